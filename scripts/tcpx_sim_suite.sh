#!/usr/bin/env bash
# The library's GPU suite over a TCPX plugin binary you have (Google's
# libnccl-net.so / libnccl-net-tcpx.so), on one host with one GPU, under the
# bundled devmem-TCP + RxDM simulator (libtcpxsim.so, preloaded).  Each
# step runs in its own process: the plugin calls exit() on its fatal paths.
#
# Usage: scripts/tcpx_sim_suite.sh PLUGIN.so [PATTERN]   (or --list)
#
# PATTERN (an extended regular expression) picks steps by name; --list
# prints them.  Expects a CUDA build in $BUILD (default build-gpu, as
# scripts/gpu_ci.sh makes it); the plugin's own libraries must be found
# beside it or on LD_LIBRARY_PATH.  Logs go to $BUILD/tcpx_sim/ and, when
# $OUT is set, to $OUT; STEP_TIMEOUT (seconds, default 300) bounds each step.
# Exit status: 0 when every step did what it should,
# 1 otherwise, 2 usage.  docs/testing.md describes the steps.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }
case ${1:-} in
-h | --help) usage; exit 0 ;;
"") usage >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$repo/build-gpu}
list_only=0
[[ $1 == --list ]] && { list_only=1; plugin=/dev/null; } || plugin=$(realpath "$1")
pattern=${2:-.}
sim=$BUILD/lib/libtcpxsim.so
bin=$BUILD/bin
logs=$BUILD/tcpx_sim
if ((!list_only)); then
	for f in "$plugin" "$sim" "$bin/tcpx_perf"; do
		[[ -e $f ]] || { echo "tcpx_sim_suite: $f not found" >&2; exit 2; }
	done
	mkdir -p "$logs"
fi

# The plugin on loopback: lo for data and control, flow steering programmed
# at once (the simulator's rules apply immediately), the usual chunk size.
export TCPX_P2P_PLUGIN=$plugin
export NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=${NCCL_GPUDIRECTTCPX_SOCKET_IFNAME:-lo}
export NCCL_GPUDIRECTTCPX_CTRL_DEV=${NCCL_GPUDIRECTTCPX_CTRL_DEV:-lo}
export NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS=${NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS:-1000}
export NCCL_DYNAMIC_CHUNK_SIZE=${NCCL_DYNAMIC_CHUNK_SIZE:-524288}
export LD_LIBRARY_PATH=$(dirname "$plugin")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TCPX_P2P_TIMEOUT_MS=${TCPX_P2P_TIMEOUT_MS:-30000}

summary=()
status=0

# A crash under the simulator leaves a backtrace of "lib.so(+0xOFF)"
# frames in the log: name them with addr2line where it is installed.
symbolize() {
	command -v addr2line >/dev/null || return 0
	grep -q "tcpxsim: signal" "$1" || return 0
	echo "---- frames" >>"$1"
	grep -A64 "tcpxsim: signal" "$1" | sed -n 's/^\([^( ]*\.so[^( ]*\)(+\(0x[0-9a-f]*\)).*/\1 \2/p' |
		while read -r lib off; do
			[[ -f $lib ]] && echo "$(basename "$lib") $off $(addr2line -f -C -e "$lib" "$off" | paste -sd' ')"
		done >>"$1"
}

# step NAME EXPECT [VAR=VALUE ...] -- COMMAND...
# EXPECT: ok (exit 0), or exit:N:TEXT (exit status N and TEXT in the output:
# a fault the plugin is known to end the process for).
step() {
	local name=$1 expect=$2 envs=() rc out
	shift 2
	while [[ $1 != -- ]]; do envs+=("$1"); shift; done
	shift
	[[ $name =~ $pattern ]] || return 0
	if ((list_only)); then echo "$name"; return 0; fi
	out=$logs/$name.log
	echo "==== $name"
	env "${envs[@]}" LD_PRELOAD="$sim" timeout -k 5 "${STEP_TIMEOUT:-300}" "$@" >"$out" 2>&1
	rc=$?
	symbolize "$out"
	tail -n 4 "$out" | sed 's/^/    /'
	local verdict=FAIL
	if [[ $expect == ok ]]; then
		((rc == 0)) && verdict=PASS
	else
		local want_rc=${expect#exit:} text
		text=${want_rc#*:}
		want_rc=${want_rc%%:*}
		((rc == want_rc)) && grep -q -- "$text" "$out" && verdict=PASS
	fi
	[[ $verdict == PASS ]] || status=1
	summary+=("$verdict  $name (exit $rc)")
	[[ -n ${OUT:-} ]] && cp -f "$out" "$OUT/" 2>/dev/null
	return 0
}

perf=("$bin/tcpx_perf")
cuda=(--mem cuda --gpu 0,0 --verify -q)

step cuda_transfer.kernel ok -- "$bin/test_cuda_transfer" kernel 256
step cuda_transfer.d2d ok -- "$bin/test_cuda_transfer" d2d 16
step cuda_transfer.host ok -- "$bin/test_cuda_transfer" host 16
step cuda_transfer.pinned ok -- "$bin/test_cuda_transfer" pinned 64
step cuda_transfer.pin ok -- "$bin/test_cuda_transfer" pin 64
step kv_cuda ok -- "$bin/test_kv_cuda" cuda
# A hostile CLOSE and a silent peer beside an honest connection; an honest
# burst of notifications.  The connections the library fails are closed
# with sends of the plugin still queued, and its socket threads send
# without MSG_NOSIGNAL: SIGPIPE is ignored, as docs/troubleshooting.md
# tells applications to (Python does by itself).
trap '' PIPE
step close.hostile ok TCPX_P2P_GPU=0 -- "$bin/test_hostile_close"
trap - PIPE
step notif.burst ok TCPX_P2P_GPU=0 -- "$bin/test_notif_flow"
for ch in 1 2 4 8; do
	step "perf.cuda.ch$ch" ok -- "${perf[@]}" loopback "${cuda[@]}" --channels "$ch" \
		-b 4K -e 256M -f 4 -n 5 -w 1
done
step perf.cuda.conns4 ok -- "${perf[@]}" loopback "${cuda[@]}" --conns 4 -s 64M -n 5 -w 1
step perf.cuda.bidir ok -- "${perf[@]}" loopback "${cuda[@]}" --bidir -s 64M -n 5 -w 1
step perf.cuda.progress_thread ok TCPX_P2P_PROGRESS_THREAD=1 -- \
	"${perf[@]}" loopback "${cuda[@]}" -b 4K -e 64M -f 16 -n 5 -w 1
step perf.cuda.two_processes ok -- bash -c "
	'${perf[0]}' server ${cuda[*]} --gpu 0 -p 18700 -s 64M -n 5 -w 1 &
	sleep 1; '${perf[0]}' client -H 127.0.0.1 ${cuda[*]} --gpu 0 -p 18700 -s 64M -n 5 -w 1
	c=\$?; wait \$!; s=\$?; exit \$((c | s))"
step kv.cuda.write ok -- "${perf[@]}" kv loopback "${cuda[@]}" --op write -n 5 -w 1
step kv.cuda.read ok -- "${perf[@]}" kv loopback "${cuda[@]}" --op read -n 5 -w 1
step perf.host ok -- "${perf[@]}" loopback --mem host --gpu 0,0 --verify -q -b 4K -e 16M -f 16 -n 3 -w 1
step perf.pinned ok -- "${perf[@]}" loopback --mem pinned --gpu 0,0 --verify -q -s 16M -n 3 -w 1

# The simulator's fault settings: what the plugin does with each.
step fault.starved_pool ok TCPXSIM_POOL_PAGES=1024 -- \
	"${perf[@]}" loopback "${cuda[@]}" -s 64M -n 3 -w 1
step fault.late_completions ok TCPXSIM_TX_DELAY_US=2000 -- \
	"${perf[@]}" loopback "${cuda[@]}" -s 16M -n 3 -w 1
step fault.unsteered "exit:1:no cmsg" TCPXSIM_STEERING=none -- \
	"${perf[@]}" loopback "${cuda[@]}" -s 1M -n 1 -w 0
step fault.linear "exit:1:landed on host memory" TCPXSIM_LINEAR=64 -- \
	"${perf[@]}" loopback "${cuda[@]}" -s 1M -n 1 -w 0
step fault.small_mss "exit:1:segs, failstop" TCPXSIM_MSS=64 -- \
	"${perf[@]}" loopback "${cuda[@]}" -s 1M -n 1 -w 0

((list_only)) && exit 0
echo
echo "==== tcpx_sim_suite summary ($(basename "$plugin"), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1))"
printf '%s\n' "${summary[@]}"
echo "==== tcpx_sim_suite: $([[ $status == 0 ]] && echo OK || echo FAILED)"
exit "$status"
