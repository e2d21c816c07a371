#!/usr/bin/env bash
# NCCL against libtcpx_p2p over the same TCPX plugin (Google's GPUDirect-TCPX
# binary you have) under the devmem-TCP + RxDM simulator, on one host: the
# same GPUs, the same plugin sockets per comm, the same channel count, one
# direction and both, every transfer verified; prints a side-by-side table
# with the simulator's own ceiling (sim_ceiling) on as many sockets.
#
# Usage: scripts/compare_nccl_tcpx.sh PLUGIN.so [options]
#
# Options: --build-dir DIR (default build-gpu, as scripts/gpu_ci.sh makes
# it), --out DIR (default compare-tcpx-<date>), --gpu A,B (default 0,1;
# A = B runs the library only: NCCL needs two GPUs), --channels N (default
# 8), --socks NSxNT (NCCL_NSOCKS_PERTHREAD x NCCL_SOCKET_NTHREADS, default
# 4x1: NCCL's tuning for A3), --sizes MIN:MAX (default 1M:256M, factor 2),
# --iters N (default 5), --warmup N (default 5: the sweep's first size runs
# just after the connections are made, and with 1 warm-up transfer the
# library's 256 KiB came out at a fifth of its rate alone), --chunk N (the
# library's bytes per plugin request, tcpx_perf --chunk; default its own:
# the plugin's NCCL_DYNAMIC_CHUNK_SIZE, 512 KiB here), --nccl-chunk N
# (NCCL_P2P_NET_CHUNKSIZE, NCCL's step over the network; default NCCL's own,
# 128 KiB; Google's A3 guidance sets 512K), --chunks-per-channel N (the
# library's pieces per channel share, tcpx_perf --chunks-per-channel;
# default its own), --no-ceiling.
# Needs python3, tcpx_perf, nccl_pair (CUDA and NCCL) and libtcpxsim.so.
# Exit status: 0, 1 on a failed run, 2 usage, 77 no usable GPU.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-gpu
out=compare-tcpx-$(date +%Y%m%d-%H%M%S)
gpus=0,1
channels=8
socks=4x1
sizes=1M:256M
iters=5
warmup=5
chunk=
nccl_chunk=
depth=
ceiling=1

die() { echo "compare_nccl_tcpx: $1" >&2; exit "${2:-1}"; }
usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }

case ${1:-} in
-h | --help) usage; exit 0 ;;
"" | -*) usage >&2; exit 2 ;;
esac
plugin=$(realpath "$1") || die "no plugin $1" 2
shift
while (($#)); do
	case $1 in
	--build-dir) build=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--gpu) gpus=${2:?}; shift 2 ;;
	--channels) channels=${2:?}; shift 2 ;;
	--socks) socks=${2:?}; shift 2 ;;
	--sizes) sizes=${2:?}; shift 2 ;;
	--iters) iters=${2:?}; shift 2 ;;
	--warmup) warmup=${2:?}; shift 2 ;;
	--chunk) chunk=${2:?}; shift 2 ;;
	--nccl-chunk) nccl_chunk=${2:?}; shift 2 ;;
	--chunks-per-channel) depth=${2:?}; shift 2 ;;
	--no-ceiling) ceiling=0; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[[ $sizes == *:* ]] || die "--sizes wants MIN:MAX, e.g. 1M:256M" 2
[[ $socks =~ ^([0-9]+)x([0-9]+)$ ]] || die "--socks wants NSxNT, e.g. 4x1" 2
nsocks=${BASH_REMATCH[1]}
nthreads=${BASH_REMATCH[2]}
[[ $gpus =~ ^([0-9]+),([0-9]+)$ ]] || die "--gpu wants A,B" 2
nccl_bytes=
if [[ -n $nccl_chunk ]]; then
	nccl_bytes=$(numfmt --from=iec "$nccl_chunk" 2>/dev/null) ||
		die "--nccl-chunk wants a size, e.g. 128K" 2
fi
tcpx_chunk=()
[[ -z $chunk ]] || tcpx_chunk=(--chunk "$chunk")
[[ -z $depth ]] || tcpx_chunk+=(--chunks-per-channel "$depth")
ga=${BASH_REMATCH[1]}
gb=${BASH_REMATCH[2]}
build=$(cd "$build" && pwd) || die "no build directory $build" 2
sim=$build/lib/libtcpxsim.so
perf=$build/bin/tcpx_perf
pair=$build/bin/nccl_pair
ceil=$build/bin/sim_ceiling
for f in "$plugin" "$sim" "$perf"; do
	[[ -e $f ]] || die "$f is missing" 2
done
nccl=1
((ga != gb)) || { nccl=0; echo "compare_nccl_tcpx: --gpu $gpus: one GPU, NCCL needs two: the library only"; }
((!nccl)) || [[ -e $pair ]] || die "$pair is missing (nccl_pair needs CUDA and NCCL)" 2
((!ceiling)) || [[ -e $ceil ]] || die "$ceil is missing" 2
command -v python3 >/dev/null || die "python3 is needed for the table" 2
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Settings that would leak into a run from the caller's environment.
clean=(-u NCCL_NET -u NCCL_NET_PLUGIN -u NCCL_SOCKET_NTHREADS -u NCCL_NSOCKS_PERTHREAD
	-u NCCL_MIN_NCHANNELS -u NCCL_MAX_NCHANNELS -u NCCL_NCHANNELS_PER_NET_PEER
	-u NCCL_MIN_P2P_NCHANNELS -u NCCL_MAX_P2P_NCHANNELS -u TCPX_P2P_NUM_CHANNELS
	-u TCPX_P2P_CHUNK_BYTES -u NCCL_P2P_NET_CHUNKSIZE -u LD_PRELOAD)
# The plugin on one host (as scripts/tcpx_sim_suite.sh): lo for data and
# control, flow steering at once, 512 KiB tasks; its own libraries beside it.
plug=(NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=lo NCCL_GPUDIRECTTCPX_CTRL_DEV=lo
	NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS=1000
	NCCL_DYNAMIC_CHUNK_SIZE=${NCCL_DYNAMIC_CHUNK_SIZE:-524288}
	"LD_LIBRARY_PATH=$(dirname "$plugin")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	NCCL_NSOCKS_PERTHREAD=$nsocks NCCL_SOCKET_NTHREADS=$nthreads
	TCPX_P2P_TIMEOUT_MS=${TCPX_P2P_TIMEOUT_MS:-60000})
# NCCL on one host over a net plugin: no NVLink/PCIe peer or shared-memory
# transport between the two GPUs, the plugin named by path, GPUDirect for
# both directions whatever the PCI distance, and the channel count pinned.
nccl_env=(NCCL_NET_PLUGIN=$plugin NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0
	NCCL_NET_GDR_LEVEL=SYS NCCL_NET_GDR_READ=1 NCCL_MIN_NCHANNELS=$channels
	NCCL_MAX_NCHANNELS=$channels NCCL_NCHANNELS_PER_NET_PEER=$channels
	NCCL_MIN_P2P_NCHANNELS=$channels NCCL_MAX_P2P_NCHANNELS=$channels)
[[ -z $nccl_bytes ]] || nccl_env+=(NCCL_P2P_NET_CHUNKSIZE="$nccl_bytes")
sweep=(-b "${sizes%%:*}" -e "${sizes##*:}" -f 2 -n "$iters" -w "$warmup" --verify)

# run NAME env-assignments... -- command...: log and JSON under $out.
run() {
	local name=$1 rc
	shift
	local envs=()
	while [[ $1 != -- ]]; do envs+=("$1"); shift; done
	shift
	echo "== $name: ${envs[*]} $(basename "$1") ${*:2}" | tee "$out/$name.log"
	set +e
	env "${clean[@]}" "${envs[@]}" LD_PRELOAD="$sim" "$@" --json "$out/$name.json" 2>&1 |
		tee -a "$out/$name.log"
	rc=${PIPESTATUS[0]}
	set -e
	((rc != 77)) || die "$name: skipped (no usable GPU)" 77
	((rc == 0)) || die "$name failed with status $rc (log: $out/$name.log)"
}

if ((ceiling)); then
	n=$((channels * nsocks * nthreads))
	((n <= 64)) || n=64
	echo "== ceiling: sim_ceiling -S $n --gpus $gb" | tee "$out/ceiling.log"
	env "${clean[@]}" "${plug[@]}" "$ceil" -S "$n" --gpus "$gb" -s 64M -n 3 \
		--json "$out/ceiling.json" 2>&1 |
		tee -a "$out/ceiling.log" || die "sim_ceiling failed (log: $out/ceiling.log)"
fi
for dir in uni bidir; do
	extra=()
	[[ $dir == bidir ]] && extra=(--bidir)
	if ((nccl)); then
		run "nccl_$dir" "${plug[@]}" "${nccl_env[@]}" -- "$pair" -g "$gpus" "${sweep[@]}" \
			"${extra[@]}" -q
	fi
	run "tcpx_$dir" "${plug[@]}" TCPX_P2P_PLUGIN="$plugin" -- "$perf" loopback -q --mem cuda \
		--gpu "$gpus" --channels "$channels" "${tcpx_chunk[@]}" "${sweep[@]}" "${extra[@]}"
done

python3 - "$out" "$nccl" "$gpus" "$channels" "$socks" "${chunk:-default}" \
	"${depth:-default}" "${nccl_chunk:-default}" >"$out/compare.txt" <<'EOF' ||
import json, os, re, sys

out, nccl, gpus, channels, socks, chunk, depth, nccl_chunk = (sys.argv[1], sys.argv[2] == "1",
                                                             *sys.argv[3:])
def load(n):
    p = os.path.join(out, n + ".json")
    if not os.path.exists(p):
        return {}
    with open(p) as f:
        return {r["size"]: r["gbps"] for r in json.load(f)}
res = {n: load(n) for n in ("nccl_uni", "tcpx_uni", "nccl_bidir", "tcpx_bidir")}
sizes = sorted(set(res["tcpx_uni"]) | set(res["tcpx_bidir"]))

def human(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)

def cell(n, s):
    return "%.3f" % res[n][s] if s in res[n] else "-"

def ratio(a, b, s):
    if s in res[a] and s in res[b] and res[b][s] > 0:
        return "%.2f" % (res[a][s] / res[b][s])
    return "-"

ceil = ""
p = os.path.join(out, "ceiling.log")
if os.path.exists(p):
    text = open(p).read()
    m1 = re.search(r"raw_tcp\s+([0-9.]+)", text)
    m2 = re.search(r"simulator\s+([0-9.]+)", text)
    if m1 and m2:
        ceil = "# simulator ceiling on as many sockets: %s GB/s (raw loopback TCP %s)" % (
            m2.group(1), m1.group(1))
print("# GB/s (10^9 bytes/s), GPU %s over Google's TCPX plugin under libtcpxsim, verified;" % gpus)
print("# %s channels, %s sockets per comm (NSOCKS_PERTHREAD x SOCKET_NTHREADS); bidir sums both"
      % (channels, socks))
print("# chunks: tcpx_p2p %s, up to %s per channel share; NCCL P2P_NET_CHUNKSIZE %s"
      % (chunk, depth, nccl_chunk))
if ceil:
    print(ceil)
if not nccl:
    print("# one GPU: NCCL not run (it needs two)")
head = ["size", "nccl", "tcpx_p2p", "ratio", "nccl_bidir", "tcpx_bidir", "ratio"]
w = [6, 8, 9, 6, 10, 10, 6]
print("  ".join(h.rjust(w[i]) for i, h in enumerate(head)))
for s in sizes:
    cells = [human(s), cell("nccl_uni", s), cell("tcpx_uni", s), ratio("tcpx_uni", "nccl_uni", s),
             cell("nccl_bidir", s), cell("tcpx_bidir", s), ratio("tcpx_bidir", "nccl_bidir", s)]
    print("  ".join(c.rjust(w[i]) for i, c in enumerate(cells)))
EOF
	die "merging the results failed"
cat "$out/compare.txt"
echo "compare_nccl_tcpx: results in $out"
