#!/usr/bin/env bash
# Collect what decides whether GPUDirect-TCPX works on this host into one
# folder, with a SUMMARY file to read first:
#
#   scripts/collect_diagnostics.sh [--out DIR] [--nics LIST] [--build-dir DIR]
#
#   host.txt       kernel, OS, CPUs, this shell's CPU affinity
#   numa.txt       NUMA nodes and their CPU lists (numactl --hardware if present)
#   pcie.txt       lspci -tv (if present), the sysfs PCI path, NUMA node and
#                  local CPUs of every NIC and NVIDIA GPU (nvidia-smi topo -m
#                  if present)
#   nics.txt       driver, MTU, speed, state, addresses, queues of each NIC
#   irq.txt        each NIC queue's IRQ: its /proc/interrupts line and
#                  smp_affinity_list / effective_affinity_list
#   ethtool-NIC.txt  ethtool -i, -S, -k, -g, -l, -n, --show-priv-flags: devmem
#                  counters (rx_devmem_pkts ...), header split, flow steering
#   dmesg.txt      kernel log lines about devmem, header split, TCPX, gve
#   plugin.txt     the TCPX plugin files (the A3 paths of docs/configuration.md
#                  "Plugin search order", and TCPX_P2P_PLUGIN), their version
#                  strings, mounts (noexec) and the RxDM socket directory
#   env.txt        TCPX_*, NCCL_*, CUDA_* variables; the bindings and settings
#                  scripts/tcpx_env.sh derives here (in a subshell)
#
# NICs: --nics eth1,eth2 (default: every interface but lo).  It only reads:
# nothing is changed, no root is needed (as root dmesg and some IRQ files
# say more), and a missing tool or file is noted in SUMMARY, not an error.
# Exit status: 0 once the folder is written, 1 when it cannot be, 2 usage.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,27s/^# \{0,1\}//p' "$0"; }

out=tcpx-diag-$(hostname 2>/dev/null || echo host)-$(date +%Y%m%d-%H%M%S)
nics=
build=$root/build
while (($#)); do
	case $1 in
	--out) out=${2:?--out wants a folder}; shift 2 ;;
	--nics) nics=${2:?--nics wants a list}; shift 2 ;;
	--build-dir) build=${2:?}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
if ! mkdir -p "$out" 2>/dev/null || [[ ! -w $out ]]; then
	echo "collect_diagnostics: cannot write to $out" >&2
	exit 1
fi
out=$(cd "$out" && pwd)
summary=$out/SUMMARY
: >"$summary"
absent=()

note() { printf '%s\n' "$*" >>"$summary"; }
have() {
	command -v "$1" >/dev/null 2>&1 && return 0
	[[ " ${absent[*]} " == *" $1 "* ]] || absent+=("$1")
	return 1
}
# run FILE CMD...: append "$ CMD" and its output (bounded to 20 s) to FILE.
run() {
	local f=$out/$1
	shift
	printf '$ %s\n' "$*" >>"$f"
	timeout 20 "$@" >>"$f" 2>&1 || printf '(exit status %d)\n' $? >>"$f"
	echo >>"$f"
}
# show FILE PATH...: append each readable sysfs/proc file as "path: value".
show() {
	local f=$out/$1 p
	shift
	for p in "$@"; do
		[[ -r $p && -f $p ]] && printf '%s: %s\n' "$p" "$(tr '\n' ' ' <"$p" 2>/dev/null)" >>"$f"
	done
}

if [[ -z $nics ]]; then
	nics=$(cd /sys/class/net 2>/dev/null && for n in *; do [[ $n == lo ]] || printf '%s,' "$n"; done)
	nics=${nics%,}
fi
IFS=, read -ra niclist <<<"$nics"

note "# TCPX diagnostics: $(hostname 2>/dev/null), $(date -u '+%Y-%m-%d %H:%M:%S UTC'), uid $(id -u)"
note "# folder: $out"

# --- host
run host.txt uname -a
show host.txt /etc/os-release /proc/cmdline
run host.txt nproc
have lscpu && run host.txt lscpu
grep -E '^(Cpus|Mems)_allowed_list' /proc/self/status >>"$out/host.txt" 2>/dev/null
note "cpus: $(nproc 2>/dev/null), kernel $(uname -r)"

# --- NUMA
nodes=()
for d in /sys/devices/system/node/node[0-9]*; do
	[[ -d $d ]] || continue
	nodes+=("${d##*/}")
	show numa.txt "$d/cpulist"
done
have numactl && run numa.txt numactl --hardware
note "numa: ${#nodes[@]} node(s):$(for n in "${nodes[@]}"; do
	printf ' %s=%s' "$n" "$(cat "/sys/devices/system/node/$n/cpulist" 2>/dev/null)"; done)"

# --- PCIe tree: NICs and NVIDIA GPUs
if have lspci; then
	run pcie.txt lspci -tv
else
	echo "(lspci absent: sysfs paths only)" >>"$out/pcie.txt"
fi
for n in "${niclist[@]}"; do
	dev=/sys/class/net/$n/device
	if [[ -e $dev ]]; then
		printf 'nic %s: %s numa_node=%s local_cpulist=%s\n' "$n" "$(readlink -f "$dev")" \
			"$(cat "$dev/numa_node" 2>/dev/null || echo ?)" \
			"$(cat "$dev/local_cpulist" 2>/dev/null || echo ?)" >>"$out/pcie.txt"
	else
		printf 'nic %s: no device in sysfs (virtual or absent)\n' "$n" >>"$out/pcie.txt"
	fi
done
ngpu=0
for d in /sys/bus/pci/devices/*; do
	[[ $(cat "$d/vendor" 2>/dev/null) == 0x10de ]] || continue
	case $(cat "$d/class" 2>/dev/null) in 0x0300* | 0x0302*) ;; *) continue ;; esac
	ngpu=$((ngpu + 1))
	printf 'gpu %s: %s numa_node=%s local_cpulist=%s\n' "${d##*/}" "$(readlink -f "$d")" \
		"$(cat "$d/numa_node" 2>/dev/null || echo ?)" \
		"$(cat "$d/local_cpulist" 2>/dev/null || echo ?)" >>"$out/pcie.txt"
done
have nvidia-smi && run pcie.txt nvidia-smi topo -m
note "gpus: $ngpu NVIDIA GPU(s) on the PCI bus"

# --- NICs, IRQs, ethtool
devmem_total=0
for n in "${niclist[@]}"; do
	d=/sys/class/net/$n
	if [[ ! -e $d ]]; then
		note "nic $n: absent"
		echo "nic $n: absent" >>"$out/nics.txt"
		continue
	fi
	drv=$(basename "$(readlink -f "$d/device/driver" 2>/dev/null)" 2>/dev/null)
	{
		echo "== $n"
		echo "driver: ${drv:-none}"
		for a in mtu speed operstate address; do
			printf '%s: %s\n' "$a" "$(cat "$d/$a" 2>/dev/null || echo ?)"
		done
		echo "queues: $(cd "$d/queues" 2>/dev/null && echo *)"
	} >>"$out/nics.txt"
	have ip && run nics.txt ip -d addr show dev "$n"

	# Queue IRQs: MSI vectors of the PCI function (for virtio the net
	# device's parent), else /proc/interrupts lines naming the NIC, the
	# device (virtio2-input.0) or its PCI address (gve-ntfy-blk0@pci:...).
	irqs=()
	pdev=$(readlink -f "$d/device" 2>/dev/null)
	for m in "$pdev/msi_irqs" "${pdev%/*}/msi_irqs"; do
		[[ -n $pdev && -d $m ]] || continue
		for i in "$m"/*; do [[ -e $i ]] && irqs+=("${i##*/}"); done
		break
	done
	if ((${#irqs[@]} == 0)); then
		while read -r i; do irqs+=("$i"); done < <(awk -v n="$n" -v d="${pdev##*/}" \
			'$1 ~ /^[0-9]+:$/ && ($NF ~ n || (d != "" && index($NF, d))) {
				sub(":", "", $1); print $1 }' /proc/interrupts 2>/dev/null)
	fi
	cpus_used=
	{
		echo "== $n: ${#irqs[@]} IRQ(s)"
		for i in "${irqs[@]}"; do
			aff=$(cat "/proc/irq/$i/smp_affinity_list" 2>/dev/null || echo ?)
			eff=$(cat "/proc/irq/$i/effective_affinity_list" 2>/dev/null || echo ?)
			name=$(awk -v i="$i:" '$1 == i { print $NF }' /proc/interrupts 2>/dev/null)
			printf 'irq %s %s: affinity %s effective %s\n' "$i" "${name:-?}" "$aff" "$eff"
			cpus_used+="$eff,"
		done
	} >>"$out/irq.txt"

	hs="unknown (no ethtool)"
	devmem="no ethtool"
	if have ethtool; then
		f=ethtool-$n.txt
		for o in -i -S -k -g -l -n --show-priv-flags; do
			run "$f" ethtool "$o" "$n"
		done
		devmem=$(timeout 10 ethtool -S "$n" 2>/dev/null | grep -i devmem | tr -s ' \n' ' ')
		if [[ -n $devmem ]]; then
			v=$(timeout 10 ethtool -S "$n" 2>/dev/null | awk '$1 == "rx_devmem_pkts:" { print $2 }')
			devmem_total=$((devmem_total + ${v:-0}))
		else
			devmem="no devmem counters (not a devmem-capable driver)"
		fi
		# gve: priv flag enable-header-split; newer ethtool: "TCP data split" in -g.
		hs=$(grep -iE 'header-split|header split|data split' "$out/$f" | tr -s ' \t\n' ' ')
		hs=${hs:-not reported}
	fi
	numa=$(cat "$d/device/numa_node" 2>/dev/null || echo -)
	note "nic $n: driver ${drv:-none}, numa $numa, ${#irqs[@]} IRQs${cpus_used:+ on CPUs ${cpus_used%,}};" \
		"devmem: $devmem; header split: $hs"
done
((${#niclist[@]})) || note "nics: none found"

# --- kernel log
if dmesg >/dev/null 2>&1; then
	dmesg 2>/dev/null | grep -iE 'devmem|dmabuf|header.?split|tcpx|rxdm|gve|flow.steer' \
		>"$out/dmesg.txt"
	note "dmesg: $(wc -l <"$out/dmesg.txt") line(s) about devmem/header split/TCPX/gve (dmesg.txt)"
else
	echo "(dmesg not readable: kernel.dmesg_restrict=1 without root)" >"$out/dmesg.txt"
	note "dmesg: not readable by uid $(id -u) (kernel.dmesg_restrict); run as root for it"
fi

# --- TCPX plugin
found=()
for p in ${TCPX_P2P_PLUGIN:+"$TCPX_P2P_PLUGIN"} /usr/local/tcpx/lib64/libnccl-net-tcpx.so \
	/var/lib/tcpx/lib64/libnccl-net.so; do
	{
		echo "== $p"
		if [[ -e $p ]]; then
			ls -lL "$p"
			echo "real path: $(readlink -f "$p")"
			have sha256sum && sha256sum "$p"
			if have findmnt; then
				echo "mount: $(findmnt -n -o TARGET,OPTIONS --target "$(dirname "$p")" 2>/dev/null)"
			fi
			if have strings; then
				strings -a "$p" 2>/dev/null |
					grep -E 'ncclNetPlugin_v[0-9]|GPUDirectTCPX|[Vv]ersion|[0-9]+\.[0-9]+\.[0-9]+' |
					sort -u | head -n 40
			fi
		else
			echo "absent"
		fi
		echo
	} >>"$out/plugin.txt" 2>&1
	[[ -e $p ]] && found+=("$p")
done
for d in /usr/local/tcpx/lib64 /var/lib/tcpx/lib64; do
	[[ -d $d ]] && run plugin.txt ls -la "$d"
done
rx=${NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX:-/run/tcpx}
if [[ -d $rx ]]; then
	run plugin.txt ls -la "$rx"
	note "rxdm: $rx exists ($(find "$rx" -maxdepth 1 -type s 2>/dev/null | wc -l) socket(s))"
else
	note "rxdm: no $rx (the RxDM container shares its sockets there)"
fi
tcpx=()
for p in "${found[@]}"; do [[ $p == *nccl-net-tcpxemu* ]] || tcpx+=("$p"); done
if ((${#tcpx[@]})); then
	for p in "${tcpx[@]}"; do
		v=$(strings -a "$p" 2>/dev/null | grep -m1 -iE 'GPUDirectTCPX[^ ]*' || true)
		note "plugin: $p ($(readlink -f "$p")${v:+, $v})"
	done
else
	note "plugin: no TCPX plugin installed (checked ${TCPX_P2P_PLUGIN:+$TCPX_P2P_PLUGIN, }/usr/local/tcpx/lib64/libnccl-net-tcpx.so, /var/lib/tcpx/lib64/libnccl-net.so): the library can load only the emulator here"
fi

# --- environment and bindings
{
	echo "== environment"
	env | grep -E '^(TCPX_|NCCL_|CUDA_|LD_LIBRARY_PATH=)' | sort
	echo
	echo "== scripts/tcpx_env.sh here (derived, in a subshell; this shell unchanged)"
	# shellcheck disable=SC1091 # sourced by path, checked on its own
	(. "$root/scripts/tcpx_env.sh" && env | grep -E '^(TCPX_P2P_PLUGIN|NCCL_|LD_LIBRARY_PATH)=' | sort) 2>&1
} >>"$out/env.txt"
b=$( (. "$root/scripts/tcpx_env.sh" 2>&1 >/dev/null) | sed -n 's/^tcpx_env.sh: bindings //p')
note "bindings: ${b:-?} (env.txt)"
if [[ -x $build/bin/tcpx_perf ]]; then
	run env.txt "$build/bin/tcpx_perf" --dump-config
fi

if ((${#absent[@]})); then
	note "absent tools: ${absent[*]} (their parts are missing above)"
fi
if ((${#tcpx[@]})) && have ethtool; then
	note "devmem: rx_devmem_pkts summed over the NICs: $devmem_total (must grow during a transfer)"
fi
echo "collect_diagnostics: wrote $out (read $out/SUMMARY first)" >&2
cat "$summary"
exit 0
