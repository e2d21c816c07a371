"""Fixtures: two host-memory sessions in this process, connected over the
emulator on 127.0.0.1, and helpers that drive both until transfers end."""
import threading
import time

import numpy as np
import pytest

import tcpx_p2p as tp

TIMEOUT = 30.0  # seconds: a deadline for hangs, never a measurement


def connect_pair(a, b):
    """Conns (on a, on b) by dial/accept: accept runs in a thread."""
    out = {}
    with a.server("127.0.0.1", 0) as srv:
        def accept():
            try:
                out["conn"] = srv.accept(timeout=TIMEOUT)
            except Exception as e:  # reported by the caller
                out["error"] = e
        t = threading.Thread(target=accept)
        t.start()
        cb = b.dial("127.0.0.1", srv.port, timeout=TIMEOUT)
        t.join(TIMEOUT)
    if "error" in out:
        raise out["error"]
    return out["conn"], cb


def complete(*xfers, drive=(), timeout=TIMEOUT):
    """Drive every xfer's session (test()), and the sessions in drive (a
    one-sided target's), until all are done; raises the first error.  One
    thread can drive both ends of a loopback this way."""
    deadline = time.monotonic() + timeout
    pending = list(xfers)
    while pending:
        for s in drive:
            s.progress()
        pending = [x for x in pending if not x.test()]
        if time.monotonic() > deadline:
            raise AssertionError(f"transfers still pending after {timeout} s: {pending}")


def pattern(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


@pytest.fixture
def pair():
    """(session a, session b, conn on a, conn on b); closed afterwards."""
    a = tp.Session(gpu=-1)
    b = tp.Session(gpu=-1)
    ca, cb = connect_pair(a, b)
    yield a, b, ca, cb
    b.close()
    a.close()
