#!/usr/bin/env bash
# The library's own instructions per chunk (method in docs/performance.md
# "Library cost per chunk").  bench/chunk_cost moves T
# transfers of C chunks between two sessions of one process over MemNet, an
# in-process plugin that does next to nothing, and runs under callgrind twice,
# with T1 and T2 transfers: the self instructions of libtcpx_p2p.so (not libc,
# not the plugin, not the kernel) of the second run minus the first, over
# (T2 - T1) x C chunks, is the library's cost per chunk, both peers together,
# set-up and tear-down cancelled.
#
#   scripts/chunk_cost.sh [options] [-- chunk_cost options]
#     --build DIR      build tree (default build-cc, configured RelWithDebInfo if absent)
#     --no-build       use the build tree as it is (bin/chunk_cost must exist)
#     --t1 N --t2 N    transfer counts of the two runs (default 200, 400)
#     --chunks LIST    chunks per transfer, comma list (default 16); with two or more,
#                      the cost is also split into per transfer + per chunk
#     --modes LIST     send,vec,write,write-vec (default send,vec,write)
#     --top N          the library's N costliest functions per chunk (default 8; 0: none)
#     --limit N        exit 1 when a mode costs more than N instructions per chunk
#     --keep DIR       keep the callgrind files and logs there
#     --json FILE      the records as a JSON array
# Exit status: 0, 1 (a run failed or --limit exceeded), 2 (usage).
set -euo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

build="build-cc"
do_build=1
t1=200
t2=400
chunks=16
modes=send,vec,write
top=8
limit=
keep=
json=
extra=()

# usage [status]: the header's usage lines, on stderr unless asked for.
usage() {
	local rc=${1:-2} fd=2
	[ "$rc" = 0 ] && fd=1
	sed -n '/^#   scripts/,/^# Exit/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&"$fd"
	exit "$rc"
}

while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--no-build) do_build=0; shift ;;
	--t1) t1=$2; shift 2 ;;
	--t2) t2=$2; shift 2 ;;
	--chunks) chunks=$2; shift 2 ;;
	--modes) modes=$2; shift 2 ;;
	--top) top=$2; shift 2 ;;
	--limit) limit=$2; shift 2 ;;
	--keep) keep=$2; shift 2 ;;
	--json) json=$2; shift 2 ;;
	--) shift; extra=("$@"); break ;;
	-h|--help) usage 0 ;;
	*) echo "chunk_cost.sh: unknown option $1" >&2; usage ;;
	esac
done
[[ $t1 =~ ^[0-9]+$ && $t2 =~ ^[0-9]+$ && $t2 -gt $t1 ]] ||
	{ echo "chunk_cost.sh: want 0 <= t1 < t2" >&2; exit 2; }
[[ $chunks =~ ^[0-9]+(,[0-9]+)*$ && $top =~ ^[0-9]+$ ]] || usage
[[ -z $limit || $limit =~ ^[0-9]+$ ]] || usage
IFS=, read -r -a chunk_list <<<"$chunks"
IFS=, read -r -a mode_list <<<"$modes"
declare -A mode_flags=([send]="" [vec]="--vec" [write]="--write" [write-vec]="--write --vec")
for m in "${mode_list[@]}"; do
	[[ -v mode_flags[$m] ]] || { echo "chunk_cost.sh: unknown mode $m" >&2; exit 2; }
done

command -v valgrind >/dev/null 2>&1 || tp_install_deps valgrind
command -v python3 >/dev/null 2>&1 || tp_install_deps
case $build in /*) ;; *) build=$tp_root/$build ;; esac
if [ "$do_build" = 0 ]; then
	[ -x "$build/bin/chunk_cost" ] || { echo "chunk_cost.sh: no $build/bin/chunk_cost" >&2; exit 2; }
elif [ ! -f "$build/CMakeCache.txt" ]; then
	mkdir -p "$build"
	tp_log "configuring $build (RelWithDebInfo)"
	tp_build "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTCPX_P2P_WERROR=ON
else
	cmake --build "$build" -j"$(nproc)" --target chunk_cost >/dev/null
fi
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
btype=$(cache CMAKE_BUILD_TYPE)
if [ -n "$(cache TCPX_P2P_SANITIZE)" ]; then
	echo "chunk_cost.sh: $build is a sanitizer build; valgrind needs a plain one" >&2
	exit 2
fi
case $btype in
RelWithDebInfo|Release) ;;
*) tp_log "warning: $build is a ${btype:-default} build: counts differ from RelWithDebInfo" ;;
esac
[ "$(cache TCPX_P2P_TEST_HOOKS)" = ON ] && tp_log "warning: $build has TCPX_P2P_TEST_HOOKS on"

if [ -n "$keep" ]; then
	mkdir -p "$keep"
	work=$keep
else
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi

records=()
over=0
printf '# libtcpx_p2p.so instructions (callgrind Ir, self) per chunk, both peers; runs of %d and %d transfers\n' "$t1" "$t2"
printf '# build %s (%s), commit %s, %s, chunk_cost options: %s\n' "$build" "${btype:-?}" \
	"$(git -C "$tp_root" rev-parse --short HEAD 2>/dev/null || echo '?')" "$(valgrind --version)" \
	"${extra[*]:-(defaults)}"
printf '%-10s %6s %10s %12s %14s %15s\n' mode chunks "Ir/chunk" "Ir/transfer" "plugin/chunk" "program/chunk"
for m in "${mode_list[@]}"; do
	fit=()
	for c in "${chunk_list[@]}"; do
		outs=()
		for t in "$t1" "$t2"; do
			base=$work/$m-c$c-t$t
			# shellcheck disable=SC2086
			if ! valgrind --tool=callgrind --callgrind-out-file="$base.out" \
				"$build/bin/chunk_cost" -n "$t" -c "$c" ${mode_flags[$m]} "${extra[@]}" \
				>"$base.log" 2>&1; then
				echo "chunk_cost.sh: $m, $c chunks, $t transfers failed:" >&2
				tail -20 "$base.log" >&2
				exit 1
			fi
			outs+=("$base.out")
		done
		rec=$(python3 "$tp_root/scripts/callgrind_delta.py" --json --top "$top" \
			"${outs[0]}" $((t1 * c)) "${outs[1]}" $((t2 * c)))
		read -r per plug prog < <(python3 -c 'import json,sys; r=json.loads(sys.argv[1]);
print("%.1f %.1f %.1f" % (r["lib_per_unit"], r["plugin_per_unit"], r["program_per_unit"]))' "$rec")
		printf '%-10s %6d %10s %12s %14s %15s\n' "$m" "$c" "$per" \
			"$(awk -v p="$per" -v c="$c" 'BEGIN { printf "%.0f", p * c }')" "$plug" "$prog"
		records+=("$(python3 -c 'import json,sys; r=json.loads(sys.argv[1]);
r.update(mode=sys.argv[2], chunks_per_transfer=int(sys.argv[3]), transfers=[int(sys.argv[4]), int(sys.argv[5])]);
print(json.dumps(r))' "$rec" "$m" "$c" "$t1" "$t2")")
		fit+=("$c $per")
		if [ -n "$limit" ] && awk -v p="$per" -v l="$limit" 'BEGIN { exit !(p > l) }'; then
			over=1
		fi
	done
	if [ ${#fit[@]} -ge 2 ]; then
		# Ir per transfer = a + b x chunks, through the smallest and largest count.
		printf '%s\n' "${fit[@]}" | sort -n | awk -v m="$m" '
			NR == 1 { c1 = $1; y1 = $1 * $2 } { c2 = $1; y2 = $1 * $2 }
			END { b = (y2 - y1) / (c2 - c1); printf "%-10s fit: %.0f per transfer + %.1f per chunk (%d and %d chunks)\n", m, y1 - b * c1, b, c1, c2 }'
	fi
done

if [ "$top" -gt 0 ]; then
	for r in "${records[@]}"; do
		python3 -c 'import json,sys; r=json.loads(sys.argv[1])
print("# %s, %d chunks/transfer: costliest library functions, Ir per chunk (self, inlined callees included)" % (r["mode"], r["chunks_per_transfer"]))
for f in r["top"]: print("  %8.1f  %s (%s)" % (f["per_unit"], f["function"], f["file"].split("/src/")[-1]))' "$r"
	done
fi
if [ -n "$json" ]; then
	(IFS=,; printf '[%s]\n' "${records[*]}") >"$json"
fi
if [ "$over" = 1 ]; then
	echo "chunk_cost.sh: above the limit of $limit instructions per chunk" >&2
	exit 1
fi
