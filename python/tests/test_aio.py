"""The session's completion fd from Python: Session.fileno() and
Session.completions(), with selectors and with asyncio (tcpx_p2p.aio), which
must park no thread per await."""
import asyncio
import selectors
import threading
import time

import numpy as np
import pytest

import tcpx_p2p as tp
from conftest import TIMEOUT, complete, connect_pair, pattern

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


def _loop_thread():
    """An event loop running in a thread of its own."""
    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    return loop, t


def _stop(loop, t):
    loop.call_soon_threadsafe(loop.stop)
    t.join(TIMEOUT)
    loop.close()


def test_two_loops_one_session():
    """An end that one loop takes from the session's fd reaches the loop
    that awaits it: loop B is held busy while its transfer ends, so only
    loop A sees the fd readable (and clears it)."""
    a = tp.Session(gpu=-1, progress_thread=True)
    b = tp.Session(gpu=-1, progress_thread=True)
    ca, cb = connect_pair(a, b)
    src, dst = pattern(2 * PIECE, 53), np.zeros(2 * PIECE, dtype=np.uint8)
    ms, md = b.register(src), a.register(dst)
    loop_a, ta = _loop_thread()
    loop_b, tb = _loop_thread()
    x1 = ca.recv(md, offset=0, length=PIECE)
    x2 = ca.recv(md, offset=PIECE, length=PIECE)
    gate, b_waiting = threading.Event(), threading.Event()

    async def await_held(x):
        coro = tp.wait_async(x)
        fut = asyncio.ensure_future(coro)
        await asyncio.sleep(0)  # the await is registered with B's reactor
        b_waiting.set()
        gate.wait(TIMEOUT)  # B's loop is held: it cannot see the fd
        await asyncio.wait_for(fut, TIMEOUT)

    fa = asyncio.run_coroutine_threadsafe(tp.wait_async(x1), loop_a)
    fb = asyncio.run_coroutine_threadsafe(await_held(x2), loop_b)
    try:
        assert b_waiting.wait(TIMEOUT)
        # The sends are matched in order: x1's data, then x2's.  Loop A
        # takes both ends from the fd while B is held.
        tx = [cb.send(ms, offset=0, length=PIECE), cb.send(ms, offset=PIECE, length=PIECE)]
        fa.result(TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while not x2.done:  # until A's completions() has taken it too
            assert time.monotonic() < deadline, "loop A never took the second end"
            time.sleep(0.001)
        gate.set()
        fb.result(TIMEOUT)  # B resolves although its fd never woke it
        complete(*tx)
    finally:
        gate.set()
        _stop(loop_a, ta)
        _stop(loop_b, tb)
    assert np.array_equal(dst, src)
    b.close()
    a.close()


@pytest.mark.parametrize("other", ["wait", "cancel"])
def test_await_while_another_thread_uses_the_xfer(other):
    """A thread that waits on (or cancels) an awaited transfer while it ends
    holds it busy, so completions() passes it over; letting go of it tells
    the loop.  Many rounds: the end must land inside the other thread's call
    at least sometimes."""
    a = tp.Session(gpu=-1, progress_thread=True)
    b = tp.Session(gpu=-1, progress_thread=True)
    ca, cb = connect_pair(a, b)
    rounds = 200
    src, dst = pattern(rounds * PIECE, 59), np.zeros(rounds * PIECE, dtype=np.uint8)
    ms, md = b.register(src), a.register(dst)
    loop, t = _loop_thread()
    try:
        for k in range(rounds):
            x = ca.recv(md, offset=k * PIECE, length=PIECE)
            fut = asyncio.run_coroutine_threadsafe(tp.wait_async(x), loop)
            y = cb.send(ms, offset=k * PIECE, length=PIECE)
            try:
                x.wait(TIMEOUT) if other == "wait" else x.cancel()
            except tp.Busy:
                pass  # the loop's completions() took it first
            try:
                fut.result(TIMEOUT)
            except tp.Cancelled:
                pass
            try:
                complete(y)
            except tp.Cancelled:
                pass
    finally:
        _stop(loop, t)
    b.close()
    a.close()
