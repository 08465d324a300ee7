#!/usr/bin/env python3
"""Soak: `cadenza serve` under a long mixed load; nothing lost, nothing leaked.

  tests/soak/soak.py CADENZA WORK_DIR --duration SECONDS [--concurrency 32] [--model GGUF]
                     [--warmup SECONDS] [--seed N]

Serves the Qwen2.5-0.5B shape (synthesized, Q8_0, random weights, unless --model is given) and
keeps CONCURRENCY clients busy for DURATION seconds with a mix drawn per request (seeded):
chat and completions, streamed and not, n > 1, stop strings, short and long prompts, a shared
system prompt (prefix caching), requests that ask for an error (a prompt over --max-model-len:
HTTP 400), and clients that disconnect at a random point of a stream or before reading anything.

Fails (exit 1) when:
  - a request neither completes (200, a finish_reason for every choice, `[DONE]` on streams) nor
    gets the error it asked for: a 5xx, an unexpected 4xx, a timeout, a truncated stream;
  - after the load, within 30 s, requests running, KV cache usage or the process's open file
    descriptors do not return to their idle values (measured before the load);
  - resident memory grows by 1% or more after warm-up: the median of the samples in the first
    10% of the time after --warmup (default a quarter of the run) against the median of the
    last 10% (sampled every second from /metrics).
Writes WORK_DIR/report.md (counts by kind and outcome, latencies, memory and descriptors at
start and end) and WORK_DIR/rss.svg (resident memory, open descriptors and running requests
over time).
"""
import argparse, http.client, json, os, random, re, signal, socket, statistics, subprocess, sys
import threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cadenza_serve import http_get, start_listening, wait_ready  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("cadenza")
p.add_argument("work")
p.add_argument("--duration", type=float, required=True)
p.add_argument("--concurrency", type=int, default=32)
p.add_argument("--model")
p.add_argument("--warmup", type=float)
p.add_argument("--seed", type=int, default=1)
p.add_argument("--threads", type=int, default=2)
args = p.parse_args()
warmup = args.warmup if args.warmup is not None else args.duration / 4
os.makedirs(args.work, exist_ok=True)
MAX_MODEL_LEN = 2048


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- the server -------------------------------------------------------------------------------
model = args.model or os.path.join(args.work, "qwen2.5-0.5b-q8_0.gguf")
if not args.model and not os.path.exists(model):
    subprocess.run([args.cadenza, "synth", "--preset", "qwen2.5-0.5b", "--type", "q8_0", "--seed", "7",
                    "-o", model], check=True, stdout=subprocess.DEVNULL)
server, port = start_listening(
    [args.cadenza, "serve", "-m", model, "--port", "0", "-t", str(args.threads),
     "--served-model-name", "soak", "--max-num-seqs", str(args.concurrency),
     "--max-model-len", str(MAX_MODEL_LEN), "--max-queue", "1024"],
    os.path.join(args.work, "serve.err"), timeout_s=300)
if port is None:
    sys.exit("serve did not start: " + open(os.path.join(args.work, "serve.err")).read()[-2000:])


def get(path, timeout=10):
    return http_get(port, path, timeout)


if not wait_ready(port):
    sys.exit("serve never got ready")

METRICS = {"rss": "process_resident_memory_bytes", "fds": "process_open_fds",
           "kv": "cadenza_kv_cache_usage_ratio", "running": "cadenza_num_requests_running",
           "waiting": "cadenza_num_requests_waiting"}


def sample():
    _, text = get("/metrics")
    out = {}
    for key, name in METRICS.items():
        m = re.search(r"^" + name + r"(?:\{[^}]*\})? ([0-9.eE+-]+)$", text, re.M)
        out[key] = float(m.group(1)) if m else float("nan")
    return out


# --- the load ---------------------------------------------------------------------------------
WORDS = ("the model serves requests while other clients come and go and the cache keeps what "
         "they share so that long prompts cost less the second time around").split()
rng0 = random.Random(args.seed)
SYSTEM = " ".join(rng0.choice(WORDS) for _ in range(80))   # ~450 tokens, shared
# (The synthesized model's built-in byte-level vocabulary makes a word ~5-6 tokens.)


def text(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make_request(rng):
    """(kind, path, body, expect): expect 'ok', 'error400' or 'disconnect:K'."""
    kind = rng.choices(["chat", "chat_stream", "completion_n", "stop", "shared_prefix", "long",
                        "bad_too_long", "disconnect"], weights=[20, 20, 10, 10, 15, 8, 5, 12])[0]
    max_tokens = rng.randint(4, 40)
    if kind == "completion_n":
        return kind, "/v1/completions", {"model": "soak", "prompt": text(rng, rng.randint(1, 12)),
                                         "max_tokens": max_tokens, "n": rng.randint(2, 3),
                                         "temperature": 0.8, "seed": rng.randint(0, 1 << 30)}, "ok"
    if kind == "bad_too_long":
        return kind, "/v1/completions", {"model": "soak", "prompt": text(rng, 2 * MAX_MODEL_LEN),
                                         "max_tokens": 8}, "error400"
    content = text(rng, rng.randint(1, 16))
    messages = [{"role": "user", "content": content}]
    if kind == "shared_prefix":
        messages.insert(0, {"role": "system", "content": SYSTEM})
    if kind == "long":
        messages[0]["content"] = text(rng, rng.randint(100, 220))   # ~600-1,300 tokens
    body = {"model": "soak", "messages": messages, "max_tokens": max_tokens,
            "temperature": rng.choice([0, 0.7])}
    if kind == "stop":
        body["stop"] = rng.choice([["the"], ["e", "model"], ["\n"]])
    if kind in ("chat_stream", "disconnect") or rng.random() < 0.3:
        body["stream"] = True
    if kind == "disconnect":
        body["stream"] = True
        return kind, "/v1/chat/completions", body, f"disconnect:{rng.randint(0, 6)}"
    return kind, "/v1/chat/completions", body, "ok"


lock = threading.Lock()
results = []          # (kind, outcome, seconds, detail)
stop_at = 0.0


def run_one(rng):
    kind, path, body, expect = make_request(rng)
    t0 = time.time()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        if expect.startswith("disconnect:"):
            events = int(expect.split(":")[1])
            r = c.getresponse()
            for _ in range(events):
                if not r.readline():
                    break
            c.sock.shutdown(socket.SHUT_RDWR)   # the client walks away mid-stream
            return kind, "disconnected", time.time() - t0, ""
        r = c.getresponse()
        data = r.read().decode(errors="replace")
        if expect == "error400":
            ok = r.status == 400 and '"error"' in data
            return kind, "asked_error" if ok else "LOST", time.time() - t0, f"{r.status} {data[:200]}"
        if r.status != 200:
            return kind, "LOST", time.time() - t0, f"{r.status} {data[:200]}"
        n = body.get("n", 1)
        if body.get("stream"):
            finishes = len(re.findall(r'"finish_reason":"[a-z_]+"', data))
            ok = data.rstrip().endswith("data: [DONE]") and finishes >= n
        else:
            doc = json.loads(data)
            ok = len(doc["choices"]) == n and all(ch.get("finish_reason") for ch in doc["choices"])
        return kind, "completed" if ok else "LOST", time.time() - t0, "" if ok else data[-300:]
    except Exception as e:  # a timeout, a reset, bad JSON: all lost
        return kind, "LOST", time.time() - t0, repr(e)
    finally:
        c.close()


def client(i):
    rng = random.Random(args.seed * 1000 + i)
    while time.time() < stop_at:
        r = run_one(rng)
        with lock:
            results.append(r)


samples = []          # (t, metrics)


def sampler(stop):
    while not stop.is_set():
        try:
            samples.append((time.time(), sample()))
        except OSError as e:
            log(f"metrics: {e}")
        stop.wait(1.0)


idle = sample()
log(f"idle: {idle}")
t_start = time.time()
stop_at = t_start + args.duration
stop_sampling = threading.Event()
threads = [threading.Thread(target=sampler, args=(stop_sampling,))]
threads += [threading.Thread(target=client, args=(i,)) for i in range(args.concurrency)]
for t in threads:
    t.start()
while time.time() < stop_at:
    time.sleep(min(30, max(0.1, stop_at - time.time())))
    with lock:
        done = len(results)
        lost = sum(1 for r in results if r[1] == "LOST")
    log(f"{time.time() - t_start:.0f}s: {done} requests, {lost} lost, last sample {samples[-1][1] if samples else None}")
for t in threads[1:]:
    t.join()

# Back to idle?
settled = None
end = time.time() + 30
while time.time() < end:
    s = sample()
    if s["running"] == 0 and s["waiting"] == 0 and s["kv"] <= idle["kv"] and s["fds"] <= idle["fds"]:
        settled = s
        break
    time.sleep(0.5)
stop_sampling.set()
threads[0].join()
after = settled or sample()

# --- verdict ----------------------------------------------------------------------------------
failures = []
lost = [r for r in results if r[1] == "LOST"]
for r in lost[:10]:
    failures.append(f"lost: {r[0]} after {r[2]:.1f}s: {r[3]}")
if len(lost) > 10:
    failures.append(f"... {len(lost)} lost in all")
if settled is None:
    failures.append(f"not back to idle 30 s after the load: idle {idle}, now {after}")
post = [(t, s) for t, s in samples if t - t_start >= warmup and t - t_start <= args.duration]
rss_growth = float("nan")
if len(post) >= 20:
    k = max(3, len(post) // 10)
    first = statistics.median(s["rss"] for _, s in post[:k])
    last = statistics.median(s["rss"] for _, s in post[-k:])
    rss_growth = last / first - 1
    if rss_growth >= 0.01:
        failures.append(f"resident memory grew {100 * rss_growth:.2f}% after warm-up ({first / 2**20:.1f} -> {last / 2**20:.1f} MiB)")
else:
    failures.append(f"only {len(post)} memory samples after warm-up: run longer")
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

# --- report -----------------------------------------------------------------------------------
kinds = sorted({r[0] for r in results})
outcomes = ["completed", "asked_error", "disconnected", "LOST"]
lines = [f"# Soak: {args.duration:.0f} s, c={args.concurrency}, {os.path.basename(model)}, -t {args.threads}", "",
         f"{len(results)} requests; warm-up {warmup:.0f} s; resident memory growth after warm-up "
         f"{100 * rss_growth:.3f}%", "",
         "| kind | " + " | ".join(outcomes) + " | median s | p99 s |", "|---|" + "---:|" * (len(outcomes) + 2)]
for k in kinds:
    rs = [r for r in results if r[0] == k]
    lat = sorted(r[2] for r in rs)
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    lines.append(f"| {k} | " + " | ".join(str(sum(1 for r in rs if r[1] == o)) for o in outcomes)
                 + f" | {statistics.median(lat):.2f} | {p99:.2f} |")
first_s = post[0][1] if post else idle
lines += ["", "| | idle (before) | after warm-up | end of load | after (settled) |", "|---|---:|---:|---:|---:|"]
last_s = samples[-1][1] if samples else idle
for key, unit, div in [("rss", "MiB", 2**20), ("fds", "", 1), ("kv", "", 1), ("running", "", 1)]:
    lines.append(f"| {METRICS[key]} {unit} | {idle[key] / div:.2f} | {first_s[key] / div:.2f} | "
                 f"{last_s[key] / div:.2f} | {after[key] / div:.2f} |")
lines += ["", "Failures: " + ("none" if not failures else ""), *[f"- {f}" for f in failures]]
open(os.path.join(args.work, "report.md"), "w").write("\n".join(lines) + "\n")


def svg(path):
    if len(samples) < 2:
        return
    W, H, pad = 900, 300, 40
    t0, t1 = samples[0][0], samples[-1][0]
    series = [("rss", "#1f77b4", "resident MiB", 2**20), ("fds", "#d62728", "open fds", 1),
              ("running", "#2ca02c", "running", 1)]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H * len(series)}" font-family="sans-serif" font-size="12">']
    for i, (key, color, label, div) in enumerate(series):
        ys = [s[key] / div for _, s in samples]
        lo, hi = min(ys), max(ys)
        hi = hi if hi > lo else lo + 1
        y0 = i * H
        pts = " ".join(f"{pad + (t - t0) / max(1e-9, t1 - t0) * (W - 2 * pad):.1f},"
                       f"{y0 + H - pad - (v - lo) / (hi - lo) * (H - 2 * pad):.1f}"
                       for (t, _), v in zip(samples, ys))
        wx = pad + warmup / max(1e-9, t1 - t0) * (W - 2 * pad)
        out += [f'<text x="{pad}" y="{y0 + 20}">{label}: {lo:.1f} .. {hi:.1f} (x: 0 .. {t1 - t0:.0f} s; dashed: end of warm-up)</text>',
                f'<line x1="{wx:.1f}" y1="{y0 + pad}" x2="{wx:.1f}" y2="{y0 + H - pad}" stroke="#888" stroke-dasharray="4"/>',
                f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"/>']
    out.append("</svg>")
    open(path, "w").write("\n".join(out))


svg(os.path.join(args.work, "rss.svg"))
print("\n".join(lines))
for f in failures:
    print("FAILED:", f)
print("soak: OK" if not failures else "soak: FAILED")
sys.exit(1 if failures else 0)
