#!/usr/bin/env bash
# scripts/tcpx_env.sh derives NCCL_GPUDIRECTTCPX_TX/RX_BINDINGS from a fake
# sysfs tree (TCPX_ENV_SYSFS): the A3 layout (eth1/eth2 on NUMA 0, eth3/eth4
# on 1, 2 x 104 CPUs), a small one-node host, a NIC with NUMA node -1 on a
# two-node host (unreadable: the A3 values are the fallback), and values the
# caller set (kept).  Needs no root.
# Usage: tcpx_env_bindings.sh BUILD_DIR
# shellcheck disable=SC2154 # tmp is set by tp_setup
source "$(dirname "$0")/fault_lib.sh"
tp_setup "${1:-}"
env_sh=$(cd "$(dirname "$0")/../.." && pwd)/scripts/tcpx_env.sh
sys=$tmp/sys

# node NODE CPULIST / nic NAME NODE: build the fake tree.
node() { mkdir -p "$sys/devices/system/node/node$1" && echo "$2" >"$sys/devices/system/node/node$1/cpulist"; }
nic() { mkdir -p "$sys/class/net/$1/device" && echo "$2" >"$sys/class/net/$1/device/numa_node"; }
# derive [VAR=VALUE...]: source tcpx_env.sh with the fake tree; sets tx, rx, msg.
derive() {
	local o
	# shellcheck disable=SC2016 # expanded by the inner bash
	o=$(env -i PATH="$PATH" TCPX_ENV_SYSFS="$sys" "$@" bash -c \
		'. "$0" || exit 1; echo "$NCCL_GPUDIRECTTCPX_TX_BINDINGS"
		 echo "$NCCL_GPUDIRECTTCPX_RX_BINDINGS"' \
		"$env_sh" 2>"$tmp/msg") || tp_fail "sourcing tcpx_env.sh failed"
	tx=$(sed -n 1p <<<"$o")
	rx=$(sed -n 2p <<<"$o")
	msg=$(cat "$tmp/msg")
}
expect() { # NAME GOT WANT
	[ "$2" = "$3" ] || tp_fail "$1: got '$2', expected '$3'"
}
a3_tx="eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177"
a3_rx="eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191"

# The A3 topology: each node's two ranges (cores, then their hyperthreads) halved.
node 0 0-51,104-155
node 1 52-103,156-207
nic eth1 0; nic eth2 0; nic eth3 1; nic eth4 1
derive
expect "A3 TX" "$tx" "eth1:0-25,104-129;eth2:0-25,104-129;eth3:52-77,156-181;eth4:52-77,156-181"
expect "A3 RX" "$rx" "eth1:26-51,130-155;eth2:26-51,130-155;eth3:78-103,182-207;eth4:78-103,182-207"
grep -q 'bindings from sysfs: eth1->node0' <<<"$msg" || tp_fail "not printed: $msg"
grep -q "TX_BINDINGS=$tx" <<<"$msg" || tp_fail "TX value not printed: $msg"

# Two NICs named by the caller, NUMA -1 on a one-node 3-CPU host.
rm -rf "$sys"
node 0 0-2
nic ens7 -1; nic ens8 0
derive NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=ens7,ens8
expect "one node TX" "$tx" "ens7:0-1;ens8:0-1"
expect "one node RX" "$rx" "ens7:2;ens8:2"

# One CPU: TX and RX share it.
rm -rf "$sys"
node 0 0
nic eth1 0
derive NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=eth1
expect "one CPU" "$tx/$rx" "eth1:0/eth1:0"

# Unreadable: NUMA node -1 with two nodes, and a missing NIC -> A3 values.
rm -rf "$sys"
node 0 0-3; node 1 4-7
nic eth1 -1; nic eth2 0; nic eth3 1; nic eth4 1
derive
expect "fallback TX" "$tx" "$a3_tx"
expect "fallback RX" "$rx" "$a3_rx"
grep -q 'A3 fallback (topology unreadable: eth1 reports NUMA node -1' <<<"$msg" ||
	tp_fail "fallback reason not printed: $msg"
nic eth1 0
rm -rf "$sys/class/net/eth4"
derive
expect "missing NIC" "$tx" "$a3_tx"
grep -q 'no .*/class/net/eth4/device/numa_node' <<<"$msg" || tp_fail "reason: $msg"

# The caller's values win; quiet means quiet.
derive NCCL_GPUDIRECTTCPX_TX_BINDINGS=eth1:5 NCCL_GPUDIRECTTCPX_RX_BINDINGS=eth1:6
expect "caller's" "$tx/$rx" "eth1:5/eth1:6"
[ -z "$msg" ] || tp_fail "printed with both bindings set: $msg"
derive TCPX_ENV_QUIET=1
[ -z "$msg" ] || tp_fail "TCPX_ENV_QUIET=1 still printed: $msg"
echo "PASS: bindings derived from sysfs, A3 fallback when unreadable"
