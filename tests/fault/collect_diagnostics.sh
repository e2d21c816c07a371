#!/usr/bin/env bash
# Smoke test of scripts/collect_diagnostics.sh on a host without TCPX: it
# exits 0, writes every section and a SUMMARY that says no TCPX plugin is
# installed (or names the one that is) and which tools are absent, changes
# no IRQ affinity, and (when run as root with setpriv) does the same as an
# unprivileged user.  Needs no root.
# Usage: collect_diagnostics.sh BUILD_DIR
# rc_NAME is set by name in fault_lib.sh.
# shellcheck disable=SC2154
source "$(dirname "$0")/fault_lib.sh"
tp_setup "${1:-}"
diag=$(cd "$(dirname "$0")/../.." && pwd)/scripts/collect_diagnostics.sh

irq_state() { grep -H . /proc/irq/*/smp_affinity_list 2>/dev/null; }

# check DIR: the folder a run wrote.
check() {
	local d=$1 f t

	[ -s "$d/SUMMARY" ] || tp_fail "no SUMMARY in $d"
	for f in host.txt numa.txt pcie.txt irq.txt nics.txt plugin.txt env.txt dmesg.txt; do
		[ -e "$d/$f" ] || tp_fail "$d has no $f"
	done
	if [ -e /usr/local/tcpx/lib64/libnccl-net-tcpx.so ] || [ -e /var/lib/tcpx/lib64/libnccl-net.so ]; then
		grep -Eq '^plugin: /(usr/local|var/lib)/tcpx/' "$d/SUMMARY" ||
			{ cat "$d/SUMMARY" >&2; tp_fail "a TCPX plugin is installed but SUMMARY does not name it"; }
	else
		grep -q '^plugin: no TCPX plugin installed' "$d/SUMMARY" ||
			{ cat "$d/SUMMARY" >&2; tp_fail "SUMMARY does not say that no TCPX plugin is installed"; }
	fi
	for t in ethtool lspci numactl; do
		command -v "$t" >/dev/null && continue
		grep -q "^absent tools:.* $t" "$d/SUMMARY" || grep -q "^absent tools: $t" "$d/SUMMARY" ||
			{ cat "$d/SUMMARY" >&2; tp_fail "SUMMARY does not list $t as absent"; }
	done
	grep -q '^bindings: ' "$d/SUMMARY" || tp_fail "SUMMARY has no bindings line"
	grep -Eq '^(dmesg|numa|cpus): ' "$d/SUMMARY" || tp_fail "SUMMARY lacks the host lines"
}

before=$(irq_state)
tp_spawn diag 60 -- "$diag" --out "$tmp/d" --build-dir "$1"
tp_wait_exit diag 55000
tp_expect_success diag
check "$tmp/d"
grep -q "^nic lo" "$tmp/d/SUMMARY" && tp_fail "lo was examined"
[ "$before" = "$(irq_state)" ] || tp_fail "IRQ affinities changed"
tp_note "SUMMARY:"
sed 's/^/    /' "$tmp/d/SUMMARY" >&2

# A NIC that does not exist is reported, not fatal.
tp_spawn diag2 60 -- "$diag" --out "$tmp/d2" --nics tpnosuchnic0
tp_wait_exit diag2 55000
tp_expect_success diag2
grep -q '^nic tpnosuchnic0: absent' "$tmp/d2/SUMMARY" || tp_fail "absent NIC not reported"
tp_spawn bad 10 -- "$diag" --bogus
tp_wait_exit bad "$tp_hang_ms"
[ "$rc_bad" -eq 2 ] || tp_fail "a bad option gave $rc_bad, not 2"

if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
	as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	if "${as_nobody[@]}" test -x "$diag"; then
		# $tmp is private to root: a folder of its own that uid 65534 may
		# write (and tp_spawn's pid file is not needed).
		udir=$(mktemp -d)
		rm_udir() { rm -rf "$udir"; }
		tp_cleanups+=(rm_udir)
		chmod 0777 "$udir"
		rc=0
		timeout -s KILL 60 "${as_nobody[@]}" "$diag" --out "$udir/d" >"$tmp/user.out" 2>&1 || rc=$?
		[ "$rc" -eq 0 ] || { tail -n 20 "$tmp/user.out" >&2; tp_fail "as uid 65534 it exited $rc"; }
		check "$udir/d"
		grep -q 'uid 65534' "$udir/d/SUMMARY" || tp_fail "did not run as uid 65534"
		tp_note "as uid 65534: $(grep '^dmesg' "$udir/d/SUMMARY")"
	else
		tp_note "uid 65534 cannot run $diag: the unprivileged run is left out"
	fi
fi
echo "PASS: collect_diagnostics.sh ran, SUMMARY says what is absent"
