#!/usr/bin/env bash
# The library's object files, as a call graph (A -> B: A uses a symbol B
# defines), read from nm (defined against undefined symbols of each
# object).  The graph must have no cycle: the objects stand in floors, and
# calls go down only (docs/architecture.md, "Inside src/core").  Prints
# every pair of objects that call each other (once: not again as a loop of
# two), and every longer loop, each edge with one symbol that makes it,
# every call into the API floor (core/api/) from outside it, and every
# public call (a tcpx_p2p_* symbol) defined outside core/api/ and the
# objects allowed one below.  A pair fails the check unless the allowlist
# below names it with a reason; a longer loop, a call into api/ or a public
# call elsewhere always fails.
# Usage: scripts/check_layers.sh OBJ...   (an argument may be a ;-list, as
# CMake's $<TARGET_OBJECTS:...> gives it; an object is named by its path
# below CMake's "<target>.dir/" less ".o", e.g. core/close/list.c)
# Exit: 0 none of these, 1 some, 2 usage or nm failure.
set -euo pipefail

# "a b  reason": a pair allowed to stay, each side as the objects are named.
allowlist=(
)

# "object  reason": the objects outside core/api/ that define public calls
# (tcpx_p2p_*): the top floor beside api/ (sessions, listeners, the
# built-in rendezvous) and the util layer's own.  An entry that no longer
# matches is reported, to be removed.
public_allowlist=(
	"core/session.c  session_create, _destroy, _progress, _query: the session, the top floor"
	"core/setup/listener.c  listen, listener_blob, connect, listener_destroy: set-up, the top floor"
	"core/setup/rendezvous.c  server_*, dial: the built-in rendezvous, the top floor"
	"util/config.c  config_init, config_count, config_describe: the settings table"
	"util/error.c  strerror, last_error"
	"util/log.c  set_log"
	"util/version.c  version"
)

objs=()
for a in "$@"; do
	IFS=';' read -r -a parts <<<"$a"
	for p in "${parts[@]}"; do
		[ -n "$p" ] && objs+=("$p")
	done
done
if [ ${#objs[@]} -eq 0 ]; then
	echo "usage: $0 OBJ..." >&2
	exit 2
fi
command -v nm >/dev/null || { echo "check_layers: nm not found" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for o in "${objs[@]}"; do
	name=${o##*.dir/}
	name=${name%.o}
	# defined: every global symbol it defines (text, data, bss, weak)
	nm -g --defined-only "$o" | awk -v n="$name" 'NF >= 3 { print $3 "\t" n }' >>"$tmp/def"
	nm -u "$o" | awk -v n="$name" '{ print $NF "\t" n }' >>"$tmp/use"
done
sort -u "$tmp/def" -o "$tmp/def"
sort -u "$tmp/use" -o "$tmp/use"
# caller -> callee edges, each with one symbol that makes it
join -t $'\t' "$tmp/use" "$tmp/def" | awk -F'\t' '$2 != $3 { print $2 "\t" $3 "\t" $1 }' |
	sort -u -k1,1 -k2,2 >"$tmp/edges"
awk -F'\t' '
	{ key = $1 SUBSEP $2; sym[key] = sym[key] ? sym[key] : $3; edge[key] = 1 }
	END {
		for (k in edge) {
			split(k, p, SUBSEP)
			if (p[1] < p[2] && ((p[2] SUBSEP p[1]) in edge))
				print p[1] " " p[2] "\t" sym[k] " / " sym[p[2] SUBSEP p[1]]
		}
	}' "$tmp/edges" | sort >"$tmp/pairs"

bad=0
while IFS=$'\t' read -r pair why; do
	allowed=""
	for entry in "${allowlist[@]}"; do
		set -- $entry
		if [ "$1 $2" = "$pair" ] || [ "$2 $1" = "$pair" ]; then
			shift 2
			allowed="$*"
		fi
	done
	if [ -n "$allowed" ]; then
		echo "allowed: $pair ($why): $allowed"
	else
		echo "mutual:  $pair ($why)"
		bad=1
	fi
done <"$tmp/pairs"

# Loops of any length: a depth-first search from every object; each edge
# back to an object on the search's path closes a loop, printed from that
# object round to it again.  Loops made only of allowed pairs pass.
for entry in "${allowlist[@]}"; do
	set -- $entry
	printf '%s\t%s\n%s\t%s\n' "$1" "$2" "$2" "$1"
done >"$tmp/allowed"
awk -F'\t' '
	FILENAME == ARGV[1] { ok[$1 SUBSEP $2] = 1; next }
	{
		if (!(($1 SUBSEP $2) in ok)) {
			adj[$1] = adj[$1] " " $2
			sym[$1 SUBSEP $2] = $3
		}
		node[$1] = 1
		node[$2] = 1
	}
	function dfs(v,    n, i, j, w, ws, line) {
		color[v] = 1
		path[++depth] = v
		n = split(adj[v], ws, " ")
		for (i = 1; i <= n; i++) {
			w = ws[i]
			if (color[w] == 1) {
				for (j = depth; path[j] != w; j--)
					;
				if (j == depth - 1)
					continue # two objects: printed as their pair
				line = "loop:    " w
				for (; j < depth; j++)
					line = line " -> " path[j + 1] " (" sym[path[j] SUBSEP path[j + 1]] ")"
				print line " -> " w " (" sym[v SUBSEP w] ")"
				loops++
			} else if (!color[w]) {
				dfs(w)
			}
		}
		depth--
		color[v] = 2
	}
	END {
		PROCINFO["sorted_in"] = "@ind_str_asc"
		for (v in node)
			if (!color[v])
				dfs(v)
		print loops + 0 >"/dev/stderr"
	}' "$tmp/allowed" "$tmp/edges" 2>"$tmp/nloops"
loops=$(cat "$tmp/nloops")
[ "$loops" -eq 0 ] || bad=1

# The API floor (src/core/api/) is the top: no object outside it calls in.
awk -F'\t' '$2 ~ /^core\/api\// && $1 !~ /^core\/api\// {
	print "into api: " $1 " -> " $2 " (" $3 ")" }' "$tmp/edges" >"$tmp/intoapi"
cat "$tmp/intoapi"
[ ! -s "$tmp/intoapi" ] || bad=1

# Public calls live on the API floor, or in an object the allowlist names.
for entry in "${public_allowlist[@]}"; do
	set -- $entry
	echo "$1"
done | sort -u >"$tmp/pubok"
awk -F'\t' '$1 ~ /^tcpx_p2p_/ && $2 !~ /^core\/api\// { print $2 "\t" $1 }' "$tmp/def" |
	sort -k1,1 -k2,2 >"$tmp/pubdef"
awk -F'\t' 'FILENAME == ARGV[1] { ok[$1] = 1; next }
	!($1 in ok) { print "public:  " $1 " (" $2 ")" }' "$tmp/pubok" "$tmp/pubdef" >"$tmp/public"
cat "$tmp/public"
[ ! -s "$tmp/public" ] || bad=1
cut -f1 "$tmp/pubdef" | sort -u | comm -23 "$tmp/pubok" - | sed 's/^/unused:  public allowlist entry /'
echo "check_layers: $(wc -l <"$tmp/pairs") mutual pair(s), $loops loop(s), $(wc -l <"$tmp/intoapi") call(s) into core/api, $(wc -l <"$tmp/public") public call(s) outside it among ${#objs[@]} objects"
exit $bad
