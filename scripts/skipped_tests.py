#!/usr/bin/env python3
"""Lists the tests a ctest run skipped, with each one's reason, from ctest's JUnit output.

    scripts/skipped_tests.py JUNIT_XML [--strict]

A reason is the test's "SKIPPED: ..." line (what GTEST_SKIP() and the shell tests print), else the
line after gtest's "file:line: Skipped", else ctest's own (e.g. SKIP_RETURN_CODE=77).
--strict (what scripts/test.sh uses): exit 1 when a test was skipped for a reason other than
missing hardware (no CUDA device, an ISA level this CPU lacks) or a missing ../shared, so that a
missing tool or a broken setup cannot pass as "Skipped" in CI.
"""
import re
import sys
import xml.etree.ElementTree as ET

ALLOWED = [
    r"\.\./shared test data not found",
    r"no CUDA device",
    r"not available on this CPU",
    r"no avx512_vnni on this CPU",
]


def reason_of(case):
    out = case.findtext("system-out") or ""
    lines = out.splitlines()
    for line in lines:
        m = re.search(r"SKIPPED: .*", line)
        if m:
            return m.group(0)
    for i, line in enumerate(lines):
        if re.search(r":\d+: Skipped$", line) and i + 1 < len(lines) and lines[i + 1].strip():
            return lines[i + 1].strip()
    skipped = case.find("skipped")
    return (skipped.get("message") if skipped is not None else "") or "no reason given"


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    strict = "--strict" in sys.argv[2:]
    root = ET.parse(sys.argv[1]).getroot()
    # gtest_discover_tests appends "  # GetParam() = ..." to parameterized names; the name is enough.
    skipped = [(c.get("name").split("  # ")[0], reason_of(c))
               for c in root.iter("testcase") if c.find("skipped") is not None]
    total = sum(1 for _ in root.iter("testcase"))
    print(f"skipped tests: {len(skipped)} of {total}")
    bad = []
    for name, reason in skipped:
        ok = any(re.search(p, reason) for p in ALLOWED)
        print(f"  {'' if ok else 'NOT ALLOWED: '}{name}: {reason}")
        if not ok:
            bad.append(name)
    if strict and bad:
        print(f"{len(bad)} test(s) skipped for a reason other than missing hardware or ../shared "
              "(install what they need: scripts/setup.sh --test)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
