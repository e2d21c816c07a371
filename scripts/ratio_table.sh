#!/usr/bin/env bash
# The ratio table in one command: raw loopback TCP (tcp_probe), host
# memory and CUDA memory over the emulator (tcpx_perf loopback) at the same
# sockets (2 per channel), one line per channel count.
# Usage: BUILD=build-gpu scripts/ratio_table.sh [size (256M)] [channels (1 2 4 8)]
#   Without a GPU the CUDA column says "-".  Host rows use TCPX_EMU_BOUNCE=off
#   (with a GPU the emulator would otherwise bounce host receives through
#   device memory).
set -u

usage() {
	cat <<'USAGE'
usage: [BUILD=build] scripts/ratio_table.sh [size (256M)] [channels (1 2 4 8)]
One line per channel count: raw loopback TCP (tcp_probe), host and CUDA
memory over the emulator (tcpx_perf loopback) at 2 sockets per channel,
their GB/s and ratios.  Without a GPU the CUDA column says "-".
  -h, --help  this text
USAGE
}

for a in "$@"; do
	case $a in
	-h|--help) usage; exit 0 ;;
	-*) usage >&2; exit 2 ;;
	esac
done
for a in "${@:2}"; do
	[[ $a =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }
done
build=${BUILD:-build}
size=${1:-256M}
shift || true
chans=${*:-1 2 4 8}
plugin=$build/lib/libnccl-net-tcpxemu.so
gbps() { grep -v '^#' | awk 'NF > 3 { v = $4 } END { print v ? v : "-" }'; }
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "# $size, GB/s (10^9 B/s); sockets = channels x 2"
echo "# sockets  raw  host  cuda  host/raw  cuda/host"
for ch in $chans; do
	s=$((ch * 2))
	raw=$("$build/bin/tcp_probe" loopback -S "$s" -s "$size" -n 10 -w 2 2>/dev/null | gbps)
	host=$(TCPX_EMU_BOUNCE=off TCPX_P2P_PLUGIN=$plugin "$build/bin/tcpx_perf" loopback \
		--mem host --channels "$ch" --size "$size" -n 10 -w 2 -q 2>/dev/null | gbps)
	cuda=-
	[ "$ngpu" -ge 1 ] && cuda=$(TCPX_P2P_PLUGIN=$plugin "$build/bin/tcpx_perf" loopback \
		--mem cuda --gpu 0 --channels "$ch" --size "$size" -n 10 -w 2 -q 2>/dev/null | gbps)
	awk -v s="$s" -v r="$raw" -v h="$host" -v c="$cuda" 'BEGIN {
		hr = (r + 0 > 0 && h + 0 > 0) ? sprintf("%.2f", h / r) : "-"
		ch = (h + 0 > 0 && c + 0 > 0) ? sprintf("%.2f", c / h) : "-"
		printf "%9s  %s  %s  %s  %s  %s\n", s, r, h, c, hr, ch }'
done
