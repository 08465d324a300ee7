#!/usr/bin/env bash
# End to end, router mode (docs/server.md "Several models"): `cadenza serve --models-dir` over three
# synthesized models with --models-max 2. Checks: every model answers in turn for ROUTER_ROUNDS
# rounds (default 10) with at most two loaded (/v1/models after each request, and the metrics);
# the server's RSS over the rounds (printed; the late rounds must not grow past the early ones);
# a slow load of one model (the CADENZA_TEST_LOAD_DELAY test hook) while another streams: the
# largest gap between the streaming model's SSE chunks (printed, and well under the delay; one
# I/O thread, so a load that blocked it would show);
# unknown models are 404 model_not_found; then a bert encoder joins the folder's models (a second
# server over four files, --pooling mean): Anthropic Messages and OpenAI Responses pick their
# model by name, /v1/embeddings answers from a decoder and from the encoder, and the encoder
# refuses chat with 400; SIGTERM drains and exits 0.
# Usage: router_e2e.sh CADENZA_BINARY WORK_DIR
set -u
cadenza=$1 work=$2
source "$(cd "$(dirname "$0")/../.." && pwd)/e2e_lib.sh"
command -v curl >/dev/null || { echo "SKIPPED: curl missing"; exit 77; }
rm -rf "$work" && mkdir -p "$work/models"

for m in a:1 b:2 c:3; do
  "$cadenza" synth --preset demo --type q8_0 --layers 2 --ctx 1024 --seed "${m#*:}" \
    -o "$work/models/${m%%:*}.gguf" 2>/dev/null || { echo "synth failed"; exit 1; }
done

delay_ms=${ROUTER_LOAD_DELAY_MS:-2000}
CADENZA_TEST_LOAD_DELAY="c:$delay_ms" "$cadenza" serve --models-dir "$work/models" --models-max 2 \
  --port 0 -t 1 --io-threads 1 --max-model-len 512 --max-num-seqs 4 --drain-timeout 10 \
  >"$work/serve.out" 2>"$work/serve.err" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
trap cleanup EXIT

wait_for_serve "$work/serve.out" "$work/serve.err" "$pid"
wait_for_ready

python3 - "$port" "$pid" "${ROUTER_ROUNDS:-10}" "$delay_ms" <<'PY' || { tail -30 "$work/serve.err"; exit 1; }
import http.client, json, sys, threading, time

port, pid, rounds, delay_ms = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])

def request(method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request(method, path, json.dumps(body) if body is not None else None,
              {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data

def models():
    s, d = request("GET", "/v1/models")
    assert s == 200, (s, d)
    return {m["id"]: m["status"] for m in json.loads(d)["data"]}

def rss_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

def complete(name, n=8):
    s, d = request("POST", "/v1/completions",
                   {"model": name, "prompt": "hello", "max_tokens": n, "ignore_eos": True})
    assert s == 200, (name, s, d)
    j = json.loads(d)
    assert j["model"] == name and j["usage"]["completion_tokens"] == n, j
    return j

assert models() == {"a": "unloaded", "b": "unloaded", "c": "unloaded"}, models()
s, d = request("POST", "/v1/completions", {"model": "nope", "prompt": "x"})
assert s == 404 and json.loads(d)["error"]["code"] == "model_not_found", (s, d)

# 1. A slow load of c while a streams: a's chunks keep coming.
complete("a")
def stream(name, n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", json.dumps(
        {"model": name, "prompt": "x", "max_tokens": n, "ignore_eos": True, "stream": True}),
        {"Content-Type": "application/json"})
    sent = time.monotonic()
    r = c.getresponse()
    assert r.status == 200, r.status
    times, done = [sent], False
    while True:
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data:"):
            times.append(time.monotonic())
            if line.strip() == b"data: [DONE]":
                done = True
    c.close()
    assert done
    return max(b - a for a, b in zip(times, times[1:]))

slow = {}
def load_c():
    t = time.monotonic()
    complete("c")
    slow["took"] = time.monotonic() - t
th = threading.Thread(target=load_c)
t0 = time.monotonic()
th.start()
# Wait for c's load to begin (the request's thread, connection and parse take a while on a loaded
# machine; a fixed 50 ms sleep was not always enough); a load that never shows is a failure.
deadline = time.monotonic() + 60
while (st := models())["c"] != "loading":
    assert th.is_alive() and time.monotonic() < deadline, ("c was never seen loading", st)
    time.sleep(0.01)
worst, streams = 0.0, 0
while th.is_alive():
    worst = max(worst, stream("a", 64))
    streams += 1
th.join()
assert slow["took"] >= delay_ms / 1000, slow
assert streams >= 2, streams
print(f"slow load: c took {slow['took']*1000:.0f} ms (hook {delay_ms} ms); {streams} streams of a "
      f"meanwhile; largest gap between a's SSE chunks {worst*1000:.1f} ms")
assert worst < delay_ms / 1000 / 2, worst

# 2. Rotation: a, b, c in turn; never more than two loaded; RSS per round.
rss = []
for r in range(rounds):
    for name in ("a", "b", "c"):
        complete(name)
        st = models()
        assert st[name] == "loaded", st
        assert sum(v == "loaded" for v in st.values()) <= 2, st
    rss.append(rss_kib())
half = max(1, rounds // 2)
print("rss MiB per round:", " ".join(f"{k/1024:.1f}" for k in rss))
print(f"rss: first {rss[0]/1024:.1f} MiB, max {max(rss)/1024:.1f} MiB, last {rss[-1]/1024:.1f} MiB "
      f"over {rounds} rounds ({rounds*3} loads)")
# Bounded: the late rounds stay within the early rounds' peak plus a margin for the allocator.
assert max(rss[half:]) <= max(rss[:half]) * 1.25 + 32 * 1024, rss

s, m = request("GET", "/metrics")
m = m.decode()
def sample(series):
    for line in m.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None
assert sample("cadenza_models_loaded") == 2, sample("cadenza_models_loaded")
assert sample('cadenza_model_loads_total{model="a",result="ok"}') >= rounds, m
assert sample('cadenza_generation_tokens_total{model="b"}') >= rounds * 8, m
print("router e2e: ok")
PY
rc=$?
[ $rc -eq 0 ] || exit 1

stop_serve() {
  kill -TERM "$pid"
  wait "$pid"
  local rc=$?
  trap - EXIT
  [ $rc -eq 0 ] || { echo "serve exited $rc after SIGTERM"; tail -20 "$work/serve.err"; exit 1; }
}
stop_serve

# Every API shape and embeddings in router mode, an encoder among the models.
"$cadenza" synth --preset bge-small-en-v1.5 --type f16 --layers 2 --seed 4 \
  -o "$work/models/e.gguf" 2>/dev/null || { echo "synth bert failed"; exit 1; }
"$cadenza" serve --models-dir "$work/models" --models-max 2 --pooling mean --port 0 -t 1 \
  --io-threads 2 --max-model-len 512 --max-num-seqs 4 --drain-timeout 10 \
  >"$work/serve.out" 2>"$work/serve.err" &
pid=$!
trap cleanup EXIT
wait_for_serve "$work/serve.out" "$work/serve.err" "$pid"
wait_for_ready
python3 - "$port" <<'PY' || { tail -30 "$work/serve.err"; exit 1; }
import http.client, json, sys
port = int(sys.argv[1])

def post(path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data)

s, j = post("/v1/messages", {"model": "a", "max_tokens": 4,
                             "messages": [{"role": "user", "content": "hello"}]})
assert s == 200 and j["type"] == "message" and j["model"] == "a", (s, j)
assert j["usage"]["output_tokens"] >= 1, j
s, j = post("/v1/messages", {"model": "nope", "max_tokens": 4,
                             "messages": [{"role": "user", "content": "hello"}]})
assert s == 404 and j["type"] == "error" and j["error"]["type"] == "not_found_error", (s, j)
s, j = post("/v1/messages/count_tokens", {"model": "b",
                                          "messages": [{"role": "user", "content": "hello"}]})
assert s == 200 and j["input_tokens"] > 0, (s, j)
s, j = post("/v1/responses", {"model": "b", "input": "hello", "max_output_tokens": 4})
assert s == 200 and j["object"] == "response" and j["model"] == "b", (s, j)
s, j = post("/v1/responses", {"input": "hello"})
assert s == 400 and j["error"]["param"] == "model", (s, j)
dims = {}
for name in ("a", "e"):
    s, j = post("/v1/embeddings", {"model": name, "input": ["hello world", "router"]})
    assert s == 200 and len(j["data"]) == 2 and j["model"] == name, (name, s, j)
    v = j["data"][0]["embedding"]
    assert abs(sum(x * x for x in v) - 1) < 1e-3, (name, "not L2-normalized")
    dims[name] = len(v)
s, j = post("/v1/chat/completions", {"model": "e", "messages": [{"role": "user", "content": "hi"}]})
assert s == 400, (s, j)
print(f"router api shapes: Messages, count_tokens, Responses ok; embeddings dims {dims}")
PY
[ $? -eq 0 ] || exit 1
stop_serve
echo "PASS"
