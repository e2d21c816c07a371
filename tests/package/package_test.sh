#!/usr/bin/env bash
# Install the build into a scratch prefix and use it as an application would:
# the CMake package (find_package + tcpx_p2p::tcpx_p2p), the pkg-config file,
# the installed emulator plugin found beside the installed library, the
# installed programs finding that library by themselves, and an export list
# of tcpx_p2p_* symbols only.
# Usage: package_test.sh BUILD_DIR CONSUMER_SRC LIBDIR CMAKE CC GENERATOR [SANITIZE [BINDIR]]
# (CTest passes these; SANITIZE is the build's -fsanitize value, if any.)
set -u

build=$1 consumer=$2 libdir=$3 cmake=$4 cc=$5 generator=$6 sanitize=${7:-} bindir=${8:-bin}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
status=0

say() { printf '== %s\n' "$*"; }
bad() { printf 'FAIL: %s\n' "$*" >&2; status=1; }

for tool in nm pkg-config; do
	command -v "$tool" >/dev/null || { echo "$tool not found: skipping"; exit 77; }
done
flags=()
[ -n "$sanitize" ] && flags=("-fsanitize=$sanitize")

say "install $build into $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
	{ cat "$tmp/install.log" >&2; bad "cmake --install"; exit 1; }
lib=$prefix/$libdir/libtcpx_p2p.so
for f in include/tcpx_p2p.h include/tcpx_p2p_version.h "$libdir/libtcpx_p2p.so" \
	"$libdir/libnccl-net-tcpxemu.so" "$bindir/tcpx_perf" "$bindir/tcp_probe" \
	"$libdir/cmake/tcpx_p2p/tcpx_p2pConfig.cmake" \
	"$libdir/cmake/tcpx_p2p/tcpx_p2pConfigVersion.cmake" "$libdir/pkgconfig/tcpx_p2p.pc"; do
	[ -e "$prefix/$f" ] || bad "the install lacks $f"
done
[ "$status" -eq 0 ] || exit 1

say "exported symbols of $lib"
nm -D --defined-only "$lib" >"$tmp/nm.txt" || { bad "nm failed"; exit 1; }
# Type A entries are the version nodes (TCPX_P2P_0.1); the rest must be ours:
# name@@NODE is the current version, name@NODE an older one kept for old
# binaries (tcpx_p2p_config_init@TCPX_P2P_0.1).
awk '$2 != "A" && $3 !~ /^tcpx_p2p_[a-z0-9_]+@@?TCPX_P2P_/ { print $3 }' "$tmp/nm.txt" \
	>"$tmp/foreign.txt"
if [ -s "$tmp/foreign.txt" ]; then
	bad "exports other than versioned tcpx_p2p_* symbols:"
	sed 's/^/    /' "$tmp/foreign.txt" >&2
fi
# Every function the installed header declares is exported, and only those.
grep -o '^TCPX_P2P_API [^(]*(' "$prefix/include/tcpx_p2p.h" |
	sed 's/.*[ *]\(tcpx_p2p_[a-z0-9_]*\)($/\1/' | sort >"$tmp/declared.txt"
awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' "$tmp/nm.txt" | sort -u >"$tmp/exported.txt"
if ! diff "$tmp/declared.txt" "$tmp/exported.txt" >"$tmp/sym.diff"; then
	bad "header declarations (<) and exports (>) differ:"
	sed 's/^/    /' "$tmp/sym.diff" >&2
else
	echo "$(wc -l <"$tmp/exported.txt") symbols, exactly those declared in tcpx_p2p.h"
fi

# On a host with the TCPX plugin installed the library would pick it (and it
# cannot loop back on one machine): name the installed emulator explicitly
# there.  Everywhere else the library must find it beside itself.
run_env=(env -u TCPX_P2P_PLUGIN -u UCCL_TCPX_PLUGIN_PATH "LD_LIBRARY_PATH=$prefix/$libdir")
# The installed programs must find the installed library through their own
# RUNPATH, wherever the prefix lies: no LD_LIBRARY_PATH for them.
prog_env=(env -u TCPX_P2P_PLUGIN -u UCCL_TCPX_PLUGIN_PATH -u LD_LIBRARY_PATH)
expect_dir=$prefix/$libdir
if [ -e /usr/local/tcpx/lib64/libnccl-net-tcpx.so ] || [ -e /var/lib/tcpx/lib64/libnccl-net.so ]
then
	echo "a TCPX plugin is installed here: naming the installed emulator explicitly"
	run_env+=("TCPX_P2P_PLUGIN=$prefix/$libdir/libnccl-net-tcpxemu.so")
	prog_env+=("TCPX_P2P_PLUGIN=$prefix/$libdir/libnccl-net-tcpxemu.so")
fi

say "installed programs, without LD_LIBRARY_PATH"
for p in tcpx_perf tcp_probe; do
	"${prog_env[@]}" "$prefix/$bindir/$p" --help >"$tmp/$p-help.log" 2>&1 ||
		{ sed 's/^/    /' "$tmp/$p-help.log" >&2; bad "installed $p --help"; }
done
if "${prog_env[@]}" "$prefix/$bindir/tcpx_perf" loopback --mem host --size 1M --iters 2 --warmup 1 \
	--timeout 30000 --verify >"$tmp/perf.log" 2>&1; then
	grep -q 'verified' "$tmp/perf.log" || bad "installed tcpx_perf loopback did not verify"
	# "plugin TCPXEmu_v7 (ABI v7, PATH)": PATH may run through bin/../lib.
	used=$(sed -n 's/.*plugin TCPXEmu_v7 (ABI v7, \(.*\)),.*/\1/p' "$tmp/perf.log" | head -n 1)
	if [ -z "$used" ] ||
		[ "$(realpath "$used")" != "$(realpath "$expect_dir/libnccl-net-tcpxemu.so")" ]; then
		bad "installed tcpx_perf loaded \"${used:-no emulator}\", not the installed emulator"
	fi
else
	sed 's/^/    /' "$tmp/perf.log" >&2
	bad "installed tcpx_perf loopback --mem host"
fi

say "CMake consumer: find_package(tcpx_p2p) with CMAKE_PREFIX_PATH=$prefix"
if "$cmake" -S "$consumer" -B "$tmp/cmake-build" -G "$generator" \
	-DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
	-DCMAKE_C_FLAGS="${flags[*]}" -DCMAKE_BUILD_TYPE=Release >"$tmp/cfg.log" 2>&1 &&
	"$cmake" --build "$tmp/cmake-build" >"$tmp/build.log" 2>&1; then
	"${run_env[@]}" "$tmp/cmake-build/consumer" "$expect_dir" || bad "CMake-built consumer"
else
	cat "$tmp/cfg.log" "$tmp/build.log" >&2
	bad "configuring or building the CMake consumer"
fi

# pkg-config substitutes the prefix it is told; --define-prefix derives it
# from where the .pc file lies, as for any relocated install.
say "pkg-config consumer: PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig"
pc=(env "PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig" pkg-config --define-prefix)
if pcflags=$("${pc[@]}" --cflags --libs tcpx_p2p); then
	echo "pkg-config: $pcflags"
	case " $pcflags " in
	*" -I$prefix/include "*) ;;
	*) bad "pkg-config --cflags does not point into $prefix/include" ;;
	esac
	# shellcheck disable=SC2086 # pkg-config output is a word list
	if "$cc" -std=c11 -Wall -Wextra -Werror "${flags[@]}" -pthread \
		"$consumer/consumer.c" -o "$tmp/consumer-pc" $pcflags; then
		"${run_env[@]}" "$tmp/consumer-pc" "$expect_dir" || bad "pkg-config-built consumer"
	else
		bad "compiling the consumer with pkg-config flags"
	fi
	hdr=$(sed -n 's/^#define TCPX_P2P_VERSION_STRING "\(.*\)"$/\1/p' \
		"$prefix/include/tcpx_p2p_version.h")
	[ "$("${pc[@]}" --modversion tcpx_p2p)" = "$hdr" ] ||
		bad "pkg-config version differs from tcpx_p2p_version.h ($hdr)"
else
	bad "pkg-config does not know tcpx_p2p"
fi

[ "$status" -eq 0 ] && echo "PASS: installed package usable from CMake and pkg-config"
exit "$status"
