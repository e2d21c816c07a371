"""Restarted peers recognised by a node id (Session.set_node_id,
tcpx_p2p_session_set_node_id): a listener that holds a connection from a
dialler fails it with PeerRestarted when a new incarnation with the same
node id connects, while the old one is still alive."""
import numpy as np
import pytest

import tcpx_p2p as tp
from conftest import complete, connect_pair, pattern

SIZE = 1 << 16


def test_set_node_id_values():
    with tp.Session(gpu=-1) as s:
        for good in ("decode-7", "x" * 31, None, ""):
            s.set_node_id(good)
        for bad in ("x" * 32, "has space", "\x01", "é"):
            with pytest.raises(tp.InvalidArgument):
                s.set_node_id(bad)
        with pytest.raises(TypeError):
            s.set_node_id(7)


def test_listener_recognises_restarted_dialler():
    t = tp.Session(gpu=-1)
    d1 = tp.Session(gpu=-1)
    d2 = tp.Session(gpu=-1)
    try:
        d1.set_node_id("decode-7")
        d2.set_node_id("decode-7")
        ct1, cd1 = connect_pair(t, d1)
        dst = np.zeros(SIZE, dtype=np.uint8)
        md = t.register(dst)
        old = ct1.recv(md)
        assert not old.test()
        ct2, cd2 = connect_pair(t, d2)  # the new incarnation
        with pytest.raises(tp.PeerRestarted):
            old.test()
        src = pattern(SIZE, 3)
        complete(ct2.recv(md), cd2.send(d2.register(src)))
        assert np.array_equal(dst, src)
    finally:
        d2.close()
        d1.close()
        t.close()


def test_redial_same_conn():
    """Session(redial_ms=...): a dialled Conn whose server session went
    away re-dials the next one at the same port by itself; calls raise
    Again meanwhile, then the same Conn moves bytes and its generation is
    1.  Without redial_ms the Conn stays Closed, generation 0."""
    import threading
    import time

    for redial in (60000, 0):
        d = tp.Session(gpu=-1, redial_ms=redial)
        t1 = tp.Session(gpu=-1)
        t2 = None
        try:
            srv = t1.server("127.0.0.1", 0)
            port = srv.port
            out = {}
            th = threading.Thread(target=lambda: out.update(c=srv.accept(timeout=60)))
            th.start()
            c = d.dial("127.0.0.1", port, timeout=60)
            th.join()
            srv.close()
            assert c.generation == 0
            dst = np.zeros(SIZE, dtype=np.uint8)
            md = d.register(dst)
            old = c.recv(md)
            out["c"].close()
            with pytest.raises(tp.Closed):
                old.wait(60)
            t1.close()
            t2 = tp.Session(gpu=-1)
            srv = t2.server("127.0.0.1", port)
            th = threading.Thread(target=lambda: out.update(c=srv.accept(timeout=60)))
            th.start()
            if not redial:
                with pytest.raises(tp.Closed):
                    c.progress()
                assert c.generation == 0
                d.dial("127.0.0.1", port, timeout=60).close()  # let the accept end
                th.join()
                out["c"].close()
                srv.close()
                c.close()
                continue
            end = time.monotonic() + 60
            again = 0
            while True:
                try:
                    c.progress()
                    break
                except tp.Again:
                    again += 1
                    assert time.monotonic() < end
                    time.sleep(0.005)
            th.join()
            srv.close()
            assert again > 0 and c.generation == 1
            src = pattern(SIZE, 5)
            complete(c.recv(md), out["c"].send(t2.register(src)))
            assert np.array_equal(dst, src)
            out["c"].close()
            c.close()
        finally:
            if t2:
                t2.close()
            t1.close()
            d.close()
