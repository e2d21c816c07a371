#!/usr/bin/env bash
# One tcpx_perf pair between two A3 nodes, GPU memory, with the GPU's own NIC:
#
#   node A:  scripts/run_two_node.sh server [--gpu N] [tcpx_perf args...]
#   node B:  scripts/run_two_node.sh client --peer ADDR [--gpu N] [tcpx_perf args...]
#   mpirun -np 2 --map-by ppr:1:node -x TCPX_P2P_PEER=ADDR scripts/run_two_node.sh auto ...
#   srun -N 2 --ntasks-per-node=1 scripts/run_two_node.sh auto ...
#   node B only:  scripts/run_two_node.sh client --ssh nodeA [options] [tcpx_perf args...]
#
# Sources scripts/tcpx_env.sh (A3 TCPX settings), then runs tcpx_perf with
# --mem cuda --gpu N and TCPX_P2P_NET_DEV = N/2: GPU N sits on the PCIe switch
# of eth(1+N/2), which is plugin device N/2 with
# NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1,eth2,eth3,eth4.  With numactl the
# process is bound to that NIC's NUMA node (sysfs; else GPUs 0-3: node 0,
# 4-7: node 1).  Arguments after the options go to tcpx_perf and win over
# these defaults (e.g. -b 1M -e 256M, --port P, --json F).
#
# Role auto: launcher rank 0 (OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMI_RANK)
# is the server, rank 1 the client; the client's peer is --peer, else
# TCPX_P2P_PEER, else (Slurm) the first node of SLURM_JOB_NODELIST.
# --ssh HOST (client): also start the server on HOST, over $TCPX_P2P_SSH
# (default ssh), as this script in --remote-root (default this checkout's
# path) with the same options and the caller's TCPX_P2P_*, TCPX_EMU_* and
# NCCL_* variables (not TCPX_EMU_ADDR: per host); --peer defaults to HOST.
#
# Options: --peer ADDR, --gpu N (default 0), --mem cuda|host (host: no GPU,
# no NIC pinning), --nics LIST (TCPX_P2P_NICS: stripe channels over these NICs
# instead of pinning TCPX_P2P_NET_DEV), --build-dir DIR (default build; or
# TCPX_PERF for the binary itself), --no-numa, --ssh HOST, --remote-root DIR,
# --dry-run (print the environment and command, run nothing).
# Exit status: tcpx_perf's (with --ssh: 1 when either side failed), 2 usage.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,31s/^# \{0,1\}//p' "$0"; }
die() { echo "run_two_node: $*" >&2; exit 2; }

# shellcheck disable=SC1091 # sourced by path, checked on its own
. "$root/scripts/launch_lib.sh"
# The caller's settings, before tcpx_env.sh adds this host's: what --ssh forwards.
tp_launch_forwarded_env

(($#)) || { usage >&2; exit 2; }
role=$1
shift
case $role in
server | client | auto) ;;
-h | --help) usage; exit 0 ;;
*) usage >&2; exit 2 ;;
esac

peer=${TCPX_P2P_PEER:-}
gpu=0
mem=cuda
nics=
build=$root/build
numa=1
dry=0
ssh_host=
rroot=$root
opts=() # our options, for the remote side of --ssh
while (($#)); do
	case $1 in
	--peer) peer=${2:?--peer wants an address}; shift 2 ;;
	--gpu) gpu=${2:?--gpu wants a number}; opts+=("$1" "$2"); shift 2 ;;
	--mem) mem=${2:?--mem wants cuda or host}; opts+=("$1" "$2"); shift 2 ;;
	--nics) nics=${2:?--nics wants a list}; opts+=("$1" "$2"); shift 2 ;;
	--build-dir) build=${2:?}; opts+=("$1" "$2"); shift 2 ;;
	--no-numa) numa=0; opts+=("$1"); shift ;;
	--ssh) ssh_host=${2:?--ssh wants a host}; shift 2 ;;
	--remote-root) rroot=${2:?}; shift 2 ;;
	--dry-run) dry=1; shift ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[[ $gpu =~ ^[0-9]+$ ]] || die "--gpu wants a number, not '$gpu'"
[[ $mem == cuda || $mem == host ]] || die "--mem wants cuda or host, not '$mem'"

tp_launch_role

# shellcheck disable=SC1091 # sourced by path, checked on its own
. "$root/scripts/tcpx_env.sh"
nic=$((gpu / 2))
node=$((gpu / 4))
if [[ $mem == cuda ]]; then
	ifname=$(printf '%s' "$NCCL_GPUDIRECTTCPX_SOCKET_IFNAME" | cut -d, -f$((nic + 1)))
	ifname=${ifname:-eth$((1 + nic))}
	n=$(cat "/sys/class/net/$ifname/device/numa_node" 2>/dev/null || echo -1)
	[[ $n =~ ^[0-9]+$ ]] && node=$n
	if [[ -n $nics ]]; then
		export TCPX_P2P_NICS=$nics
		where="NICs $nics"
	else
		: "${TCPX_P2P_NET_DEV:=$nic}"
		export TCPX_P2P_NET_DEV
		where="$ifname (net dev $TCPX_P2P_NET_DEV"
		where+=", NUMA $node)"
	fi
else
	[[ -n $nics ]] && export TCPX_P2P_NICS=$nics
	where="host memory, NICs ${TCPX_P2P_NICS:-auto}"
fi

perf=${TCPX_PERF:-$build/bin/tcpx_perf}
cmd=("$perf" "$role" --mem "$mem")
[[ $mem == cuda ]] && cmd+=(--gpu "$gpu")
[[ $role == client ]] && cmd+=(--host "$peer")
cmd+=("$@")
if ((numa)) && [[ $mem == cuda ]] && command -v numactl >/dev/null 2>&1 &&
	numactl --hardware 2>/dev/null | grep -q "^node $node cpus: [0-9]"; then
	cmd=(numactl --cpunodebind="$node" --membind="$node" "${cmd[@]}")
fi

remote=()
if [[ -n $ssh_host ]]; then
	rcmd="cd $(printf %q "$rroot") && exec env"
	for w in "${fwd[@]}" scripts/run_two_node.sh server "${opts[@]}" -- "$@"; do
		rcmd+=" $(printf %q "$w")"
	done
	# shellcheck disable=SC2206 # TCPX_P2P_SSH is a command with its options
	remote=(${TCPX_P2P_SSH:-ssh} "$ssh_host" "$rcmd")
fi

if [[ $mem == cuda ]]; then
	echo "run_two_node: $role GPU $gpu -> $where, plugin ${TCPX_P2P_PLUGIN:-(library default search)}" >&2
else
	echo "run_two_node: $role, $where, plugin ${TCPX_P2P_PLUGIN:-(library default search)}" >&2
fi
if ((dry)); then
	env | grep -E '^(NCCL_|TCPX_P2P_)' | sort
	((${#remote[@]})) && { printf '%q ' "${remote[@]}"; echo; }
	printf '%q ' "${cmd[@]}"
	echo
	exit 0
fi
[[ -x $perf ]] || { echo "run_two_node: no tcpx_perf at $perf (--build-dir?)" >&2; exit 1; }
if ((${#remote[@]} == 0)); then
	exec "${cmd[@]}"
fi
"${remote[@]}" </dev/null &
rpid=$!
rc=0
"${cmd[@]}" || rc=$?
# A client that failed leaves the server waiting for it: end the session.
((rc == 0)) || kill "$rpid" 2>/dev/null || true
rrc=0
wait "$rpid" || rrc=$?
((rrc == 0)) || echo "run_two_node: the server on $ssh_host exited $rrc" >&2
((rc == 0 && rrc == 0)) || exit 1
