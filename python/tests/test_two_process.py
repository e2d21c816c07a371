"""Two processes over loopback: the parent serves, a child python dials,
receives a pattern, sends it back transformed, and writes into the
parent's exported memory with a notification."""
import os
import subprocess
import sys
import time

import numpy as np

import tcpx_p2p as tp
from conftest import TIMEOUT, pattern

CHILD = r"""
import sys, numpy as np, tcpx_p2p as tp
port, size = int(sys.argv[1]), int(sys.argv[2])
with tp.Session() as s:
    c = s.dial("127.0.0.1", port, timeout=30)
    buf = np.zeros(size, dtype=np.uint8)
    mr = s.register(buf)
    desc = bytearray(tp.RDESC_SIZE)
    md = s.register(desc)
    x = c.recv(mr); x.wait(30)
    c.recv(md).wait(30)
    buf ^= 0x5a
    c.send(mr).wait(30)
    rmr = c.import_rmr(bytes(desc))
    w = c.write(tp.Segments(mr, [0, size // 2], 4096), tp.Segments(rmr, [4096, 0], 4096),
                notif=b"child wrote")
    w.wait(30)
    c.barrier(timeout=30)
print("child ok")
"""


def test_two_processes():
    size = 2 << 20
    with tp.Session() as s:
        with s.server("127.0.0.1", 0) as srv:
            env = dict(os.environ)
            child = subprocess.Popen([sys.executable, "-c", CHILD, str(srv.port), str(size)],
                                     env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
            try:
                c = srv.accept(timeout=TIMEOUT)
                src = pattern(size, 1)
                back = np.zeros(size, dtype=np.uint8)
                pool = np.zeros(8192, dtype=np.uint8)
                mpool = s.register(pool)
                desc = bytearray(c.export(mpool))
                c.send(s.register(src)).wait(TIMEOUT)
                c.send(s.register(desc)).wait(TIMEOUT)
                c.recv(s.register(back)).wait(TIMEOUT)
                assert np.array_equal(back, src ^ 0x5a)
                deadline = time.monotonic() + TIMEOUT
                notes = []
                while not notes:   # polling drives this side of the WRITE
                    notes = s.notif_poll()
                    assert time.monotonic() < deadline
                assert notes == [(c, b"child wrote")]
                assert np.array_equal(pool[4096:], back[:4096])
                assert np.array_equal(pool[:4096], back[size // 2:size // 2 + 4096])
                c.barrier(timeout=TIMEOUT)
                # Closing here answers the child's close; a parent that
                # only waited would leave it waiting close_timeout_ms.
                c.close()
                out, err = child.communicate(timeout=TIMEOUT)
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()
    assert child.returncode == 0, err
    assert out.strip() == "child ok"
