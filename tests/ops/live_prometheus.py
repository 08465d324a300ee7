#!/usr/bin/env python3
"""Every dashboard panel's query and every rule's query, against a real Prometheus.

  tests/ops/live_prometheus.py CADENZA_BINARY WORK_DIR

Starts two `cadenza serve` replicas (a synthesized MoE model, so the expert metrics exist), a
`cadenza gateway` in front of them (a tenant limited to one request a minute, the response cache
on), and Debian's Prometheus scraping all three with
deploy/monitoring/rules loaded. A short load covers what the panels show: streams and not,
cached and repeated prompts, a bad key (401), an unknown model (404), rate limits (429),
and a stream broken by killing its replica, after which requests still routed to that replica
are retried on the other and its circuit breaker opens.
Then every query of deploy/monitoring/grafana/cadenza.json, every recording rule, and every alert
(its comparisons made `bool`, so the series exist whether or not it fires) goes through
Prometheus's HTTP API; the test fails if any returns no series. It writes WORK_DIR/preview.html:
each panel drawn from query_range data (an SVG chart per panel), the check that stands in for
a Grafana rendering, since Grafana is not a Debian package.
Exit 77 (ctest: skipped) only when prometheus is missing.
"""
import http.client, json, os, re, shutil, signal, socket, subprocess, sys, time, urllib.parse

import yaml  # Debian's python3-yaml (scripts/setup.sh --test)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MON = os.path.join(ROOT, "deploy", "monitoring")
procs = []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args, log):
    p = subprocess.Popen(args, stdout=open(log + ".out", "w"), stderr=open(log + ".err", "w"))
    procs.append(p)
    return p


def wait_http(port, path, timeout=90, proc=None, log=None):
    end = time.time() + timeout
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            sys.exit(f"process for port {port} exited early:\n" + open(log + ".err").read()[-2000:])
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit(f"127.0.0.1:{port}{path} never answered 200")


def post(port, path, body, key=None, stream=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    c.request("POST", path, json.dumps(body), headers)
    r = c.getresponse()
    if stream:
        return c, r
    data = r.read()
    return r.status, data


def prom(port, endpoint, **params):
    url = f"/api/v1/{endpoint}?" + urllib.parse.urlencode(params)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", url)
    answer = json.loads(c.getresponse().read())
    if answer.get("status") != "success":
        raise RuntimeError(f"{params.get('query')}: {answer}")
    return answer["data"]["result"]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    cadenza, work = sys.argv[1], sys.argv[2]
    if not shutil.which("prometheus"):
        print("SKIPPED: prometheus is needed for the live monitoring test (scripts/setup.sh --test)")
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = os.path.join(work, "moe.gguf")
    subprocess.run([cadenza, "synth", "--preset", "deepseek-v3-small", "--type", "f16", "--ctx",
                    "1024", "--seed", "5", "-o", model], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)

    ports = {name: free_port() for name in ("a", "b", "gw", "prom")}
    replicas = {}
    for name in ("a", "b"):
        log = os.path.join(work, "serve-" + name)
        p = start([cadenza, "serve", "-m", model, "--port", str(ports[name]), "-t", "1",
                   "--max-model-len", "1024", "--served-model-name", "m", "--no-warmup"], log)
        replicas[name] = p
        wait_http(ports[name], "/ready", proc=p, log=log)

    acme = "sk-acme-live"
    limited = "sk-limited-live"
    hashed = lambda k: subprocess.run([cadenza, "gateway", "--hash-key", k], check=True,
                                      capture_output=True, text=True).stdout.strip()
    gw_config = {
        "listeners": [{"host": "127.0.0.1", "port": ports["gw"]}],
        "default_model": "m",
        "models": [
            {"name": "m", "versions": [{"version": "stable", "weight": 100, "upstreams": [
                f"127.0.0.1:{ports['a']}", f"127.0.0.1:{ports['b']}"]}]},
            {"name": "s", "versions": [{"version": "stable", "weight": 100, "upstream_model": "m",
                "upstreams": [f"127.0.0.1:{ports['b']}"]}]},
        ],
        "routing": {"max_retries": 2},
        # Health checks every 20 s: after b is killed, requests still reach it for a while, fail,
        # are retried on a, and open b's circuit breaker (the failover panel's series).
        "health": {"interval_ms": 20000, "timeout_ms": 1000, "eject_after_failures": 2},
        "tenants": [
            {"name": "acme", "key_sha256": hashed(acme), "models": ["*"]},
            {"name": "limited", "key_sha256": hashed(limited), "models": ["*"],
             "requests_per_minute": 1},
        ],
        "cache": {"backend": "lru", "max_entries": 100},
    }
    gw_yaml = os.path.join(work, "gateway.yaml")
    yaml.safe_dump(gw_config, open(gw_yaml, "w"))
    gw_log = os.path.join(work, "gateway")
    gw = start([cadenza, "gateway", "-c", gw_yaml], gw_log)
    wait_http(ports["gw"], "/health", proc=gw, log=gw_log)

    prom_config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": "cadenza-serve", "static_configs": [{"targets": [
                f"127.0.0.1:{ports['a']}", f"127.0.0.1:{ports['b']}"]}]},
            {"job_name": "cadenza-gateway", "static_configs": [{"targets": [
                f"127.0.0.1:{ports['gw']}"]}]},
        ],
    }
    # The rule groups evaluate every 15 s in production; here every second, so the test is short.
    for f in ("cadenza-recording.yaml", "cadenza-alerts.yaml"):
        rules = yaml.safe_load(open(os.path.join(MON, "rules", f)))
        for g in rules["groups"]:
            g["interval"] = "1s"
        yaml.safe_dump(rules, open(os.path.join(work, f), "w"))
    prom_config["rule_files"] = [os.path.join(work, f) for f in
                                 ("cadenza-recording.yaml", "cadenza-alerts.yaml")]
    prom_yml = os.path.join(work, "prometheus.yml")
    yaml.safe_dump(prom_config, open(prom_yml, "w"))
    prom_log = os.path.join(work, "prometheus")
    pp = start(["prometheus", f"--config.file={prom_yml}", f"--storage.tsdb.path={work}/tsdb",
                f"--web.listen-address=127.0.0.1:{ports['prom']}"], prom_log)
    wait_http(ports["prom"], "/-/ready", proc=pp, log=prom_log)
    t_start = time.time()

    # The load. Each request's outcome is checked: a failure here is a test failure, not noise.
    gwp = ports["gw"]
    outcomes = {}
    def note(what, status):
        outcomes.setdefault(what, []).append(status)
    for i in range(12):
        body = {"model": "m", "prompt": f"request {i % 4} about the weather", "max_tokens": 8,
                "temperature": 0}
        note("completion", post(gwp, "/v1/completions", body, acme)[0])
        chat = {"model": "m", "messages": [{"role": "user", "content": f"hello {i}"}],
                "max_tokens": 6, "stream": i % 2 == 0}
        note("chat", post(gwp, "/v1/chat/completions", chat, acme)[0])
    note("bad key", post(gwp, "/v1/completions", {"model": "m", "prompt": "x"}, "sk-wrong")[0])
    note("unknown model", post(gwp, "/v1/completions", {"model": "nope", "prompt": "x"}, acme)[0])
    for _ in range(3):
        note("limited", post(gwp, "/v1/completions", {"model": "m", "prompt": "x", "max_tokens": 2},
                             limited)[0])
    # A stream on replica b, broken by killing b after its first bytes.
    conn, resp = post(gwp, "/v1/completions", {"model": "s", "prompt": "a long story",
                      "max_tokens": 900, "min_tokens": 900, "stream": True, "temperature": 1},
                      acme, stream=True)
    note("stream to b", resp.status)
    resp.read1(64)
    replicas["b"].send_signal(signal.SIGKILL)
    replicas["b"].wait()
    rest = resp.read()
    conn.close()
    # b is gone but not yet known to be: requests routed to it fail over to a.
    for i in range(16):
        body = {"model": "m", "prompt": f"after the fault {i}", "max_tokens": 4, "temperature": 0}
        note("after b died", post(gwp, "/v1/completions", body, acme)[0])
    print("outcomes:", {k: sorted(set(v)) for k, v in outcomes.items()})
    expect = {"completion": {200}, "chat": {200}, "bad key": {401}, "unknown model": {404},
              "stream to b": {200}, "after b died": {200}}
    for what, statuses in expect.items():
        if set(outcomes[what]) != statuses:
            sys.exit(f"{what}: got statuses {outcomes[what]}, expected {statuses}")
    if 429 not in outcomes["limited"]:
        sys.exit(f"the limited tenant was never refused: {outcomes['limited']}")
    if b"error" not in rest:
        sys.exit("the stream broken by killing its replica did not end with an error event")

    # Every query, until all return series (rates need two scrapes; rules a few evaluations).
    queries = []
    dash = json.load(open(os.path.join(MON, "grafana", "cadenza.json")))
    subst = {"$__rate_interval": "1m", "$serve_job": "cadenza-serve.*",
             "$gateway_job": "cadenza-gateway.*"}
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            expr = t["expr"]
            for k, v in subst.items():
                expr = expr.replace(k, v)
            queries.append((f"panel '{panel['title']}' {t['refId']}", expr, panel, t))
    for f in ("cadenza-recording.yaml", "cadenza-alerts.yaml"):
        for g in yaml.safe_load(open(os.path.join(MON, "rules", f)))["groups"]:
            for r in g["rules"]:
                if "record" in r:
                    queries.append((f"recording rule {r['record']}", r["record"], None, None))
                    queries.append((f"recording rule {r['record']} (expr)", r["expr"], None, None))
                else:
                    expr = re.sub(r"\s(>=|<=|==|!=|>|<)\s", r" \1 bool ", r["expr"])
                    queries.append((f"alert {r['alert']}", expr, None, None))
    deadline = time.time() + 120
    while True:
        empty = [(name, expr) for name, expr, _, _ in queries if not prom(ports["prom"], "query", query=expr)]
        if not empty or time.time() > deadline:
            break
        time.sleep(2)
    print(f"{len(queries) - len(empty)} of {len(queries)} queries returned series "
          f"({time.time() - t_start:.0f} s after Prometheus started)")
    for name, expr in empty:
        print(f"NO SERIES: {name}: {expr}")

    # A little more history for the preview's charts (the check itself is done).
    time.sleep(max(0.0, t_start + 30 - time.time()))
    write_preview(work, ports["prom"], queries, t_start)
    return 1 if empty else 0


def write_preview(work, port, queries, t_start):
    end = time.time()
    step = 1
    parts = ["<!doctype html><meta charset=utf-8><title>Cadenza dashboard preview</title>",
             "<style>body{font:13px sans-serif;background:#111;color:#ddd}div.p{display:inline-block;"
             "width:31%;margin:6px;vertical-align:top;background:#1b1b1b;padding:6px}svg{background:#161616}"
             "</style><h1>Cadenza dashboard: panels from live Prometheus data</h1>"]
    colors = ["#7eb26d", "#eab839", "#6ed0e0", "#ef843c", "#e24d42", "#1f78c1", "#ba43a9"]
    seen = {}
    for name, expr, panel, target in queries:
        if panel is None:
            continue
        seen.setdefault(panel["id"], (panel, []))[1].append((target, expr))
    for panel, targets in seen.values():
        lines, legend = [], []
        series = []
        for target, expr in targets:
            try:
                res = prom(port, "query_range", query=expr, start=t_start, end=end, step=step)
            except RuntimeError:
                res = []
            for s in res[:8]:
                pts = [(float(t), float(v)) for t, v in s["values"] if v not in ("NaN", "+Inf", "-Inf")]
                label = target["legendFormat"]
                for k, v in s["metric"].items():
                    label = label.replace("{{" + k + "}}", v)
                series.append((label, pts))
        ys = [v for _, pts in series for _, v in pts] or [0, 1]
        lo, hi = min(ys), max(ys)
        hi = hi if hi > lo else lo + 1
        for i, (label, pts) in enumerate(series):
            c = colors[i % len(colors)]
            xy = " ".join(f"{(t - t_start) / max(end - t_start, 1) * 380 + 10:.1f},"
                          f"{150 - (v - lo) / (hi - lo) * 130:.1f}" for t, v in pts)
            lines.append(f'<polyline fill=none stroke="{c}" stroke-width=1.5 points="{xy}"/>')
            legend.append(f'<span style="color:{c}">&#9632; {label}</span>')
        parts.append(f"<div class=p><b>{panel['title']}</b> <small>({panel['fieldConfig']['defaults']['unit']};"
                     f" {lo:.3g} to {hi:.3g})</small><br><svg width=400 height=160>{''.join(lines)}</svg>"
                     f"<br>{' '.join(legend)}</div>")
    open(os.path.join(work, "preview.html"), "w").write("\n".join(parts))
    print(f"preview: {os.path.join(work, 'preview.html')}")


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    sys.exit(rc)
