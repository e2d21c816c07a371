#!/usr/bin/env bash
# Eight concurrent tcpx_perf pairs between two A3 nodes, one per GPU, each on
# its GPU's NIC (scripts/run_two_node.sh), then per-GPU and total GB/s:
#
#   server node:  scripts/run_a3_8gpu.sh server [options] [tcpx_perf args...]
#   client node:  scripts/run_a3_8gpu.sh client --peer ADDR [options] [tcpx_perf args...]
#   this host:    scripts/run_a3_8gpu.sh --local N [options] [tcpx_perf args...]
#
# Pair g uses GPU g and port BASE+g.  --local N runs N pairs as tcpx_perf
# loopback processes on this host over the emulator plugin with --mem host
# (a smoke test without GPUs or TCPX).  The total is the sum of the per-GPU
# rates at each size; it means aggregate bandwidth only because the pairs run
# at once, so prefer one size (-s 256M -n 50) over a sweep for it.
#
# Options: --peer ADDR, --gpus N (default 8), --port-base P (default 18515),
# --out DIR (default a3-<date>; per-GPU JSON and logs), --build-dir DIR
# (default build).  Exit status: 0, 1 when a pair fails, 2 usage.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,17s/^# \{0,1\}//p' "$0"; }

role=
peer=${TCPX_P2P_PEER:-}
gpus=8
base=18515
out=a3-$(date +%Y%m%d-%H%M%S)
build=$root/build
case ${1:-} in
server | client) role=$1; shift ;;
--local) role=local; gpus=${2:?--local wants a pair count}; shift 2 ;;
-h | --help) usage; exit 0 ;;
*) usage >&2; exit 2 ;;
esac
while (($#)); do
	case $1 in
	--peer) peer=${2:?}; shift 2 ;;
	--gpus) gpus=${2:?}; shift 2 ;;
	--port-base) base=${2:?}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--build-dir) build=${2:?}; shift 2 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
if ! [[ $gpus =~ ^[0-9]+$ ]] || ((gpus < 1 || gpus > 64)); then
	echo "run_a3_8gpu: pair count must be 1..64, not '$gpus'" >&2
	exit 2
fi
if ! [[ $base =~ ^[0-9]+$ ]] || ((base < 1 || base + gpus > 65536)); then
	echo "run_a3_8gpu: bad --port-base '$base'" >&2
	exit 2
fi
if [[ $role == client && -z $peer ]]; then
	echo "run_a3_8gpu: client needs --peer ADDR (or TCPX_P2P_PEER)" >&2
	exit 2
fi
command -v python3 >/dev/null || { echo "run_a3_8gpu: python3 is needed" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=$(cd "$build" && pwd) || { echo "run_a3_8gpu: no build dir" >&2; exit 2; }

pids=()
for ((g = 0; g < gpus; g++)); do
	json=$out/$role-gpu$g.json
	log=$out/$role-gpu$g.log
	rm -f "$json"
	if [[ $role == local ]]; then
		TCPX_P2P_PLUGIN=${TCPX_P2P_PLUGIN:-$build/lib/libnccl-net-tcpxemu.so} \
			"$build/bin/tcpx_perf" loopback --mem host "$@" --json "$json" \
			>"$log" 2>&1 &
	else
		args=("$role" --gpu "$g" --build-dir "$build")
		[[ $role == client ]] && args+=(--peer "$peer")
		"$root/scripts/run_two_node.sh" "${args[@]}" -- --port $((base + g)) "$@" \
			--json "$json" >"$log" 2>&1 &
	fi
	pids+=($!)
done

failed=0
for ((g = 0; g < gpus; g++)); do
	if ! wait "${pids[$g]}"; then
		echo "run_a3_8gpu: pair $g failed; its log, $out/$role-gpu$g.log:" >&2
		tail -n 5 "$out/$role-gpu$g.log" >&2
		failed=1
	fi
done
((failed == 0)) || exit 1

python3 - "$out" "$role" "$gpus" <<'EOF' | tee "$out/summary.txt"
import json, os, sys

out, role, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
res = []
for g in range(n):
    path = os.path.join(out, "%s-gpu%d.json" % (role, g))
    try:
        with open(path) as f:
            recs = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("run_a3_8gpu: %s: %s" % (path, e))
    if not recs:
        sys.exit("run_a3_8gpu: %s: no results" % path)
    res.append({r["size"]: r["gbps"] for r in recs})
sizes = sorted(set().union(*res))
print("# %s: per-GPU GB/s (10^9 bytes/s), %d concurrent pairs; total = sum" % (role, n))
head = ["size"] + ["gpu%d" % g for g in range(n)] + ["total"]
print(" ".join("%10s" % h for h in head))
for s in sizes:
    vals = [r.get(s) for r in res]
    cells = [str(s)] + ["%.3f" % v if v is not None else "-" for v in vals]
    cells.append("%.3f" % sum(v for v in vals if v is not None))
    print(" ".join("%10s" % c for c in cells))
EOF
exit "${PIPESTATUS[0]}"
