"""Build and install the tcpx_p2p Python package.

    pip install ./python            # from a checkout (builds the library in build/ if need be)

Offline, with Debian's python3-setuptools and python3-dev: there is no
pyproject.toml, so pip builds with the setuptools it has instead of
fetching a build backend.  The library is found at build time in, first
match wins:

    TCPX_P2P_BUILD_DIR   a CMake build directory of this project
    TCPX_P2P_PREFIX      an install prefix (cmake --install)
    ../build             the checkout's build directory (scripts/quickstart.sh)
    pkg-config tcpx_p2p  an installed library

and where none is, in a checkout, the library and the emulator are built
with CMake into ../build first (as scripts/quickstart.sh would;
TCPX_P2P_NO_BUILD=1 turns that off; TCPX_P2P_CMAKE_ARGS adds configure
options, e.g. "-DTCPX_P2P_CUDA=OFF").

Its headers compile the extension; libtcpx_p2p.so.0 and the emulator
plugin beside it are copied into the package (tcpx_p2p/lib/) unless
TCPX_P2P_BUNDLE=0.  TCPX_P2P_WERROR=1 turns warnings into errors.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
LIBS = ("libtcpx_p2p.so.0", "libnccl-net-tcpxemu.so")


def from_build_dir(build):
    cache = os.path.join(build, "CMakeCache.txt")
    if not os.path.exists(cache):
        return None
    src = None
    with open(cache) as f:
        for line in f:
            m = re.match(r"tcpx_p2p_SOURCE_DIR:STATIC=(.*)", line.strip())
            if m:
                src = m.group(1)
    if not src:
        return None
    return ([os.path.join(src, "include"), os.path.join(build, "include")],
            os.path.join(build, "lib"))


def from_prefix(prefix):
    inc = os.path.join(prefix, "include")
    if not os.path.exists(os.path.join(inc, "tcpx_p2p.h")):
        return None
    for d in ["lib", "lib64"] + glob.glob(os.path.join(prefix, "lib", "*-linux-gnu")):
        libdir = os.path.join(prefix, d)
        if os.path.exists(os.path.join(libdir, LIBS[0])):
            return [inc], libdir
    return None


def from_pkg_config():
    try:
        inc = subprocess.check_output(["pkg-config", "--variable=includedir", "tcpx_p2p"],
                                      text=True, stderr=subprocess.DEVNULL).strip()
        lib = subprocess.check_output(["pkg-config", "--variable=libdir", "tcpx_p2p"],
                                      text=True, stderr=subprocess.DEVNULL).strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return [inc], lib


def find_library():
    tried = []
    for var, fn in (("TCPX_P2P_BUILD_DIR", from_build_dir), ("TCPX_P2P_PREFIX", from_prefix)):
        if os.environ.get(var):
            found = fn(os.path.abspath(os.environ[var]))
            if not found:
                sys.exit(f"setup.py: {var}={os.environ[var]} holds no built tcpx_p2p")
            return found
    default = os.path.join(HERE, "..", "build")
    found = from_build_dir(os.path.abspath(default))
    if found and os.path.exists(os.path.join(found[1], LIBS[0])):
        return found
    tried.append(f"{os.path.abspath(default)} (no CMakeCache.txt or no lib/{LIBS[0]})")
    found = from_pkg_config()
    if found:
        return found
    tried.append("pkg-config tcpx_p2p (not found)")
    found = build_checkout(os.path.abspath(default), tried)
    if found:
        return found
    sys.exit("setup.py: libtcpx_p2p not found: build it first (scripts/quickstart.sh), or set "
             "TCPX_P2P_BUILD_DIR or TCPX_P2P_PREFIX.  Tried: " + "; ".join(tried))


def build_checkout(build, tried):
    """A checkout with no library built yet: build it with CMake, as
    scripts/quickstart.sh does (the library and the emulator only)."""
    src = os.path.dirname(build)
    if not os.path.exists(os.path.join(src, "include", "tcpx_p2p.h")):
        tried.append(f"{src} (not a libtcpx_p2p checkout: nothing to build)")
        return None
    if os.environ.get("TCPX_P2P_NO_BUILD") == "1" or not shutil.which("cmake"):
        tried.append(f"building in {build} (TCPX_P2P_NO_BUILD=1, or no cmake)")
        return None
    print(f"setup.py: no libtcpx_p2p found: building it with CMake in {build}", file=sys.stderr)
    try:
        extra = os.environ.get("TCPX_P2P_CMAKE_ARGS", "").split()
        subprocess.check_call(["cmake", "-S", src, "-B", build, "-DBUILD_TESTING=OFF"] + extra,
                              stdout=sys.stderr)
        subprocess.check_call(["cmake", "--build", build, "-j", str(os.cpu_count() or 1),
                               "--target", "tcpx_p2p", "nccl-net-tcpxemu"], stdout=sys.stderr)
    except (OSError, subprocess.CalledProcessError) as e:
        tried.append(f"building in {build} ({e})")
        return None
    found = from_build_dir(build)
    if found and os.path.exists(os.path.join(found[1], LIBS[0])):
        return found
    tried.append(f"building in {build} (no lib/{LIBS[0]} after the build)")
    return None


INCLUDES, LIBDIR = find_library()


class BuildPy(build_py):
    """Record where the library was found, and bundle it with the emulator."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "tcpx_p2p")
        with open(os.path.join(pkg, "_paths.py"), "w") as f:
            f.write("# Written by setup.py: where the build found libtcpx_p2p.\n")
            f.write(f"BUILD_LIBDIR = {os.path.abspath(LIBDIR)!r}\n")
        if os.environ.get("TCPX_P2P_BUNDLE", "1") == "0":
            return
        os.makedirs(os.path.join(pkg, "lib"), exist_ok=True)
        for name in LIBS:
            src = os.path.join(LIBDIR, name)
            if os.path.exists(src):
                shutil.copy2(os.path.realpath(src), os.path.join(pkg, "lib", name))


warnings = ["-Wall", "-Wextra", "-Wshadow", "-Wstrict-prototypes", "-Wmissing-prototypes",
            "-Wno-unused-parameter"]
if os.environ.get("TCPX_P2P_WERROR") == "1":
    warnings.append("-Werror")

os.chdir(HERE)  # setuptools takes sources relative to setup.py
setup(
    name="tcpx_p2p",
    version="0.4.1",
    description="Point-to-point GPU and host transfers over NCCL net plugins (libtcpx_p2p)",
    packages=["tcpx_p2p"],
    ext_modules=[Extension(
        "tcpx_p2p._tcpx_p2p",
        sources=sorted(glob.glob("src/*.c")),
        depends=glob.glob("src/*.h"),
        include_dirs=INCLUDES,
        libraries=["dl"],
        extra_compile_args=["-std=gnu11", "-fvisibility=hidden"] + warnings,
    )],
    cmdclass={"build_py": BuildPy},
    python_requires=">=3.9",
    zip_safe=False,
)
