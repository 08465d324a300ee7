#!/usr/bin/env bash
# The one prepared check of the CUDA backend on a GPU machine (docs/cuda.md, issue 9).
#
#   scripts/gpu_check.sh bundle   # HERE (no GPU needed): build with CUDA and pack the binaries,
#                                 # their non-system libraries and a subset of ../shared into
#                                 # build-cuda/gpu-bundle (ignored by git; < 64 MiB with the tree)
#   scripts/gpu_check.sh          # ON THE GPU MACHINE: uses build-cuda/gpu-bundle when present
#                                 # (carry it), else configures and builds with CUDA (-j16); then
#                                 # CUDA tests, golden tests on the GPU, CPU-vs-GPU greedy text,
#                                 # the Llama-3.2-1B-shaped bf16 benchmark; prints a table and
#                                 # writes it (and logs) under $OUT (default /tmp/gpu_check_out).
#   scripts/gpu_check.sh --build  # ON THE GPU MACHINE: ignore the bundle, build there.
#
# Device tool call (one call, <= 10 minutes wall):
#   run(command="bash scripts/gpu_check.sh", carry=["build-cuda/gpu-bundle"], timeout_s=600)
# Environment: GPU_CHECK_QUANT=1 adds Q8_0 and Q4_K_M decode runs; GPU_CHECK_BENCH=0 skips the
# benchmark; GPU_CHECK_SANITIZER=0 skips the compute-sanitizer memcheck of the op tests. Ceilings (measured on this workplace's H200s, /work/.library/device/KINDS.md):
# 4.3 TB/s copy bandwidth, ~790 TFLOP/s dense bf16.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
BUNDLE="$ROOT/build-cuda/gpu-bundle"
HBM_BYTES_PER_S=4.3e12
BF16_FLOPS=790e12

# ------------------------------------------------------------------------------------------------
if [[ "${1:-}" == "bundle" ]]; then
  set -e
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DCADENZA_CUDA=ON >/dev/null
  ninja -C build-cuda -j "${JOBS:-2}" cadenza test_cuda_backend test_cuda_factory
  rm -rf "$BUNDLE"
  mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/shared/models" "$BUNDLE/shared/golden"
  cp build-cuda/bin/cadenza "$BUNDLE/bin/"
  cp build-cuda/tests/kernels/test_cuda_backend build-cuda/tests/kernels/test_cuda_factory "$BUNDLE/bin/"
  strip --strip-unneeded "$BUNDLE"/bin/*
  # Shared libraries the binaries need, except glibc's and the CUDA toolkit's (there: /usr/local/cuda).
  for b in "$BUNDLE"/bin/*; do
    ldd "$b" | awk '/=> \//{print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*|libcublas*|libcudart*) ;;
      *) cp -L "$lib" "$BUNDLE/lib/" ;;
    esac
  done
  # Binaries and libraries compressed (the device tool carries at most 64 MiB with the tree).
  tar -C "$BUNDLE" -cJf "$BUNDLE/binaries.tar.xz" bin lib
  rm -rf "$BUNDLE/bin" "$BUNDLE/lib"
  # ../shared models that fit: two f16 tinies (dense, experts) and one quantized file.
  SHARED="${CADENZA_SHARED_DIR:-$ROOT/../shared}"
  for m in tiny-llama-spm-f16 tiny-mixtral-f16 small-llama-spm-Q4_K_M; do
    if [[ -f "$SHARED/models/$m.gguf" && -f "$SHARED/golden/$m.json" ]]; then
      cp "$SHARED/models/$m.gguf" "$BUNDLE/shared/models/"
      cp "$SHARED/golden/$m.json" "$BUNDLE/shared/golden/"
    fi
  done
  du -sh "$BUNDLE" "$BUNDLE"/*
  echo "bundle ready: carry [\"build-cuda/gpu-bundle\"] and run 'bash scripts/gpu_check.sh'"
  exit 0
fi

# ------------------------------------------------------------------------------------------------
OUT="${OUT:-/tmp/gpu_check_out}"
mkdir -p "$OUT"
REPORT="$OUT/gpu_check.md"
: >"$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }
T0=$(date +%s)
# The device tool returns at most 8 files: keep the report, the main test log and the benchmark
# lines as files and pack every other log into logs.tar.gz.
pack_logs() {
  (cd "$OUT" && shopt -s nullglob && files=(*.log *.json) &&
   keep=(test_cuda_backend.log) &&
   rest=() && for f in "${files[@]}"; do [[ " ${keep[*]} " == *" $f "* ]] || rest+=("$f"); done &&
   ((${#rest[@]})) && tar -czf logs.tar.gz "${rest[@]}" && rm -f "${rest[@]}") || true
}
trap pack_logs EXIT
elapsed() { echo $(($(date +%s) - T0)); }

export PATH="/usr/local/cuda/bin:$PATH"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# cuBLAS 13 (opened at run time by --device cuda): the toolkit's copy, else any other (PyTorch's wheels carry one).
if ! ls /usr/local/cuda/lib64/libcublas.so.13 >/dev/null 2>&1; then
  for d in $(find /usr /opt -name 'libcublas.so.13' 2>/dev/null | xargs -r -n1 dirname | sort -u); do
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
  done
fi

say "# Cadenza CUDA check ($(date -u +%FT%TZ))"
say ""
say '```'
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tee -a "$REPORT"
nvcc --version 2>/dev/null | tail -1 | tee -a "$REPORT"
say '```'

if [[ -f "$BUNDLE/binaries.tar.xz" && "${1:-}" != "--build" ]]; then
  mkdir -p /tmp/cadenza-bundle && tar -C /tmp/cadenza-bundle -xJf "$BUNDLE/binaries.tar.xz"
  BIN=/tmp/cadenza-bundle/bin
  export LD_LIBRARY_PATH="/tmp/cadenza-bundle/lib:$LD_LIBRARY_PATH"
  if ! "$BIN/cadenza" --help >/dev/null 2>"$OUT/bundle_error.log"; then
    say "bundle binaries do not run here ($(head -c 300 "$OUT/bundle_error.log")); building instead"
    BIN=""
  else
    say "binaries: carried bundle (build-cuda/gpu-bundle)"
  fi
else
  BIN=""
fi
if [[ -z "$BIN" ]]; then
  say "binaries: building here (Release, CADENZA_CUDA=ON, -j16)"
  if ! { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCADENZA_CUDA=ON \
           -DCADENZA_BUILD_BENCH=OFF && \
         ninja -C build-gpu -j16 cadenza test_cuda_backend test_cuda_factory; } >"$OUT/build.log" 2>&1; then
    say "BUILD FAILED (tail of build.log):"
    tail -30 "$OUT/build.log" | tee -a "$REPORT"
    exit 1
  fi
  BIN="$ROOT/build-gpu/bin"
  cp build-gpu/tests/kernels/test_cuda_backend build-gpu/tests/kernels/test_cuda_factory "$BIN/"
  say "build: $(elapsed) s"
fi

# Shared test data: the bundle's subset, else ../shared.
if [[ -d "$BUNDLE/shared/models" ]]; then
  export CADENZA_SHARED_DIR="$BUNDLE/shared"
elif [[ -d "$ROOT/../shared/models" ]]; then
  export CADENZA_SHARED_DIR="$ROOT/../shared"
fi

# --- 1. tests ----------------------------------------------------------------------------------
say ""
say "## Tests"
TEST_STATUS=0
# One process per suite: a device fault aborts its process (the backend cannot recover a CUDA
# context), and the other suites still run. All output goes to test_cuda_backend.log.
: >"$OUT/test_cuda_backend.log"
for t in "test_cuda_factory:*" "test_cuda_backend:CudaOps.*" "test_cuda_backend:CudaAttention.*" \
         "test_cuda_backend:CudaModel.*" "test_cuda_backend:SharedModels/*"; do
  bin=${t%%:*} filter=${t#*:}
  log="$OUT/suite.log"
  if timeout 300 "$BIN/$bin" --gtest_color=no --gtest_filter="$filter" >"$log" 2>&1; then r=PASS; else r="FAIL (exit $?)"; TEST_STATUS=1; fi
  summary=$(grep -E '^\[  (PASSED  |FAILED  |SKIPPED )\] [0-9]+ tests?' "$log" | tr '\n' ' ')
  say "- $bin $filter: **$r** $summary"
  grep -E '^\[  FAILED  \]|Failure|SKIPPED:|critical|Expected|Which is|Value of' "$log" | sort | uniq -c | head -24 | sed 's/^/    /' | tee -a "$REPORT"
  grep -E '^\[cuda' "$log" | sed 's/^/    /' | tee -a "$REPORT"
  { echo "===== $bin $filter"; cat "$log"; } >>"$OUT/test_cuda_backend.log"
  rm -f "$log"
done
# Out-of-bounds accesses and races in the kernels (memcheck on the op tests; skipped when
# compute-sanitizer is absent or GPU_CHECK_SANITIZER=0).
if [[ "${GPU_CHECK_SANITIZER:-1}" != 0 ]] && command -v compute-sanitizer >/dev/null; then
  if timeout 180 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/test_cuda_backend" \
       --gtest_filter='CudaOps.*:CudaAttention.*' >"$OUT/memcheck.log" 2>&1; then
    say "- compute-sanitizer memcheck (CudaOps, CudaAttention): **clean**"
  else
    say "- compute-sanitizer memcheck (CudaOps, CudaAttention): **errors or timeout** (memcheck.log)"
    grep -m5 -E "Invalid|ERROR SUMMARY|FAILED" "$OUT/memcheck.log" | sed 's/^/    /' | tee -a "$REPORT"
  fi
fi
say "(tests done at $(elapsed) s)"

# --- 2. CPU vs GPU greedy text ------------------------------------------------------------------
say ""
say "## Greedy text, CPU vs GPU (32 tokens, --temp 0)"
LOGLINE='^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:.]+\] \['
: >"$OUT/run_gpu_stdout.log"
if [[ -n "${CADENZA_SHARED_DIR:-}" ]]; then
  for m in "$CADENZA_SHARED_DIR"/models/*.gguf; do
    name=$(basename "$m" .gguf)
    for p in "Once upon a time" "The capital of France is"; do
      # Logs go to stderr; the filter only guards against a binary older than that fix.
      cpu=$(timeout 120 "$BIN/cadenza" run -m "$m" -p "$p" -n 32 --temp 0 --no-echo --device cpu 2>/dev/null |
            grep -Ev "$LOGLINE")
      gpu=$(timeout 120 "$BIN/cadenza" run -m "$m" -p "$p" -n 32 --temp 0 --no-echo --device cuda \
              2>"$OUT/run_gpu_stderr.log" | tee -a "$OUT/run_gpu_stdout.log" | grep -Ev "$LOGLINE")
      if [[ -n "$gpu" && "$cpu" == "$gpu" ]]; then r=identical; else r=DIFFERENT; fi
      say "- $name / \"$p\": $r"
      if [[ "$r" == DIFFERENT ]]; then
        printf '    cpu: %q\n    gpu: %q\n' "${cpu:0:160}" "${gpu:0:160}" | tee -a "$REPORT"
      fi
    done
  done
  grep -h -m1 "cuda backend: device" "$OUT/run_gpu_stdout.log" "$OUT/run_gpu_stderr.log" 2>/dev/null |
    head -1 | sed 's/^/    /' | tee -a "$REPORT"
else
  say "(no shared models: skipped)"
fi
say "(greedy done at $(elapsed) s)"

# --- 3. benchmark -------------------------------------------------------------------------------
if [[ "${GPU_CHECK_BENCH:-1}" != 0 ]]; then
  say ""
  say "## Benchmark: Llama-3.2-1B-shaped bf16 (cadenza synth), one sequence"
  MODEL=/tmp/l1b-bf16.gguf
  "$BIN/cadenza" synth --preset llama-3.2-1b --type bf16 -o "$MODEL" >"$OUT/synth.log" 2>&1 ||
    say "synth failed: $(tail -3 "$OUT/synth.log")"
  declare -a RUNS=("invariant:bf16:$MODEL:2048:128")
  RUNS+=("cublas:bf16:$MODEL:2048:128")
  if [[ "${GPU_CHECK_QUANT:-0}" == 1 ]]; then
    for q in q8_0 q4_k_m; do
      "$BIN/cadenza" synth --preset llama-3.2-1b --type $q -o /tmp/l1b-$q.gguf >>"$OUT/synth.log" 2>&1
      RUNS+=("invariant:$q:/tmp/l1b-$q.gguf:0:128")
    done
  fi
  : >"$OUT/bench.jsonl"
  for r in "${RUNS[@]}"; do
    IFS=: read -r mode type file pp tg <<<"$r"
    gemm=$([[ $mode == cublas ]] && echo cublas || echo invariant)
    if CADENZA_CUDA_GEMM=$gemm timeout 240 "$BIN/cadenza" bench -m "$file" --device cuda -p "$pp" \
         -n "$tg" -r 3 --json --no-probe >"$OUT/bench_one.json" 2>>"$OUT/bench_stderr.log"; then
      python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["mode"]=sys.argv[2]; d["wtype"]=sys.argv[3]; print(json.dumps(d))' \
        "$OUT/bench_one.json" "$mode" "$type" >>"$OUT/bench.jsonl"
    else
      say "bench $mode $type failed: $(tail -3 "$OUT/bench_stderr.log")"
    fi
    say "(bench $mode $type done at $(elapsed) s)"
  done
  python3 - "$OUT/bench.jsonl" "$HBM_BYTES_PER_S" "$BF16_FLOPS" <<'PY' | tee -a "$REPORT"
import json, sys
path, hbm, peak = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
print("| matmul path | weights | decode tok/s | % of HBM roofline | prefill tokens | prefill tok/s | % of bf16 peak |")
print("|---|---|---|---|---|---|---|")
for line in open(path):
    d = json.loads(line)
    wbytes = d["decode_weight_bytes"]
    tg = d.get("tg", {}).get("tokens_per_s", {}).get("median", 0.0)
    roof = hbm / wbytes
    pp = d.get("pp", {})
    pps = pp.get("tokens_per_s", {}).get("median", 0.0)
    # ~2 FLOP per weight per token (bf16: 2 bytes per weight); attention excluded.
    params = wbytes / 2 if d["wtype"] == "bf16" else None
    frac = f"{100 * pps * 2 * params / peak:.1f}%" if params and pps else "-"
    print(f"| {d['mode']} | {d['wtype']} ({wbytes / 1e9:.2f} GB/token) | {tg:.1f} | "
          f"{100 * tg / roof:.1f}% (roofline {roof:.0f}) | {pp.get('tokens', 0)} | {pps:.0f} | {frac} |")
PY
  say ""
  say "## 64 concurrent sequences through the engine (cadenza generate --device cuda)"
  # 64 requests of 256 random prompt ids and 128 greedy tokens, all running at once.
  python3 -c 'import json,random; r=random.Random(7); [print(json.dumps({"id": f"r{i}", "prompt_token_ids": [r.randrange(128000) for _ in range(256)]})) for i in range(64)]' >/tmp/gen64.jsonl
  if timeout 240 "$BIN/cadenza" generate -m "$MODEL" --device cuda --input /tmp/gen64.jsonl \
       --output /tmp/gen64.out.jsonl --max-tokens 128 --ignore-eos --temp 0 --seed 1 \
       --max-num-seqs 64 --max-model-len 512 --kv-cache-memory 4GiB >"$OUT/generate.log" 2>&1; then
    grep -E "^generate: (wall|prompt|generated|preempt)" "$OUT/generate.log" | tee -a "$REPORT"
  else
    say "generate failed: $(tail -3 "$OUT/generate.log")"
  fi
  say "(generate done at $(elapsed) s)"
fi

say ""
say "total: $(elapsed) s; tests $([[ $TEST_STATUS == 0 ]] && echo passed || echo FAILED)"
exit $TEST_STATUS
