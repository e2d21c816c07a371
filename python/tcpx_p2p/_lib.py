"""Finding libtcpx_p2p.so.

The package loads one file, the first of:

1. ``TCPX_P2P_LIBRARY``, when set: that file only.
2. ``lib/libtcpx_p2p.so.0`` inside the package (``pip install`` copies the
   library and the bundled emulator plugin there).
3. ``libtcpx_p2p.so.0`` in the library directory of the build the package
   was built from (the CMake build tree, or an install prefix).
4. ``libtcpx_p2p.so.0`` through the system's loader (``LD_LIBRARY_PATH``,
   ``ldconfig``'s cache).
"""
import os

from . import _paths

SONAME = "libtcpx_p2p.so.0"


def candidates():
    """The files to try, in order, with where each comes from."""
    env = os.environ.get("TCPX_P2P_LIBRARY")
    if env:
        return [(env, "TCPX_P2P_LIBRARY")]
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    bundled = os.path.join(here, "lib", SONAME)
    if os.path.exists(bundled):
        found.append((bundled, "installed with the package"))
    if _paths.BUILD_LIBDIR:
        built = os.path.join(_paths.BUILD_LIBDIR, SONAME)
        if os.path.exists(built):
            found.append((built, "the build the package was built from"))
    found.append((SONAME, "the system's library search path"))
    return found


def load(ext):
    """Load the first candidate into the extension; ImportError if none."""
    tried = []
    for path, why in candidates():
        try:
            return path, ext.load(path)
        except OSError as e:
            tried.append(f"  {path} ({why}): {e}")
    raise ImportError("tcpx_p2p: libtcpx_p2p could not be loaded; tried:\n" + "\n".join(tried) +
                      "\nBuild the library (scripts/quickstart.sh) and install the package "
                      "from it, or set TCPX_P2P_LIBRARY to libtcpx_p2p.so.0.")
