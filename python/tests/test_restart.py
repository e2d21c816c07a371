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
