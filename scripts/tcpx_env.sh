# shellcheck shell=bash
# GPUDirect-TCPX settings for GCP a3-highgpu-8g (docs/benchmarks.md,
# DESIGN §11).  Source it, don't run it:
#
#   . scripts/tcpx_env.sh
#
# Every variable is exported only when it is not set already, so a caller can
# override any of them first.  Also sets TCPX_P2P_PLUGIN when Google's plugin
# is installed, and warns on stderr when /var/lib/tcpx/lib64 is mounted
# noexec (dlopen fails there: copy the directory to /usr/local/tcpx/lib64).
# The CPU bindings are the ones used on the 208-CPU A3 host; on another CPU
# count they are left unset (derive them from the NIC's NUMA node there).
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
if [ "$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 0)" = 208 ]; then
	tcpx_env_default NCCL_GPUDIRECTTCPX_TX_BINDINGS \
		"eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177"
	tcpx_env_default NCCL_GPUDIRECTTCPX_RX_BINDINGS \
		"eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191"
elif [ -z "${NCCL_GPUDIRECTTCPX_TX_BINDINGS+x}" ] &&
     { [ -d /usr/local/tcpx/lib64 ] || [ -d /var/lib/tcpx/lib64 ]; }; then
	echo "tcpx_env.sh: not a 208-CPU A3 host: NCCL_GPUDIRECTTCPX_TX/RX_BINDINGS left unset" >&2
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
unset -f tcpx_env_default tcpx_env_noexec
