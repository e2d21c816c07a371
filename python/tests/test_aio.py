"""The session's completion fd from Python: Session.fileno() and
Session.completions(), with selectors and with asyncio (tcpx_p2p.aio), which
must park no thread per await."""
import asyncio
import selectors
import threading

import numpy as np
import pytest

import tcpx_p2p as tp
from conftest import TIMEOUT, connect_pair, pattern

PIECE = 4096


@pytest.fixture(params=[True, False], ids=["thread", "engine"])
def tpair(request):
    """Two host sessions, with or without progress threads."""
    a = tp.Session(gpu=-1, progress_thread=request.param)
    b = tp.Session(gpu=-1, progress_thread=request.param)
    ca, cb = connect_pair(a, b)
    yield a, b, ca, cb
    b.close()
    a.close()


def test_fileno_and_completions(tpair):
    a, b, ca, cb = tpair
    n = 200
    src, dst = pattern(n * PIECE, 41), np.zeros(n * PIECE, dtype=np.uint8)
    ms, md = b.register(src), a.register(dst)
    assert a.fileno() == a.fileno() >= 0
    rx = [ca.recv(md, offset=k * PIECE, length=PIECE) for k in range(n)]
    tx = [cb.send(ms, offset=k * PIECE, length=PIECE) for k in range(n)]
    sel = selectors.DefaultSelector()
    sel.register(a.fileno(), selectors.EVENT_READ)
    got = []
    while len(got) < n:
        if not a.progress_thread:  # nobody else drives: stand in for a timer
            b.progress()
            got += a.completions(max=16)
            continue
        assert sel.select(TIMEOUT), "the fd never became readable"
        while True:
            more = a.completions(max=16)
            got += more
            if len(more) < 16:
                break
    sel.close()
    assert sorted(map(id, got)) == sorted(map(id, rx))  # each exactly once
    assert all(x.done and x.ok for x in got)
    for x in tx:
        while not x.test():
            a.progress()
    assert np.array_equal(dst, src)
    assert a.completions() == []


def test_asyncio_many_in_flight_no_threads(tpair):
    """Thousands of awaits at once: no executor thread, every byte right."""
    a, b, ca, cb = tpair
    n = 2000
    src, dst = pattern(n * PIECE, 43), np.zeros(n * PIECE, dtype=np.uint8)
    ms, md = b.register(src), a.register(dst)
    threads_before = threading.active_count()

    async def main():
        loop = asyncio.get_running_loop()
        rx = [ca.recv(md, offset=k * PIECE, length=PIECE) for k in range(n)]
        tx = [cb.send(ms, offset=k * PIECE, length=PIECE) for k in range(n)]
        await asyncio.wait_for(asyncio.gather(*rx, *tx), TIMEOUT)
        assert loop._default_executor is None  # nothing ran in a thread
        assert threading.active_count() == threads_before
        return rx, tx

    rx, tx = asyncio.run(main())
    assert all(x.ok for x in rx + tx)
    assert np.array_equal(dst, src)


def test_asyncio_timeout_and_failure(tpair):
    a, b, ca, cb = tpair
    buf = np.zeros(PIECE, dtype=np.uint8)
    m = a.register(buf)

    async def main():
        x = ca.recv(m)  # nobody sends
        with pytest.raises(tp.TimedOut):
            await tp.wait_async(x, timeout=0.05)
        assert not x.done
        ca.close()  # fails it: the await that follows sees ECLOSED
        with pytest.raises(tp.Closed):
            await asyncio.wait_for(tp.wait_async(x), TIMEOUT)

    asyncio.run(main())


def test_session_close_forgets_its_fd():
    """A loop that watched a session's fd stops before the fd is closed."""
    a = tp.Session(gpu=-1, progress_thread=True)
    b = tp.Session(gpu=-1, progress_thread=True)
    ca, cb = connect_pair(a, b)
    src, dst = pattern(PIECE, 47), np.zeros(PIECE, dtype=np.uint8)
    ms, md = b.register(src), a.register(dst)

    async def main():
        loop = asyncio.get_running_loop()
        fd = a.fileno()
        await asyncio.wait_for(asyncio.gather(ca.recv(md), cb.send(ms)), TIMEOUT)
        b.close()
        a.close()
        with pytest.raises((KeyError, ValueError)):
            loop._selector.get_key(fd)

    asyncio.run(main())
    assert np.array_equal(dst, src)


def test_cancel(pair):
    """Xfer.cancel: a receive cancelled before its send came raises
    Cancelled, and so does the send it would have met; the next pair moves."""
    a, b, ca, cb = pair
    src, dst = pattern(3 * PIECE, 49), np.zeros(3 * PIECE, dtype=np.uint8)
    ms, md = b.register(src), a.register(dst)
    rx = [ca.recv(md, offset=k * PIECE, length=PIECE) for k in range(3)]
    rx[1].cancel()
    tx = [cb.send(ms, offset=k * PIECE, length=PIECE) for k in range(3)]
    for x in rx + tx:
        while True:
            try:
                if x.test():
                    break
            except tp.Cancelled:
                break
            a.progress()
            b.progress()
    assert rx[0].ok and rx[2].ok and tx[0].ok and tx[2].ok
    assert rx[1].ok is False and tx[1].ok is False
    with pytest.raises(tp.Cancelled):
        rx[1].wait(0)
    with pytest.raises(tp.Cancelled):
        tx[1].wait(0)
    assert np.array_equal(dst[:PIECE], src[:PIECE])
    assert np.array_equal(dst[2 * PIECE:], src[2 * PIECE:])
    assert not dst[PIECE:2 * PIECE].any()
