#!/usr/bin/env bash
# SIGKILL a peer process mid-stream and restart it, ten times, against one
# surviving process: its old transfers must end (never hang), each new
# incarnation must move every byte right, none of an old one's bytes landing
# in a new one.  The survivor (restart_peer.py, on the Python package) waits
# for the victim's lines, never a fixed time.
# Usage: restart_peer.sh BUILD_DIR dial|dial_hung|dial_redial|listen|listen_hung
# (the survivor's role; the _hung ones stop each old victim instead, so that
# only the new incarnation's epoch ends it: at the re-dial, or at the accept
# of a dialler with the old one's node id; dial_redial dials once and lets
# the library re-dial each next incarnation over the same connection)
# port is set by name in fault_lib.sh (tp_free_port).
# shellcheck disable=SC2154
source "$(dirname "$0")/fault_lib.sh"
tp_setup "${1:-}"
role=${2:-dial}
rounds=${TP_RESTART_ROUNDS:-10}
build=$1

[ -r "$build/python/tcpx_p2p/__init__.py" ] || tp_skip "no Python package in $build/python"
PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} python3 -c 'import tcpx_p2p' 2>/dev/null ||
	tp_skip "the Python package in $build/python does not import"
tp_free_port port
tp_note "survivor: $role on 127.0.0.1:$port, $rounds incarnations of its peer"
PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH} \
	timeout -s KILL 280 python3 "$(dirname "$0")/restart_peer.py" survivor "$role" "$port" \
	"$rounds" || tp_fail "the survivor failed (rc $?)"
