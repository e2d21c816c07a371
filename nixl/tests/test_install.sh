#!/bin/sh
# nixl.install: the plugin as `cmake --install` puts it finds the installed
# library wherever the plugin file is copied or linked (NIXL's plugins/
# folder, a NIXL_PLUGIN_DIR): its RUNPATH names the library's install
# folder by its absolute path, and the library is installed there.
# $1 build dir, $2 the configured library folder (CMAKE_INSTALL_FULL_LIBDIR).
# Exit 0 pass, 1 fail.
set -u
build=$1 libdir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the library and the plugin (the rest of the project need not be built)
for d in "$build" "$build/src" "$build/nixl"; do
	DESTDIR="$work" cmake -DCMAKE_INSTALL_LOCAL_ONLY=ON -P "$d/cmake_install.cmake" \
		>> "$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
done
plugin=$(find "$work" -name libplugin_TCPX.so | head -1)
[ -n "$plugin" ] || { echo "FAIL: no libplugin_TCPX.so installed"; exit 1; }
runpath=$(readelf -d "$plugin" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
echo "RUNPATH: $runpath"
case ":$runpath:" in
*":$libdir:"*) ;;
*) echo "FAIL: RUNPATH lacks $libdir: a copy in NIXL's plugin folder would not load"; exit 1 ;;
esac
[ -e "$work$libdir/libtcpx_p2p.so.0" ] ||
	{ echo "FAIL: libtcpx_p2p.so.0 is not installed in $libdir"; exit 1; }
echo passed
