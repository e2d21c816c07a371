#!/usr/bin/env bash
# Run the KV hand-offs many times, as separate process pairs, and count the
# runs whose bytes were wrong: tcpx_perf kv (server and client processes,
# --verify: a WRITE checked on the target when its notification is taken)
# and the Python example (examples/python/kv_transfer.py: prefill and decode
# processes), WRITE and READ each.  A data race shows in a few runs in a
# hundred, not in one; --delay-us adds the test-hook builds' random stream
# delays (TCPX_P2P_TEST_STREAM_DELAY_US, TCPX_EMU_STREAM_DELAY_US) to every
# run, so that work on one stream used from another without an ordering
# shows every time it happens.
#
#   scripts/kv_soak.sh [--runs N] [--jobs J] [--delay-us US] [--mem cuda|host]
#                      [--only perf|example] [--op write|read] [BUILD]
#
# BUILD (default build-gpu) is a build tree with tcpx_perf and the Python
# package (build/python).  Runs go J at a time, each pair on its own port
# and, with --mem cuda, on GPU (run mod the machine's GPU count) through
# CUDA_VISIBLE_DEVICES: most of a run is process and CUDA set-up, which
# several GPUs do side by side.
# Prints one line per kind ("kv_soak: perf write: 200/200 passed"), the
# failures counted by their first error line, and the output of the first
# failures (each invocation's logs under BUILD/kv_soak/<time>-<pid>/; the
# logs of passed runs are removed); exits 1 if any run failed.
set -uo pipefail

runs=200 jobs=8 delay=0 mem=cuda only="" only_op=""
while (($#)); do
	case $1 in
	--runs) runs=$2; shift 2 ;;
	--jobs) jobs=$2; shift 2 ;;
	--delay-us) delay=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--op) only_op=$2; shift 2 ;;
	-h|--help) sed -n 2,20p "$0"; exit 0 ;;
	-*) echo "kv_soak: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
repo=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$repo/build-gpu}" && pwd) || exit 2
logs=$build/kv_soak/$(date +%Y%m%d-%H%M%S)-$$
mkdir -p "$logs"
export TCPX_P2P_PLUGIN=${TCPX_P2P_PLUGIN:-$build/lib/libnccl-net-tcpxemu.so}
if ((delay)); then
	export TCPX_P2P_TEST_STREAM_DELAY_US=$delay TCPX_EMU_STREAM_DELAY_US=$delay
fi
py=${TCPX_P2P_PYTHON:-python3}
device=$([[ $mem == cuda ]] && echo cuda || echo cpu)
ngpu=0
if [[ $mem == cuda && -z ${CUDA_VISIBLE_DEVICES:-} ]]; then
	ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
fi

# One run: kind (perf|example), op (write|read), index.  Exit status 0 = verified.
one() {
	local kind=$1 op=$2 i=$3 port=$((20000 + ($3 % 4000) * 2)) log=$logs/$1-$2-$3.log
	((ngpu)) && export CUDA_VISIBLE_DEVICES=$((i % ngpu))
	if [[ $kind == perf ]]; then
		local args=(kv --mem "$mem" --verify -n 2 -w 1 --blocks 256 --block-size 16K,64K
			--op "$op" --port "$port" --timeout 30000)
		timeout 120 "$build/bin/tcpx_perf" "${args[@]}" server >"$log.server" 2>&1 &
		local srv=$!
		timeout 120 "$build/bin/tcpx_perf" "${args[@]}" client --host 127.0.0.1 \
			>"$log" 2>&1
		local rc=$?
		wait "$srv" || rc=1
		cat "$log.server" >>"$log"
		rm -f "$log.server"
	else
		PYTHONPATH=$build/python timeout 120 "$py" "$repo/examples/python/kv_transfer.py" \
			--op "$op" --device "$device" >"$log" 2>&1
		local rc=$?
	fi
	((rc == 0)) && rm -f "$log"
	return "$rc"
}
export -f one
export build logs mem device py repo ngpu

status=0
for kind in perf example; do
	[[ -n $only && $only != "$kind" ]] && continue
	for op in write read; do
		[[ -n $only_op && $only_op != "$op" ]] && continue
		t0=$(date +%s)
		failed=$(seq 1 "$runs" | xargs -P "$jobs" -I{} bash -c "one $kind $op {} || echo F" |
			grep -c F)
		printf 'kv_soak: %s %s%s: %d/%d passed (%d s)\n' "$kind" "$op" \
			"$( ((delay)) && echo ", stream delays 0..$delay us")" \
			$((runs - failed)) "$runs" $(($(date +%s) - t0))
		((failed)) && status=1
	done
done
if ls "$logs"/*.log >/dev/null 2>&1; then
	echo "kv_soak: failures by their first error line (logs in $logs):"
	for f in "$logs"/*.log; do
		{ grep -m1 -E "wrong|rror|FAILED|presumed dead|timed out" "$f" ||
			echo "(no error line: killed?)"; } | sed -E 's/[0-9]+/N/g' | cut -c1-160
	done | sort | uniq -c | sort -rn | head -8
fi
for f in $(ls "$logs"/*.log 2>/dev/null | head -3); do
	echo "---- $(basename "$f")"
	grep -E "FAILED|wrong|written|rror|tcpx_perf: kv:" "$f" | head -6
done
exit "$status"
