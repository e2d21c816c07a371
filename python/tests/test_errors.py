"""Errors: the library's code and detail, and the package's own checks."""
import mmap

import numpy as np
import pytest

import tcpx_p2p as tp
from conftest import complete, pattern


def test_error_carries_code_name_and_detail(pair):
    a, b, ca, cb = pair
    mr = a.register(bytearray(4096))
    with pytest.raises(tp.InvalidArgument) as e:
        ca.send(mr, 0, 8192)
    err = e.value
    assert isinstance(err, tp.Error)
    assert err.code == -1 and err.name == "EINVAL" and err.call == "Conn.send"
    assert "outside" in err.detail and err.detail in str(err)


def test_session_config_errors(monkeypatch):
    with pytest.raises(TypeError):
        tp.Session(no_such_field=1)
    with pytest.raises(TypeError):
        tp.Session(4)
    with pytest.raises(ValueError):
        tp.Session(unpack="sideways")
    with pytest.raises(tp.InvalidArgument) as e:
        tp.Session(num_channels=17)
    assert "num_channels" in e.value.detail
    monkeypatch.setenv("TCPX_P2P_NUM_CHANNELS", "many")
    with pytest.raises(tp.InvalidArgument) as e:
        tp.Session()
    assert "TCPX_P2P_NUM_CHANNELS" in e.value.detail


def test_timeout_leaves_transfer_pending(pair):
    a, b, ca, cb = pair
    src, dst = pattern(4096, 1), bytearray(4096)
    xr = ca.recv(a.register(dst))
    with pytest.raises(tp.TimedOut) as e:
        xr.wait(0.05)
    assert isinstance(e.value, TimeoutError) and not xr.done
    with pytest.raises(tp.TimedOut):
        tp.wait_any([xr], timeout=0)
    complete(xr, cb.send(b.register(src)))
    assert bytes(dst) == src.tobytes()


def test_dial_nobody_listening():
    with tp.Session() as s:
        with s.server("127.0.0.1", 0) as srv:
            port = srv.port
        with pytest.raises((tp.TimedOut, tp.NetworkError, tp.Closed)):
            s.dial("127.0.0.1", port, timeout=0.2)
        with pytest.raises(ValueError):
            s.dial("127.0.0.1", 0)


def test_memory_rules():
    with tp.Session() as s:
        with pytest.raises(ValueError, match="not contiguous"):
            s.register(np.zeros((64, 64), dtype=np.uint8)[:, ::2])
        with pytest.raises(ValueError, match="no bytes"):
            s.register(bytearray())
        with pytest.raises(TypeError, match="cannot register"):
            s.register(object())
        # Fortran order is contiguous too: the bytes are one range
        assert s.register(np.zeros((8, 8), order="F")).length == 512
        ro = s.register(b"read-only bytes")
        assert ro.readonly and ro.obj == b"read-only bytes"
        arr = np.zeros(100, dtype=np.uint8)
        arr.flags.writeable = False
        assert s.register(arr).readonly


def test_read_only_memory_never_receives(pair):
    a, b, ca, cb = pair
    ro = a.register(b"x" * 4096)
    with pytest.raises(ValueError, match="read-only"):
        ca.recv(ro)
    with pytest.raises(ValueError, match="read-only"):
        ca.recvv([(ro, 0, 10)])
    with pytest.raises(ValueError, match="read-only"):
        ca.export(ro, access=tp.ACCESS_WRITE)
    rmr = cb.import_rmr(ca.export(ro))  # default access of read-only memory: READ
    assert rmr.access == tp.ACCESS_READ
    src = b.register(bytearray(4096))
    with pytest.raises(ValueError, match="read-only"):
        cb.read([(b.register(b"y" * 4096), 0, 4096)], [(rmr, 0, 4096)])
    assert src.length == 4096


def test_segment_errors(pair):
    a, b, ca, cb = pair
    mr = a.register(bytearray(1 << 16))
    with pytest.raises(ValueError, match="outside"):
        tp.Segments(mr, [0, 65000], 1000)
    with pytest.raises(ValueError, match="negative"):
        tp.Segments(mr, np.array([0, -4096]), 10)
    with pytest.raises(ValueError, match="lengths"):
        tp.Segments(mr, [0, 1, 2], [1, 2])
    with pytest.raises(TypeError):
        tp.Segments(mr, np.zeros(4, dtype=np.float32), 1)
    with pytest.raises(TypeError):
        ca.sendv([mr])
    with pytest.raises(TypeError, match="RMR"):
        ca.write([(mr, 0, 10)], [(mr, 0, 10)])
    rmr = ca.import_rmr(cb.export(b.register(bytearray(100))))
    with pytest.raises(ValueError, match="another connection"):
        cb.write([(b.register(bytearray(10)), 0, 10)], [(rmr, 0, 10)])
    with pytest.raises(ValueError, match="another session"):
        ca.send(b.register(bytearray(10)))
    with pytest.raises(ValueError):
        cb.import_rmr(b"short")
    with pytest.raises(tp.ProtocolError):
        cb.import_rmr(bytes(tp.RDESC_SIZE))
    with pytest.raises(ValueError):
        ca.notify(b"")
    with pytest.raises(ValueError):
        ca.write([(mr, 0, 10)], [(rmr, 0, 10)], notif=b"n" * (tp.NOTIF_LIMIT + 1))
    # longer than the peer takes (its notif_max_bytes, 64 KiB by default)
    with pytest.raises(tp.InvalidArgument, match="notif_max_bytes"):
        ca.write([(mr, 0, 10)], [(rmr, 0, 10)], notif=b"n" * ((64 << 10) + 1))


def test_closed_objects_raise_value_error(pair):
    a, b, ca, cb = pair
    mr = a.register(bytearray(100))
    mr.close()
    with pytest.raises(ValueError, match="closed"):
        ca.send(mr)
    ca.close()
    with pytest.raises(ValueError, match="closed"):
        ca.send(a.register(bytearray(10)))
    with pytest.raises(ValueError, match="closed"):
        ca.progress()


def test_mmap_stays_open_while_registered():
    with tp.Session() as s:
        m = mmap.mmap(-1, 1 << 16)
        mr = s.register(m)
        with pytest.raises(BufferError):
            m.close()
        mr.close()
        m.close()
