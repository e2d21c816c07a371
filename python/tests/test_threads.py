"""Threads: waiting never holds the GIL, so a thread blocked in wait()
lets other threads run, and two threads drive two sessions at once."""
import threading

import numpy as np

import tcpx_p2p as tp
from conftest import TIMEOUT, connect_pair, pattern


def test_receiver_waits_while_sender_runs_python():
    """The receiver's wait() can only end if the sender's thread runs
    Python meanwhile (posting and waiting on the send): a wait holding
    the GIL would deadlock here until the timeout."""
    with tp.Session() as a, tp.Session() as b:
        ca, cb = connect_pair(a, b)
        src, dst = pattern(4 << 20, 1), np.zeros(4 << 20, dtype=np.uint8)
        ms, md = b.register(src), a.register(dst)
        out = {}

        def receiver():
            x = ca.recv(md)
            x.wait(TIMEOUT)
            out["recv"] = x.ok

        t = threading.Thread(target=receiver)
        t.start()
        xs = cb.send(ms)
        xs.wait(TIMEOUT)
        t.join(TIMEOUT)
        assert out == {"recv": True} and np.array_equal(dst, src)


def test_two_threads_two_session_pairs():
    """Four sessions; each of two threads drives one pair's sender while
    a third waits on both receivers with wait_any per session."""
    sessions = [tp.Session() for _ in range(4)]
    try:
        pairs = [connect_pair(sessions[0], sessions[1]), connect_pair(sessions[2], sessions[3])]
        size, rounds = 1 << 20, 8
        bufs = []
        errors = []

        def run(k):
            rx, tx = pairs[k]
            try:
                for r in range(rounds):
                    src = pattern(size, 100 * k + r)
                    dst = np.zeros(size, dtype=np.uint8)
                    xr = rx.recv(rx.session.register(dst))
                    xs = tx.send(tx.session.register(src))
                    # two waits in this thread: each drives its own session
                    done = []
                    while len(done) < 2:
                        for x in (xr, xs):
                            if x not in done and x.test():
                                done.append(x)
                    bufs.append((src, dst))
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert not errors and len(bufs) == 2 * rounds
        assert all(np.array_equal(s, d) for s, d in bufs)
    finally:
        for s in sessions:
            s.close()


def test_concurrent_posts_on_one_conn():
    """Several threads post sends on one conn while one thread receives."""
    with tp.Session() as a, tp.Session() as b:
        ca, cb = connect_pair(a, b)
        n, size = 4, 256 << 10
        srcs = [np.full(size, k + 1, dtype=np.uint8) for k in range(n)]
        dst = np.zeros(n * size, dtype=np.uint8)
        md = a.register(dst)
        recvs = [ca.recv(md, k * size, size) for k in range(n)]
        sends, lock = [], threading.Lock()

        def post(k):
            x = cb.send(b.register(srcs[k]))
            with lock:
                sends.append(x)
            x.wait(TIMEOUT)

        threads = [threading.Thread(target=post, args=(k,)) for k in range(n)]
        for t in threads:
            t.start()
        tp.wait_all(recvs, timeout=TIMEOUT)
        for t in threads:
            t.join(TIMEOUT)
        assert all(x.ok for x in sends)
        # sends match receives in posting order; every block is one value
        got = sorted(int(dst[k * size]) for k in range(n))
        assert got == [1, 2, 3, 4]
        for k in range(n):
            assert (dst[k * size:(k + 1) * size] == dst[k * size]).all()


def test_one_xfer_waited_on_by_two_threads_is_busy(pair):
    """While one thread waits on an Xfer, another thread's test() or
    wait() on it raises Busy instead of racing for its handle."""
    a, b, ca, cb = pair
    md = a.register(np.zeros(4096, dtype=np.uint8))
    x = ca.recv(md)  # nobody sends: it stays pending
    out = {}

    def waiter():
        try:
            x.wait(timeout=3.0)
        except tp.TimedOut:
            out["waiter"] = "timed out"

    t = threading.Thread(target=waiter)
    t.start()
    busy = False
    while t.is_alive():  # until the waiter is inside wait(), for its 3 s
        try:
            x.test()  # False while the waiter is not
        except tp.Busy:
            busy = True
            break
    t.join(TIMEOUT)
    assert busy and out == {"waiter": "timed out"}
