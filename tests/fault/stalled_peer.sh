#!/usr/bin/env bash
# SIGSTOP one side of a running verified transfer: its sockets stay open but
# nothing moves, so only a deadline can end the wait.  The survivor must fail
# on its own with a timeout error, not before its --timeout; then the
# stopped side is killed.
# Usage: stalled_peer.sh BUILD_DIR client|server   (the side to stop)
# rc_NAME, el_NAME and pid_NAME are set by name in fault_lib.sh.
# shellcheck disable=SC2154
source "$(dirname "$0")/fault_lib.sh"
tp_setup "${1:-}"
victim=${2:-client}
survivor=$(tp_peer_of "$victim")
tmo=3000

tp_start_pair $tmo
cpid=cpid_$victim
tp_note "stopping the $victim (pid ${!cpid}) mid-run"
kill -STOP "${!cpid}"
tp_wait_exit "$survivor" "$tp_hang_ms"
el=el_$survivor rc=rc_$survivor
tp_note "$survivor exited with ${!rc} after ${!el} ms"
kill -KILL "${!cpid}"
tp_expect_failure "$survivor" '^tcpx_perf: .*timed out'
# A deadline that fires long before --timeout would be a bug too: the stop
# came after a completed iteration, so at most one iteration's slack is due.
[ "${!el}" -ge $((tmo - 1000)) ] ||
	tp_fail "$survivor gave up after ${!el} ms, before its ${tmo} ms timeout"
tp_note "$survivor said: $(grep '^tcpx_perf: ' "$tmp/$survivor.err" | grep -v iteration |
	tail -n 1)"
echo "PASS: $survivor timed out cleanly with the $victim stopped"
