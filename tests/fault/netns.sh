#!/usr/bin/env bash
# tcpx_perf between two network namespaces joined by a veth pair (10.231.0.1
# and 10.231.0.2 exist only inside them), so data crosses a real link that
# can be degraded:
#   veth      - plain link: the addresses and TCPX_EMU_ADDR binding work
#   netem     - delay 2ms 1ms, loss 0.5% both ways: TCP recovers, bytes verify
#   reorder   - netem delay, reordering, duplication and loss: same
#   slowlink  - a 200 Mbit/s token bucket both ways (tbf: no netem needed)
#   nftloss   - nftables drops 0.5% of TCP packets both ways, for kernels
#               without netem
#   linkdown  - the link goes down mid-run: both sides must time out
#   linkdown_live - the same under tcpx_perf kv with a two-minute deadline:
#               the target only polls notifications, the initiator posts
#               with the progress thread, and both must learn of the cut
#               from liveness (no heartbeat for 3 s), not from a deadline
# Needs root, ip netns and veth, and for some modes the netem or tbf qdisc or
# nft(8); exits 77 saying what is missing otherwise.
# Usage: netns.sh BUILD_DIR MODE
# rc_NAME, el_NAME and pid_NAME are set by name in fault_lib.sh.
# shellcheck disable=SC2154
source "$(dirname "$0")/fault_lib.sh"
tp_setup "${1:-}"
mode=${2:-veth}
qdisc=()
case $mode in
veth | linkdown | linkdown_live | nftloss) ;;
netem) qdisc=(netem delay 2ms 1ms loss 0.5%) ;;
reorder) qdisc=(netem delay 2ms reorder 25% 50% duplicate 1% loss 0.5%) ;;
slowlink) qdisc=(tbf rate 200mbit burst 64kb latency 50ms) ;;
*) tp_fail "unknown mode $mode" ;;
esac

# Names unique per run so parallel registrations do not collide.
nsa=tpfa$$
nsb=tpfb$$
va=tpfa$$
vb=tpfb$$
tp_netns_pair "$nsa" "$nsb" "$va" "$vb" 10.231.0
if [ ${#qdisc[@]} -gt 0 ]; then
	command -v tc >/dev/null || tp_skip "tc(8) from iproute2 is missing"
	ip netns exec "$nsa" tc qdisc add dev "$va" root "${qdisc[@]}" 2>"$tmp/tc.err" ||
		tp_skip "${qdisc[0]} qdisc unavailable (sch_${qdisc[0]} module?): $(cat "$tmp/tc.err")"
	ip netns exec "$nsb" tc qdisc add dev "$vb" root "${qdisc[@]}" ||
		tp_fail "${qdisc[0]} worked on one end of the pair but not the other"
	tp_note "qdisc on both ends: ${qdisc[*]}"
fi
if [ "$mode" = nftloss ]; then
	command -v nft >/dev/null || tp_skip "nft(8) from nftables is missing"
	for ns in "$nsa" "$nsb"; do
		# The namespaces are fresh: this table is the whole ruleset there.
		ip netns exec "$ns" nft -f - 2>"$tmp/nft.err" <<-'NFT' ||
			table inet tpfault {
				chain out {
					type filter hook output priority 0;
					meta l4proto tcp numgen random mod 1000 < 5 counter drop
				}
			}
		NFT
			tp_skip "nftables rule refused (no nf_tables?): $(cat "$tmp/nft.err")"
	done
	tp_note "nftables drops 0.5% of TCP packets leaving each namespace"
fi

in_a=(ip netns exec "$nsa" env TCPX_EMU_ADDR=10.231.0.1)
in_b=(ip netns exec "$nsb" env TCPX_EMU_ADDR=10.231.0.2)
# Once the server printed /$1/, the link goes down; both sides must then
# fail on their own within $3 ms, with /$2/.
cut_link() {
	tp_wait_for server "$1" 30000
	sleep 1
	tp_note "taking the link down mid-run"
	ip -n "$nsa" link set "$va" down
	tp_wait_exit server "$3"
	tp_wait_exit client "$3"
	tp_note "server exited $rc_server after $el_server ms, client $rc_client after $el_client ms"
	tp_expect_failure server "$2"
	tp_expect_failure client "$2"
	tp_note "server: $(grep '^tcpx_perf: ' "$tmp/server.err" | grep -v iteration | tail -n 1)"
	tp_note "client: $(grep '^tcpx_perf: ' "$tmp/client.err" | grep -v iteration | tail -n 1)"
}

if [ "$mode" = linkdown_live ]; then
	# Deadlines 120 s, a peer silent for 3 s presumed dead.
	live=(TCPX_P2P_HEARTBEAT_MS=200 TCPX_P2P_DEAD_AFTER_MS=3000 TCPX_P2P_LOG_LEVEL=INFO)
	args=(kv --op write -p 18515 --block-size 64K --blocks 64 -n 10000000 -w 1 --verify
		--timeout 120000)
	tp_spawn server 150 "${in_a[@]}" "${live[@]}" -- "$perf" "${args[@]}" server \
		--bind 10.231.0.1
	tp_spawn client 150 "${in_b[@]}" "${live[@]}" TCPX_P2P_PROGRESS_THREAD=1 -- \
		"$perf" "${args[@]}" client --host 10.231.0.1
	cut_link 'INFO conn .*connected to' 'presumed dead' 60000
	echo "PASS: both sides learnt of the cut link from liveness, not a deadline"
	exit 0
fi
if [ "$mode" = linkdown ]; then
	tmo=3000
	args=(-p 18515 -s 16M -n 1000000 -w 1 --verify --timeout "$tmo")
else
	# Loss makes a single chunk wait for retransmission: a generous deadline.
	tmo=30000
	args=(-p 18515 -b 4K -e 16M -f 4 -n 3 -w 1 --verify --timeout "$tmo")
fi
tp_spawn server 150 "${in_a[@]}" -- "$perf" server --bind 10.231.0.1 "${args[@]}"
tp_spawn client 150 "${in_b[@]}" -- "$perf" client --host 10.231.0.1 "${args[@]}"

if [ "$mode" = linkdown ]; then
	cut_link 'iteration [0-9]+ of' '^tcpx_perf: .*(timed out|closed|unreachable|network)' \
		"$tp_hang_ms"
	echo "PASS: both sides failed cleanly when the link went down"
	exit 0
fi

tp_wait_exit client 140000
tp_wait_exit server "$tp_hang_ms"
tp_expect_success server
tp_expect_success client
# Every size of the sweep must have a result row on both sides.
for side in server client; do
	for size in 4096 16384 65536 262144 1048576 4194304 16777216; do
		grep -Eq "^ +$size +3 " "$tmp/$side.out" ||
			{ tp_dump $side; tp_fail "$side has no result for $size bytes"; }
	done
	grep -q verified "$tmp/$side.out" || tp_fail "$side did not run with --verify"
done
tp_note "client 16 MiB row: $(grep -E '^ +16777216 ' "$tmp/client.out")"
if [ "$mode" = nftloss ]; then
	# Without drops the test proves nothing about recovery.
	drops=0
	for ns in "$nsa" "$nsb"; do
		n=$(ip netns exec "$ns" nft list ruleset |
			sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
		drops=$((drops + ${n:-0}))
	done
	tp_note "packets dropped: $drops"
	[ "${drops:-0}" -gt 0 ] || tp_fail "nftables dropped nothing: loss was not exercised"
fi
echo "PASS: verified 4K..16M across namespaces ($mode)"
