#!/usr/bin/env bash
# Two "hosts" on one machine: runs one model split across two MPI processes that sit in two
# network namespaces joined by a veth pair, talking OpenMPI over TCP, and checks that greedy output
# is the same as a single process's.
#
#   tests/dist/two_hosts.sh CADENZA_BINARY MODEL_GGUF
#
# Checks, each against `cadenza run -m MODEL -p PROMPT -n 16 --temp 0` run without mpirun:
#   (a) --tensor-parallel-size 2 and --pipeline-parallel-size 2, one rank per namespace;
#   (b) the same with 1 ms of one-way latency on the link (`tc qdisc ... netem delay 1ms` on both
#       veth ends; where the kernel has no netem, the pair is rebuilt through a third namespace in
#       which tests/dist/delay_relay.py forwards each frame 1 ms late).
# and that rank 0 ran in namespace A and rank 1 in namespace B. Prints the wall time of each run.
#
# How: a hostfile names the two hosts by their veth addresses (10.77.0.1, 10.77.0.2, slots=1);
# mpirun runs inside namespace A, and instead of ssh its rsh launcher calls
# tests/dist/netns_agent.sh, which enters the namespace that owns the host's address
# (`ip netns exec`) and runs the orted command there. btl tcp,self and the *_if_include settings
# keep all MPI traffic (and mpirun's own) on the veth. Each namespace also gets its own UTS
# namespace and host name, so the ranks' own log lines ("driver on ...", "worker ... on ...")
# name the namespace they run in.
#
# Exit: 0 all matched; 1 a mismatch or a failure (what differed and the stderr tail are printed);
# 77 with "SKIPPED: ..." only when mpirun, ip or tc is missing or namespaces cannot be created.
# Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN). Traffic stays inside the namespaces it creates.
# Env: CADENZA_TWO_HOSTS_KEEP=1 keeps the work directory; CADENZA_TWO_HOSTS_PROMPT, _TOKENS,
# _TIMEOUT (seconds per mpirun, default 120).
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 CADENZA_BINARY MODEL_GGUF" >&2
  exit 1
fi
BIN=$(realpath -- "$1" 2>/dev/null) || BIN=$1
MODEL=$(realpath -- "$2" 2>/dev/null) || MODEL=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PROMPT=${CADENZA_TWO_HOSTS_PROMPT:-"The quick brown fox jumps over the lazy dog. Once upon a time"}
TOKENS=${CADENZA_TWO_HOSTS_TOKENS:-16}
MPI_TIMEOUT=${CADENZA_TWO_HOSTS_TIMEOUT:-120}   # seconds per mpirun

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { FAILED=1; echo "FAIL: $*"; exit 1; }

for tool in mpirun ip tc; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool is not installed"
done
command -v timeout >/dev/null 2>&1 || fail "timeout (coreutils) is not installed"
[ -x "$BIN" ] || fail "$BIN is not an executable"
[ -r "$MODEL" ] || fail "$MODEL is not readable"
[ -r "$HERE/netns_agent.sh" ] || fail "$HERE/netns_agent.sh is missing"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

NS_A=cdz-a-$$
NS_B=cdz-b-$$
NS_D=cdz-d-$$        # only for the netem-less latency fallback
IP_A=10.77.0.1
IP_B=10.77.0.2
SUBNET=10.77.0.0/24
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cdz-two-hosts.XXXXXX") || fail "mktemp failed"
CREATED=()           # namespaces this script made; only these are cleaned up
RELAY_PID=""
FAILED=0

cleanup() {
  local ns pid
  if [ -n "$RELAY_PID" ]; then
    kill "$RELAY_PID" 2>/dev/null
    wait "$RELAY_PID" 2>/dev/null
  fi
  # Whatever still runs inside our own namespaces (an orted left by a timed-out mpirun) was
  # started by this script.
  for ns in "${CREATED[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  done
  for ns in "${CREATED[@]}"; do ip netns del "$ns" 2>/dev/null; done
  # Open MPI session directories a killed run leaves (named after our per-run host names).
  rm -rf "${TMPDIR:-/tmp}/ompi.$NS_A".* "${TMPDIR:-/tmp}/ompi.$NS_B".*
  if [ "$FAILED" = 0 ] && [ "${CADENZA_TWO_HOSTS_KEEP:-0}" != 1 ]; then
    rm -rf "$WORK"
  else
    echo "work directory kept: $WORK"
  fi
}
trap cleanup EXIT
trap 'FAILED=1; exit 1' INT TERM HUP

add_ns() {
  if ! ip netns add "$1" 2>"$WORK/netns.err"; then
    skip "cannot create network namespaces: $(cat "$WORK/netns.err")"
  fi
  CREATED+=("$1")
  ip -n "$1" link set lo up || fail "cannot bring up lo in $1"
  # IPv4 only: no IPv6 router solicitations or DAD on the test link.
  ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
    net.ipv6.conf.default.disable_ipv6=1 2>/dev/null || true
}

add_ns "$NS_A"
add_ns "$NS_B"

# A separate UTS namespace per "host" gives each its own host name (cosmetic, but it lets the
# ranks' log lines prove where they ran). Without unshare, fall back to the agent's log alone.
USE_UTS=0
if command -v unshare >/dev/null 2>&1 && unshare --uts sh -c 'hostname cdz-probe' 2>/dev/null; then
  USE_UTS=1
fi

# The host table the agent reads: address, namespace, host name.
TABLE=$WORK/hosts.table
{
  echo "$IP_A $NS_A $([ $USE_UTS = 1 ] && echo "$NS_A")"
  echo "$IP_B $NS_B $([ $USE_UTS = 1 ] && echo "$NS_B")"
} >"$TABLE"
printf '%s slots=1\n%s slots=1\n' "$IP_A" "$IP_B" >"$WORK/hostfile"
# The agent's path goes into an MCA string that is split at spaces: use a copy in $WORK.
cp "$HERE/netns_agent.sh" "$WORK/agent.sh" && chmod +x "$WORK/agent.sh"

# Link: vA (in A, 10.77.0.1) <-> vB (in B, 10.77.0.2), or through D when $1 = relay.
setup_link() {
  ip -n "$NS_A" link del vA 2>/dev/null
  if [ "${1:-direct}" = relay ]; then
    ip -n "$NS_D" link add dA type veth peer name vA netns "$NS_A" || return 1
    ip -n "$NS_D" link add dB type veth peer name vB netns "$NS_B" || return 1
    ip -n "$NS_D" link set dA promisc on up && ip -n "$NS_D" link set dB promisc on up || return 1
  else
    ip -n "$NS_A" link add vA type veth peer name vB netns "$NS_B" || return 1
  fi
  ip -n "$NS_A" addr add "$IP_A/24" dev vA && ip -n "$NS_A" link set vA up &&
    ip -n "$NS_B" addr add "$IP_B/24" dev vB && ip -n "$NS_B" link set vB up
}
setup_link direct || fail "cannot create the veth pair between $NS_A and $NS_B"

# Median TCP round trip A -> B in ms ("n/a" without python3): shows the latency took effect.
probe_rtt() {
  command -v python3 >/dev/null 2>&1 || { echo "n/a"; return; }
  local port=$((20000 + RANDOM % 20000)) epid r
  ip netns exec "$NS_B" python3 "$HERE/delay_relay.py" echo "$IP_B" "$port" 2>/dev/null &
  epid=$!
  r=$(ip netns exec "$NS_A" timeout 20 python3 "$HERE/delay_relay.py" rtt "$IP_B" "$port" 20 \
      2>/dev/null) || r="error"
  kill "$epid" 2>/dev/null
  wait "$epid" 2>/dev/null
  echo "$r"
}

now_ms() { date +%s%3N; }

SINGLE=$WORK/single.out
run_single() {
  local t0 t1 rc
  t0=$(now_ms)
  "$BIN" run -m "$MODEL" -p "$PROMPT" -n "$TOKENS" --temp 0 >"$SINGLE" 2>"$WORK/single.err"
  rc=$?
  t1=$(now_ms)
  if [ $rc -ne 0 ] || [ ! -s "$SINGLE" ]; then
    echo "FAIL: single-process run exited $rc or printed nothing; stderr tail:"
    tail -n 30 "$WORK/single.err"
    exit 1
  fi
  printf '%-28s %6d ms wall\n' "single process" $((t1 - t0))
}

# run_mpi LABEL PARALLEL_FLAGS...: one rank in A (driver), one in B; compares with $SINGLE.
run_mpi() {
  local label=$1 t0 t1 rc ok=1
  shift
  local out=$WORK/$label.out err=$WORK/$label.err log=$WORK/$label.agent.log
  : >"$log"
  local mpi=(mpirun -np 2 --hostfile "$WORK/hostfile" --map-by node --bind-to none
    --mca plm_rsh_agent "$WORK/agent.sh" --mca plm_rsh_no_tree_spawn 1
    --mca pml ob1 --mca btl tcp,self
    --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET"
    "$BIN" run -m "$MODEL" -p "$PROMPT" -n "$TOKENS" --temp 0 -t 1 "$@")
  t0=$(now_ms)
  if [ $USE_UTS = 1 ]; then
    CDZ_NETNS_TABLE=$TABLE CDZ_NETNS_LOG=$log timeout -k 10 "$MPI_TIMEOUT" \
      ip netns exec "$NS_A" unshare --uts sh -c 'hostname "$1" && shift && exec "$@"' sh \
      "$NS_A" "${mpi[@]}" >"$out" 2>"$err"
  else
    CDZ_NETNS_TABLE=$TABLE CDZ_NETNS_LOG=$log timeout -k 10 "$MPI_TIMEOUT" \
      ip netns exec "$NS_A" "${mpi[@]}" >"$out" 2>"$err"
  fi
  rc=$?
  t1=$(now_ms)
  printf '%-28s %6d ms wall\n' "$label" $((t1 - t0))
  if [ $rc -ne 0 ]; then
    [ $rc -eq 124 ] && echo "FAIL [$label]: mpirun timed out after ${MPI_TIMEOUT}s" \
      || echo "FAIL [$label]: mpirun exited $rc"
    ok=0
  elif ! cmp -s "$SINGLE" "$out"; then
    echo "FAIL [$label]: output differs from the single process"
    echo "  $(cmp "$SINGLE" "$out" 2>&1 | head -n 1)"
    echo "  single: $(head -c 800 "$SINGLE" | cat -v)"
    echo "  $label: $(head -c 800 "$out" | cat -v)"
    ok=0
  fi
  # Where the ranks ran: the agent must have launched host B's daemon inside namespace B (rank 0
  # is mpirun's own child in A), and with host names the ranks say so themselves.
  if ! grep -q "host $IP_B -> netns $NS_B " "$log"; then
    echo "FAIL [$label]: the agent never launched anything in $NS_B (agent log: $log)"
    ok=0
  elif grep -v "host $IP_B -> netns $NS_B " "$log" | grep -q .; then
    echo "FAIL [$label]: unexpected agent launches:"; cat "$log"
    ok=0
  fi
  if [ $USE_UTS = 1 ] && [ $rc -eq 0 ]; then
    if ! grep -Eq "\[rank 0\].* on $NS_A([^0-9]|\$)" "$err" ||
       ! grep -Eq "\[rank 1\].* on $NS_B([^0-9]|\$)" "$err"; then
      echo "FAIL [$label]: rank logs do not show rank 0 on $NS_A and rank 1 on $NS_B"
      ok=0
    fi
  fi
  if [ $ok = 0 ]; then
    echo "--- stderr tail ($err) ---"
    tail -n 30 "$err"
    echo "---"
    FAILED=1
    return 1
  fi
  grep -E "\[rank [01]\].* on ($NS_A|$NS_B)([^0-9]|\$)" "$err" | sed 's/^.*\] \[rank/  [rank/' | head -n 2
  sed -n 's/^run: \(prompt\|generate\) */  \1: /p' "$err"
  echo "  ok: identical to the single process"
}

echo "two_hosts: $NS_A ($IP_A) <-veth-> $NS_B ($IP_B); model $(basename "$MODEL"), $TOKENS tokens"
run_single
echo "== (a) no added latency (TCP rtt A->B: $(probe_rtt) ms)"
run_mpi "tp2" --tensor-parallel-size 2
run_mpi "pp2" --pipeline-parallel-size 2

# (b) 1 ms one way on each end, 2 ms round trip.
MODE=netem
if ! ip netns exec "$NS_A" tc qdisc add dev vA root netem delay 1ms 2>"$WORK/tc.err" ||
   ! ip netns exec "$NS_B" tc qdisc add dev vB root netem delay 1ms 2>>"$WORK/tc.err"; then
  echo "note: netem is not available here ($(head -n 1 "$WORK/tc.err")); using the userspace" \
    "delay relay (tests/dist/delay_relay.py) in a third namespace instead"
  command -v python3 >/dev/null 2>&1 ||
    { FAILED=1; fail "no netem qdisc and no python3 for the delay relay: cannot add latency"; }
  MODE=relay
  add_ns "$NS_D"
  setup_link relay || { FAILED=1; fail "cannot rebuild the link through $NS_D"; }
  ip netns exec "$NS_D" python3 "$HERE/delay_relay.py" relay dA dB 1 "$WORK/relay.ready" \
    2>"$WORK/relay.err" &
  RELAY_PID=$!
  for _ in $(seq 1 100); do [ -s "$WORK/relay.ready" ] && break; sleep 0.1; done
  if [ ! -s "$WORK/relay.ready" ]; then
    FAILED=1
    cat "$WORK/relay.err"
    fail "the delay relay did not start"
  fi
fi
echo "== (b) 1 ms added each way, via $MODE (TCP rtt A->B: $(probe_rtt) ms)"
run_mpi "tp2+1ms" --tensor-parallel-size 2
run_mpi "pp2+1ms" --pipeline-parallel-size 2

if [ "$FAILED" != 0 ]; then
  echo "two_hosts: FAILED"
  exit 1
fi
echo "two_hosts: all outputs identical"
exit 0
