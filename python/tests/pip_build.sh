#!/usr/bin/env bash
# pip_build.sh PYTHON CHECKOUT: a user's one command on a fresh checkout,
# `pip install ./python`, with no library built: setup.py must build it
# (CMake, into the copy's build/) and bundle it.  The checkout's files
# (tracked and untracked, not ignored) are copied to a scratch directory;
# CUDA is left out to keep the build short.  Then, with nothing pointing at
# any build, import the package and check where it loaded from.  Exit 0, 1,
# or 77 (no pip/setuptools, no git, no cmake).
set -euo pipefail
py=$1 src=$2
if ! "$py" -m pip --version >/dev/null 2>&1 || ! "$py" -c 'import setuptools' 2>/dev/null; then
	echo "pip_build: $py has no pip or setuptools (python3-pip, python3-setuptools): skipped"
	exit 77
fi
for t in git cmake; do
	command -v "$t" >/dev/null || { echo "pip_build: no $t: skipped"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/checkout"
(cd "$src" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$tmp/checkout")
[ ! -e "$tmp/checkout/build" ] || { echo "pip_build: the copy has a build/"; exit 1; }
cd "$tmp/checkout"
env -u TCPX_P2P_BUILD_DIR -u TCPX_P2P_PREFIX TCPX_P2P_CMAKE_ARGS=-DTCPX_P2P_CUDA=OFF \
	"$py" -m pip install -q --no-index --no-deps --no-build-isolation --target "$tmp/site" ./python
test -e "$tmp/checkout/build/lib/libtcpx_p2p.so.0" || { echo "pip_build: nothing built"; exit 1; }
cd "$tmp"
env -u TCPX_P2P_PLUGIN -u TCPX_P2P_LIBRARY PYTHONPATH="$tmp/site" "$py" - "$tmp/site" <<'PY'
import os, sys
import tcpx_p2p as tp
lib = os.path.join(sys.argv[1], "tcpx_p2p", "lib")
assert tp.library_path() == os.path.join(lib, "libtcpx_p2p.so.0"), tp.library_path()
with tp.Session() as s:
    assert s.query()["plugin_path"] == os.path.join(lib, "libnccl-net-tcpxemu.so")
print("pip_build: the library was built and bundled")
PY
