#!/usr/bin/env bash
# Each script a user runs answers -h and --help with its usage on stdout and
# exit 0, and does nothing else: the programs that would install, build,
# test or benchmark are replaced on PATH by stubs that record being called,
# and BUILD names an empty directory (the benchmark scripts run its bin/).
# Usage: help.sh SCRIPT...   (paths of the scripts to check)
set -u

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/stubs"
for p in apt-get dpkg-query sudo cmake ctest make nvidia-smi python3 tcpx_perf; do
	printf '#!/bin/sh\necho "%s $*" >>"%s"\nexit 1\n' "$p" "$tmp/called" >"$tmp/stubs/$p"
	chmod +x "$tmp/stubs/$p"
done
status=0
bad() { printf 'FAIL: %s\n' "$*" >&2; status=1; }

for script in "$@"; do
	for flag in -h --help; do
		rm -f "$tmp/called"
		PATH="$tmp/stubs:$PATH" BUILD="$tmp/stubs" bash "$script" "$flag" >"$tmp/out" \
			2>"$tmp/err"
		rc=$?
		name="$(basename "$script") $flag"
		[ "$rc" -eq 0 ] || bad "$name: exit $rc: $(head -c 300 "$tmp/err")"
		grep -qi '^usage' "$tmp/out" || bad "$name: no usage on stdout"
		[ ! -e "$tmp/called" ] || bad "$name: ran $(tr '\n' ';' <"$tmp/called")"
	done
done
exit $status
