#!/usr/bin/env bash
# scripts/check_layers.sh on objects made here: a chain passes; a loop of
# three (no two of them calling each other) fails and is printed; a mutual
# pair fails and is printed once (not again as a loop of two); a call into
# core/api/ from outside it fails; a public call (tcpx_p2p_*) defined
# outside core/api/ and the allowed objects fails.
# Usage: check_layers_selftest.sh CC
set -euo pipefail
cc=${1:-cc}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/t.dir"

# obj NAME CALLEE...: NAME.o defines NAME() and calls each callee.
obj() {
	local n=$1 body="" decl=""
	shift
	for f in "$@"; do
		decl+="void $f(void);"
		body+="$f();"
	done
	echo "$decl void $n(void) { $body }" >"$tmp/$n.c"
	"$cc" -c -o "$tmp/t.dir/$n.o" "$tmp/$n.c"
}
check() { bash "$root/scripts/check_layers.sh" "$@" >"$tmp/out" 2>&1; }

obj a b
obj b c
obj c
check "$tmp/t.dir/a.o;$tmp/t.dir/b.o" "$tmp/t.dir/c.o" ||
	{ cat "$tmp/out"; echo "FAIL: a chain was refused"; exit 1; }
grep -q '0 mutual pair(s), 0 loop(s), 0 call(s) into core/api, 0 public call(s) outside it among 3 objects' "$tmp/out" ||
	{ cat "$tmp/out"; echo "FAIL: a chain's summary"; exit 1; }

obj c a
if check "$tmp/t.dir/a.o" "$tmp/t.dir/b.o" "$tmp/t.dir/c.o"; then
	cat "$tmp/out"
	echo "FAIL: a loop of three passed"
	exit 1
fi
grep -Eq '^loop: +(a -> b \(b\) -> c \(c\) -> a \(a\)|b -> c \(c\) -> a \(a\) -> b \(b\)|c -> a \(a\) -> b \(b\) -> c \(c\))$' "$tmp/out" ||
	{ cat "$tmp/out"; echo "FAIL: the loop is not printed"; exit 1; }

obj b a
obj c
if check "$tmp/t.dir/a.o" "$tmp/t.dir/b.o" "$tmp/t.dir/c.o"; then
	cat "$tmp/out"
	echo "FAIL: a mutual pair passed"
	exit 1
fi
grep -q '^mutual:  a b' "$tmp/out" || { cat "$tmp/out"; echo "FAIL: the pair"; exit 1; }
if grep -q '^loop:' "$tmp/out" || ! grep -q ' 1 mutual pair(s), 0 loop(s),' "$tmp/out"; then
	cat "$tmp/out"
	echo "FAIL: the pair is reported again as a loop"
	exit 1
fi
mkdir -p "$tmp/t.dir/core/api"
obj b
echo 'void a(void); void core_api_post(void) { a(); }' >"$tmp/api.c"
"$cc" -c -o "$tmp/t.dir/core/api/post.o" "$tmp/api.c"
check "$tmp/t.dir/a.o" "$tmp/t.dir/b.o" "$tmp/t.dir/core/api/post.o" ||
	{ cat "$tmp/out"; echo "FAIL: the API floor calling down was refused"; exit 1; }
obj b core_api_post
if check "$tmp/t.dir/a.o" "$tmp/t.dir/b.o" "$tmp/t.dir/core/api/post.o"; then
	cat "$tmp/out"
	echo "FAIL: a call into core/api passed"
	exit 1
fi
grep -q '^into api: b -> core/api/post (core_api_post)$' "$tmp/out" ||
	{ cat "$tmp/out"; echo "FAIL: the call into api is not printed"; exit 1; }

# Public calls: on the API floor they pass; elsewhere they fail, unless the
# object is allowed (core/session.c is).
obj b
obj tcpx_p2p_thing
mkdir -p "$tmp/t.dir/core"
echo 'void tcpx_p2p_session_thing(void) {}' >"$tmp/session.c"
"$cc" -c -o "$tmp/t.dir/core/session.c.o" "$tmp/session.c"
check "$tmp/t.dir/a.o" "$tmp/t.dir/b.o" "$tmp/t.dir/core/api/post.o" \
	"$tmp/t.dir/core/session.c.o" ||
	{ cat "$tmp/out"; echo "FAIL: a public call in an allowed object was refused"; exit 1; }
echo 'void tcpx_p2p_thing(void) {}' >"$tmp/api2.c"
"$cc" -c -o "$tmp/t.dir/core/api/thing.o" "$tmp/api2.c"
check "$tmp/t.dir/a.o" "$tmp/t.dir/core/api/thing.o" ||
	{ cat "$tmp/out"; echo "FAIL: a public call on the API floor was refused"; exit 1; }
if check "$tmp/t.dir/a.o" "$tmp/t.dir/tcpx_p2p_thing.o"; then
	cat "$tmp/out"
	echo "FAIL: a public call below the API floor passed"
	exit 1
fi
grep -q '^public:  tcpx_p2p_thing (tcpx_p2p_thing)$' "$tmp/out" ||
	{ cat "$tmp/out"; echo "FAIL: the public call below the floor is not printed"; exit 1; }
echo "check_layers_selftest: ok"
