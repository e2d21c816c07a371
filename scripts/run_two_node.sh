#!/usr/bin/env bash
# One tcpx_perf pair between two A3 nodes, GPU memory, with the GPU's own NIC:
#
#   node A:  scripts/run_two_node.sh server [--gpu N] [tcpx_perf args...]
#   node B:  scripts/run_two_node.sh client --peer ADDR [--gpu N] [tcpx_perf args...]
#
# Sources scripts/tcpx_env.sh (A3 TCPX settings), then runs tcpx_perf with
# --mem cuda --gpu N and TCPX_P2P_NET_DEV = N/2: GPU N sits on the PCIe switch
# of eth(1+N/2), which is plugin device N/2 with
# NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4.  With numactl the
# process is bound to that NIC's NUMA node (GPUs 0-3: node 0, 4-7: node 1).
# Arguments after the options go to tcpx_perf and win over these defaults
# (e.g. --mem host, -b 1M -e 256M, --port P, --json F).
#
# Options: --peer ADDR (client; or TCPX_P2P_PEER), --gpu N (default 0),
# --build-dir DIR (default build; or TCPX_PERF for the binary itself),
# --no-numa, --dry-run (print the environment and command, run nothing).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,17s/^# \{0,1\}//p' "$0"; }

(($#)) || { usage >&2; exit 2; }
role=$1
shift
case $role in
server | client) ;;
-h | --help) usage; exit 0 ;;
*) usage >&2; exit 2 ;;
esac

peer=${TCPX_P2P_PEER:-}
gpu=0
build=$root/build
numa=1
dry=0
while (($#)); do
	case $1 in
	--peer) peer=${2:?--peer wants an address}; shift 2 ;;
	--gpu) gpu=${2:?--gpu wants a number}; shift 2 ;;
	--build-dir) build=${2:?}; shift 2 ;;
	--no-numa) numa=0; shift ;;
	--dry-run) dry=1; shift ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[[ $gpu =~ ^[0-9]+$ ]] || { echo "run_two_node: --gpu wants a number, not '$gpu'" >&2; exit 2; }
if [[ $role == client && -z $peer ]]; then
	echo "run_two_node: client needs --peer ADDR (or TCPX_P2P_PEER)" >&2
	exit 2
fi

# shellcheck disable=SC1091 # sourced by path, checked on its own
. "$root/scripts/tcpx_env.sh"
nic=$((gpu / 2))
node=$((gpu / 4))
: "${TCPX_P2P_NET_DEV:=$nic}"
export TCPX_P2P_NET_DEV

perf=${TCPX_PERF:-$build/bin/tcpx_perf}
cmd=("$perf" "$role" --mem cuda --gpu "$gpu")
[[ $role == client ]] && cmd+=(--host "$peer")
cmd+=("$@")
if ((numa)) && command -v numactl >/dev/null 2>&1 &&
	numactl --hardware 2>/dev/null | grep -q "^node $node cpus: [0-9]"; then
	cmd=(numactl --cpunodebind="$node" --membind="$node" "${cmd[@]}")
fi

echo "run_two_node: $role GPU $gpu -> eth$((1 + nic)) (net dev $TCPX_P2P_NET_DEV," \
	"NUMA $node), plugin ${TCPX_P2P_PLUGIN:-(library default search)}" >&2
if ((dry)); then
	env | grep -E '^(NCCL_|TCPX_P2P_)' | sort
	printf '%q ' "${cmd[@]}"
	echo
	exit 0
fi
[[ -x $perf ]] || { echo "run_two_node: no tcpx_perf at $perf (--build-dir?)" >&2; exit 1; }
exec "${cmd[@]}"
