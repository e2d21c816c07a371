# Where the build that made this package found libtcpx_p2p.  setup.py
# writes the real value into the built package; None in the source tree.
BUILD_LIBDIR = None
