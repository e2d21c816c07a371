# shellcheck shell=bash
# GPUDirect-TCPX settings for GCP a3-highgpu-8g (docs/benchmarks.md,
# docs/tcpx.md, "Running on GCP A3").  Source it, don't run it:
#
#   . scripts/tcpx_env.sh
#
# Every variable is exported only when it is not set already, so a caller can
# override any of them first.  Also sets TCPX_P2P_PLUGIN when Google's plugin
# is installed, and warns on stderr when /var/lib/tcpx/lib64 is mounted
# noexec (dlopen fails there: copy the directory to /usr/local/tcpx/lib64).
# NCCL_GPUDIRECTTCPX_TX/RX_BINDINGS come from this host's topology: each NIC
# of NCCL_GPUDIRECTTCPX_SOCKET_IFNAME -> /sys/class/net/NIC/device/numa_node
# -> /sys/devices/system/node/nodeN/cpulist, each range of that list split
# in a first half for TX and the rest for RX (NICs on one node share them).
# When that cannot be read (no such NIC, NUMA node -1 on a multi-node host)
# the a3-highgpu-8g values of docs/tcpx.md ("CPU bindings") are the fallback.  What it chose is
# printed on stderr (TCPX_ENV_QUIET=1 silences it; TCPX_ENV_SYSFS=DIR reads
# another sysfs tree, for tests).
# Returns non-zero only when it was run instead of sourced.

if [ -n "${BASH_VERSION:-}" ] && ! (return 0 2>/dev/null); then
	echo "tcpx_env.sh: source it: . $0" >&2
	exit 2
fi

tcpx_env_default() {
	# Set and export $1=$2 unless $1 is already set (empty counts as set).
	if eval "[ -z \"\${$1+x}\" ]"; then
		export "$1=$2"
	fi
}

tcpx_env_noexec() {
	# True when the file system holding $1 is mounted noexec.
	local dir=$1 opts=""
	if command -v findmnt >/dev/null 2>&1; then
		opts=$(findmnt -n -o OPTIONS --target "$dir" 2>/dev/null | tail -n 1)
	else
		# The longest mount point that is a prefix of $dir holds it.
		opts=$(awk -v d="$dir" '
			index(d "/", ($2 == "/" ? "/" : $2 "/")) == 1 && length($2) >= best {
				best = length($2); o = $4
			}
			END { print o }' /proc/mounts 2>/dev/null)
	fi
	case ",$opts," in
	*,noexec,*) return 0 ;;
	esac
	return 1
}

tcpx_env_default NCCL_GPUDIRECTTCPX_SOCKET_IFNAME eth1,eth2,eth3,eth4
tcpx_env_default NCCL_GPUDIRECTTCPX_CTRL_DEV eth0
tcpx_env_default NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX /run/tcpx
tcpx_env_default NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS 50000
tcpx_env_default NCCL_GPUDIRECTTCPX_FORCE_ACK 0
tcpx_env_default NCCL_DYNAMIC_CHUNK_SIZE 524288
tcpx_env_default NCCL_NSOCKS_PERTHREAD 4
tcpx_env_default NCCL_SOCKET_NTHREADS 1

tcpx_env_split() {
	# $1 = a cpulist ("0-51,104-155"); prints "TX RX": the first half of
	# every range for TX, the rest for RX, so hyperthread siblings (the
	# second range) stay on the same side as their cores.
	local item a b n h tx="" rx=""
	for item in $(printf '%s' "$1" | tr ',' ' '); do
		case $item in
		*-*) a=${item%-*}; b=${item#*-} ;;
		*) a=$item; b=$item ;;
		esac
		n=$((b - a + 1))
		h=$(((n + 1) / 2))
		if [ "$h" -eq 1 ]; then tx=$tx,$a; else tx=$tx,$a-$((a + h - 1)); fi
		if [ "$n" -gt "$h" ]; then
			if [ "$n" -eq $((h + 1)) ]; then rx=$rx,$b; else rx=$rx,$((a + h))-$b; fi
		fi
	done
	tx=${tx#,}
	rx=${rx#,}
	printf '%s %s\n' "$tx" "${rx:-$tx}"
}

tcpx_env_bindings() {
	# Derive "nic:cpus;..." TX and RX bindings from sysfs: each NIC of
	# NCCL_GPUDIRECTTCPX_SOCKET_IFNAME -> its NUMA node -> that node's CPUs,
	# split in a TX and an RX half.  Sets tcpx_env_tx, tcpx_env_rx and
	# tcpx_env_how; returns 1 (with the reason in tcpx_env_how) when some
	# part of the topology cannot be read.
	local sys=${TCPX_ENV_SYSFS:-/sys} nic node nodes cpus halves
	tcpx_env_tx="" tcpx_env_rx="" tcpx_env_how=""
	nodes=$(cd "$sys/devices/system/node" 2>/dev/null && echo node[0-9]*)
	for nic in $(printf '%s' "$NCCL_GPUDIRECTTCPX_SOCKET_IFNAME" | tr ',' ' '); do
		if ! node=$(cat "$sys/class/net/$nic/device/numa_node" 2>/dev/null); then
			tcpx_env_how="no $sys/class/net/$nic/device/numa_node"
			return 1
		fi
		if [ "$node" = -1 ]; then
			# No affinity reported: fine on a one-node host, unknown otherwise.
			case $nodes in
			node0) node=0 ;;
			*) tcpx_env_how="$nic reports NUMA node -1 on a host with nodes: ${nodes:-none}"
			   return 1 ;;
			esac
		fi
		if ! cpus=$(cat "$sys/devices/system/node/node$node/cpulist" 2>/dev/null) ||
		   [ -z "$cpus" ]; then
			tcpx_env_how="no CPU list for NUMA node $node of $nic"
			return 1
		fi
		halves=$(tcpx_env_split "$cpus")
		tcpx_env_tx="$tcpx_env_tx;$nic:${halves% *}"
		tcpx_env_rx="$tcpx_env_rx;$nic:${halves#* }"
		tcpx_env_how="$tcpx_env_how, $nic->node$node($cpus)"
	done
	tcpx_env_tx=${tcpx_env_tx#;}
	tcpx_env_rx=${tcpx_env_rx#;}
	tcpx_env_how="from sysfs:${tcpx_env_how#,}"
	[ -n "$tcpx_env_tx" ] || { tcpx_env_how="no NIC in NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"; return 1; }
}

if [ -z "${NCCL_GPUDIRECTTCPX_TX_BINDINGS+x}" ] || [ -z "${NCCL_GPUDIRECTTCPX_RX_BINDINGS+x}" ]; then
	if ! tcpx_env_bindings; then
		# The values of the 208-CPU a3-highgpu-8g (docs/tcpx.md, "CPU bindings"), for eth1..eth4.
		tcpx_env_how="A3 fallback (topology unreadable: $tcpx_env_how)"
		tcpx_env_tx="eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177"
		tcpx_env_rx="eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191"
	fi
	tcpx_env_default NCCL_GPUDIRECTTCPX_TX_BINDINGS "$tcpx_env_tx"
	tcpx_env_default NCCL_GPUDIRECTTCPX_RX_BINDINGS "$tcpx_env_rx"
	if [ -z "${TCPX_ENV_QUIET:-}" ]; then
		echo "tcpx_env.sh: bindings $tcpx_env_how" >&2
		echo "tcpx_env.sh:   NCCL_GPUDIRECTTCPX_TX_BINDINGS=$NCCL_GPUDIRECTTCPX_TX_BINDINGS" >&2
		echo "tcpx_env.sh:   NCCL_GPUDIRECTTCPX_RX_BINDINGS=$NCCL_GPUDIRECTTCPX_RX_BINDINGS" >&2
	fi
	unset tcpx_env_tx tcpx_env_rx tcpx_env_how
fi

if [ -d /var/lib/tcpx/lib64 ] && tcpx_env_noexec /var/lib/tcpx/lib64; then
	echo "tcpx_env.sh: /var/lib/tcpx/lib64 is mounted noexec: the TCPX plugin cannot be" \
		"loaded from there; copy it: cp -a /var/lib/tcpx/lib64/. /usr/local/tcpx/lib64/ &&" \
		"ln -sf libnccl-net.so /usr/local/tcpx/lib64/libnccl-net-tcpx.so" >&2
fi
if [ -z "${TCPX_P2P_PLUGIN+x}" ]; then
	if [ -f /usr/local/tcpx/lib64/libnccl-net-tcpx.so ]; then
		export TCPX_P2P_PLUGIN=/usr/local/tcpx/lib64/libnccl-net-tcpx.so
	elif [ -f /var/lib/tcpx/lib64/libnccl-net.so ] &&
	     ! tcpx_env_noexec /var/lib/tcpx/lib64; then
		export TCPX_P2P_PLUGIN=/var/lib/tcpx/lib64/libnccl-net.so
	fi
fi
# Google's plugin finds its own dependencies beside it.
case "${TCPX_P2P_PLUGIN:-}" in
/usr/local/tcpx/lib64/* | /var/lib/tcpx/lib64/*)
	case ":${LD_LIBRARY_PATH:-}:" in
	*":${TCPX_P2P_PLUGIN%/*}:"*) ;;
	*) export LD_LIBRARY_PATH="${TCPX_P2P_PLUGIN%/*}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
	esac
	;;
esac
unset -f tcpx_env_default tcpx_env_noexec tcpx_env_split tcpx_env_bindings
