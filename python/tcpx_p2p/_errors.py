"""Exceptions: one class per library error code, all under Error."""
import builtins


class Error(Exception):
    """A libtcpx_p2p call failed.

    code: the negative TCPX_P2P_E* value; name: its name ("ETIMEDOUT");
    detail: tcpx_p2p_last_error() of the failing call; call: the method.
    """

    def __init__(self, code, detail=None, call=""):
        super().__init__(code, detail, call)
        self.code = code
        self.name = NAMES.get(code, str(code))
        self.detail = detail or ""
        self.call = call

    def __str__(self):
        from . import _tcpx_p2p
        text = _tcpx_p2p.strerror(self.code)
        where = f"{self.call}: " if self.call else ""
        return f"{where}{text} ({self.name})" + (f": {self.detail}" if self.detail else "")


class InvalidArgument(Error):
    """EINVAL: bad argument or configuration value."""


class NoMemory(Error):
    """ENOMEM: out of host or device memory."""


class NotSupported(Error):
    """ENOTSUP: the plugin or build does not support this."""


class NoPlugin(Error):
    """ENOPLUGIN: no NCCL net plugin could be loaded."""


class PluginError(Error):
    """EPLUGIN: the plugin returned an error."""


class NetworkError(Error):
    """ENET: socket or system error."""


class TimedOut(Error, builtins.TimeoutError):
    """ETIMEDOUT: the deadline passed; nothing was lost."""

    def __init__(self, code, detail=None, call=""):
        Error.__init__(self, code, detail, call)


class Again(Error):
    """EAGAIN: not complete yet."""


class CudaError(Error):
    """ECUDA: a CUDA call failed."""


class ProtocolError(Error):
    """EPROTO: the peer broke the protocol (another version or layout, or past a bound)."""


class Busy(Error):
    """EBUSY: the object still has transfers or users."""


class Closed(Error):
    """ECLOSED: the peer closed, or the connection failed before."""


class InternalError(Error):
    """EINTERNAL: a bug in the library; please report it."""


class Cancelled(Error):
    """ECANCELED: cancelled (Xfer.cancel), on this side or by the peer."""


class PeerRestarted(Closed):
    """EPEERRESTART: the peer restarted; a new incarnation of it connected from the same address."""


CLASSES = {
    -1: InvalidArgument, -2: NoMemory, -3: NotSupported, -4: NoPlugin, -5: PluginError,
    -6: NetworkError, -7: TimedOut, -8: Again, -9: CudaError, -10: ProtocolError, -11: Busy,
    -12: Closed, -13: InternalError, -14: Cancelled, -15: PeerRestarted,
}
NAMES = {
    -1: "EINVAL", -2: "ENOMEM", -3: "ENOTSUP", -4: "ENOPLUGIN", -5: "EPLUGIN", -6: "ENET",
    -7: "ETIMEDOUT", -8: "EAGAIN", -9: "ECUDA", -10: "EPROTO", -11: "EBUSY", -12: "ECLOSED",
    -13: "EINTERNAL", -14: "ECANCELED", -15: "EPEERRESTART",
}
