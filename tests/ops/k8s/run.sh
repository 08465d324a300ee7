#!/usr/bin/env bash
# ctest ops_kubernetes_manifests: every overlay of deploy/kubernetes renders with `kubectl
# kustomize` and passes schema validation (validate.mjs: Kubernetes, prometheus-operator and KEDA
# schemas, unknown fields rejected), after the validator's self-test proves it catches errors;
# the gateway config the overlays render passes `cadenza gateway --check` with its tenants file.
#   run.sh CADENZA SOURCE_DIR WORK_DIR
# Exit 77 (skipped, which scripts/test.sh counts as a failure) only when kubectl, node or npm is
# missing; a failed `npm ci` is a failure.
set -euo pipefail
cadenza=$1 src=$2 work=$3
for tool in kubectl node npm; do
  command -v "$tool" >/dev/null 2>&1 || { echo "SKIPPED: $tool is needed to render and validate deploy/kubernetes"; exit 77; }
done
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$here/validate.mjs" "$work/"
if [ ! -d "$work/node_modules/kubernetes-models" ]; then
  (cd "$work" && npm ci --no-audit --no-fund >npm.log 2>&1) || {
    echo "FAILED: npm ci could not install the schema packages; $work/npm.log:"; tail -20 "$work/npm.log"; exit 1; }
fi
(cd "$work" && node validate.mjs --self-test)

overlays=$(cd "$src/deploy/kubernetes/overlays" && ls -d */ | tr -d /)
[ -n "$overlays" ] || { echo "no overlays under deploy/kubernetes/overlays"; exit 1; }
rendered=()
for o in $overlays; do
  kubectl kustomize "$src/deploy/kubernetes/overlays/$o" > "$work/$o.yaml"
  rendered+=("$work/$o.yaml")
done
(cd "$work" && node validate.mjs "${rendered[@]}")

# The gateway's config and tenants as the pods see them (config/ and tenants/ side by side).
python3 - "$work/cpu.yaml" "$work/gw" <<'PY'
import base64, os, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
out = sys.argv[2]
for d in docs:
    name = d["metadata"]["name"]
    if d["kind"] == "ConfigMap" and name.startswith("cadenza-gateway-config"):
        os.makedirs(f"{out}/config", exist_ok=True)
        open(f"{out}/config/gateway.yaml", "w").write(d["data"]["gateway.yaml"])
    if d["kind"] == "Secret" and name.startswith("cadenza-gateway-tenants"):
        os.makedirs(f"{out}/tenants", exist_ok=True)
        open(f"{out}/tenants/tenants.yaml", "wb").write(base64.b64decode(d["data"]["tenants.yaml"]))
PY
"$cadenza" gateway --config "$work/gw/config/gateway.yaml" --check
echo "deploy/kubernetes: $(echo $overlays | wc -w) overlays rendered and valid"
