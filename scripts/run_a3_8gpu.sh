#!/usr/bin/env bash
# Every GPU of one A3 node sending to the same GPU of another, at once, then
# per-GPU and total GB/s:
#
#   server node:  scripts/run_a3_8gpu.sh server [options] [tcpx_perf args...]
#   client node:  scripts/run_a3_8gpu.sh client --peer ADDR [options] [tcpx_perf args...]
#   either, by launcher rank (one rank per node):
#     mpirun -np 2 --map-by ppr:1:node -x TCPX_P2P_PEER=ADDR scripts/run_a3_8gpu.sh auto ...
#     srun -N 2 --ntasks-per-node=1 scripts/run_a3_8gpu.sh auto ...
#   client node only (server started over ssh):
#     scripts/run_a3_8gpu.sh client --ssh HOST [options] [tcpx_perf args...]
#   this host:    scripts/run_a3_8gpu.sh --local N [options] [tcpx_perf args...]
#
# Layout one (default), as NCCL runs: one tcpx_perf process per node drives
# every GPU (tcpx_perf --gpus LIST: a session and a thread per GPU, one plugin
# instance, each thread on its GPU's NUMA node, channels on the NICs
# TCPX_P2P_NICS picks, default the GPU's closest).  Layout procs: one
# run_two_node.sh process per GPU (TCPX_P2P_NET_DEV = GPU/2, numactl), the
# layout whose TCPX devmem set-up conflicts between processes sharing a NIC;
# kept for comparison.  Pair g uses GPU g and port BASE+g in both.
#
# Role auto: launcher rank 0 (OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK) is
# the server, 1 the client; the client's peer is --peer, else TCPX_P2P_PEER,
# else (Slurm) the first node of SLURM_JOB_NODELIST.  --ssh HOST starts this
# script as the server on HOST over $TCPX_P2P_SSH (default ssh), in
# --remote-root (default this checkout's path) with the same options, --out
# and the caller's TCPX_P2P_*, TCPX_EMU_* and NCCL_* variables (not
# TCPX_EMU_ADDR); --peer defaults to HOST.  --local N runs N pairs over the
# emulator on this host with --mem host (a smoke test without GPUs or TCPX).
# The total is the sum of the per-GPU rates at each size; "all" (layout one)
# is tcpx_perf's own aggregate, all bytes over the wall time of an iteration;
# prefer one size (-s 256M -n 50) over a sweep for them.
#
# Options: --layout one|procs, --gpus N|LIST (default 8 = 0-7; a list such
# as 0-3 or 0,2,4,6), --pairs N (host memory: N sessions, no GPU), --peer ADDR,
# --nics LIST (TCPX_P2P_NICS), --port-base P (default 18515), --out DIR
# (default a3-<date>; ROLE-gpuG.json, logs, summary.txt), --build-dir DIR
# (default build), --ssh HOST, --remote-root DIR, --dry-run.
# Exit status: 0, 1 when a pair fails, 2 usage.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,40s/^# \{0,1\}//p' "$0"; }
die() { echo "run_a3_8gpu: $*" >&2; exit 2; }

# shellcheck disable=SC1091 # sourced by path, checked on its own
. "$root/scripts/launch_lib.sh"
# The caller's settings, before tcpx_env.sh adds this host's: what --ssh forwards.
tp_launch_forwarded_env

role=
peer=${TCPX_P2P_PEER:-}
layout=one
gpulist=0-7
pairs=
nics=
base=18515
out=a3-$(date +%Y%m%d-%H%M%S)
build=$root/build
ssh_host=
rroot=$root
dry=0
opts=() # our options, for the remote side of --ssh
case ${1:-} in
server | client | auto) role=$1; shift ;;
--local) role=local; pairs=${2:?--local wants a pair count}; shift 2 ;;
-h | --help) usage; exit 0 ;;
*) usage >&2; exit 2 ;;
esac
while (($#)); do
	case $1 in
	--peer) peer=${2:?}; shift 2 ;;
	--layout) layout=${2:?}; opts+=("$1" "$2"); shift 2 ;;
	--gpus) gpulist=${2:?}; opts+=("$1" "$2"); shift 2 ;;
	--pairs) pairs=${2:?}; opts+=("$1" "$2"); shift 2 ;;
	--nics) nics=${2:?}; opts+=("$1" "$2"); shift 2 ;;
	--port-base) base=${2:?}; opts+=("$1" "$2"); shift 2 ;;
	--out) out=${2:?}; opts+=("$1" "$2"); shift 2 ;;
	--build-dir) build=${2:?}; opts+=("$1" "$2"); shift 2 ;;
	--ssh) ssh_host=${2:?}; shift 2 ;;
	--remote-root) rroot=${2:?}; shift 2 ;;
	--dry-run) dry=1; opts+=("$1"); shift ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[[ $layout == one || $layout == procs ]] || die "--layout is one or procs, not '$layout'"

# The GPUs, or host-memory pairs (gpu -1), of this run.
gpus=()
if [[ -n $pairs ]]; then
	if ! [[ $pairs =~ ^[0-9]+$ ]] || ((pairs < 1 || pairs > 64)); then
		die "pair count must be 1..64, not '$pairs'"
	fi
	for ((k = 0; k < pairs; k++)); do gpus+=(-1); done
else
	[[ $gpulist =~ ^[0-9]+$ ]] && gpulist=0-$((gpulist - 1))
	IFS=, read -ra items <<<"$gpulist"
	for it in "${items[@]}"; do
		[[ $it =~ ^([0-9]+)(-([0-9]+))?$ ]] || die "bad --gpus '$gpulist'"
		a=${BASH_REMATCH[1]} b=${BASH_REMATCH[3]:-${BASH_REMATCH[1]}}
		((a <= b)) || die "bad --gpus '$gpulist'"
		for ((g = a; g <= b; g++)); do gpus+=("$g"); done
	done
	((${#gpus[@]} >= 1 && ${#gpus[@]} <= 64)) || die "1..64 GPUs, not ${#gpus[@]}"
fi
n=${#gpus[@]}
if ! [[ $base =~ ^[0-9]+$ ]] || ((base < 1 || base + n > 65536)); then
	die "bad --port-base '$base'"
fi

tp_launch_role
command -v python3 >/dev/null || { echo "run_a3_8gpu: python3 is needed" >&2; exit 1; }
[[ -d $build ]] || die "no build dir $build (--build-dir?)"
build=$(cd "$build" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

remote_pid=
if [[ -n $ssh_host ]]; then
	rcmd="cd $(printf %q "$rroot") && exec env"
	for w in "${fwd[@]}" scripts/run_a3_8gpu.sh server "${opts[@]}" -- "$@"; do
		rcmd+=" $(printf %q "$w")"
	done
	# shellcheck disable=SC2206 # TCPX_P2P_SSH is a command with its options
	remote=(${TCPX_P2P_SSH:-ssh} "$ssh_host" "$rcmd")
	echo "run_a3_8gpu: server on $ssh_host: $(printf '%q ' "${remote[@]}")" >&2
	if ((dry == 0)); then
		"${remote[@]}" </dev/null >"$out/remote-server.log" 2>&1 &
		remote_pid=$!
	fi
fi

# Per-pair tcpx_perf argument lists (layout procs) or the one command.
mem_args() { # $1 = GPU or -1
	if (($1 < 0)); then echo --mem host; else echo --mem cuda --gpu "$1"; fi
}
pids=()
if [[ $layout == one ]]; then
	if [[ $role == local ]]; then
		cmd=(env "TCPX_P2P_PLUGIN=${TCPX_P2P_PLUGIN:-$build/lib/libnccl-net-tcpxemu.so}"
			"$build/bin/tcpx_perf" loopback)
	else
		# shellcheck disable=SC1091 # sourced by path, checked on its own
		. "$root/scripts/tcpx_env.sh"
		[[ -n $nics ]] && export TCPX_P2P_NICS=$nics
		[[ -n ${TCPX_P2P_NET_DEV:-} ]] &&
			echo "run_a3_8gpu: TCPX_P2P_NET_DEV=$TCPX_P2P_NET_DEV puts every GPU on one NIC" >&2
		cmd=("$build/bin/tcpx_perf" "$role")
		[[ $role == client ]] && cmd+=(--host "$peer")
	fi
	if [[ -n $pairs ]]; then
		cmd+=(--mem host --pairs "$n")
	else
		cmd+=(--mem cuda --gpus "$gpulist")
	fi
	cmd+=(--port "$base" "$@" --json "$out/$role.json")
	echo "run_a3_8gpu: $role, one process, $n sessions, NICs ${TCPX_P2P_NICS:-auto}:" \
		"$(printf '%q ' "${cmd[@]}")" >&2
	if ((dry == 0)); then
		rm -f "$out/$role.json"
		"${cmd[@]}" >"$out/$role.log" 2>&1 &
		pids+=($!)
	fi
else
	for ((k = 0; k < n; k++)); do
		g=${gpus[$k]}
		# shellcheck disable=SC2207 # two or three plain words
		m=($(mem_args "$g"))
		if [[ $role == local ]]; then
			cmd=(env "TCPX_P2P_PLUGIN=${TCPX_P2P_PLUGIN:-$build/lib/libnccl-net-tcpxemu.so}"
				"$build/bin/tcpx_perf" loopback --mem host)
		else
			cmd=("$root/scripts/run_two_node.sh" "$role" "${m[@]}" --build-dir "$build")
			[[ -n $nics ]] && cmd+=(--nics "$nics")
			[[ $role == client ]] && cmd+=(--peer "$peer")
			cmd+=(--)
		fi
		cmd+=(--port $((base + k)) "$@" --json "$out/$role-gpu$k.json")
		((k == 0)) && echo "run_a3_8gpu: $role, $n processes; pair 0:" \
			"$(printf '%q ' "${cmd[@]}")" >&2
		if ((dry == 0)); then
			rm -f "$out/$role-gpu$k.json"
			"${cmd[@]}" >"$out/$role-gpu$k.log" 2>&1 &
			pids+=($!)
		fi
	done
fi
((dry == 0)) || exit 0

failed=0
for ((k = 0; k < ${#pids[@]}; k++)); do
	if ! wait "${pids[$k]}"; then
		log=$out/$role-gpu$k.log what="pair $k"
		[[ $layout == one ]] && log=$out/$role.log what="tcpx_perf"
		echo "run_a3_8gpu: $what failed; its log, $log:" >&2
		tail -n 5 "$log" >&2
		failed=1
	fi
done
# A client that failed leaves the server waiting for it: end the session.
if [[ -n $remote_pid ]] && ((failed)); then
	kill "$remote_pid" 2>/dev/null || true
fi
if [[ -n $remote_pid ]] && ! wait "$remote_pid"; then
	echo "run_a3_8gpu: the server on $ssh_host failed; $out/remote-server.log:" >&2
	tail -n 5 "$out/remote-server.log" >&2
	failed=1
fi
((failed == 0)) || exit 1

python3 - "$out" "$role" "$n" "$layout" "${gpus[@]}" <<'EOF' | tee "$out/summary.txt"
import json, os, sys

out, role, n, layout = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
gpus = [int(g) for g in sys.argv[5:]]

def load(path):
    try:
        with open(path) as f:
            recs = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("run_a3_8gpu: %s: %s" % (path, e))
    if not recs:
        sys.exit("run_a3_8gpu: %s: no results" % path)
    return recs

agg = {}
if layout == "one":
    # Split tcpx_perf's records into the per-pair files the procs layout writes.
    recs = load(os.path.join(out, "%s.json" % role))
    per = [[r for r in recs if not r.get("aggregate") and r.get("pair") == k] for k in range(n)]
    agg = {r["size"]: r["gbps"] for r in recs if r.get("aggregate")}
    for k in range(n):
        if not per[k]:
            sys.exit("run_a3_8gpu: %s.json: no results for pair %d" % (role, k))
        with open(os.path.join(out, "%s-gpu%d.json" % (role, k)), "w") as f:
            json.dump(per[k], f, indent=1)
else:
    per = [load(os.path.join(out, "%s-gpu%d.json" % (role, k))) for k in range(n)]
res = [{r["size"]: r["gbps"] for r in p} for p in per]
sizes = sorted(set().union(*res))
what = "one process, %d sessions" % n if layout == "one" else "%d processes" % n
print("# %s: per-GPU GB/s (10^9 bytes/s), %s at once; total = sum, all = tcpx_perf's "
      "aggregate" % (role, what))
names = ["gpu%d" % g if g >= 0 else "pair%d" % k for k, g in enumerate(gpus)]
head = ["size"] + names + ["total", "all"]
print(" ".join("%10s" % h for h in head))
for s in sizes:
    vals = [r.get(s) for r in res]
    cells = [str(s)] + ["%.3f" % v if v is not None else "-" for v in vals]
    cells.append("%.3f" % sum(v for v in vals if v is not None))
    cells.append("%.3f" % agg[s] if s in agg else "-")
    print(" ".join("%10s" % c for c in cells))
EOF
exit "${PIPESTATUS[0]}"
