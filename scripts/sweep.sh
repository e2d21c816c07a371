#!/usr/bin/env bash
# Loopback GB/s over chunk size, channels and emulator sockets per comm, host
# and CUDA memory, in interleaved repetitions: the measurements behind the
# TCPX_P2P_CHUNK_BYTES and TCPX_P2P_NUM_CHANNELS defaults and the sockets
# scripts/tcpx_env.sh sets (docs/performance.md).
#   BUILD=build [CHUNKS="512K 1M 2M 4M"] [CHANNELS="1 2 4"] [SOCKS=2] \
#     [MEMS="host cuda"] scripts/sweep.sh [reps (3)] [size (256M)]
# SOCKS are NCCL_NSOCKS_PERTHREAD values (one socket thread per comm).  Host
# rows run with TCPX_EMU_BOUNCE=off; CUDA rows only where a GPU is seen.
set -euo pipefail

usage() {
	cat <<'USAGE'
usage: [BUILD=build] [CHUNKS="512K 1M 2M 4M"] [CHANNELS="1 2 4"] [SOCKS=2]
       [MEMS="host cuda"] scripts/sweep.sh [reps (3)] [size (256M)]
Loopback GB/s of tcpx_perf over the emulator for every chunk size, channel
count and NCCL_NSOCKS_PERTHREAD value (SOCKS), host and CUDA memory (CUDA
only where a GPU is seen), repeated reps times, interleaved.  One line per
run: rep=R mem=M channels=C socks=S chunk=K GB/s=X.
  -h, --help  this text
USAGE
}

case ${1:-} in
-h|--help) usage; exit 0 ;;
esac
if [ $# -gt 2 ] || ! [[ ${1:-3} =~ ^[1-9][0-9]*$ ]] || [[ ${2:-256M} == -* ]]; then
	usage >&2
	exit 2
fi
build=${BUILD:-build}
perf=$build/bin/tcpx_perf
plugin=$build/lib/libnccl-net-tcpxemu.so
reps=${1:-3}
size=${2:-256M}
read -ra chunks <<<"${CHUNKS:-512K 1M 2M 4M}"
read -ra chans <<<"${CHANNELS:-1 2 4}"
read -ra socks <<<"${SOCKS:-2}"
read -ra mems <<<"${MEMS:-host cuda}"
have_gpu=0
nvidia-smi -L >/dev/null 2>&1 && have_gpu=1
for ((r = 1; r <= reps; r++)); do
	for mem in "${mems[@]}"; do
		[[ $mem == cuda && $have_gpu == 0 ]] && continue
		for ch in "${chans[@]}"; do
			for so in "${socks[@]}"; do
				for chunk in "${chunks[@]}"; do
					args=(loopback --mem "$mem" --channels "$ch" --chunk "$chunk"
						--size "$size" -n 10 -w 2 -q)
					env=(TCPX_P2P_PLUGIN="$plugin" NCCL_NSOCKS_PERTHREAD="$so"
						NCCL_SOCKET_NTHREADS=1)
					if [[ $mem == cuda ]]; then
						args+=(--gpu 0,0)
					else
						env+=(TCPX_EMU_BOUNCE=off)
					fi
					gbps=$(env "${env[@]}" "$perf" "${args[@]}" 2>/dev/null |
						tail -1 | awk '{print $4}')
					echo "rep=$r mem=$mem channels=$ch socks=$so chunk=$chunk GB/s=${gbps:--}"
				done
			done
		done
	done
done
