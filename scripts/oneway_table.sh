#!/usr/bin/env bash
# One-way latency against raw TCP in one run: for each size, alternating,
# raw loopback TCP (tcp_probe loopback: the message over S sockets, a
# one-byte answer) and the library over the emulator (tcpx_perf loopback,
# host memory, one transfer at a time), repeated; one line per repetition
# with both p50s and averages and their ratios, then each ratio's range.
# With a bounce mode, raw TCP runs a second time with --bounce (received
# into shuffled 4 KiB pages and copied out by the answering thread: the
# same second pass over the bytes that a bounce receive's unpack makes),
# and the library's p50 is also given as a ratio to that.
# Usage: [BUILD=build] [BASE=dir] [BOUNCE=host|off] [CHANNELS=1] [SOCKS=S]
#        [ITERS=300] scripts/oneway_table.sh [reps (3)] [sizes (4K 256K 1M 4M)]
#   BASE: a second build (bin/, lib/) run after each of BUILD's, its rows
#   marked "base" (a before/after comparison in the same run).
#   S defaults to 2 sockets per channel, as the emulator's comms have.
set -u

usage() {
	cat <<'USAGE'
usage: [BUILD=build] [BASE=dir] [BOUNCE=host|off] [CHANNELS=1] [SOCKS=S] [ITERS=300]
       scripts/oneway_table.sh [reps (3)] [sizes (4K 256K 1M 4M)]
Alternates raw loopback TCP (tcp_probe: S sockets, a one-byte answer) and
tcpx_perf loopback (host memory, the emulator with TCPX_EMU_BOUNCE=BOUNCE)
per size and repetition; prints p50 and average of each and the ratios
library/raw; with BOUNCE=host also raw TCP with --bounce (a bounce buffer's
second copy) and the ratio library/that, and for both runs the CPU time a
transfer costs.  BASE names a second build run right after BUILD's ("base"
rows).
  -h, --help  this text
USAGE
}

for a in "$@"; do
	case $a in
	-h|--help) usage; exit 0 ;;
	-*) usage >&2; exit 2 ;;
	esac
done
build=${BUILD:-build}
base=${BASE:-}
bounce=${BOUNCE:-host}
ch=${CHANNELS:-1}
socks=${SOCKS:-$((ch * 2))}
iters=${ITERS:-300}
reps=${1:-3}
shift || true
sizes=${*:-4K 256K 1M 4M}
[[ $reps =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }

# p50, average, voluntary switches and CPU µs per transfer of a table (the
# last two from the --switches line, "-" where a build has none)
row() { awk '/context switches/ { v = $4; for (i = 2; i < NF; i++) if ($i == "us" && $(i + 1) == "of") c = $(i - 1) }
	/^#/ { next } NF >= 6 { a = $3; p = $5 }
	END { print (p ? p : "-"), (a ? a : "-"), (v != "" ? v : "-"), (c != "" ? c : "-") }'; }
lib() { # dir: p50 avg voluntary-switches cpu-us of one tcpx_perf run
	local sw=
	# Builds older than --switches print "-" in that column.
	"$1/bin/tcpx_perf" --help 2>&1 | grep -q -- --switches && sw=--switches
	LD_LIBRARY_PATH=$1/lib TCPX_P2P_PLUGIN=$1/lib/libnccl-net-tcpxemu.so \
		TCPX_EMU_BOUNCE=$bounce "$1/bin/tcpx_perf" loopback --mem host --channels "$ch" \
		-s "$size" -n "$iters" -w 20 -q $sw 2>/dev/null | row
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 > 0 && b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }'; }

echo "# one way, host memory, $ch channel(s), emulator bounce=$bounce; raw: $socks socket(s)"
echo "# us; ratio = library / raw TCP, each pair measured back to back; vcsw = the library"
echo "# run's voluntary context switches per transfer (tcpx_perf --switches); cpu = CPU µs a"
echo "# transfer in the whole process (both ends, the plugin's threads), lib and raw"
[ "$bounce" = off ] || echo "# rawb: raw TCP --bounce (pages, then a copy), p50_xb = lib_p50 / rawb_p50"
printf "# %-6s %4s %-5s %9s %9s %9s %9s %8s %8s %6s %9s %8s %8s %8s\n" size rep build lib_p50 \
	lib_avg raw_p50 raw_avg p50_x avg_x vcsw rawb_p50 p50_xb lib_cpu raw_cpu
for size in $sizes; do
	for r in $(seq 1 "$reps"); do
		read -r rp ra _ rc < <("$build/bin/tcp_probe" loopback -S "$socks" -s "$size" \
			-n "$iters" -w 20 --switches 2>/dev/null | row)
		bp=-
		[ "$bounce" = off ] || read -r bp _ _ < <("$build/bin/tcp_probe" loopback \
			-S "$socks" -s "$size" -n "$iters" -w 20 --bounce 2>/dev/null | row)
		for b in "$build" $base; do
			read -r lp la lv lc < <(lib "$b")
			tag=new
			[ "$b" = "$build" ] || tag=base
			printf "  %-6s %4s %-5s %9s %9s %9s %9s %8s %8s %6s %9s %8s %8s %8s\n" "$size" \
				"$r" "$tag" "$lp" "$la" "$rp" "$ra" "$(ratio "$lp" "$rp")" \
				"$(ratio "$la" "$ra")" "$lv" "$bp" "$(ratio "$lp" "$bp")" "$lc" "$rc"
		done
	done
done | awk '
	{ print }
	/^  / { k = $1 " " $3; x = $8 + 0; y = $12 + 0
		if (x > 0) { if (!(k in lo) || x < lo[k]) lo[k] = x; if (!(k in hi) || x > hi[k]) hi[k] = x
			order[k] = ++n }
		if (x > 0 && y > 0) { nb++
			if (!(k in blo) || y < blo[k]) blo[k] = y; if (!(k in bhi) || y > bhi[k]) bhi[k] = y } }
	END { print "# p50 ratio ranges (library/raw" (nb ? "; library/raw --bounce" : "") "):"
		for (k in order) printf "#   %-14s %.2f-%.2f%s\n", k, lo[k], hi[k],
			(k in blo) ? sprintf("   %.2f-%.2f", blo[k], bhi[k]) : "" }'
