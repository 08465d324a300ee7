#!/usr/bin/env python3
"""ctest ops_compose_stack: deploy/compose/compose.yaml is consistent with the files beside it.

  compose_check.py CADENZA SOURCE_DIR WORK_DIR

Checks, without a container runtime (these machines cannot start containers): every service has an
image; every build's context and Containerfile exist; every bind mount's source exists (the models
folder excepted: the `model` service creates it); the gateway config passes `cadenza gateway
--check` and routes to services the file defines; the Prometheus config passes `promtool check
config` with the rule files it mounts, and scrapes the replicas and the gateway under the job names
the dashboard selects; Grafana's dashboard mount is the generated dashboard; the serve command
line starts a real server on a synthesized model (flags and all) that answers /health.
"""
import os, re, shutil, signal, subprocess, sys, urllib.request
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from cadenza_serve import start_listening  # noqa: E402

# Absolute paths: the Prometheus config written into WORK names the rule files under SRC.
cadenza, src, work = (os.path.abspath(a) for a in sys.argv[1:4])
compose_dir = os.path.join(src, "deploy", "compose")
errors = []


def expand(s):
    """${VAR:-default} -> default (the file's defaults are what this checks)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(s))


doc = yaml.safe_load(open(os.path.join(compose_dir, "compose.yaml")))
services = doc["services"]
for name in ["replica-a", "replica-b", "gateway", "redis", "prometheus", "grafana", "model"]:
    if name not in services:
        errors.append(f"service {name} missing")
for name, svc in services.items():
    if "image" not in svc:
        errors.append(f"{name}: no image")
    if "build" in svc:
        ctx = os.path.normpath(os.path.join(compose_dir, svc["build"]["context"]))
        cf = os.path.join(ctx, svc["build"].get("dockerfile", "Containerfile"))
        if not os.path.isfile(cf):
            errors.append(f"{name}: build file {cf} not found")
    for v in svc.get("volumes", []):
        host = expand(v).split(":")[0]
        if not host.startswith((".", "/")):
            if host not in doc.get("volumes", {}):
                errors.append(f"{name}: named volume {host} not declared")
            continue
        path = os.path.normpath(os.path.join(compose_dir, host))
        if host != "./models" and not os.path.exists(path):
            errors.append(f"{name}: mount source {host} not found")
    for dep in (svc.get("depends_on") or []):
        if dep not in services:
            errors.append(f"{name}: depends on unknown {dep}")

# Gateway: valid config, upstreams are services of this file.
gw = yaml.safe_load(open(os.path.join(compose_dir, "gateway.yaml")))
r = subprocess.run([cadenza, "gateway", "--config", os.path.join(compose_dir, "gateway.yaml"), "--check"],
                   capture_output=True, text=True)
print(r.stdout.strip(), r.stderr.strip())
if r.returncode != 0:
    errors.append("gateway.yaml fails --check")
for m in gw["models"]:
    for up in m.get("upstreams", []):
        if up.split(":")[0] not in services:
            errors.append(f"gateway upstream {up} is no service")
if gw["cache"]["redis"]["host"] not in services:
    errors.append("gateway's redis host is no service")

# Prometheus: rule paths point into the mounted rules folder; promtool checks it all.
os.makedirs(work, exist_ok=True)
prom = yaml.safe_load(open(os.path.join(compose_dir, "prometheus.yml")))
rules_dir = os.path.join(src, "deploy", "monitoring", "rules")
prom["rule_files"] = [os.path.join(rules_dir, os.path.basename(p)) for p in prom["rule_files"]]
jobs = {c["job_name"]: [t for s in c["static_configs"] for t in s["targets"]] for c in prom["scrape_configs"]}
if not any(j.startswith("cadenza-serve") for j in jobs) or not any(j.startswith("cadenza-gateway") for j in jobs):
    errors.append(f"scrape jobs {list(jobs)} do not match the dashboard's cadenza-serve*/cadenza-gateway*")
for targets in jobs.values():
    for t in targets:
        if t.split(":")[0] not in services:
            errors.append(f"scrape target {t} is no service")
local = os.path.join(work, "prometheus.yml")
yaml.safe_dump(prom, open(local, "w"))
if shutil.which("promtool"):
    r = subprocess.run(["promtool", "check", "config", local], capture_output=True, text=True)
    print(r.stdout.strip())
    if r.returncode != 0:
        errors.append("promtool check config: " + r.stderr.strip())
else:
    print("SKIPPED: promtool is needed (scripts/setup.sh --test)")
    sys.exit(77)

graf = [v for v in services["grafana"]["volumes"] if "cadenza.json" in v]
if not graf or not os.path.isfile(os.path.normpath(os.path.join(compose_dir, graf[0].split(":")[0]))):
    errors.append("grafana does not mount deploy/monitoring/grafana/cadenza.json")

# The replicas' command line, on a synthesized model.
serve = services["replica-a"]
cmd = [expand(a) for a in serve["command"]]
model = os.path.join(work, "model.gguf")
subprocess.run([cadenza, "synth", "--preset", "demo", "--type", "f32", "--layers", "2", "--ctx", "512",
                "--seed", "4", "-o", model], check=True, capture_output=True)
cmd = [model if a == "/models/model.gguf" else a for a in cmd]
cmd[cmd.index("--host") + 1] = "127.0.0.1"
cmd[cmd.index("--port") + 1] = "0"
cmd[cmd.index("--threads") + 1] = "2"
proc, port = start_listening([cadenza] + cmd, os.path.join(work, "serve.err"))
if port is None:
    errors.append("the replicas' command line did not start a server: " + open(os.path.join(work, "serve.err")).read()[-500:])
else:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as resp:
        print("serve /health:", resp.status)
proc.send_signal(signal.SIGTERM)
rc = proc.wait(timeout=60)
if rc != 0:
    errors.append(f"serve exited {rc} after SIGTERM")

for e in errors:
    print("FAILED:", e)
print(f"deploy/compose: {len(services)} services checked, {len(errors)} problems")
sys.exit(1 if errors else 0)
