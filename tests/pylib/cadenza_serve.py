"""Starting a `cadenza serve` (or `cadenza gateway`) process for Python test scripts.

The server is started with `--port 0`; it prints "listening on http(s)://HOST:PORT" on stdout once
its socket is bound, and the port is read from that line. Shared by tests/soak/soak.py and
tests/ops/compose_check.py (the shell tests use tests/e2e_lib.sh, which does the same).
"""
import re
import subprocess
import time

LISTENING = re.compile(r"listening on https?://[^:]+:(\d+)")


def start_listening(argv, stderr_path, timeout_s=60):
    """Starts argv (stdout piped, stderr to stderr_path) and waits for its "listening on" line.

    Returns (process, port); port is None when the process exited or printed no such line within
    timeout_s (the caller reads stderr_path for why and stops the process).
    """
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(stderr_path, "w"), text=True)
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            return proc, None
        m = LISTENING.search(line)
        if m:
            return proc, int(m.group(1))
    return proc, None
