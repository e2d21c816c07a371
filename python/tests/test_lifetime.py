"""Lifetimes: release order, objects outliving their owners, buffers
dropped by Python while registered, pending transfers dropped."""
import gc
import threading
import time

import numpy as np
import pytest

import tcpx_p2p as tp
from conftest import TIMEOUT, complete, connect_pair, pattern


def test_mr_outlives_its_session():
    s = tp.Session()
    buf = bytearray(4096)
    mr = s.register(buf)
    s.close()
    assert s.closed and mr.closed  # the session's close released it
    mr.close()                      # and closing again is harmless
    del s
    gc.collect()
    assert len(mr) == 4096
    buf.extend(b"x")                # the buffer export was released


def test_session_dropped_first_is_kept_by_its_objects():
    s = tp.Session()
    mr = s.register(bytearray(4096))
    del s
    gc.collect()
    assert not mr.closed
    mr.close()


def test_buffer_dropped_by_python_while_registered(pair):
    a, b, ca, cb = pair
    src = pattern(1 << 20, 1)
    want = src.copy()
    dst = bytearray(1 << 20)
    ms, md = b.register(src), a.register(dst)
    del src, dst                    # the MRs keep the memory
    gc.collect()
    complete(ca.recv(md), cb.send(ms))
    assert bytes(md.obj) == want.tobytes()
    with pytest.raises(BufferError):
        md.obj.extend(b"more")      # no resize while registered


def test_pending_transfer_dropped_then_conn_closed(pair):
    a, b, ca, cb = pair
    md = a.register(bytearray(1 << 20))
    x = ca.recv(md)
    del x                          # pending: the session keeps the handle
    gc.collect()
    with pytest.raises(tp.Busy):
        md.close()                 # still used by the dropped transfer
    ca.close()                     # cancels it; the orphan is released
    md.close()


def test_region_busy_while_transfer_pending(pair):
    a, b, ca, cb = pair
    src, dst = pattern(8192, 2), bytearray(8192)
    ms, md = b.register(src), a.register(dst)
    xr = ca.recv(md)
    with pytest.raises(tp.Busy):
        md.close()
    complete(xr, cb.send(ms))
    md.close()
    assert bytes(dst) == src.tobytes()


def test_conn_close_cancels_pending(pair):
    a, b, ca, cb = pair
    xr = ca.recv(a.register(bytearray(4096)))
    ca.close()
    with pytest.raises(tp.Closed):
        xr.wait(TIMEOUT)
    assert xr.done and xr.ok is False


def test_session_close_cascades():
    a, b = tp.Session(), tp.Session()
    ca, cb = connect_pair(a, b)
    mr = a.register(bytearray(1 << 16))
    x = ca.recv(mr)
    srv = a.server("127.0.0.1", 0)
    lis = a.listen()
    rmr = ca.import_rmr(cb.export(b.register(bytearray(64))))
    a.close()
    assert ca.closed and mr.closed and rmr.closed
    with pytest.raises(tp.Closed):
        x.wait(0)
    with pytest.raises(ValueError):
        srv.port
    with pytest.raises(ValueError):
        lis.blob
    b.close()


def test_context_managers():
    with tp.Session() as a, tp.Session() as b:
        ca, cb = connect_pair(a, b)
        with ca, a.register(bytearray(100)) as mr:
            assert not mr.closed
        assert ca.closed and mr.closed
    assert a.closed and b.closed


def test_close_refused_while_another_thread_waits(pair):
    a, b, ca, cb = pair
    src, dst = pattern(4096, 3), bytearray(4096)
    xr = ca.recv(a.register(dst))
    waiting = threading.Event()
    out = {}

    def waiter():
        waiting.set()
        try:
            xr.wait(TIMEOUT)
            out["ok"] = True
        except tp.Error as e:
            out["err"] = e

    t = threading.Thread(target=waiter)
    t.start()
    waiting.wait(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while not ca.in_use:             # until the waiter is inside wait()
        assert time.monotonic() < deadline, "the waiter never started waiting"
        time.sleep(0.001)
    with pytest.raises(tp.Busy):
        ca.close()
    with pytest.raises(tp.Busy):
        a.close()
    xs = cb.send(b.register(src))
    xs.wait(TIMEOUT)
    t.join(TIMEOUT)
    assert out == {"ok": True} and bytes(dst) == src.tobytes()


def test_many_objects_released_without_leaking_handles():
    for _ in range(3):
        with tp.Session() as a, tp.Session() as b:
            ca, cb = connect_pair(a, b)
            for k in range(20):
                src = np.full(4096, k, dtype=np.uint8)
                dst = bytearray(4096)
                complete(ca.recv(a.register(dst)), cb.send(b.register(src)))
                assert dst == bytes([k]) * 4096
