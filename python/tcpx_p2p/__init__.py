"""tcpx_p2p: point-to-point GPU and host transfers over NCCL net plugins.

Python bindings of libtcpx_p2p (a C extension over the C API).  Objects:

    Session(**config)      one process and one GPU (gpu=-1: host memory only)
    Session.server()       Server: accept() connections from peers that dial()
    Session.dial()         Conn to a Server
    Session.listen()       Listener: blob exchange through your own control plane
    Session.register(obj)  MR over a buffer, NumPy array or CUDA tensor
    Conn.send/recv/sendv/recvv/write/read  -> Xfer (wait(), test(), await,
                           query(), set_deadline())
    Conn.export(mr) -> bytes; Conn.import_rmr(bytes) -> RMR (one-sided targets)
    Segments(region, offsets, lengths)      a KV batch's blocks, checked once
    Conn.prepare/prepare_strided -> XList   a WRITE or READ checked once; XList.post()
    Session.stats(), Conn.stats() -> dict; prometheus(stats) -> text exposition

Waiting never holds the GIL.  Errors are Error subclasses carrying the
library's code and detail.  See docs/python.md.
"""
from . import _tcpx_p2p
from . import _lib
from ._errors import (Error, InvalidArgument, NoMemory, NotSupported, NoPlugin, PluginError,
                      NetworkError, TimedOut, Again, CudaError, ProtocolError, Busy, Closed,
                      InternalError, Cancelled, PeerRestarted, CLASSES as _CLASSES)

_tcpx_p2p._set_errors(Error, dict(_CLASSES))
_path, _libversion = _lib.load(_tcpx_p2p)

from ._tcpx_p2p import (Session, Conn, MR, RMR, Xfer, Server, Listener, Segments, XList,  # noqa: E402
                        wait_any, strerror, config_table, set_log_level,
                        ACCESS_READ, ACCESS_WRITE, RDESC_SIZE, NOTIF_MAX, NOTIF_LIMIT,
                        MAX_CHANNELS)
from . import aio as _aio  # noqa: E402
from .metrics import prometheus  # noqa: E402

_tcpx_p2p._set_await(_aio.wait_async)
_tcpx_p2p._set_close_hook(_aio.forget)
_tcpx_p2p._set_let_go_hook(_aio.let_go)
wait_async = _aio.wait_async

__version__ = _tcpx_p2p.HEADER_VERSION


def library_version():
    """Version of the libtcpx_p2p that was loaded ("MAJOR.MINOR.PATCH")."""
    return _tcpx_p2p.version()


def library_path():
    """The libtcpx_p2p file that was loaded."""
    return _tcpx_p2p.library_path()


def wait_all(xfers, timeout=None):
    """Wait for every xfer (any sessions), in the order they complete.

    Raises the first failure seen; TimedOut when timeout seconds pass
    first (the ones still pending stay pending).
    """
    import time
    pending = [x for x in xfers if not x.done]
    deadline = None if timeout is None else time.monotonic() + timeout
    first_error = None
    for x in xfers:
        if x.done and x.ok is False and first_error is None:
            try:
                x.wait(0)
            except Error as e:
                first_error = e
    while pending:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        sessions = {id(x.conn.session) for x in pending}
        if len(sessions) == 1:
            i = wait_any(pending, left)
        else:
            pending[0].wait(left)
            i = 0
        x = pending.pop(i)
        try:
            x.wait(0)
        except Error as e:
            if first_error is None:
                first_error = e
    if first_error is not None:
        raise first_error


__all__ = [
    "Session", "Conn", "MR", "RMR", "Xfer", "Server", "Listener", "Segments", "XList", "wait_any",
    "wait_all", "wait_async", "strerror", "config_table", "set_log_level", "library_version",
    "library_path", "Error", "InvalidArgument", "NoMemory", "NotSupported", "NoPlugin",
    "PluginError", "NetworkError", "TimedOut", "Again", "CudaError", "ProtocolError", "Busy",
    "Closed", "InternalError", "Cancelled", "PeerRestarted", "ACCESS_READ", "ACCESS_WRITE", "RDESC_SIZE", "NOTIF_MAX",
    "NOTIF_LIMIT", "MAX_CHANNELS", "prometheus",
]
