"""Prepared transfer lists (Conn.prepare, Conn.prepare_strided, XList.post):
checked once, posted many times, every byte compared."""
import numpy as np
import pytest

import tcpx_p2p as tp
from conftest import TIMEOUT, complete, pattern


def take_notif(sess, xfers):
    """Drive sess (the target) and the initiator's xfers until one notification."""
    import time
    deadline = time.monotonic() + TIMEOUT
    while True:
        got = sess.notif_poll()
        if got:
            return got
        for x in xfers:
            x.test()
        assert time.monotonic() < deadline, "no notification"


def test_prepared_write_and_read_reposted(pair):
    a, b, ca, cb = pair
    block, nblk = 4096, 64
    pool = np.zeros(nblk * block, dtype=np.uint8)      # a: the target
    kv = np.zeros(16 * block, dtype=np.uint8)          # b: the initiator
    back = np.zeros(16 * block, dtype=np.uint8)
    mpool, mkv, mback = a.register(pool), b.register(kv), b.register(back)
    rmr = cb.import_rmr(ca.export(mpool))
    dst = np.array([5, 60, 2, 33, 17, 9, 1, 44, 50, 3, 7, 11, 13, 21, 40, 63], dtype=np.uint64)
    w = cb.prepare("write", tp.Segments(mkv, np.arange(16, dtype=np.uint64) * block, block),
                   tp.Segments(rmr, dst * block, block))
    r = cb.prepare("read", [(mback, 0, 16 * block)], tp.Segments(rmr, dst * block, block))
    assert (w.op, w.length, r.op, r.length) == ("write", 16 * block, "read", 16 * block)
    with pytest.raises(tp.Busy):  # the list holds its regions
        mkv.close()
    for i in range(8):
        kv[:] = pattern(kv.nbytes, 100 + i)
        x = w.post(notif=b"batch %d" % i)
        notes = take_notif(a, [x])
        assert notes == [(ca, b"batch %d" % i)]
        complete(x, drive=(a,))
        for j, d in enumerate(dst):
            assert np.array_equal(pool[int(d) * block:(int(d) + 1) * block],
                                  kv[j * block:(j + 1) * block])
        back[:] = 0
        complete(r.post(), drive=(a,))
        assert np.array_equal(back, kv)
    with pytest.raises(tp.InvalidArgument):
        r.post(notif=b"a read takes none")
    w.close()
    r.close()
    assert w.closed and r.closed
    with pytest.raises(ValueError):
        w.post()
    mkv.close()  # released: the region may go


def test_prepared_strided(pair):
    a, b, ca, cb = pair
    block = 1000
    pool = np.zeros(64 * block, dtype=np.uint8)
    src = pattern(40 * block, 7)
    mpool, msrc = a.register(pool), b.register(src)
    rmr = cb.import_rmr(ca.export(mpool))
    # every other local block against every third remote one
    with cb.prepare_strided("write", msrc, (block, 2 * block, 10, block),
                            rmr, (7, 3 * block, 10, block)) as w:
        for _ in range(3):
            complete(w.post(), drive=(a,))
    for k in range(10):
        got = pool[7 + 3 * k * block:7 + 3 * k * block + block]
        assert np.array_equal(got, src[block + 2 * k * block:block + 2 * k * block + block])
    with pytest.raises(tp.InvalidArgument):  # blocks would overlap
        cb.prepare_strided("write", msrc, (0, block - 1, 2, block), rmr, (0, block, 2, block))
    with pytest.raises(tp.InvalidArgument):  # past the end of the export
        cb.prepare_strided("write", msrc, (0, block, 2, block),
                           rmr, (pool.nbytes - block, block, 2, block))
    with pytest.raises(ValueError):
        cb.prepare_strided("copy", msrc, (0, block, 1, block), rmr, (0, block, 1, block))


def test_prepared_list_released_with_its_conn(pair):
    a, b, ca, cb = pair
    pool = np.zeros(1 << 16, dtype=np.uint8)
    src = pattern(4096, 3)
    mpool, ms = a.register(pool), b.register(src)
    rmr = cb.import_rmr(ca.export(mpool))
    w = cb.prepare("write", [(ms, 0, 4096)], [(rmr, 100, 4096)])
    cb.close()
    assert w.closed
    ms.close()  # the conn's close released the list and its hold
