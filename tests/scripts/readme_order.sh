#!/usr/bin/env bash
# The README's order on a fresh clone: scripts/quickstart.sh configures
# build/ without tests, then scripts/test.sh reuses that directory.  Its
# release configure must bring the directory to the full test list (as many
# tests as a directory test.sh configured alone), and its ctest must fail on
# a directory with no tests instead of printing "No tests were found" and
# passing.  Configures only, in scratch directories, with the option lists
# and the ctest call the scripts themselves use (scripts/lib.sh).
# Usage: readme_order.sh   (CC: the compiler of the build under test)
set -u
source "$(dirname "$0")/../../scripts/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
bad() { printf 'FAIL: %s\n' "$*" >&2; status=1; }
count() { ctest --test-dir "$1" -N 2>/dev/null | sed -n 's/^Total Tests: //p'; }

tp_suite_args quickstart
tp_configure "$tmp/readme" "${tp_args[@]}" || { bad "quickstart configure"; exit 1; }
n=$(count "$tmp/readme")
[ "${n:-x}" = 0 ] || bad "quickstart's build lists ${n:-no} tests; expected 0 (BUILD_TESTING=OFF)"
if tp_ctest "$tmp/readme" >"$tmp/empty.log" 2>&1; then
	bad "ctest passed a suite with no tests"
	cat "$tmp/empty.log" >&2
fi

tp_suite_args release
tp_configure "$tmp/readme" "${tp_args[@]}" || { bad "release configure over quickstart's"; exit 1; }
tp_configure "$tmp/alone" "${tp_args[@]}" || { bad "release configure"; exit 1; }
after=$(count "$tmp/readme") alone=$(count "$tmp/alone")
echo "release suite: $after tests after quickstart, $alone configured alone"
[ "${alone:-0}" -gt 0 ] || bad "a release configure lists no tests"
[ "${after:-0}" = "${alone:-0}" ] || bad "after quickstart the release suite lists $after tests, not $alone"
exit $status
