#!/usr/bin/env bash
# A rendezvous peer that is not tcpx_p2p (or is broken): tcpx_perf must reject
# it with a clear message or time out, and exit non-zero on its own, never
# crash or hang.  tcpx_perf serves exactly one peer, so one bad peer ends it.
# Usage: bootstrap_garbage.sh BUILD_DIR client|server MODE
#   client MODE: bootstrap_peer.py dials a tcpx_perf server and misbehaves
#   server MODE: tcpx_perf dials a bootstrap_peer.py that misbehaves
# MODE: see bootstrap_peer.py.
# rc_NAME, el_NAME and pid_NAME are set by name in fault_lib.sh.
# shellcheck disable=SC2154
source "$(dirname "$0")/fault_lib.sh"
tp_setup "${1:-}"
bad=${2:-client}
mode=${3:-garbage}
# A peer that breaks the protocol is refused whenever it speaks, so those
# modes get a limit no slow scheduler reaches; a silent one is given up on
# at the limit, which the test then checks.
tmo=30000
[ "$mode" = silent ] && tmo=3000
tp_free_port port
args=(-p "$port" -s 4K -n 2 -w 0 --verify --timeout "$tmo")

# What tcpx_perf must say for each misbehaviour (the library's EPROTO/ETIMEDOUT
# text, wrapped by tcpx_perf's "accept:"/"dial:" prefix).
case $mode in
garbage) re='protocol.*bad magic' ;;
bad_len) re='protocol.*(exceeds|limit|too long)' ;;
bad_blob) re='protocol.*blob' ;;
bad_type) re='protocol.*type' ;;
silent) re='timed out' ;;
rst) re='closed|reset' ;;
crafted) re='protocol.*in-progress connect state' ;;
*) tp_fail "unknown mode $mode" ;;
esac

# The bad peer starts first and says when it is about to dial or listening,
# so that tcpx_perf's timeout never runs while Python is still starting (on a
# loaded machine that takes seconds); the dialing peer retries every 50 ms.
if [ "$bad" = client ]; then
	tp_spawn peer 90 -- python3 "$(dirname "$0")/bootstrap_peer.py" client "$mode" "$port"
	tp_wait_for peer 'peer: dialing' 60000
	tp_spawn perf 90 -- "$perf" server --bind 127.0.0.1 "${args[@]}"
else
	tp_spawn peer 90 -- python3 "$(dirname "$0")/bootstrap_peer.py" server "$mode" "$port"
	# Let the fake server listen first so the dial meets it, not a refusal.
	tp_wait_for peer 'peer: listening' 60000
	tp_spawn perf 60 -- "$perf" client --host 127.0.0.1 "${args[@]}"
fi
tp_wait_exit perf "$tp_hang_ms"
tp_note "tcpx_perf $(tp_peer_of "$bad") exited $rc_perf after $el_perf ms"
tp_expect_failure perf "^tcpx_perf: .*($re)"
if [ "$mode" = silent ] && [ "$el_perf" -lt $((tmo - 1000)) ]; then
	tp_fail "tcpx_perf gave up after $el_perf ms, before its $tmo ms timeout"
fi
grep -q 'peer: ready' "$tmp/peer.out" || tp_fail "the bad peer never connected"
tp_note "tcpx_perf stderr: $(grep '^tcpx_perf: ' "$tmp/perf.err" | tail -n 1)"
echo "PASS: a $mode $bad peer was rejected cleanly"
