"""Loopback transfers of every kind, checked byte for byte."""
import asyncio
import threading
import time

import numpy as np
import pytest

import tcpx_p2p as tp
from conftest import TIMEOUT, complete, connect_pair, pattern


def test_import_and_library():
    assert tp.library_version() == tp.__version__
    assert tp.library_path().endswith("libtcpx_p2p.so.0")
    rows = {name: value for name, value, _ in tp.config_table()}
    assert "TCPX_P2P_NUM_CHANNELS" in rows


@pytest.mark.parametrize("size", [0, 1, 4097, 1 << 20, (3 << 20) + 5])
def test_send_recv_sizes(pair, size):
    a, b, ca, cb = pair
    src = pattern(max(size, 1), size)
    dst = bytearray(max(size, 1))
    with b.register(src) as ms, a.register(dst) as md:
        xr = ca.recv(md, 0, size)
        xs = cb.send(ms, 0, size)
        complete(xr, xs)
        assert xr.ok and xs.ok and xr.length == size
    assert bytes(dst[:size]) == src[:size].tobytes()


def test_both_directions_and_offsets(pair):
    a, b, ca, cb = pair
    buf_a = pattern(1 << 20, 1)
    buf_b = pattern(1 << 20, 2)
    want_a, want_b = buf_b[1000:201000].copy(), buf_a[5:65541].copy()
    ma, mb = a.register(buf_a), b.register(buf_b)
    x1 = ca.recv(ma, 300000, 200000)
    x2 = cb.send(mb, 1000, 200000)
    x3 = cb.recv(mb, 500000, 65536)
    x4 = ca.send(ma, 5, 65536)
    complete(x1, x2, x3, x4)
    assert np.array_equal(buf_a[300000:500000], want_a)
    assert np.array_equal(buf_b[500000:565536], want_b)


def test_memoryview_and_array_module(pair):
    import array
    a, b, ca, cb = pair
    src = array.array("I", range(50000))
    dst = memoryview(bytearray(200000))
    ms, md = b.register(src), a.register(dst)
    complete(ca.recv(md), cb.send(ms))
    assert bytes(dst) == src.tobytes()


def test_sendv_recvv_tuples_and_segments(pair):
    a, b, ca, cb = pair
    src1, src2 = pattern(1 << 20, 3), pattern(1 << 16, 4)
    dst = np.zeros(1 << 20, dtype=np.uint8)
    m1, m2, md = b.register(src1), b.register(src2), a.register(dst)
    send_segs = [(m1, 0, 4096), (m2, 100, 5000), (m1, 700000, 123457), (m1, 0, 0)]
    offs = np.array([900000, 10, 200000], dtype=np.int64)
    lens = np.array([4096 + 5000, 100000, 23457], dtype=np.uint32)
    recv_segs = tp.Segments(md, offs, lens)
    assert len(recv_segs) == 3 and recv_segs.total == 4096 + 5000 + 123457
    xr, xs = ca.recvv(recv_segs), cb.sendv(send_segs)
    complete(xr, xs)
    stream = np.concatenate([src1[:4096], src2[100:5100], src1[700000:823457]])
    got = np.concatenate([dst[900000:909096], dst[10:100010], dst[200000:223457]])
    assert np.array_equal(got, stream)


def test_sendv_into_plain_recv_1024_blocks(pair):
    """The fast path: a 1,024-block batch from NumPy offsets, one Segments."""
    a, b, ca, cb = pair
    block, nblk = 4096, 1024
    pool = pattern(2 * nblk * block, 5)
    ids = np.random.default_rng(6).permutation(2 * nblk)[:nblk]
    dst = np.zeros(nblk * block, dtype=np.uint8)
    mp, md = b.register(pool), a.register(dst)
    segs = tp.Segments(mp, ids.astype(np.uint64) * block, block)
    complete(ca.recv(md), cb.sendv(segs))
    assert np.array_equal(dst.reshape(nblk, block), pool.reshape(-1, block)[ids])


def test_length_mismatch_fails_both_and_conn_survives(pair):
    a, b, ca, cb = pair
    src, dst = pattern(8192, 7), bytearray(8192)
    ms, md = b.register(src), a.register(dst)
    xr, xs = ca.recv(md, 0, 4096), cb.send(ms, 0, 8192)
    with pytest.raises(tp.ProtocolError):
        complete(xr, xs)
    for x in (xr, xs):
        with pytest.raises(tp.ProtocolError) as e:
            complete(x)
        assert e.value.code == -10 and e.value.detail
    complete(ca.recv(md), cb.send(ms))
    assert bytes(dst) == src.tobytes()


def export_pool(ca, cb, pool_mr, access=None):
    """a exports pool_mr to b (carried as bytes); b's RMR."""
    desc = ca.export(pool_mr, access=access) if access else ca.export(pool_mr)
    assert isinstance(desc, bytes) and len(desc) == tp.RDESC_SIZE
    return cb.import_rmr(desc)


def drive_until_notif(sess, other, timeout=TIMEOUT):
    """Poll sess for one notification, driving `other` too."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        got = sess.notif_poll()
        if got:
            return got
        for x in other:
            x.test()
        assert time.monotonic() < deadline, "no notification"


def test_write_scattered_blocks_with_notification(pair):
    a, b, ca, cb = pair
    block, nblk = 8192, 64
    pool = np.zeros(nblk * block, dtype=np.uint8)     # a: the target (decode)
    kv = pattern(16 * block, 8)                       # b: the initiator (prefill)
    mpool, mkv = a.register(pool), b.register(kv)
    rmr = export_pool(ca, cb, mpool)
    assert rmr.length == pool.nbytes and rmr.access == tp.ACCESS_READ | tp.ACCESS_WRITE
    dst = np.array([5, 60, 2, 33, 17, 9, 1, 44, 50, 3, 7, 11, 13, 21, 40, 63], dtype=np.uint64)
    local = tp.Segments(mkv, np.arange(16, dtype=np.uint64) * block, block)
    remote = tp.Segments(rmr, dst * block, block)
    x = cb.write(local, remote, notif=b"request 7 ready")
    notes = drive_until_notif(a, [x])
    assert notes == [(ca, b"request 7 ready")]
    complete(x, drive=(a,))
    for j, d in enumerate(dst):
        assert np.array_equal(pool[int(d) * block:(int(d) + 1) * block],
                              kv[j * block:(j + 1) * block])


def test_read_and_tuple_remote_segments(pair):
    a, b, ca, cb = pair
    pool = pattern(1 << 20, 9)
    dst = np.zeros(3 * 10000, dtype=np.uint8)
    mpool, md = a.register(pool), b.register(dst)
    rmr = export_pool(ca, cb, mpool, access=tp.ACCESS_READ)
    x = cb.read([(md, 0, 30000)], [(rmr, 500, 10000), (rmr, 900000, 10000), (rmr, 0, 10000)])
    # the target serves the READ while its session is driven
    import time
    deadline = time.monotonic() + TIMEOUT
    while not x.test():
        a.progress()
        assert time.monotonic() < deadline
    assert np.array_equal(dst, np.concatenate([pool[500:10500], pool[900000:910000],
                                               pool[:10000]]))


def test_write_outside_export_refused_nothing_written(pair):
    a, b, ca, cb = pair
    pool = np.zeros(1 << 16, dtype=np.uint8)
    src = pattern(4096, 10)
    mpool, ms = a.register(pool), b.register(src)
    rmr = cb.import_rmr(ca.export(mpool, 0, 8192))
    with pytest.raises(tp.InvalidArgument):  # outside the rmr: refused at the post
        cb.write([(ms, 0, 4096)], [(rmr, 6000, 4096)])
    reader = cb.import_rmr(ca.export(mpool, 0, 4096, access=tp.ACCESS_READ))
    with pytest.raises(tp.InvalidArgument):  # no write access: refused at the post
        cb.write([(ms, 0, 4096)], [(reader, 0, 4096)])
    mpool.close()  # revokes the exports: the target refuses the transfer
    x = cb.write([(ms, 0, 4096)], [(rmr, 0, 4096)])
    with pytest.raises(tp.InvalidArgument) as e:
        complete(x, drive=(a,))
    assert e.value.detail and not pool.any()


def test_notify_after_data(pair):
    a, b, ca, cb = pair
    src, dst = pattern(1 << 20, 11), np.zeros(1 << 20, dtype=np.uint8)
    ms, md = b.register(src), a.register(dst)
    xr = ca.recv(md)
    xs = cb.send(ms)
    cb.notify(b"after the send")
    notes = drive_until_notif(a, [xs, xr])
    assert notes[0][1] == b"after the send" and notes[0][0] is ca
    complete(xr, xs)
    assert np.array_equal(dst, src)


def test_wait_any_and_wait_all(pair):
    a, b, ca, cb = pair
    src, dst = pattern(1 << 20, 12), np.zeros(1 << 20, dtype=np.uint8)
    ms, md = b.register(src), a.register(dst)
    recvs = [ca.recv(md, k << 18, 1 << 18) for k in range(4)]
    sends = [cb.send(ms, k << 18, 1 << 18) for k in range(4)]
    done = []

    def sender():
        tp.wait_all(sends, timeout=TIMEOUT)

    t = threading.Thread(target=sender)
    t.start()
    left = list(recvs)
    while left:
        i = tp.wait_any(left, timeout=TIMEOUT)
        done.append(left.pop(i))
    t.join(TIMEOUT)
    assert all(x.ok for x in recvs + sends)
    assert np.array_equal(dst, src)


def test_blob_exchange_listen_connect():
    with tp.Session() as a, tp.Session() as b:
        la, lb = a.listen(), b.listen()
        out = {}
        t = threading.Thread(target=lambda: out.update(c=lb.connect(la.blob, timeout=TIMEOUT)))
        t.start()
        ca = la.connect(lb.blob, timeout=TIMEOUT)
        t.join(TIMEOUT)
        cb = out["c"]
        src, dst = pattern(100000, 13), bytearray(100000)
        complete(ca.recv(a.register(dst)), cb.send(b.register(src)))
        assert bytes(dst) == src.tobytes()
        with pytest.raises(tp.NotSupported):
            ca.barrier(timeout=1)


def test_progress_thread_and_config_kwargs():
    kw = dict(progress_thread=True, num_channels=2, chunk_bytes=256 << 10, send_window=4,
              recv_window=8, timeout_ms=20000)
    with tp.Session(**kw) as a, tp.Session(**kw) as b:
        assert a.query()["chunk_bytes"] == 256 << 10
        ca, cb = connect_pair(a, b)
        src, dst = pattern(3 << 20, 14), np.zeros(3 << 20, dtype=np.uint8)
        xr = ca.recv(a.register(dst))
        xs = cb.send(b.register(src))
        xs.wait(TIMEOUT)  # the threads drive both sessions
        xr.wait(TIMEOUT)
        assert np.array_equal(dst, src)
        # The threads also finish the close handshake: nothing left posted.
        ca.close()
        cb.close()
        deadline = time.monotonic() + TIMEOUT
        while (a.query()["conns_closing"] or b.query()["conns_closing"]) and \
                time.monotonic() < deadline:
            time.sleep(0.001)
        assert a.query()["conns_closing"] == b.query()["conns_closing"] == 0
        assert a.query()["unclean_closes"] == b.query()["unclean_closes"] == 0


def test_asyncio_await(pair):
    a, b, ca, cb = pair
    src, dst = pattern(1 << 20, 15), np.zeros(1 << 20, dtype=np.uint8)
    ms, md = b.register(src), a.register(dst)

    async def main():
        xr, xs = ca.recv(md), cb.send(ms)
        await asyncio.wait_for(asyncio.gather(xr, tp.wait_async(xs, timeout=TIMEOUT)),
                               TIMEOUT)
        return xr, xs

    xr, xs = asyncio.run(main())
    assert xr.ok and xs.ok and np.array_equal(dst, src)


def test_notif_poll_waits_without_the_gil(pair):
    """notif_poll(timeout=...) waits in C, driving the target, while the
    initiator's thread posts and waits on its WRITE."""
    a, b, ca, cb = pair
    assert a.notif_poll(timeout=0.02) == []
    pool, src = np.zeros(1 << 20, dtype=np.uint8), pattern(1 << 20, 16)
    mp = a.register(pool)   # kept: a dropped MR is deregistered, revoking its exports
    rmr = cb.import_rmr(ca.export(mp))
    ms = b.register(src)
    out = {}

    def initiator():
        x = cb.write([(ms, 0, 1 << 20)], [(rmr, 0, 1 << 20)], notif=b"all there")
        x.wait(TIMEOUT)
        out["ok"] = x.ok

    t = threading.Thread(target=initiator)
    t.start()
    notes = a.notif_poll(timeout=TIMEOUT)
    t.join(TIMEOUT)
    assert notes == [(ca, b"all there")] and out == {"ok": True}
    assert np.array_equal(pool, src)


def test_unexport_refuses_what_comes_after(pair):
    a, b, ca, cb = pair
    pool = np.zeros(1 << 16, dtype=np.uint8)
    src = pattern(4096, 12)
    mpool, ms = a.register(pool), b.register(src)
    desc = ca.export(mpool)
    rmr = cb.import_rmr(desc)
    complete(cb.write([(ms, 0, 4096)], [(rmr, 0, 4096)]), drive=(a,))
    assert np.array_equal(pool[:4096], src)
    ca.unexport(desc)
    ca.unexport(desc)  # again: nothing to do
    pool[:] = 0
    with pytest.raises(tp.InvalidArgument) as e:
        complete(cb.write([(ms, 0, 4096)], [(rmr, 0, 4096)]), drive=(a,))
    assert "no export of the target allows it" in e.value.detail and not pool.any()
    with pytest.raises(tp.InvalidArgument):
        cb.unexport(desc)  # not an export of that conn
    with pytest.raises(ValueError):
        ca.unexport(b"short")


def test_failed_conn_is_an_empty_notification():
    a = tp.Session(gpu=-1, peer_max_notifs=4)
    b = tp.Session(gpu=-1)
    try:
        ca, cb = connect_pair(a, b)
        for _ in range(4):  # all a takes without polling
            cb.notify(b"n")
        # The fifth waits for a to poll (notification credits), never
        # failing the connection.
        with pytest.raises(tp.Again):
            cb.notify(b"n")
        cb.close()  # the peer closes: a's connection fails
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            b.progress()  # b's close finishes in b's passes (else a sees b go silent)
            try:
                ca.progress()
            except tp.Error:
                break
        else:
            pytest.fail("the peer's close did not fail the connection")
        notes = a.notif_poll(max=16)
        assert notes and notes[-1] == (ca, b"")  # the failure, after what came before
        assert all(msg for _, msg in notes[:-1])
        with pytest.raises(tp.Closed) as e:
            ca.progress()
        assert "closed" in e.value.detail
    finally:
        a.close()
        b.close()


def test_stats_count_what_moved_and_prometheus(pair):
    a, b, ca, cb = pair
    n, size = 5, 1 << 16
    src, dst = pattern(size, 21), np.zeros(size, dtype=np.uint8)
    ms, md = b.register(src), a.register(dst)
    for _ in range(n):
        complete(ca.recv(md), cb.send(ms))
    cb.notify(b"counted")
    deadline = time.monotonic() + TIMEOUT
    while not a.notif_poll():
        b.progress()
        assert time.monotonic() < deadline, "no notification"
    sa, sb = ca.stats(), cb.stats()
    assert (sa["xfers_in"], sa["bytes_in"], sa["notifs_in"]) == (n, n * size, 1)
    assert (sb["xfers_out"], sb["bytes_out"], sb["notifs_out"]) == (n, n * size, 1)
    assert sa["failed"] == sb["failed"] == 0 and sa["failed_by"] == {}
    # one-chunk sends one at a time, each on an idle connection: all on channel 0
    assert sb["chunks_out_by_channel"] == [n] + [0] * 15 == sa["chunks_in_by_channel"]
    assert b.stats()["bytes_out"] == n * size and b.stats()["conns"] == 1
    with tp.Session(gpu=-1, heartbeat_ms=50, dead_after_ms=0):
        pass
    text = tp.prometheus(sb, labels={"peer": 'a"1'})
    assert 'tcpx_p2p_bytes_out_total{peer="a\\"1"} %d\n' % (n * size) in text
    assert 'tcpx_p2p_xfer_latency_seconds_count{peer="a\\"1"} %d\n' % n in text
    assert "# TYPE tcpx_p2p_xfers_in_total counter" in text
    assert 'tcpx_p2p_chunks_out_by_channel_total{channel="0",peer="a\\"1"} %d\n' % n in text
    assert 'channel="1"' not in text


def test_60k_notification_round_trip(pair):
    a, b, ca, cb = pair
    msg = bytes(pattern(60 << 10, 60))
    cb.notify(b"short first")
    cb.notify(msg)
    got = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < 2:
        b.progress()
        got += a.notif_poll(max=16)
        assert time.monotonic() < deadline, "no notification"
    assert [m for _, m in got] == [b"short first", msg]
    assert got[1][0] is ca


def test_event_arguments(pair):
    """event= reaches the library: a session without a GPU refuses it
    (NotSupported), a handle of 0 or a non-event is refused here, a receive
    takes none; event=None posts as before."""
    a, b, ca, cb = pair
    src, dst = pattern(4096, 5), bytearray(4096)

    class TorchLike:
        cuda_event = 0x1234

    class Unrecorded:
        cuda_event = 0

    with b.register(src) as ms, a.register(dst) as md:
        rmr = export_pool(ca, cb, md)
        loc, rem = (ms, 0, 4096), (rmr, 0, 4096)
        with pytest.raises(tp.NotSupported):
            cb.send(ms, event=TorchLike())
        with pytest.raises(tp.NotSupported):
            cb.write(loc, rem, notif=b"n", event=0x1234)
        with pytest.raises(tp.NotSupported):
            cb.read(loc, rem, event=TorchLike())
        with pytest.raises(ValueError):
            cb.write(loc, rem, event=Unrecorded())
        with pytest.raises(TypeError):
            cb.write(loc, rem, event="no")
        with pytest.raises(TypeError):
            ca.recv(md, event=0x1234)
        complete(cb.write(loc, rem, event=None))
        rmr.close()
    assert bytes(dst) == src.tobytes()
