#!/usr/bin/env python3
"""Overload: `cadenza serve` offered 10x the request rate it can sustain; the excess is refused
quickly with 429 + Retry-After, admitted requests stay fast, and the server recovers at once.

  tests/soak/overload.py CADENZA WORK_DIR [--duration 60] [--factor 10] [--rate R]
                         [--max-num-seqs 8] [--max-queue 0] [--max-tokens 16] [--model GGUF]

Serves the Qwen2.5-0.5B shape (synthesized, Q8_0, random weights, unless --model is given) and:
  1. unloaded TTFT: the median time to the first streamed token of a few sequential requests;
  2. the sustainable rate (unless --rate): completed requests per second of a closed loop of
     max-num-seqs clients for --calibrate seconds;
  3. the overload: an open-loop arrival process (evenly spaced, one thread per request) at
     FACTOR x that rate for --duration seconds; every request is a streamed completion of
     --max-tokens tokens; --max-queue bounds how many wait beyond the running max-num-seqs, so
     the rest must get 429;
  4. recovery: sequential probes right after the last arrival until one's TTFT is back within 2x
     the unloaded median; the time that took;
  5. idle: requests running/waiting and KV cache usage back to 0 within 30 s.
Peak resident memory is sampled from /metrics every 0.5 s throughout.

Fails (exit 1) when: a request of the overload gets anything but 200 (a complete stream ending
in [DONE]) or 429; a 429 has no Retry-After header; the 429s' latency P99 exceeds
--max-429-p99-ms (default 500: generous for a loaded CI machine); no probe recovers within
--recovery-bound seconds (default 10); the server is not back at idle; serve does not drain
and exit 0 on SIGTERM. The admitted TTFT P99 against the unloaded TTFT is reported, not
enforced (it depends on the machine; docs/reliability.md has the measured value).
Writes WORK_DIR/report.md; prints it.
"""
import argparse, http.client, itertools, json, os, re, signal, statistics, subprocess, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cadenza_serve import http_get, start_listening, wait_ready  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("cadenza")
p.add_argument("work")
p.add_argument("--duration", type=float, default=60)
p.add_argument("--factor", type=float, default=10)
p.add_argument("--rate", type=float, help="the sustainable rate (req/s); default: measured")
p.add_argument("--calibrate", type=float, default=10, help="seconds of the closed-loop measurement")
p.add_argument("--max-num-seqs", type=int, default=8)
p.add_argument("--max-queue", type=int, default=0)
p.add_argument("--max-tokens", type=int, default=16)
p.add_argument("--ttft-slo-factor", type=float, default=0,
               help="serve's --ttft-slo-factor (0: off): admission by predicted time to first token")
p.add_argument("--max-429-p99-ms", type=float, default=500)
p.add_argument("--recovery-bound", type=float, default=10)
p.add_argument("--model")
p.add_argument("--threads", type=int, default=2)
p.add_argument("--prompt-words", type=int, default=0,
               help="prompts of about this many words (each request's own: it starts with a serial "
                    "number, so no prefix-cache hit); 0: the default 9-token prompt")
args = p.parse_args()
os.makedirs(args.work, exist_ok=True)


def log(msg):
    print(f"[overload {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the server -------------------------------------------------------------------------------
model = args.model or os.path.join(args.work, "qwen2.5-0.5b-q8_0.gguf")
if not args.model and not os.path.exists(model):
    subprocess.run([args.cadenza, "synth", "--preset", "qwen2.5-0.5b", "--type", "q8_0", "--seed", "7",
                    "-o", model], check=True, stdout=subprocess.DEVNULL)
server, port = start_listening(
    [args.cadenza, "serve", "-m", model, "--port", "0", "-t", str(args.threads),
     "--served-model-name", "overload", "--max-num-seqs", str(args.max_num_seqs),
     "--max-model-len", "1024", "--max-queue", str(args.max_queue), "--io-threads", "2",
     "--ttft-slo-factor", str(args.ttft_slo_factor)],
    os.path.join(args.work, "serve.err"), timeout_s=300)
if port is None:
    sys.exit("serve did not start: " + open(os.path.join(args.work, "serve.err")).read()[-2000:])


def get(path, timeout=10):
    return http_get(port, path, timeout)


if not wait_ready(port):
    sys.exit("serve never got ready")

METRICS = {"rss": "process_resident_memory_bytes", "kv": "cadenza_kv_cache_usage_ratio",
           "running": "cadenza_num_requests_running", "waiting": "cadenza_num_requests_waiting"}


def sample():
    _, text = get("/metrics")
    out = {}
    for key, name in METRICS.items():
        m = re.search(r"^" + name + r"(?:\{[^}]*\})? ([0-9.eE+-]+)$", text, re.M)
        out[key] = float(m.group(1)) if m else float("nan")
    return out


# --- one request ------------------------------------------------------------------------------
BODY = json.dumps({"model": "overload", "prompt": "The server answers every client that comes by",
                   "max_tokens": args.max_tokens, "ignore_eos": True, "stream": True})
WORDS = "the server answers every client that comes by and refuses quickly what it cannot take".split()
serial = itertools.count()
codes_429 = {}  # error code of each 429 (queue_full, ttft_limit)
codes_lock = threading.Lock()
# Per thread: the last 429's retry-after-ms (seconds), and whether its codes count (the overload's).
retry_hint = threading.local()


def body():
    """The request: the fixed short prompt, or with --prompt-words a long one of its own."""
    if not args.prompt_words:
        return BODY
    n = next(serial)
    words = [WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(args.prompt_words)]
    return json.dumps({"model": "overload", "prompt": f"request {n}: " + " ".join(words),
                       "max_tokens": args.max_tokens, "ignore_eos": True, "stream": True})


def one():
    """Returns (outcome, seconds, detail): outcome 'ok' (seconds = TTFT), '429' (seconds = the
    time to the answer; detail = its Retry-After or None), or 'LOST'."""
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", "/v1/completions", body(), {"Content-Type": "application/json",
                                                    "Connection": "close"})
        r = c.getresponse()
        if r.status == 429:
            took = time.perf_counter() - t0
            try:
                code = json.loads(r.read())["error"]["code"]
            except (ValueError, KeyError, TypeError):
                code = "?"
            if getattr(retry_hint, "count", False):
                with codes_lock:
                    codes_429[code] = codes_429.get(code, 0) + 1
            try:
                retry_hint.s = float(r.getheader("retry-after-ms")) / 1000
            except (TypeError, ValueError):
                retry_hint.s = float(r.getheader("Retry-After") or 1)
            return "429", took, r.getheader("Retry-After")
        if r.status != 200:
            return "LOST", time.perf_counter() - t0, f"{r.status} {r.read()[:200]!r}"
        ttft = None
        last = b""
        while True:
            line = r.readline()
            if not line:
                break
            if line.startswith(b"data: "):
                if ttft is None:
                    ttft = time.perf_counter() - t0
                last = line.strip()
                if last == b"data: [DONE]":
                    break
        if last != b"data: [DONE]" or ttft is None:
            return "LOST", time.perf_counter() - t0, f"stream ended with {last[:200]!r}"
        return "ok", ttft, None
    except Exception as e:  # a timeout, a reset: lost
        return "LOST", time.perf_counter() - t0, repr(e)
    finally:
        c.close()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


# --- memory sampler ---------------------------------------------------------------------------
rss_samples = []
stop_sampling = threading.Event()


def sampler():
    while not stop_sampling.is_set():
        try:
            rss_samples.append(sample()["rss"])
        except OSError as e:
            log(f"metrics: {e}")
        stop_sampling.wait(0.5)


idle = sample()
sampler_thread = threading.Thread(target=sampler)
sampler_thread.start()
failures = []

# 1. Unloaded TTFT (the first request also warms the prefix-free path).
one()
unloaded = []
for _ in range(7):
    o, s, d = one()
    if o != "ok":
        failures.append(f"unloaded request: {o} {d}")
    else:
        unloaded.append(s)
ttft0 = statistics.median(unloaded) if unloaded else float("nan")
log(f"unloaded TTFT median {1000 * ttft0:.1f} ms (max {1000 * max(unloaded or [0]):.1f})")

# 2. The sustainable rate: a closed loop at max-num-seqs.
rate = args.rate
if rate is None:
    done = []
    lock = threading.Lock()
    stop_at = time.time() + args.calibrate

    def closed():
        while time.time() < stop_at:
            o, _, d = one()
            with lock:
                done.append((o, d))
            if o == "429":  # a client that backs off as told (retry-after-ms, else Retry-After)
                time.sleep(min(getattr(retry_hint, "s", 0.1), max(0.0, stop_at - time.time())))

    t0 = time.time()
    ts = [threading.Thread(target=closed) for _ in range(args.max_num_seqs)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.time() - t0
    ok = sum(1 for o, _ in done if o == "ok")
    # A 429 is possible here (a client's next request can arrive before the engine has counted
    # its previous one out, with --max-queue 0); only lost requests are failures.
    lost_c = [d for o, d in done if o == "LOST"]
    if lost_c:
        failures.append(f"calibration: {len(lost_c)} of {len(done)} requests lost: {lost_c[:3]}")
    rate = ok / elapsed
if rate <= 0:
    server.kill()
    sys.exit(f"no request completed in the {args.calibrate:.0f} s calibration: give a longer "
             "--calibrate or the rate itself (--rate)")
log(f"sustainable rate {rate:.2f} req/s; offering {args.factor * rate:.1f} req/s for {args.duration:.0f} s")

# 3. The overload: open loop (its 429s' codes are counted).
offered = args.factor * rate
results = []  # (scheduled offset, outcome, seconds, detail)
rlock = threading.Lock()


def fire(offset):
    retry_hint.count = True
    r = one()
    with rlock:
        results.append((offset,) + r)


workers = []
lag_max = 0.0
t_start = time.perf_counter()
i = 0
while True:
    offset = i / offered
    if offset >= args.duration:
        break
    now = time.perf_counter() - t_start
    if offset > now:
        time.sleep(offset - now)
    else:
        lag_max = max(lag_max, now - offset)
    t = threading.Thread(target=fire, args=(offset,), daemon=True)
    t.start()
    workers.append(t)
    i += 1
burst_end = time.perf_counter()
achieved = i / (burst_end - t_start)
log(f"burst over: {i} arrivals ({achieved:.1f}/s; the generator lagged up to {1000 * lag_max:.0f} ms)")

# 4. Recovery: sequential probes from the last arrival on.
recovered_after = None
probes = []
while time.perf_counter() - burst_end < args.recovery_bound:
    o, s, d = one()
    probes.append((time.perf_counter() - burst_end, o, s))
    if o == "ok" and s <= 2 * ttft0:
        recovered_after = time.perf_counter() - burst_end
        break
    # After a 429, as a client told when to come back would (at most 0.5 s: recovery is timed).
    time.sleep(min(0.5, getattr(retry_hint, "s", 0.05)) if o == "429" else 0.05)
for t in workers:
    t.join(timeout=180)
if any(t.is_alive() for t in workers):
    failures.append("requests still unanswered 180 s after the burst")

# 5. Back to idle.
settled = None
end = time.time() + 30
while time.time() < end:
    s = sample()
    if s["running"] == 0 and s["waiting"] == 0 and s["kv"] <= idle["kv"]:
        settled = s
        break
    time.sleep(0.5)
stop_sampling.set()
sampler_thread.join()

# --- verdict ----------------------------------------------------------------------------------
with rlock:
    res = list(results)
admitted = [s for _, o, s, _ in res if o == "ok"]
refused = [(s, d) for _, o, s, d in res if o == "429"]
lost = [(o, s, d) for _, o, s, d in res if o == "LOST"]
for o, s, d in lost[:10]:
    failures.append(f"lost after {s:.2f} s: {d}")
if len(lost) > 10:
    failures.append(f"... {len(lost)} lost in all")
no_retry = sum(1 for _, d in refused if not d)
if no_retry:
    failures.append(f"{no_retry} of {len(refused)} 429s without Retry-After")
r429 = [s for s, _ in refused]
if refused and 1000 * pct(r429, 0.99) > args.max_429_p99_ms:
    failures.append(f"429 latency P99 {1000 * pct(r429, 0.99):.1f} ms > {args.max_429_p99_ms:.0f} ms")
if not refused:
    failures.append("no request got 429: the load did not overload the server")
if args.ttft_slo_factor and not codes_429.get("ttft_limit"):
    failures.append("--ttft-slo-factor is set but no 429 was ttft_limit")
if recovered_after is None:
    failures.append(f"no recovery: no probe within {args.recovery_bound:.0f} s of the burst's end "
                    f"had a TTFT within 2x unloaded ({[(round(t, 2), o, round(1000 * s)) for t, o, s in probes[-5:]]})")
if settled is None:
    failures.append(f"not back to idle 30 s after the load: {sample()}")
if server.poll() is not None:
    failures.append(f"serve exited with {server.returncode}")
server.send_signal(signal.SIGTERM)
try:
    rc = server.wait(timeout=60)
except subprocess.TimeoutExpired:
    server.kill()
    rc = "hung"
if rc != 0:
    failures.append(f"serve did not drain and exit 0 on SIGTERM: {rc}")

ms = lambda x: f"{1000 * x:.1f}"  # noqa: E731
ratio = pct(admitted, 0.99) / ttft0 if admitted and ttft0 == ttft0 else float("nan")
peak = max(rss_samples) if rss_samples else float("nan")
lines = [
    f"# Overload: {args.duration:.0f} s at {args.factor:g}x, {os.path.basename(model)}, -t {args.threads}, "
    f"--max-num-seqs {args.max_num_seqs} --max-queue {args.max_queue}, max_tokens {args.max_tokens}, prompt {'the default 9 tokens' if not args.prompt_words else f'~{args.prompt_words} words each'}", "",
    "| measure | value |", "|---|---:|",
    f"| unloaded TTFT median (max) ms | {ms(ttft0)} ({ms(max(unloaded or [float('nan')]))}) |",
    f"| sustainable rate req/s ({'given' if args.rate else f'closed loop, {args.calibrate:.0f} s'}) | {rate:.2f} |",
    f"| offered rate req/s (achieved) | {offered:.1f} ({achieved:.1f}) |",
    f"| arrivals | {len(res)} |",
    f"| admitted (200) | {len(admitted)} |",
    f"| admitted TTFT P50 / P99 ms | {ms(pct(admitted, 0.5))} / {ms(pct(admitted, 0.99))} |",
    f"| admitted TTFT P99 / unloaded median | {ratio:.2f}x |",
    f"| refused (429) | {len(refused)} ({', '.join(f'{k} {v}' for k, v in sorted(codes_429.items()))}) |",
    f"| 429 latency P50 / P99 / max ms | {ms(pct(r429, 0.5))} / {ms(pct(r429, 0.99))} / {ms(max(r429 or [float('nan')]))} |",
    f"| 429s with Retry-After | {len(refused) - no_retry} of {len(refused)} |",
    f"| lost (neither) | {len(lost)} |",
    f"| resident memory idle / peak MiB | {idle['rss'] / 2**20:.1f} / {peak / 2**20:.1f} |",
    f"| recovery: first probe with TTFT <= 2x unloaded, s after the burst | "
    f"{'none' if recovered_after is None else f'{recovered_after:.2f}'} |",
    f"| back at idle (running, waiting, KV 0) | {'yes' if settled else 'NO'} |",
    "", "Failures: " + ("none" if not failures else ""), *[f"- {f}" for f in failures]]
open(os.path.join(args.work, "report.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
for f in failures:
    print("FAILED:", f)
print("overload: OK" if not failures else "overload: FAILED")
sys.exit(1 if failures else 0)
