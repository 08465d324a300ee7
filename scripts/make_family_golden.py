#!/usr/bin/env python3
"""Writes a golden file for a synthesized model family (tests/model/golden/<name>.json).

  scripts/make_family_golden.py NAME --preset P [--seed S] [--type T] [--layers N]
      [--vocab-from models/X.gguf] [--cadenza build/bin/cadenza] [--refdump PATH]

Synthesizes the model with `cadenza synth` (the same recipe the test uses at test time), runs the
reference engine's refdump (../shared/tools/reference-engine.sh builds it) on the prompts of
../shared/golden/tiny-llama-spm-f16.json, and keeps what the tests compare: tokens, the top-8
logits at every position, the greedy continuation and its margins (last_logits are dropped to keep
the file small). The reference is a black box: this script only runs it. CADENZA_SHARED_DIR
names ../shared where it lies elsewhere (as for the tests).
"""
import argparse, json, os, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
shared = os.environ.get("CADENZA_SHARED_DIR") or os.path.join(os.path.dirname(root), "shared")

p = argparse.ArgumentParser()
p.add_argument("name")
p.add_argument("--preset", required=True)
p.add_argument("--seed", type=int, default=7)
p.add_argument("--type", default="f16")
p.add_argument("--layers", type=int, default=0)
p.add_argument("--vocab-from", default="models/tiny-llama-spm-f16.gguf")
p.add_argument("--cadenza", default=os.path.join(root, "build/bin/cadenza"))
p.add_argument("--refdump", default=os.path.expanduser("~/.cache/cadenza-reference/build/bin/refdump"))
a = p.parse_args()

recipe = {"preset": a.preset, "seed": a.seed, "type": a.type, "vocab_from": a.vocab_from}
if a.layers:
    recipe["layers"] = a.layers
prompts = json.load(open(os.path.join(shared, "golden/tiny-llama-spm-f16.json")))["cases"]
with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "model.gguf")
    cmd = [a.cadenza, "synth", "--preset", a.preset, "-o", model, "--type", a.type,
           "--seed", str(a.seed), "--vocab-from", os.path.join(shared, a.vocab_from), "-t", "2"]
    if a.layers:
        cmd += ["--layers", str(a.layers)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cases = []
    for c in prompts:
        # Bytes: a greedy continuation may end inside a UTF-8 sequence (greedy_text).
        out = subprocess.run([a.refdump, model, c["prompt"], "16", "8", "1", "2"], check=True,
                             capture_output=True).stdout.decode("utf-8", "replace")
        d = json.loads(out)
        d.pop("last_logits", None)
        d.pop("model", None)
        d["topk"] = [[[t, round(v, 5)] for t, v in pos] for pos in d["topk"]]
        d["greedy_margin"] = [round(m, 5) for m in d["greedy_margin"]]
        cases.append(d)
golden = {"recipe": recipe, "reference": "llama.cpp (node-llama-cpp 3.21.1) refdump, CPU, 2 threads",
          "cases": cases}
path = os.path.join(root, "tests/model/golden", a.name + ".json")
with open(path, "w") as f:
    json.dump(golden, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(cases)} cases)", file=sys.stderr)
