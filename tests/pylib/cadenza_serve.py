"""Starting a `cadenza serve` (or `cadenza gateway`) process for Python test scripts.

The server is started with `--port 0`; it prints "listening on http(s)://HOST:PORT" on stdout once
its socket is bound, and the port is read from that line. Shared by tests/soak/soak.py and
tests/soak/overload.py, tests/abuse/abuse.py and tests/ops/compose_check.py (the shell tests use tests/e2e_lib.sh, which does the same).
"""
import http.client
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


def http_get(port, path, timeout=10):
    """GET http://127.0.0.1:PORT/PATH on a new connection: (status, body text)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def wait_ready(port, timeout_s=120):
    """Polls GET /ready every 0.2 s until 200; False when timeout_s passes first."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if http_get(port, "/ready")[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False
