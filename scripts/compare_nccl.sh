#!/usr/bin/env bash
# NCCL's socket transport against libtcpx_p2p over the emulator plugin, on one
# host with two GPUs, GPU 0 -> GPU 1, over loopback; prints a side-by-side
# table.  Needs python3 (stdlib only) and a build with CUDA and NCCL:
#
#   cmake -S . -B build -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_TESTING=OFF
#   cmake --build build -j --target tcpx_perf nccl_pair nccl-net-tcpxemu tcpx_p2p
#   scripts/compare_nccl.sh --build-dir build --out results/compare
#
# Options: --build-dir DIR (default build), --out DIR (default
# compare-<date>), --iters N (default 20), --warmup N (default 3),
# --sizes MIN:MAX (default 512K:256M, step factor 2), --gpu A,B (default 0,1).
# Exit status: 0, 1 on any failed run, 2 usage, 77 fewer than two GPUs.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=compare-$(date +%Y%m%d-%H%M%S)
iters=20
warmup=3
sizes=512K:256M
gpus=0,1

die() { echo "compare_nccl: $1" >&2; exit "${2:-1}"; }
usage() { sed -n '2,15s/^# \{0,1\}//p' "$0"; }

while (($#)); do
	case $1 in
	--build-dir) build=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--iters) iters=${2:?}; shift 2 ;;
	--warmup) warmup=${2:?}; shift 2 ;;
	--sizes) sizes=${2:?}; shift 2 ;;
	--gpu) gpus=${2:?}; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
[[ $sizes == *:* ]] || die "--sizes wants MIN:MAX, e.g. 512K:256M" 2
min=${sizes%%:*}
max=${sizes##*:}
build=$(cd "$build" && pwd) || die "no build directory $build" 2
perf=$build/bin/tcpx_perf
pair=$build/bin/nccl_pair
emu=$build/lib/libnccl-net-tcpxemu.so
for f in "$perf" "$pair" "$emu"; do
	[[ -e $f ]] || die "$f is missing: build tcpx_perf nccl_pair nccl-net-tcpxemu tcpx_p2p \
(nccl_pair needs CUDA and NCCL; see docs/benchmarks.md)"
done
command -v python3 >/dev/null || die "python3 is needed for the table"
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Settings that would leak into a run from the caller's environment.
clean=(-u NCCL_SOCKET_NTHREADS -u NCCL_NSOCKS_PERTHREAD -u NCCL_NET -u NCCL_NET_PLUGIN
	-u NCCL_P2P_DISABLE -u NCCL_SHM_DISABLE -u TCPX_P2P_NUM_CHANNELS -u TCPX_P2P_CHUNK_BYTES
	-u TCPX_EMU_BOUNCE -u TCPX_EMU_POISON -u TCPX_EMU_STRICT_TAGS)
nccl_sock=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_NET_PLUGIN=none
	NCCL_SOCKET_IFNAME=lo NCCL_NVLS_ENABLE=0)
socks_2x4=(NCCL_SOCKET_NTHREADS=2 NCCL_NSOCKS_PERTHREAD=4)
sweep=(-b "$min" -e "$max" -f 2 -n "$iters" -w "$warmup")

# run NAME env-assignments... -- command...: log and JSON under $out.
run() {
	local name=$1 rc=0
	shift
	local envs=()
	while [[ $1 != -- ]]; do
		envs+=("$1")
		shift
	done
	shift
	echo "== $name: ${envs[*]} $(basename "$1") ${*:2}"
	set +e
	env "${clean[@]}" "${envs[@]}" "$@" --json "$out/$name.json" 2>&1 | tee "$out/$name.log"
	rc=${PIPESTATUS[0]}
	set -e
	if ((rc == 77)); then
		die "$name: skipped (needs two usable GPUs)" 77
	fi
	((rc == 0)) || die "$name failed with status $rc (log: $out/$name.log)"
}

run nccl_sock "${nccl_sock[@]}" -- "$pair" -g "$gpus" "${sweep[@]}"
run nccl_sock_2x4 "${nccl_sock[@]}" "${socks_2x4[@]}" -- "$pair" -g "$gpus" "${sweep[@]}"
run tcpx_emu TCPX_P2P_PLUGIN="$emu" NCCL_SOCKET_IFNAME=lo -- \
	"$perf" loopback -q --mem cuda --gpu "$gpus" "${sweep[@]}"
run tcpx_emu_2x4 TCPX_P2P_PLUGIN="$emu" NCCL_SOCKET_IFNAME=lo "${socks_2x4[@]}" -- \
	"$perf" loopback -q --mem cuda --gpu "$gpus" "${sweep[@]}"

python3 - "$out" >"$out/compare.txt" <<'EOF' || die "merging the results failed"
import json, os, sys

out = sys.argv[1]
names = ["nccl_sock", "nccl_sock_2x4", "tcpx_emu", "tcpx_emu_2x4"]
ratios = [("tcpx_emu", "nccl_sock"), ("tcpx_emu_2x4", "nccl_sock_2x4"),
          ("tcpx_emu", "nccl_sock_2x4")]
res = {}
for n in names:
    with open(os.path.join(out, n + ".json")) as f:
        res[n] = {r["size"]: r["gbps"] for r in json.load(f)}
sizes = sorted(set().union(*[set(v) for v in res.values()]))
missing = [(n, s) for n in names for s in sizes if s not in res[n]]
if missing:
    sys.exit("compare_nccl: sizes missing from the results: %s" % missing)

def human(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)

print("# GB/s (10^9 bytes/s), GPU -> GPU over loopback; nccl_* = NCCL socket transport,")
print("# tcpx_* = libtcpx_p2p over the emulator plugin; _2x4 = 2 threads x 4 sockets")
head = ["size"] + names + ["%s/%s" % (a.replace("_sock", ""), b.replace("_sock", ""))
                           for a, b in ratios]
w = [8] + [max(len(h), 9) for h in head[1:]]
print("  ".join(h.rjust(w[i]) for i, h in enumerate(head)))
for s in sizes:
    cells = [human(s)] + ["%.3f" % res[n][s] for n in names]
    cells += ["%.2f" % (res[a][s] / res[b][s]) if res[b][s] > 0 else "-" for a, b in ratios]
    print("  ".join(c.rjust(w[i]) for i, c in enumerate(cells)))
EOF
cat "$out/compare.txt"
echo "compare_nccl: results in $out"
