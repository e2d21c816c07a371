#!/usr/bin/env bash
# pip_install.sh PYTHON PACKAGE_SRC BUILD_DIR: `pip install` of the package
# from a copy of python/, offline (--no-index), into a scratch directory;
# then, with nothing in the environment pointing at the build, import it
# and move bytes: the library and the emulator plugin must come from the
# copies installed with the package.  Exit 0, 1, or 77 (no pip/setuptools).
set -euo pipefail
py=$1 src=$2 build=$3
if ! "$py" -m pip --version >/dev/null 2>&1 || ! "$py" -c 'import setuptools' 2>/dev/null; then
	echo "pip_install: $py has no pip or setuptools (python3-pip, python3-setuptools): skipped"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
cp -r "$src"/setup.py "$src"/src "$src"/tcpx_p2p "$tmp/src/"
TCPX_P2P_BUILD_DIR=$build TCPX_P2P_WERROR=1 "$py" -m pip install -q --no-index --no-deps \
	--no-build-isolation --target "$tmp/site" "$tmp/src"
cd "$tmp"
env -u TCPX_P2P_PLUGIN -u TCPX_P2P_LIBRARY PYTHONPATH="$tmp/site" "$py" - "$tmp/site" <<'PY'
import os, sys, threading
import tcpx_p2p as tp
site = sys.argv[1]
lib = os.path.join(site, "tcpx_p2p", "lib")
assert tp.library_path() == os.path.join(lib, "libtcpx_p2p.so.0"), tp.library_path()
with tp.Session() as a, tp.Session() as b:
    info = a.query()
    assert info["plugin_path"] == os.path.join(lib, "libnccl-net-tcpxemu.so"), info
    srv = a.server("127.0.0.1", 0)
    out = {}
    t = threading.Thread(target=lambda: out.update(c=srv.accept(timeout=30)))
    t.start()
    cb = b.dial("127.0.0.1", srv.port, timeout=30)
    t.join(30)
    src = bytes(range(256)) * 4096
    dst = bytearray(len(src))
    xr, xs = out["c"].recv(a.register(dst)), cb.send(b.register(src))
    while not (xr.test() & xs.test()):
        pass
    assert dst == src
print("pip_install: ok:", tp.library_path())
PY
