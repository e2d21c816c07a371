#!/usr/bin/env bash
# The NIXL backend plugin on a GPU machine: builds the project with the
# plugin against an installed NIXL, runs its tests (the VRAM part included),
# then nixlbench --backend TCPX VRAM->VRAM and DRAM->DRAM (two processes on
# this host, ASIO runtime, --check_consistency) beside tcpx_perf kv at the
# same block and batch sizes, over the bundled emulator; with a TCPX plugin
# binary given, VRAM->VRAM again over it under the bundled simulator.
#
# Usage: scripts/nixl_gpu.sh [NIXL_PREFIX] [TCPX_PLUGIN.so]
#
# NIXL_PREFIX (default: .nixl in the checkout) is a NIXL install with the
# Abseil it was built with (include/, lib/, lib/<arch>/, bin/nixlbench);
# docs/nixl.md says what it needs.  Builds in $BUILD (default build-nixl;
# a build directory configured before, e.g. by scripts/gpu_ci.sh on a
# machine without network, keeps its settings and gains the plugin); logs
# and a summary go to $OUT (default $BUILD/nixl-results).
# MEMS (default "VRAM DRAM") picks the memory kinds measured: MEMS=DRAM
# runs the host-memory part alone, on a machine without a GPU.
# Exit status: 0 when every step passed, 1 otherwise, 2 usage.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }
case ${1:-} in
-h | --help) usage; exit 0 ;;
esac

repo=$(cd "$(dirname "$0")/.." && pwd)
prefix=$(realpath "${1:-$repo/.nixl}" 2>/dev/null) || { usage >&2; exit 2; }
tcpx_plugin=${2:-}
BUILD=${BUILD:-$repo/build-nixl}
OUT=${OUT:-$BUILD/nixl-results}
[[ -f $prefix/include/backend/backend_plugin.h ]] || {
	echo "nixl_gpu: no NIXL install at $prefix" >&2
	exit 2
}
[[ -z $tcpx_plugin || -f $tcpx_plugin ]] || { echo "nixl_gpu: $tcpx_plugin not found" >&2; exit 2; }
mkdir -p "$BUILD" "$OUT"

# libnixl.so finds neither its Abseil nor its own libraries by RUNPATH.
arch_lib=$(dirname "$(find "$prefix/lib" -name libnixl.so | head -1)")
export LD_LIBRARY_PATH=$arch_lib:$prefix/lib:$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
summary=()

step() { # NAME COMMAND...: runs it, logs to $OUT/NAME.log
	local name=$1 rc
	shift
	echo "==== $name: $*"
	"$@" >"$OUT/$name.log" 2>&1
	rc=$?
	tail -n 12 "$OUT/$name.log" | sed 's/^/    /'
	((rc == 0)) || status=1
	summary+=("$([[ $rc == 0 ]] && echo PASS || echo FAIL)  $name (exit $rc)")
}

if [[ -x /usr/local/cuda/bin/nvcc ]] && ! command -v nvcc >/dev/null; then
	export PATH=/usr/local/cuda/bin:$PATH
fi
cfg=(-DTCPX_P2P_NIXL=ON -DNIXL_PREFIX="$prefix" -DBUILD_TESTING=ON)
[[ -f $BUILD/CMakeCache.txt ]] || cfg+=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
step configure cmake -S "$repo" -B "$BUILD" "${cfg[@]}"
step build cmake --build "$BUILD" -j"$(nproc)"
((status == 0)) || { printf '%s\n' "${summary[@]}"; exit 1; }
step ctest ctest --test-dir "$BUILD" -L nixl --no-tests=error --output-on-failure

plugins=$BUILD/nixl-plugins # NIXL_PLUGIN_DIR: only this folder is searched
mkdir -p "$plugins"
ln -sf "$BUILD/lib/nixl/libplugin_TCPX.so" "$plugins/"
export NIXL_PLUGIN_DIR=$plugins
emu=$BUILD/lib/libnccl-net-tcpxemu.so
nixlbench=$prefix/bin/nixlbench
common=(--total_buffer_size 1073741824 --check_consistency --num_iter 64 --warmup_iter 8)

# nixlbench ARGS...: the two processes of one run (the first to bind the
# ASIO port is the initiator); both must succeed.
two_nixlbench() {
	local port=$((20000 + RANDOM % 20000)) a
	timeout -k 5 600 "$nixlbench" --runtime_type ASIO --asio_port "$port" "$@" &
	a=$!
	sleep 2
	# a side that fails leaves the other waiting for it: both are bounded
	timeout -k 5 600 "$nixlbench" --runtime_type ASIO --asio_port "$port" "$@" ||
		{ kill "$a" 2>/dev/null; wait "$a"; return 1; }
	wait "$a"
}

two_kv() { # tcpx_perf kv ARGS...: server and client processes
	local port=$((20000 + RANDOM % 20000)) s
	timeout -k 5 600 "$BUILD/bin/tcpx_perf" kv server --port "$port" "$@" -q &
	s=$!
	sleep 1
	timeout -k 5 600 "$BUILD/bin/tcpx_perf" kv client --host 127.0.0.1 --port "$port" "$@" ||
		{ kill "$s" 2>/dev/null; wait "$s"; return 1; }
	wait "$s"
}

mems=${MEMS:-VRAM DRAM}
for mem in $mems; do
	seg=(--initiator_seg_type "$mem" --target_seg_type "$mem")
	TCPX_P2P_PLUGIN=$emu step "nixlbench.$mem.kv" two_nixlbench --backend TCPX "${seg[@]}" \
		"${common[@]}" --start_block_size 16384 --max_block_size 131072 \
		--start_batch_size 1024 --max_batch_size 1024
	TCPX_P2P_PLUGIN=$emu step "nixlbench.$mem.64M" two_nixlbench --backend TCPX "${seg[@]}" \
		"${common[@]}" --start_block_size 67108864 --max_block_size 67108864
done
kv=(--block-size 16K,32K,64K,128K --blocks 1024 -n 64 -w 8 --verify)
[[ $mems == *VRAM* ]] && TCPX_P2P_PLUGIN=$emu step kv.cuda two_kv --mem cuda --gpu 0 "${kv[@]}"
gpu=(--gpu 0)
[[ $mems == *VRAM* ]] || gpu=()
TCPX_P2P_PLUGIN=$emu step kv.host two_kv --mem host "${gpu[@]}" "${kv[@]}"

if [[ -n $tcpx_plugin ]]; then
	# Google's plugin on loopback under the simulator, set as
	# scripts/tcpx_sim_suite.sh sets it.
	sim=$BUILD/lib/libtcpxsim.so
	TCPX_P2P_PLUGIN=$(realpath "$tcpx_plugin") LD_PRELOAD=$sim \
		NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=lo NCCL_GPUDIRECTTCPX_CTRL_DEV=lo \
		NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS=1000 \
		NCCL_DYNAMIC_CHUNK_SIZE=524288 TCPX_P2P_TIMEOUT_MS=30000 \
		LD_LIBRARY_PATH=$(dirname "$(realpath "$tcpx_plugin")"):$LD_LIBRARY_PATH \
		step nixlbench.VRAM.tcpxsim two_nixlbench --backend TCPX \
		--initiator_seg_type VRAM --target_seg_type VRAM "${common[@]}" \
		--start_block_size 65536 --max_block_size 65536 \
		--start_batch_size 1024 --max_batch_size 1024
fi

{
	echo "# nixl_gpu.sh $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
	printf '%s\n' "${summary[@]}"
	for f in "$OUT"/nixlbench.*.log; do
		echo "## $(basename "$f" .log)"
		grep -E '^[0-9]+ +[0-9]+ +[0-9.]+' "$f"
	done
	for f in "$OUT"/kv.*.log; do
		echo "## $(basename "$f" .log)"
		grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ ' "$f"
	done
} >"$OUT/summary.txt"
cat "$OUT/summary.txt"
exit "$status"
