#!/usr/bin/env bash
# Chunk size against channels, host and CUDA memory, interleaved repetitions:
# the measurement behind the TCPX_P2P_CHUNK_BYTES default (docs/performance.md).
#   BUILD=build scripts/chunk_sweep.sh [reps] [size]
set -euo pipefail
build=${BUILD:-build}
perf=$build/bin/tcpx_perf
reps=${1:-3}
size=${2:-256M}
mems=(host)
if nvidia-smi -L >/dev/null 2>&1; then
	mems+=(cuda)
fi
for ((r = 1; r <= reps; r++)); do
	for mem in "${mems[@]}"; do
		for ch in 1 2 4; do
			for chunk in 512K 1M 2M 4M; do
				args=(loopback --mem "$mem" --channels "$ch" --chunk "$chunk" --size "$size"
					-n 10 -w 2 -q)
				[[ $mem == cuda ]] && args+=(--gpu 0,0)
				env=()
				[[ $mem == host ]] && env=(TCPX_EMU_BOUNCE=off)
				gbps=$(env "${env[@]}" "$perf" "${args[@]}" 2>/dev/null | tail -1 | awk '{print $4}')
				echo "rep=$r mem=$mem channels=$ch chunk=$chunk GB/s=$gbps"
			done
		done
	done
done
