#!/usr/bin/env bash
# Run examples/send_recv as two processes over 127.0.0.1: the server takes
# any free port (port 0) and prints it; both must exit 0 and say "verified".
# Usage: example_test.sh PATH/TO/send_recv
set -u

bin=$1
tmp=$(mktemp -d)
spid=
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# timeout(1) bounds each side below the CTest limit so no process outlives a failure.
timeout 90 "$bin" server 0 >"$tmp/server.out" 2>"$tmp/server.err" &
spid=$!
port=
for _ in $(seq 200); do
	port=$(sed -n 's/^listening on port \([0-9][0-9]*\)$/\1/p' "$tmp/server.out")
	[ -n "$port" ] && break
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$port" ]; then
	echo "FAIL: the server printed no port" >&2
	cat "$tmp/server.out" "$tmp/server.err" >&2
	exit 1
fi

timeout 90 "$bin" client 127.0.0.1 "$port" >"$tmp/client.out" 2>"$tmp/client.err"
crc=$?
wait "$spid"
src=$?
spid=
for side in server client; do
	echo "--- $side"
	cat "$tmp/$side.out" "$tmp/$side.err"
done
status=0
[ "$src" -eq 0 ] || { echo "FAIL: server exited $src" >&2; status=1; }
[ "$crc" -eq 0 ] || { echo "FAIL: client exited $crc" >&2; status=1; }
for side in server client; do
	grep -q "^$side: sent and received 67108864 bytes, verified" "$tmp/$side.out" ||
		{ echo "FAIL: $side did not report verified bytes" >&2; status=1; }
done
[ "$status" -eq 0 ] && echo "PASS: send_recv server and client exchanged 64 MiB each way"
exit "$status"
