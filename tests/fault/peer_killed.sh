#!/usr/bin/env bash
# kill -9 one side of a running verified transfer: the survivor must notice
# (the kernel closes the dead side's sockets), exit non-zero on its own (by
# its --timeout at the latest), and say on stderr that the peer went away.
# Usage: peer_killed.sh BUILD_DIR client|server   (the side to kill)
# rc_NAME, el_NAME and pid_NAME are set by name in fault_lib.sh.
# shellcheck disable=SC2154
source "$(dirname "$0")/fault_lib.sh"
tp_setup "${1:-}"
victim=${2:-client}
survivor=$(tp_peer_of "$victim")
tmo=3000

tp_start_pair $tmo
cpid=cpid_$victim
tp_note "killing the $victim (pid ${!cpid}) mid-run"
kill -KILL "${!cpid}"
tp_wait_exit "$survivor" "$tp_hang_ms"
el=el_$survivor rc=rc_$survivor
tp_note "$survivor exited with ${!rc} after ${!el} ms"
tp_expect_failure "$survivor" \
	'^tcpx_perf: .*(closed|reset|broken pipe|failed|timed out|connection)'
tp_note "$survivor said: $(grep '^tcpx_perf: ' "$tmp/$survivor.err" | grep -v iteration |
	tail -n 1)"
echo "PASS: $survivor failed cleanly after the $victim was killed"
