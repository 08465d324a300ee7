#!/usr/bin/env python3
"""The chaos suite (docs/reliability.md): `cadenza gateway` over three `cadenza serve` replicas
while a fault is injected under a client load.

  tests/chaos/chaos.py CADENZA WORK_DIR [--faults kill,stop,redis] [--clients 6] [--fault-s 6]

Starts redis-server, three replicas of a tiny synthesized model (A and B on 127.0.0.1, C inside
a network namespace of its own, reached over a veth pair, so that tc netem can slow its link;
where the kernel has no netem qdisc, the pair goes through a third namespace in which
tests/dist/delay_relay.py forwards the frames and delays or drops the replica's, unless
--no-relay)
and the gateway (Redis response cache, active /ready checks every 500 ms). CLIENTS threads send
chat requests through the gateway without pause: non-streamed, streamed (long, so that some are
running when a fault hits) and deterministic ones (cached). Then, one after another, each fault
of --faults (default: kill,stop,redis; also: latency,loss):
  kill     replica A gets SIGKILL; FAULT_S later it is started again on its port;
  stop     replica A gets SIGSTOP (it hangs with its connections open); FAULT_S later SIGCONT;
  latency  500 ms of added latency on replica C's link (tc netem delay), removed FAULT_S later;
  loss     20% packet loss on replica C's link (tc netem loss), removed FAULT_S later;
  redis    redis-server gets SIGKILL; FAULT_S later it is started again on its port.
Just before a replica's fault, a burst of CLIENTS more non-streamed requests is sent, so that
some are in flight on that replica when it fails. Each fault is followed by a heal period that lasts until traffic is back (a response carrying
the replica in X-Cadenza-Upstream, or a cache hit for Redis), at most --return-s.

Fails (exit 1) when a request is lost: a non-streamed request that does not get a complete 200
(the gateway must retry it on another replica), a stream that does not start with 200 (it had
not started: retrying is the gateway's job), a stream that hangs (no byte for --read-timeout, or
no end within --request-timeout), a stream that ends without `[DONE]`; or when traffic does not
return to the healed replica (cache hits to the restarted Redis) within --return-s. A started
stream that ends with an `error` event and `[DONE]` is what the gateway promises when its replica
fails mid-stream: counted, not a failure.
Exit 77 with "SKIPPED: ..." only when every fault asked for needs what is missing (the netem
faults need root, `ip`, `tc` and network namespaces, and with --no-relay the kernel's netem
qdisc; redis needs redis-server); a fault skipped among others is printed as SKIPPED too.
Prints one table row per fault: requests sent (streams among them), lost, retried (the
gateway's cadenza_gateway_retries_total), error events, seconds to eject (fault until the
gateway's health gauge or breaker took the replica out) and to return (heal until the first
response from it); writes WORK_DIR/report.md and report.json.

Python 3 standard library only.
"""
import argparse, http.client, itertools, json, os, random, re, shutil, signal, socket, subprocess, sys
import threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cadenza_serve import http_get, start_listening  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("cadenza")
p.add_argument("work")
p.add_argument("--faults", default="kill,stop,redis")
p.add_argument("--clients", type=int, default=6)
p.add_argument("--fault-s", type=float, default=6.0, help="how long each fault lasts")
p.add_argument("--baseline-s", type=float, default=4.0)
p.add_argument("--return-s", type=float, default=20.0)
p.add_argument("--read-timeout", type=float, default=30.0)
p.add_argument("--request-timeout", type=float, default=60.0)
p.add_argument("--no-relay", action="store_true",
               help="skip the netem faults where the kernel has no netem (instead of relaying)")
args = p.parse_args()
FAULTS = [f for f in args.faults.split(",") if f]
for f in FAULTS:
    if f not in ("kill", "stop", "latency", "loss", "redis"):
        sys.exit(f"unknown fault '{f}'")
NETEM = {"latency": "delay 500ms", "loss": "loss 20%"}
os.makedirs(args.work, exist_ok=True)


def log(msg):
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, check=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stdout.strip()}")
    return r


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


procs = []        # everything this script started, stopped at the end
ns_name = None    # the network namespace this script made
host_if = f"czh{os.getpid() % 100000}"


def cleanup():
    for pr in procs:
        if pr.poll() is None:
            try:
                pr.send_signal(signal.SIGCONT)
                pr.kill()
                pr.wait(timeout=10)
            except Exception:
                pass
    if ns_name:
        run(["ip", "link", "del", host_if], check=False)
        run(["ip", "netns", "del", ns_name], check=False)
    if relay_ns:
        run(["ip", "netns", "del", relay_ns], check=False)


# --- what the faults need ---------------------------------------------------------------------
skipped = {}   # fault -> why it cannot run here


RELAY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dist", "delay_relay.py")
relay_ns = None     # the relay's namespace when the kernel has no netem (below)
relay_proc = None
link_mode = "netem"


def setup_namespace():
    """Replica C's namespace, linked to this one: 10.79.N.1 (here) <-> 10.79.N.2 (there).
    Returns (far address, None) or (None, why not). Where the kernel has no netem qdisc and
    --no-relay is not given, the link goes through a third namespace in which
    tests/dist/delay_relay.py forwards the frames, delaying or dropping the replica's (what
    netem on the replica's interface would do)."""
    global ns_name, relay_ns, link_mode
    for tool in ("ip", "tc"):
        if not shutil.which(tool):
            return None, f"{tool} is not installed"
    name = f"cdz-chaos-{os.getpid()}"
    r = run(["ip", "netns", "add", name], check=False)
    if r.returncode != 0:
        return None, f"cannot create network namespaces: {r.stdout.strip()}"
    ns_name = name
    run(["ip", "-n", name, "link", "set", "lo", "up"], check=False)
    r = run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root", "netem",
             "delay", "1ms"], check=False)
    if r.returncode != 0:
        if args.no_relay:
            return None, f"tc netem is not available: {r.stdout.strip()}"
        link_mode = f"relay (no netem: {r.stdout.strip()})"
    else:
        run(["ip", "netns", "exec", name, "tc", "qdisc", "del", "dev", "lo", "root"], check=False)
    net = 10 + os.getpid() % 200
    try:
        if link_mode == "netem":
            run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", "czr", "netns", name])
        else:
            relay_ns = f"cdz-chaos-relay-{os.getpid()}"
            run(["ip", "netns", "add", relay_ns])
            run(["ip", "link", "add", host_if, "type", "veth", "peer", "name", "dh", "netns", relay_ns])
            run(["ip", "-n", relay_ns, "link", "add", "dr", "type", "veth", "peer", "name", "czr",
                 "netns", name])
            for dev in ("dh", "dr"):
                run(["ip", "-n", relay_ns, "link", "set", dev, "promisc", "on", "up"])
            relay(None)
        run(["ip", "addr", "add", f"10.79.{net}.1/24", "dev", host_if])
        run(["ip", "link", "set", host_if, "up"])
        run(["ip", "-n", name, "addr", "add", f"10.79.{net}.2/24", "dev", "czr"])
        run(["ip", "-n", name, "link", "set", "czr", "up"])
    except RuntimeError as e:
        return None, f"cannot link the namespaces: {e}"
    return f"10.79.{net}.2", None


def relay(spec):
    """(Re)starts the frame relay between dh (towards here) and dr (towards the replica) with
    the netem spec ("delay 500ms" / "loss 20%") applied to the replica's frames."""
    global relay_proc
    if relay_proc:
        relay_proc.terminate()
        relay_proc.wait()
    delay_ms, options = "0", ["--one-way"]
    words = (spec or "").split()
    if "delay" in words:
        delay_ms = words[words.index("delay") + 1].removesuffix("ms")
    if "loss" in words:
        options += ["--loss", str(float(words[words.index("loss") + 1].rstrip("%")) / 100)]
    ready = os.path.join(args.work, "relay.ready")
    if os.path.exists(ready):
        os.remove(ready)
    relay_proc = subprocess.Popen(["ip", "netns", "exec", relay_ns, sys.executable, RELAY, "relay",
                                   "dh", "dr", delay_ms, ready] + options,
                                  stderr=open(os.path.join(args.work, "relay.err"), "a"))
    procs.append(relay_proc)
    deadline = time.time() + 10
    while not os.path.exists(ready):
        if time.time() > deadline or relay_proc.poll() is not None:
            raise RuntimeError("the frame relay did not start: see relay.err")
        time.sleep(0.02)


def netem(spec):
    """Replica C's link: the netem spec ("delay 500ms", "loss 20%") on its interface, or None
    for a clean link."""
    if link_mode != "netem":
        relay(spec)
        return
    run(["ip", "netns", "exec", ns_name, "tc", "qdisc", "del", "dev", "czr", "root"], check=False)
    if spec:
        run(["ip", "netns", "exec", ns_name, "tc", "qdisc", "add", "dev", "czr", "root", "netem"]
            + spec.split())


far_host = None
if any(f in NETEM for f in FAULTS):
    if os.geteuid() != 0:
        why = "network namespaces and tc need root"
    else:
        far_host, why = setup_namespace()
    if why:
        for f in FAULTS:
            if f in NETEM:
                skipped[f] = why
if "redis" in FAULTS and not shutil.which("redis-server"):
    skipped["redis"] = "redis-server is not installed"
for f, why in skipped.items():
    print(f"SKIPPED: fault '{f}': {why}", flush=True)
if far_host and link_mode != "netem":
    print(f"NOTE: the netem faults run through a user-space {link_mode}", flush=True)
if all(f in skipped for f in FAULTS):
    cleanup()
    sys.exit(77)
FAULTS = [f for f in FAULTS if f not in skipped]

# --- the processes ----------------------------------------------------------------------------
model = os.path.join(args.work, "demo.gguf")
if not os.path.exists(model):
    subprocess.run([args.cadenza, "synth", "--preset", "demo", "--layers", "2", "--type", "f32",
                    "-o", model], check=True, stdout=subprocess.DEVNULL)


def start_replica(name, host, port=0, netns=None):
    argv = ([] if netns is None else ["ip", "netns", "exec", netns]) + [
        args.cadenza, "serve", "-m", model, "--host", host, "--port", str(port), "-t", "1",
        "--served-model-name", "tiny", "--max-num-seqs", "16", "--max-model-len", "1024"]
    pr, got = start_listening(argv, os.path.join(args.work, f"replica-{name}.err"), timeout_s=120)
    procs.append(pr)
    if got is None:
        raise RuntimeError(f"replica {name} did not start: "
                           + open(os.path.join(args.work, f"replica-{name}.err")).read()[-1500:])
    return pr, got


def start_redis(port):
    pr = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                           "--save", "", "--appendonly", "no"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(pr)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return pr
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("redis-server did not start")


def ready(host, port, timeout_s):
    """GET /ready on HOST:PORT answers 200 within timeout_s."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection(host, port, timeout=5)
            c.request("GET", "/ready")
            if c.getresponse().status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


replicas = {}   # name -> {"proc", "host", "port", "addr"}
failures = []
try:
    for name in ("A", "B"):
        pr, port = start_replica(name, "127.0.0.1")
        replicas[name] = {"proc": pr, "host": "127.0.0.1", "port": port}
    if far_host:
        pr, port = start_replica("C", far_host, netns=ns_name)
        replicas["C"] = {"proc": pr, "host": far_host, "port": port}
    else:
        pr, port = start_replica("C", "127.0.0.1")
        replicas["C"] = {"proc": pr, "host": "127.0.0.1", "port": port}
    for r in replicas.values():
        r["addr"] = f"{r['host']}:{r['port']}"
    redis_port = free_port() if "redis" in FAULTS else None
    redis = start_redis(redis_port) if redis_port else None
    cache = (f"cache: {{backend: redis, ttl_s: 300, redis: {{port: {redis_port}, timeout_ms: 200}}}}\n"
             if redis_port else "cache: {backend: lru, ttl_s: 300}\n")
    config = os.path.join(args.work, "gateway.yaml")
    with open(config, "w") as f:
        f.write("listeners: [{host: 127.0.0.1, port: 0}]\n"
                "models:\n  - name: tiny\n    upstreams: ["
                + ", ".join(r["addr"] for r in replicas.values()) + "]\n"
                "routing: {prefix_affinity_chars: 0, max_retries: 2}\n"
                "health: {interval_ms: 500, timeout_ms: 1500, eject_after_failures: 2, "
                "eject_ms: 1000, max_eject_ms: 4000}\n"
                "upstream_timeout_ms: 20000\nconnect_timeout_ms: 1000\naccess_log: true\n" + cache)
    gw, gw_port = start_listening([args.cadenza, "gateway", "--config", config],
                                  os.path.join(args.work, "gateway.err"), timeout_s=60)
    procs.append(gw)
    if gw_port is None:
        raise RuntimeError("gateway did not start: "
                           + open(os.path.join(args.work, "gateway.err")).read()[-1500:])
    for r in replicas.values():
        if not ready(r["host"], r["port"], 60):
            raise RuntimeError(f"replica {r['addr']} not ready")
except Exception as e:  # noqa: BLE001
    cleanup()
    sys.exit(f"setup failed: {e}")

# --- gateway metrics --------------------------------------------------------------------------


def metrics():
    """{(name, upstream label or ''): value} of the cadenza_gateway_* series the suite reads."""
    _, text = http_get(gw_port, "/metrics", timeout=5)
    out = {}
    for m in re.finditer(r'^(cadenza_gateway_\w+)(?:\{([^}]*)\})? ([0-9.eE+-]+)$', text, re.M):
        labels = m.group(2) or ""
        up = re.search(r'upstream="([^"]*)"', labels)
        key = (m.group(1), up.group(1) if up else "")
        out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def total(ms, name):
    return sum(v for (n, _), v in ms.items() if n == name)


# --- the load ---------------------------------------------------------------------------------
WORDS = ("the gateway keeps every request alive while replicas die hang slow down and come "
         "back").split()
results = []           # one dict per request
results_lock = threading.Lock()
request_ids = itertools.count(1)
T_START = time.time()
snapshots_taken = 0


def snapshot_sockets(tag):
    """When a request hangs: the TCP sockets' states (queues, timers, retransmissions) here and in
    replica C's namespace, to WORK/sockets-TAG.txt, for the first few hangs only."""
    global snapshots_taken
    with results_lock:
        if snapshots_taken >= 3:
            return
        snapshots_taken += 1
    out = [f"# {time.strftime('%H:%M:%S')} {tag}\n# host\n",
           subprocess.run(["ss", "-tanoi"], capture_output=True, text=True).stdout]
    if ns_name:
        out += ["# replica C's namespace\n",
                subprocess.run(["ip", "netns", "exec", ns_name, "ss", "-tanoi"],
                               capture_output=True, text=True).stdout]
    with open(os.path.join(args.work, f"sockets-{tag}.txt"), "w") as f:
        f.write("".join(out))
stop_load = threading.Event()


def one_request(rng, kind=None):
    kind = kind or rng.choices(["chat", "stream", "cached"], weights=[45, 35, 20])[0]
    if kind == "cached":   # deterministic: the gateway caches it (a few distinct prompts)
        body = {"model": "tiny", "temperature": 0, "max_tokens": 8,
                "messages": [{"role": "user", "content": f"cached question {rng.randint(0, 4)}"}]}
    else:
        body = {"model": "tiny", "temperature": 0.8, "seed": rng.randint(0, 1 << 30),
                "messages": [{"role": "user",
                              "content": " ".join(rng.choice(WORDS) for _ in range(8))}],
                "max_tokens": (rng.randint(16, 160) if kind == "chat" else
                               rng.randint(150, 400) if kind == "stream" else 400),
                "ignore_eos": True}
        if kind == "stream":
            body["stream"] = True
    rec = {"kind": kind, "t0": time.time(), "outcome": "lost", "why": "", "upstream": None,
           "id": f"chaos-{next(request_ids)}"}
    deadline = rec["t0"] + args.request_timeout
    conn = http.client.HTTPConnection("127.0.0.1", gw_port, timeout=args.read_timeout)
    try:
        # The id reaches the gateway's and the replicas' access logs: a failed request can be
        # followed through both.
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"Content-Type": "application/json", "X-Request-Id": rec["id"]})
        r = conn.getresponse()
        rec["upstream"] = r.getheader("X-Cadenza-Upstream")
        rec["status"] = r.status
        if kind != "stream":
            data = r.read()
            if r.status == 200 and json.loads(data)["choices"][0].get("finish_reason"):
                rec["outcome"] = "ok"
            else:
                rec["why"] = f"HTTP {r.status}: {data[:200]!r}"
        elif r.status != 200:
            rec["why"] = f"stream refused before it started: HTTP {r.status}: {r.read()[:200]!r}"
        else:
            rec["outcome"] = "truncated"
            error_event = False
            while True:
                if time.time() > deadline:
                    rec["outcome"], rec["why"] = "hung", "no end within --request-timeout"
                    break
                line = r.readline()
                if not line:
                    rec["why"] = "the stream ended without [DONE]"
                    break
                line = line.strip()
                if line == b"data: [DONE]":
                    rec["outcome"] = "error_event" if error_event else "ok"
                    break
                if line.startswith(b"data: {") and b'"error"' in line[:16]:
                    error_event = True
    except socket.timeout:
        rec["outcome"], rec["why"] = ("hung" if kind == "stream" else "lost"), "read timed out"
        snapshot_sockets(rec["id"])
    except Exception as e:  # noqa: BLE001
        rec["why"] = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    rec["t1"] = time.time()
    with results_lock:
        results.append(rec)


def client(seed):
    rng = random.Random(seed)
    while not stop_load.is_set():
        one_request(rng)


samples = []   # (time, metrics)


def monitor():
    while not stop_load.is_set():
        try:
            samples.append((time.time(), metrics()))
        except Exception:  # noqa: BLE001
            pass
        time.sleep(0.1)


# --- the faults -------------------------------------------------------------------------------
target = {"kill": "A", "stop": "A", "latency": "C", "loss": "C"}


def inject(fault):
    if fault in ("kill", "stop"):
        pr = replicas["A"]["proc"]
        pr.send_signal(signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
        if fault == "kill":
            pr.wait()
    elif fault in NETEM:
        netem(NETEM[fault])
    elif fault == "redis":
        redis.kill()
        redis.wait()


def heal(fault):
    global redis
    if fault == "kill":
        pr, _ = start_replica("A-restarted", "127.0.0.1", replicas["A"]["port"])
        replicas["A"]["proc"] = pr
    elif fault == "stop":
        replicas["A"]["proc"].send_signal(signal.SIGCONT)
    elif fault in NETEM:
        netem(None)
    elif fault == "redis":
        redis = start_redis(redis_port)


def first_after(t, pred):
    for ts, ms in samples:
        if ts >= t and pred(ms):
            return ts - t
    return None


rows = []
fault_times = []
threads = [threading.Thread(target=client, args=(1000 + i,), daemon=True)
           for i in range(args.clients)]
mon = threading.Thread(target=monitor, daemon=True)
mon.start()
for t in threads:
    t.start()
exit_code = 0
try:
    time.sleep(args.baseline_s)
    with results_lock:
        base = list(results)
    for name, r in replicas.items():
        if not any(x["upstream"] == r["addr"] and x["outcome"] == "ok" for x in base):
            failures.append(f"baseline: replica {name} ({r['addr']}) got no traffic")
    for fault in FAULTS:
        before = metrics()
        t_fault = time.time()
        log(f"fault {fault}")
        if fault in target:
            # A burst of non-streamed requests just before the fault, so that some are in flight
            # on the replica it hits whatever the streams happen to be doing.
            for i in range(args.clients):
                threading.Thread(target=one_request, args=(random.Random(i), "burst"),
                                 daemon=True).start()
            time.sleep(0.1)
        inject(fault)
        time.sleep(args.fault_s)
        t_heal = time.time()
        log(f"heal {fault}")
        fault_times.append({"fault": fault, "at": round(t_fault - T_START, 3),
                            "healed": round(t_heal - T_START, 3)})
        hit_base = metrics()
        heal(fault)
        # Back: a response from the replica (a cache hit for Redis) that started after the heal.
        t_back = None
        while time.time() < t_heal + args.return_s and t_back is None:
            time.sleep(0.2)
            if fault == "redis":
                t_back = first_after(t_heal, lambda ms: total(ms, "cadenza_gateway_cache_hits_total")
                                     > total(hit_base, "cadenza_gateway_cache_hits_total"))
                t_back = None if t_back is None else t_heal + t_back
            else:
                addr = replicas[target[fault]]["addr"]
                with results_lock:
                    t_back = min((x["t1"] for x in results if x["upstream"] == addr and
                                  x["outcome"] == "ok" and x["t0"] >= t_heal), default=None)
        time.sleep(1.0)   # let requests that started during the fault finish
        t_end = time.time()
        after = metrics()
        with results_lock:
            mine = [x for x in results if t_fault <= x["t0"] < t_end]
            # Requests in flight at the fault belong to it too (they are what it hits).
            mine += [x for x in results if x["t0"] < t_fault < x["t1"] and x not in mine]
        if fault == "redis":
            eject = None
        else:
            addr = replicas[target[fault]]["addr"]
            ej0 = before.get(("cadenza_gateway_upstream_ejections_total", addr), 0)
            eject = first_after(t_fault, lambda ms: ms.get(("cadenza_gateway_upstream_healthy", addr), 1) == 0
                                or ms.get(("cadenza_gateway_upstream_ejections_total", addr), 0) > ej0)
        label = fault if fault not in NETEM or link_mode == "netem" else f"{fault} (relay)"
        row = {"fault": label, "sent": len(mine),
               "streams": sum(1 for x in mine if x["kind"] == "stream"),
               "lost": sum(1 for x in mine if x["outcome"] in ("lost", "truncated")),
               "hung": sum(1 for x in mine if x["outcome"] == "hung"),
               "retried": int(total(after, "cadenza_gateway_retries_total")
                              - total(before, "cadenza_gateway_retries_total")),
               "error_events": sum(1 for x in mine if x["outcome"] == "error_event"),
               # Held by the faulted replica through the whole fault: started before it, answered
               # by that replica after the heal. For a hung replica (stop) that is the gateway
               # waiting on it instead of timing it out.
               "stuck": sum(1 for x in mine if fault in target and x["t0"] < t_fault
                            and x["t1"] > t_heal
                            and x["upstream"] == replicas[target[fault]]["addr"]),
               # Answered by the faulted replica, sent while the fault lasted: shows the
               # fault took effect (slow answers) or that the replica was out (none).
               "served_during": sum(1 for x in mine if fault in target and x["outcome"] == "ok"
                                    and t_fault <= x["t0"] < t_heal
                                    and x["upstream"] == replicas[target[fault]]["addr"]),
               "max_s": max((x["t1"] - x["t0"] for x in mine), default=0.0),
               "eject_s": eject,
               "return_s": None if t_back is None else t_back - t_heal}
        if fault == "redis":   # during the outage every cache lookup must have been a miss
            row["cache_hits_during"] = int(total(hit_base, "cadenza_gateway_cache_hits_total")
                                           - total(before, "cadenza_gateway_cache_hits_total"))
        rows.append(row)
        for x in mine:
            if x["outcome"] not in ("ok", "error_event"):
                failures.append(f"{fault}: a {x['kind']} request {x['outcome']}: {x['why']}")
        if fault == "stop" and row["stuck"]:
            failures.append(f"stop: {row['stuck']} requests waited for the hung replica until "
                            "it was resumed instead of being timed out and retried")
        if t_back is None:
            failures.append(f"{fault}: traffic did not return within {args.return_s} s of the heal")
        if fault != "redis" and eject is None and fault in ("kill", "stop"):
            failures.append(f"{fault}: the gateway never took replica {target[fault]} out")
        log(f"{fault}: {row}")
finally:
    stop_load.set()
    for t in threads:
        t.join(timeout=args.request_timeout + 5)
    cleanup()

# --- the report -------------------------------------------------------------------------------
# Every request counts, also those of the baseline and between the faults' windows.
bad = [x for x in results if x["outcome"] not in ("ok", "error_event")]
counted = sum(r["lost"] + r["hung"] for r in rows)
if len(bad) > counted:
    failures.append(f"{len(bad) - counted} more requests lost or hung outside the faults' "
                    f"windows, e.g. a {bad[0]['kind']}: {bad[0]['outcome']}: {bad[0]['why']}")


def secs(v):
    return "-" if v is None else f"{v:.1f}"


lines = ["| fault | requests sent (streams) | lost | hung | stuck | retried | error events | "
         "served by it during | slowest s | eject s | return s |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for r in rows:
    lines.append(f"| {r['fault']} | {r['sent']} ({r['streams']}) | {r['lost']} | {r['hung']} | "
                 f"{r['stuck']} | {r['retried']} | {r['error_events']} | "
                 f"{r['served_during'] if r['fault'] != 'redis' else '-'} | {secs(r['max_s'])} | {secs(r['eject_s'])} | {secs(r['return_s'])} |")
for f, why in skipped.items():
    lines.append(f"| {f} | SKIPPED: {why} | | | | | | | | | |")
table = "\n".join(lines)
print(table)
with open(os.path.join(args.work, "report.md"), "w") as f:
    f.write(table + "\n")
with open(os.path.join(args.work, "report.json"), "w") as f:
    json.dump({"rows": rows, "skipped": skipped, "failures": failures, "link": link_mode,
               "requests": len(results),
               # Each failed request, times in seconds from the start, for following its id
               # through gateway.err and replica-*.err.
               "bad_requests": [dict(x, t0=round(x["t0"] - T_START, 3),
                                     t1=round(x["t1"] - T_START, 3)) for x in bad],
               "faults_at": fault_times}, f, indent=1)
print(f"{len(results)} requests in all; replicas " +
      ", ".join(f"{n}={r['addr']}" for n, r in replicas.items()))
for msg in failures[:50]:
    print("FAIL: " + msg)
if failures:
    print(f"FAILED: {len(failures)} failures")
    sys.exit(1)
print("PASSED" + (f" (skipped: {', '.join(skipped)})" if skipped else ""))
