#!/usr/bin/env bash
# Two "hosts" in one machine: network namespaces A (10.232.0.1) and B
# (10.232.0.2) joined by a veth pair named tpdata0 on both sides, each
# running the launch scripts against the other's address over the emulator
# with host memory, verified end to end:
#   two_node_mpi   scripts/run_two_node.sh auto in each, roles from
#                  OMPI_COMM_WORLD_RANK 0/1 (as under mpirun), TCPX_EMU_ADDR
#                  set per namespace
#   two_node_ssh   scripts/run_two_node.sh client --ssh A from B: the server
#                  started through a stand-in for ssh (ip netns exec A with a
#                  clean environment), the emulator on NCCL_SOCKET_IFNAME=tpdata0
#   a3_slurm       scripts/run_a3_8gpu.sh auto --pairs 4 in each, roles from
#                  SLURM_PROCID 0/1: one tcpx_perf process per side, 4 sessions
#   a3_procs_ssh   scripts/run_a3_8gpu.sh client --ssh A --layout procs
#                  --pairs 4 from B (PMI_RANK set to a wrong value on purpose:
#                  an explicit role wins)
# Needs root, ip netns and veth; exits 77 saying what is missing otherwise.
# Usage: two_host.sh BUILD_DIR MODE
# rc_NAME and pid_NAME are set by name in fault_lib.sh.
# shellcheck disable=SC2154
source "$(dirname "$0")/fault_lib.sh"
tp_setup "${1:-}"
mode=${2:-}
src=$(cd "$(dirname "$0")/../.." && pwd)
case $mode in
two_node_mpi | two_node_ssh | a3_slurm | a3_procs_ssh) ;;
*) tp_fail "unknown mode '$mode'" ;;
esac

nsa=tpha$$
nsb=tphb$$
# One interface name on both "hosts", as eth0 is on two A3 nodes.
tp_netns_pair "$nsa" "$nsb" tpdata0 tpdata0 10.232.0

# ssh HOST COMMAND, for HOST a namespace: a login's clean environment.
cat >"$tmp/fake_ssh" <<'EOF'
#!/bin/bash
host=$1
shift
exec ip netns exec "$host" env -i PATH="$PATH" HOME="${HOME:-/root}" bash -c "$*"
EOF
chmod +x "$tmp/fake_ssh"

# Each side's --out; with --ssh the server is started with the client's
# --out, which on one machine is the same folder (file names differ by role).
outa=$tmp/outa
outb=$tmp/outb
sweep=(-b 64K -e 4M -f 4 -n 3 -w 1 --verify --timeout 20000 -q)
sizes="65536 262144 1048576 4194304"
a=(ip netns exec "$nsa" env TCPX_P2P_PLUGIN="$TCPX_P2P_PLUGIN" TCPX_ENV_QUIET=1)
b=(ip netns exec "$nsb" env TCPX_P2P_PLUGIN="$TCPX_P2P_PLUGIN" TCPX_ENV_QUIET=1)
two=$src/scripts/run_two_node.sh
a3=$src/scripts/run_a3_8gpu.sh

# rows FILE N: every size of the sweep has N result rows in FILE.
rows() {
	local s c
	for s in $sizes; do
		c=$(grep -Ec "^ +$s +3 " "$1")
		[ "$c" -eq "$2" ] || { cat "$1" >&2; tp_fail "$1: $c rows for $s bytes, not $2"; }
	done
}
# pairs_ok DIR ROLE: 4 per-pair JSON files from run_a3_8gpu.sh in DIR,
# verified, 4 sizes each, and a summary with a 4 MiB row.
pairs_ok() {
	local out=$1

	shift
	python3 - "$out" "$1" "$sizes" <<'EOF' || tp_fail "$1: per-pair results"
import json, os, sys
out, role, sizes = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3].split()]
for k in range(4):
    recs = json.load(open(os.path.join(out, "%s-gpu%d.json" % (role, k))))
    got = [r["size"] for r in recs]
    assert got == sizes, "pair %d sizes %s" % (k, got)
    for r in recs:
        c = r["config"]
        assert c["role"] == role and c["mem"] == "host" and c["verify"], c
        assert r["iters"] == 3 and r["gbps"] > 0, r
EOF
	grep -Eq '^ +4194304( +[0-9.]+){5}' "$out/summary.txt" ||
		{ cat "$out/summary.txt" >&2; tp_fail "$1: summary has no 4 MiB row for 4 pairs"; }
}

case $mode in
two_node_mpi)
	tp_spawn server 50 "${a[@]}" OMPI_COMM_WORLD_RANK=0 TCPX_EMU_ADDR=10.232.0.1 -- \
		"$two" auto --mem host --build-dir "$1" -- "${sweep[@]}"
	tp_spawn client 50 "${b[@]}" OMPI_COMM_WORLD_RANK=1 TCPX_EMU_ADDR=10.232.0.2 \
		TCPX_P2P_PEER=10.232.0.1 -- "$two" auto --mem host --build-dir "$1" -- "${sweep[@]}"
	tp_wait_exit client 45000
	tp_wait_exit server "$tp_hang_ms"
	tp_expect_success server
	tp_expect_success client
	grep -q '^# tcpx_perf server (receiver)' "$tmp/server.out" || tp_fail "rank 0 was not the server"
	grep -q '^# tcpx_perf client (sender)' "$tmp/client.out" || tp_fail "rank 1 was not the client"
	rows "$tmp/server.out" 1
	rows "$tmp/client.out" 1
	;;
two_node_ssh)
	tp_spawn client 50 "${b[@]}" NCCL_SOCKET_IFNAME=tpdata0 TCPX_P2P_SSH="$tmp/fake_ssh" -- \
		"$two" client --ssh "$nsa" --peer 10.232.0.1 --mem host --build-dir "$1" -- "${sweep[@]}"
	tp_wait_exit client 45000
	tp_expect_success client
	# The server's output comes back through "ssh", as it would.
	grep -q '^# tcpx_perf server (receiver)' "$tmp/client.out" ||
		{ tp_dump client; tp_fail "no server output came back over ssh"; }
	grep -q '^# tcpx_perf client (sender)' "$tmp/client.out" || tp_fail "no client output"
	rows "$tmp/client.out" 2
	;;
a3_slurm)
	tp_spawn server 50 "${a[@]}" SLURM_PROCID=0 TCPX_EMU_ADDR=10.232.0.1 -- \
		"$a3" auto --pairs 4 --out "$outa" --build-dir "$1" -- "${sweep[@]}"
	tp_spawn client 50 "${b[@]}" SLURM_PROCID=1 TCPX_EMU_ADDR=10.232.0.2 \
		TCPX_P2P_PEER=10.232.0.1 -- "$a3" auto --pairs 4 --out "$outb" --build-dir "$1" -- \
		"${sweep[@]}"
	tp_wait_exit client 45000
	tp_wait_exit server "$tp_hang_ms"
	tp_expect_success server
	tp_expect_success client
	grep -q 'one process, 4 sessions' "$tmp/client.err" || tp_fail "not the one-process layout"
	grep -q -- '--pairs 4' "$tmp/client.err" || tp_fail "tcpx_perf was not run with --pairs 4"
	pairs_ok "$outa" server
	pairs_ok "$outb" client
	;;
a3_procs_ssh)
	tp_spawn client 50 "${b[@]}" PMI_RANK=7 NCCL_SOCKET_IFNAME=tpdata0 \
		TCPX_P2P_SSH="$tmp/fake_ssh" -- "$a3" client --ssh "$nsa" --peer 10.232.0.1 \
		--layout procs --pairs 4 --out "$outb" --build-dir "$1" -- "${sweep[@]}"
	tp_wait_exit client 45000
	tp_expect_success client
	grep -q '4 processes' "$tmp/client.err" || tp_fail "not the per-process layout"
	pairs_ok "$outb" client
	pairs_ok "$outb" server
	;;
esac
tp_note "client: $(grep -E '^ +4194304 ' "$tmp/client.out" | tail -n 1)"
echo "PASS: $mode: verified between two namespaces"
