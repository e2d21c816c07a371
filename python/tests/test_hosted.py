"""The peer's transfers hosted here (its WRITE into an export): the stats'
in_stalls, Conn.hosted (tcpx_p2p_conn_hosted), Conn.set_in_deadline (tcpx_p2p_conn_in_deadline) and
MR.close(fail_incoming=True) (tcpx_p2p_mr_deregister_ex with
TCPX_P2P_DEREG_FAIL_INCOMING).  The stalled writer is a session of this
process that never drives its side after posting (no progress thread, no
heartbeats): what it announced and sent is all the target ever gets."""
import math
import time

import numpy as np
import pytest

import tcpx_p2p as tp
from conftest import TIMEOUT, complete, connect_pair, pattern

CHUNK = 1 << 16
SIZE = 64 * CHUNK  # far more than a window: the writer stops with most unsent


@pytest.fixture
def stalled_pair():
    """(writer a, target b, conn on a, conn on b): a has no keepalive thread
    and nothing drives it unless the test does; b notices stalls at 20 ms.
    Liveness is off on both, so that only the target's close can end the
    writer's connection (a silent writer would be presumed dead)."""
    a = tp.Session(gpu=-1, chunk_bytes=CHUNK, heartbeat_ms=0, progress_thread=False,
                   dead_after_ms=0)
    b = tp.Session(gpu=-1, chunk_bytes=CHUNK, stall_ms=20, dead_after_ms=0)
    ca, cb = connect_pair(a, b)
    yield a, b, ca, cb
    b.close()
    a.close()


def stalled_write(a, b, ca, cb):
    """a's WRITE into b's export, posted and then left alone; returns it, the
    target's region and its memory, once b counted it in in_stalls."""
    dst = np.zeros(SIZE, dtype=np.uint8)
    md = b.register(dst)
    rmr = ca.import_rmr(cb.export(md))
    src = pattern(SIZE, 5)
    x = ca.write([(a.register(src), 0, SIZE)], [(rmr, 0, SIZE)])
    deadline = time.monotonic() + TIMEOUT
    while cb.stats()["in_stalls"] == 0:
        if time.monotonic() > deadline:
            pytest.skip("the writer's announcement never reached the target "
                        "without the writer driving it")
        b.progress()
    assert cb.stats()["stalls"] == 0
    assert b.stats()["in_stalls"] >= 1
    return x, md, dst


def drive_until_failed(s, c, exc):
    """Drive s until c's failure, exc, is raised (bounded)."""
    deadline = time.monotonic() + TIMEOUT
    with pytest.raises(exc):
        while time.monotonic() < deadline:
            s.progress()
            c.progress()


def test_hosted_empty(pair):
    a, b, ca, cb = pair
    assert ca.hosted() == []
    assert cb.hosted() == []
    cb.close()
    with pytest.raises(ValueError):
        cb.hosted()


def test_hosted_lists_the_stalled_write(stalled_pair):
    a, b, ca, cb = stalled_pair
    x, md, dst = stalled_write(a, b, ca, cb)
    deadline = time.monotonic() + TIMEOUT
    while not any(h["stalled"] for h in cb.hosted()):
        assert time.monotonic() < deadline
        b.progress()
    (h,) = cb.hosted()
    assert h["op"] == "write"
    assert h["length"] == SIZE
    assert 0 <= h["done"] < SIZE
    assert h["idle_ms"] >= 20  # stalled: no chunk for stall_ms
    assert h["age_ms"] >= h["idle_ms"]
    assert h["nregions"] == 1
    assert h["regions"] == [md]
    assert ca.hosted() == []  # the writer hosts nothing
    cb.set_in_deadline(0.05)
    drive_until_failed(b, cb, tp.TimedOut)
    with pytest.raises(tp.Closed):
        complete(x)
    deadline = time.monotonic() + TIMEOUT
    while cb.hosted():  # let go once the writer answered the close
        assert time.monotonic() < deadline
        a.progress()
        b.progress()
    md.close()


def test_stats_have_in_stalls(pair):
    a, b, ca, cb = pair
    for st in (ca.stats(), cb.stats(), a.stats(), b.stats()):
        assert st["in_stalls"] == 0


def test_set_in_deadline_values(pair):
    a, b, ca, cb = pair
    for bad in (-1, -0.001, math.nan):
        with pytest.raises(tp.InvalidArgument):
            cb.set_in_deadline(bad)
    with pytest.raises(TypeError):
        cb.set_in_deadline("1")
    for good in (0, None, 0.0001, 5, 1e12):
        cb.set_in_deadline(good)


def test_in_deadline_honest_writes_land(pair):
    a, b, ca, cb = pair
    cb.set_in_deadline(TIMEOUT)
    size = 1 << 20
    src = pattern(size, 3)
    dst = np.zeros(size, dtype=np.uint8)
    with a.register(src) as ms, b.register(dst) as md:
        rmr = ca.import_rmr(cb.export(md))
        for _ in range(4):
            complete(ca.write([(ms, 0, size)], [(rmr, 0, size)]), drive=(b,))
            assert np.array_equal(dst, src)
        rmr.close()
    assert cb.stats()["in_stalls"] == 0


def test_in_deadline_on_a_closed_conn(pair):
    a, b, ca, cb = pair
    cb.close()
    with pytest.raises(ValueError):
        cb.set_in_deadline(1)


def test_close_fail_incoming_without_peer_transfers(pair):
    a, b, ca, cb = pair
    buf = np.zeros(4096, dtype=np.uint8)
    mr = b.register(buf)
    cb.export(mr)
    mr.close(fail_incoming=True)
    assert mr.closed
    mr.close(fail_incoming=True)  # again: nothing happens
    with pytest.raises(TypeError):
        b.register(buf).close(True)  # keyword only


def test_close_fail_incoming_leaves_own_transfers(pair):
    a, b, ca, cb = pair
    buf = np.zeros(4096, dtype=np.uint8)
    mr = b.register(buf)
    x = cb.recv(mr)  # nothing sent: it stays pending
    with pytest.raises(tp.Busy):
        mr.close(fail_incoming=True)
    assert not mr.closed
    x.cancel()
    with pytest.raises(tp.Error):
        complete(x)
    mr.close(fail_incoming=True)


def test_stalled_write_failed_by_in_deadline(stalled_pair):
    a, b, ca, cb = stalled_pair
    x, md, dst = stalled_write(a, b, ca, cb)
    with pytest.raises(tp.Busy):
        md.close()
    cb.set_in_deadline(0.05)
    drive_until_failed(b, cb, tp.TimedOut)
    with pytest.raises(tp.Closed):
        complete(x)  # the writer learns at once: the target closed
    deadline = time.monotonic() + TIMEOUT
    while True:  # the region is let go once the writer answered the close
        try:
            md.close()
            break
        except tp.Busy:
            assert time.monotonic() < deadline
            a.progress()
            b.progress()


def test_stalled_write_failed_by_close_fail_incoming(stalled_pair):
    a, b, ca, cb = stalled_pair
    x, md, dst = stalled_write(a, b, ca, cb)
    with pytest.raises(tp.Busy):
        md.close()
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            md.close(fail_incoming=True)
            break
        except tp.Again:
            assert time.monotonic() < deadline
            a.progress()
            b.progress()
    assert md.closed
    with pytest.raises(tp.Cancelled):
        cb.progress()
    with pytest.raises(tp.Closed):
        complete(x)
