# Helpers shared by the fault tests (sourced, not run).  Every process a test
# starts goes through tp_spawn, so the EXIT trap can kill it by pid, and
# timeout(1) bounds it even if the trap never runs.

set -u

tp_fail() {
	printf 'FAIL: %s\n' "$*" >&2
	exit 1
}

tp_skip() {
	printf 'SKIP: %s\n' "$*" >&2
	exit 77
}

tp_note() { printf '== %s\n' "$*" >&2; }

# tp_setup BUILD_DIR: locate tcpx_perf and the emulator, make a scratch dir.
tp_setup() {
	local build=${1:-}

	[ -n "$build" ] || tp_fail "usage: $0 BUILD_DIR"
	perf=$build/bin/tcpx_perf
	[ -x "$perf" ] || tp_fail "no tcpx_perf at $perf"
	export TCPX_P2P_PLUGIN=${TCPX_P2P_PLUGIN:-$build/lib/libnccl-net-tcpxemu.so}
	[ -r "$TCPX_P2P_PLUGIN" ] || tp_fail "no plugin at $TCPX_P2P_PLUGIN"
	command -v timeout >/dev/null || tp_skip "timeout(1) is missing"
	command -v python3 >/dev/null || tp_skip "python3 is missing"
	tmp=$(mktemp -d)
	tp_pids=()
	tp_cleanups=()
	trap tp_cleanup EXIT
	trap 'exit 1' INT TERM
}

tp_cleanup() {
	local p f

	for p in "${tp_pids[@]}"; do
		kill -KILL "$p" 2>/dev/null
	done
	for f in "${tp_cleanups[@]}"; do
		$f
	done
	wait 2>/dev/null
	rm -rf "$tmp"
}

# tp_free_port VAR: set VAR to a TCP port of 127.0.0.1 that nothing holds
# and that no other test on this machine picks while this script runs.  A
# port the kernel hands out itself (bind to 0) is not enough: it comes from
# the ephemeral range, so any test's outgoing connection may take it between
# the probe and the listen.  The port comes from below that range instead,
# and is claimed with flock(1) on a file under $tp_port_dir, held on a file
# descriptor of this shell (and inherited by what it spawns) until it exits.
tp_port_dir=${TMPDIR:-/tmp}/tcpx_p2p-test-ports
tp_free_port() {
	local -n tp_out=$1
	local lo hi base span p fd

	read -r lo hi </proc/sys/net/ipv4/ip_local_port_range || lo=32768 hi=60999
	if [ "$lo" -gt 12000 ]; then
		base=10000 span=$((lo - 10000))
	else
		base=$((hi + 1)) span=$((65535 - hi))
	fi
	mkdir -p "$tp_port_dir" || tp_fail "cannot make $tp_port_dir"
	for _ in $(seq 200); do
		p=$((base + (RANDOM * 32768 + RANDOM) % span))
		exec {fd}>>"$tp_port_dir/$p" || continue
		if flock -n "$fd" && python3 -c 'import socket, sys
socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' "$p" 2>/dev/null; then
			tp_out=$p
			return 0
		fi
		exec {fd}>&-
	done
	tp_fail "no free TCP port on 127.0.0.1"
}

# tp_spawn NAME LIMIT_S [PREFIX...] -- CMD...: run CMD in the background under
# timeout -s KILL (SIGTERM would stay pending on a stopped process), output to
# $tmp/NAME.out and .err.  PREFIX (e.g. "ip netns exec A env X=Y") runs around
# it.  Sets pid_NAME to the wrapper (for wait) and cpid_NAME to CMD itself (for
# signals): the wrapper writes its own pid then execs CMD, so the pid is exact.
tp_spawn() {
	local name=$1 limit=$2 prefix=()

	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		prefix+=("$1")
		shift
	done
	shift
	rm -f "$tmp/$name.pid"
	"${prefix[@]}" timeout -s KILL "$limit" \
		bash -c 'echo $$ >"$0"; exec "$@"' "$tmp/$name.pid" "$@" \
		>"$tmp/$name.out" 2>"$tmp/$name.err" &
	printf -v "pid_$name" '%s' $!
	tp_pids+=($!)
	for _ in $(seq 100); do
		[ -s "$tmp/$name.pid" ] && break
		sleep 0.05
	done
	[ -s "$tmp/$name.pid" ] || tp_fail "$name did not start"
	printf -v "cpid_$name" '%s' "$(cat "$tmp/$name.pid")"
	tp_pids+=("$(cat "$tmp/$name.pid")")
}

tp_now_ms() { date +%s%3N; }

# The LIMIT_MS of a wait for a process that should end soon.  Only a hang
# may pass it, never a slow or loaded machine: the tests assert what ended a
# process (its exit status and message), not how long that took.  Below the
# 50-60 s that tp_spawn gives the processes.
tp_hang_ms=45000

# tp_wait_exit NAME LIMIT_MS: wait up to LIMIT_MS for NAME to exit; sets rc_NAME
# and el_NAME (ms waited).  Fails the test if it is still running.
tp_wait_exit() {
	local name=$1 limit=$2 pv t0 rc
	pv=pid_$name
	t0=$(tp_now_ms)
	while kill -0 "${!pv}" 2>/dev/null; do
		if [ $(($(tp_now_ms) - t0)) -gt "$limit" ]; then
			tp_dump "$name"
			tp_fail "$name still running ${limit} ms later (hung)"
		fi
		sleep 0.05
	done
	wait "${!pv}"
	rc=$?
	printf -v "rc_$name" '%s' "$rc"
	printf -v "el_$name" '%s' "$(($(tp_now_ms) - t0))"
}

# tp_wait_for NAME REGEX LIMIT_MS: wait until NAME's stderr matches REGEX.
tp_wait_for() {
	local name=$1 re=$2 limit=$3 pv t0
	pv=pid_$name
	t0=$(tp_now_ms)
	until grep -Eq "$re" "$tmp/$name.err" 2>/dev/null; do
		if ! kill -0 "${!pv}" 2>/dev/null; then
			tp_dump "$name"
			tp_fail "$name exited before printing /$re/"
		fi
		[ $(($(tp_now_ms) - t0)) -gt "$limit" ] && tp_fail "$name: no /$re/ in $limit ms"
		sleep 0.05
	done
}

tp_dump() {
	local f

	for f in "$tmp/$1.out" "$tmp/$1.err"; do
		[ -s "$f" ] || continue
		printf -- '--- %s (last lines)\n' "${f##*/}" >&2
		tail -n 20 "$f" >&2
	done
}

# tp_expect_failure NAME REGEX: NAME exited non-zero on its own (not by a
# signal, so no crash and not our timeout) and said why on stderr.
tp_expect_failure() {
	local name=$1 re=$2 rv=rc_$1

	if [ "${!rv}" -eq 0 ]; then
		tp_dump "$name"
		tp_fail "$name exited 0 after the fault"
	fi
	if [ "${!rv}" -ge 124 ]; then
		tp_dump "$name"
		tp_fail "$name died with status ${!rv} (signal, crash or timeout(1))"
	fi
	tp_expect_clean "$name"
	if ! grep -Eq "$re" "$tmp/$name.err"; then
		tp_dump "$name"
		tp_fail "$name's stderr does not match /$re/"
	fi
}

# No sanitizer report, no assertion: the fault must be handled, not survived.
tp_expect_clean() {
	if grep -Eq 'Sanitizer|runtime error:|Assertion .* failed' "$tmp/$1.err"; then
		tp_dump "$1"
		tp_fail "$1 reported a sanitizer or assertion error"
	fi
}

tp_expect_success() {
	local name=$1 rv=rc_$1

	if [ "${!rv}" -ne 0 ]; then
		tp_dump "$name"
		tp_fail "$name exited ${!rv}"
	fi
	tp_expect_clean "$name"
}

# tp_start_pair TIMEOUT_MS: a tcpx_perf server and client on 127.0.0.1 (free
# port) doing a verified 16 MiB run far longer than any test, with a
# TIMEOUT_MS deadline; returns once the server reports progress, i.e. once
# data is flowing.
tp_start_pair() {
	local tmo=$1 port args

	tp_free_port port
	args=(-p "$port" -s 16M -n 1000000 -w 1 --verify --timeout "$tmo")
	tp_spawn server 280 -- "$perf" server --bind 127.0.0.1 "${args[@]}"
	tp_spawn client 280 -- "$perf" client --host 127.0.0.1 "${args[@]}"
	# tcpx_perf prints progress 3 s into a size, after a completed iteration;
	# on a loaded machine starting both can take many seconds: the limit
	# only bounds a hang.
	tp_wait_for server 'iteration [0-9]+ of' 150000
	tp_wait_for client 'iteration [0-9]+ of' 150000
}

# The other side of VICTIM.
tp_peer_of() {
	if [ "$1" = client ]; then
		echo server
	else
		echo client
	fi
}

# Two network namespaces, $1 and $2, joined by a veth pair whose ends are
# named $3 (in $1) and $4 (in $2), addressed $5.1/24 and $5.2/24, all up;
# removed (with every process in them) at cleanup.  Skips without root,
# ip(8), namespaces or veth.
tp_netns_pair() {
	local nsa=$1 nsb=$2 va=$3 vb=$4 net=$5

	[ "$(id -u)" -eq 0 ] || tp_skip "needs root for network namespaces"
	command -v ip >/dev/null || tp_skip "ip(8) from iproute2 is missing"
	tp_netns_names+=("$nsa" "$nsb")
	tp_cleanups+=(tp_netns_down)
	ip netns add "$nsa" 2>"$tmp/ip.err" || tp_skip "ip netns add failed: $(cat "$tmp/ip.err")"
	ip netns add "$nsb" 2>"$tmp/ip.err" || tp_skip "ip netns add failed: $(cat "$tmp/ip.err")"
	ip link add "tpv$$a" netns "$nsa" type veth peer name "tpv$$b" netns "$nsb" \
		2>"$tmp/ip.err" || tp_skip "no veth pair: $(cat "$tmp/ip.err")"
	ip -n "$nsa" link set "tpv$$a" name "$va" && ip -n "$nsb" link set "tpv$$b" name "$vb" &&
		ip -n "$nsa" addr add "$net.1/24" dev "$va" &&
		ip -n "$nsb" addr add "$net.2/24" dev "$vb" &&
		ip -n "$nsa" link set "$va" up && ip -n "$nsb" link set "$vb" up &&
		ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up ||
		tp_fail "could not configure the veth pair"
}

tp_netns_names=()
tp_netns_down() {
	local ns p

	for ns in "${tp_netns_names[@]}"; do
		# Only processes in namespaces this test made: all are ours.
		for p in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$p" 2>/dev/null
		done
		ip netns del "$ns" 2>/dev/null
	done
}
