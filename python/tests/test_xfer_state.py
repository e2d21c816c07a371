"""Xfer.query() and Xfer.set_deadline() (tcpx_p2p_xfer_query and
tcpx_p2p_xfer_deadline): chunk counts equal what was moved, a receive the
peer does not match is reported stalled and not failed, and a deadline that
passes fails the transfer with TimedOut (done, unlike a wait's timeout) and
its connection with it."""
import asyncio
import time

import numpy as np
import pytest

import tcpx_p2p as tp
from conftest import TIMEOUT, complete, connect_pair, pattern

CHUNK = 1 << 16  # chunk_bytes: a transfer of n bytes is ceil(n / CHUNK) chunks


@pytest.fixture
def small_chunks():
    a = tp.Session(gpu=-1, chunk_bytes=CHUNK)
    b = tp.Session(gpu=-1, chunk_bytes=CHUNK, stall_ms=20)
    ca, cb = connect_pair(a, b)
    yield a, b, ca, cb
    b.close()
    a.close()


@pytest.mark.parametrize("size", [0, 1, CHUNK, (1 << 20) + 5])
def test_query_counts_the_chunks_moved(small_chunks, size):
    a, b, ca, cb = small_chunks
    chunks = max(1, -(-size // CHUNK))
    src = pattern(max(size, 1), size)
    dst = np.zeros(max(size, 1), dtype=np.uint8)
    with a.register(src) as ms, b.register(dst) as md:
        xr = cb.recv(md, 0, size)
        q = xr.query()
        assert (q["done"], q["err"], q["chunks_done"]) == (False, 0, 0)
        xs = ca.send(ms, 0, size)
        complete(xr, xs)
        for x in (xr, xs):
            q = x.query()
            assert q == {"done": True, "err": 0, "stalled": False, "chunks": chunks,
                         "chunks_done": chunks}, (x, q)
            assert x.length == size
    assert np.array_equal(dst[:size], src[:size])
    assert cb.stats()["chunks_in"] == ca.stats()["chunks_out"] == chunks
    assert cb.stats()["bytes_in"] == ca.stats()["bytes_out"] == size


def test_unmatched_receive_is_stalled_not_failed(small_chunks):
    a, b, ca, cb = small_chunks
    src = pattern(CHUNK, 7)
    dst = np.zeros(CHUNK, dtype=np.uint8)
    ms, md = a.register(src), b.register(dst)
    xr = cb.recv(md)  # b's stall_ms is 20; a posts nothing yet
    deadline = time.monotonic() + TIMEOUT
    while not xr.query()["stalled"]:
        cb.progress()
        assert time.monotonic() < deadline, "never reported stalled"
    q = xr.query()
    assert (q["done"], q["err"], q["chunks_done"]) == (False, 0, 0)
    assert not xr.done and xr.ok is None
    assert cb.stats()["stalls"] == 1 and cb.stats()["failed"] == 0
    # The send comes: it moves, completes, and is no longer stalled.
    xs = ca.send(ms)
    complete(xr, xs)
    assert xr.query()["stalled"] is False and xr.query()["chunks_done"] == 1
    assert np.array_equal(dst, src)
    assert cb.stats()["stalls"] == 1


def test_deadline_in_time_changes_nothing(pair):
    a, b, ca, cb = pair
    src, dst = pattern(CHUNK, 8), np.zeros(CHUNK, dtype=np.uint8)
    ms, md = a.register(src), b.register(dst)
    xr, xs = cb.recv(md), ca.send(ms)
    assert xr.deadline is None
    before = time.monotonic()
    xr.set_deadline(60)
    xs.set_deadline(60.0)
    assert before + 59 < xr.deadline <= time.monotonic() + 60
    complete(xr, xs)
    assert xr.ok and xs.ok and np.array_equal(dst, src)
    # An ended transfer: nothing happens.
    d = xs.deadline
    xs.set_deadline(0.001)
    assert xs.deadline == d and xs.ok
    with pytest.raises(ValueError):
        xr.set_deadline(0)
    with pytest.raises(ValueError):
        xr.set_deadline(-1)
    with pytest.raises(TypeError):
        xr.set_deadline("1")


def test_deadline_past_fails_with_timedout_and_closes_the_conn(pair):
    a, b, ca, cb = pair
    dst = np.zeros(CHUNK, dtype=np.uint8)
    md = b.register(dst)
    xr = cb.recv(md)  # a never sends
    # A wait's own timeout leaves the transfer pending ...
    with pytest.raises(tp.TimedOut):
        xr.wait(timeout=0.01)
    assert not xr.done
    # ... its deadline fails it, with the same exception.
    xr.set_deadline(0.02)
    with pytest.raises(tp.TimedOut) as e:
        xr.wait(timeout=TIMEOUT)
    assert xr.done and xr.ok is False
    assert e.value.name == "ETIMEDOUT" and "deadline" in e.value.detail
    q = xr.query()
    assert (q["done"], q["err"], q["stalled"], q["chunks_done"]) == (True, e.value.code, False, 0)
    with pytest.raises(tp.TimedOut):
        xr.wait()  # the result is kept
    with pytest.raises(tp.TimedOut):
        cb.progress()  # the connection failed with it
    # The peer's side is closed with it.
    deadline = time.monotonic() + TIMEOUT
    with pytest.raises(tp.Closed):
        while time.monotonic() < deadline:
            ca.progress()
            b.progress()


def test_deadline_ends_an_await(pair):
    a, b, ca, cb = pair
    md = b.register(np.zeros(CHUNK, dtype=np.uint8))
    xr = cb.recv(md)
    xr.set_deadline(0.02)

    async def main():
        await asyncio.wait_for(tp.wait_async(xr), TIMEOUT)

    with pytest.raises(tp.TimedOut) as e:
        asyncio.run(main())
    assert xr.done and xr.query()["err"] == e.value.code < 0


def test_stream_wait_refusals(small_chunks):
    """Xfer.stream_wait without a GPU: NotSupported for a pending transfer,
    TypeError for what is no stream, ValueError for a default stream, and
    the transfer's own result once it ended (nothing to wait for).  The waits themselves are checked on a GPU
    (tests/gpu/test_stream_wait.c)."""
    a, b, ca, cb = small_chunks
    src = pattern(CHUNK, 9)
    dst = np.zeros(CHUNK, dtype=np.uint8)
    with a.register(src) as ms, b.register(dst) as md:
        xr = cb.recv(md)
        with pytest.raises(TypeError):
            xr.stream_wait("not a stream")
        with pytest.raises(tp.NotSupported):
            xr.stream_wait(0x1000)
        xs = ca.send(ms)
        complete(xr, xs)
        assert xr.stream_wait(0x1000) is None
        # the stream objects of torch and the CUDA stream protocol
        assert xr.stream_wait(TorchLike()) is None
        assert xr.stream_wait(ProtocolLike()) is None
        for bad in (BadProtocol(), NotCupy(), object()):
            with pytest.raises(TypeError):
                xr.stream_wait(bad)
        # the default streams, whatever the transfer's state
        for default in (None, 0, 1, 2, TorchDefault()):
            with pytest.raises(ValueError):
                xr.stream_wait(default)
    assert np.array_equal(dst, src)


class TorchLike:
    cuda_stream = 0x1000


class TorchDefault:
    cuda_stream = 0


class ProtocolLike:
    def __cuda_stream__(self):
        return (0, 0x1000)


class BadProtocol:
    def __cuda_stream__(self):
        return 0x1000


class NotCupy:
    ptr = 0x1000  # ptr alone is no stream (CuPy's memory has one too)
