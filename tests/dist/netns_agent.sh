#!/bin/sh
# A stand-in for ssh that OpenMPI's rsh launcher calls (--mca plm_rsh_agent PATH) when the "hosts"
# are network namespaces on this machine (tests/dist/two_hosts.sh). mpirun runs it as
#   netns_agent.sh [OPTIONS...] HOST WORD...
# where HOST is a name from the hostfile (here an IP) and the WORDs are the shell command that ssh
# would hand to the remote shell (an orted launch). The agent looks HOST up in the table file
# $CDZ_NETNS_TABLE, lines "HOST NAMESPACE [HOSTNAME]", enters that namespace with
# `ip netns exec` and runs the words with `sh -c`, as a remote login shell would. With a HOSTNAME
# it also gives the command its own UTS namespace under that host name, so MPI_Get_processor_name
# on each "host" differs. Every launch is logged to $CDZ_NETNS_LOG (when set), which is how the
# test proves the ranks ran in different namespaces.
set -u

# Skip ssh options before the host (mpirun passes --mca plm_rsh_args here, e.g. "-p 2222"),
# with the values of those that take one, as ssh(1) parses them.
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    -[BbcDEeFIiJLlmOoPpQRSWw]) shift; [ $# -gt 0 ] && shift ;;
    -*) shift ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "netns_agent: usage: netns_agent.sh HOST COMMAND..." >&2
  exit 255
fi
host=$1
shift
table=${CDZ_NETNS_TABLE:?netns_agent: CDZ_NETNS_TABLE is not set}
ns=$(awk -v h="$host" '$1 == h { print $2; exit }' "$table")
name=$(awk -v h="$host" '$1 == h { print $3; exit }' "$table")
if [ -z "$ns" ]; then
  echo "netns_agent: host $host is not in $table" >&2
  exit 255   # what ssh returns when it cannot reach a host
fi
if [ -n "${CDZ_NETNS_LOG:-}" ]; then
  echo "netns_agent: pid $$ host $host -> netns $ns hostname ${name:-(unchanged)}: $*" \
    >>"$CDZ_NETNS_LOG"
fi
if [ -n "$name" ]; then
  exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$1" && exec sh -c "$2"' netns-agent \
    "$name" "$*"
fi
exec ip netns exec "$ns" sh -c "$*"
