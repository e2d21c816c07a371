"""GPU tests of the Python package with PyTorch: CUDA tensors in and out,
and KV WRITE/READ of scattered blocks between CUDA pools.

Runs under pytest or alone (`python3 test_gpu.py`, which needs no pytest:
the GPU machine's Python may lack it); alone it exits 77 without torch or
a GPU, as CTest's python.gpu expects.  Byte checks only, no timings.
"""
import os
import subprocess
import sys
import threading
import time
import unittest

try:
    import numpy as np
except ImportError:  # main() skips: the tests need NumPy and torch
    np = None

# Before CUDA starts: the emulator copies on streams of its own, which a held
# stream sharing their hardware queue blocks (docs/api.md, stream waits).
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")

import tcpx_p2p as tp  # noqa: E402

TIMEOUT = 60.0


def cuda_torch():
    if np is None:
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def need_gpu():
    torch = cuda_torch()
    if torch is None:
        raise unittest.SkipTest("needs torch with a CUDA GPU")
    return torch


def pair(**kw):
    a, b = tp.Session(gpu=0, **kw), tp.Session(gpu=0, **kw)
    out = {}
    with a.server("127.0.0.1", 0) as srv:
        t = threading.Thread(target=lambda: out.update(c=srv.accept(timeout=TIMEOUT)))
        t.start()
        cb = b.dial("127.0.0.1", srv.port, timeout=TIMEOUT)
        t.join(TIMEOUT)
    return a, b, out["c"], cb


def complete(*xfers, drive=()):
    deadline = time.monotonic() + TIMEOUT
    pending = list(xfers)
    while pending:
        for s in drive:
            s.progress()
        pending = [x for x in pending if not x.test()]
        assert time.monotonic() < deadline, f"still pending: {pending}"


def test_cuda_tensors_in_and_out():
    torch = need_gpu()
    a, b, ca, cb = pair()
    try:
        n = (8 << 20) + 12345
        src = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
        dst = torch.zeros(n, dtype=torch.uint8, device="cuda")
        ms, md = b.register(src), a.register(dst)
        assert ms.cuda and md.cuda and md.length == n
        torch.cuda.synchronize()
        complete(ca.recv(md), cb.send(ms))
        assert torch.equal(src, dst)
        # device to host and host to device
        host = np.zeros(n, dtype=np.uint8)
        complete(ca.recv(a.register(host)), cb.send(ms))
        assert np.array_equal(host, src.cpu().numpy())
        back = torch.zeros(n, dtype=torch.uint8, device="cuda")
        complete(cb.recv(b.register(back)), ca.send(a.register(host)))
        assert torch.equal(back, src)
    finally:
        b.close()
        a.close()


def test_stream_wait_torch_stream():
    """Xfer.stream_wait on a torch stream: a sum queued right behind the wait,
    before the send is even posted, sees every received byte; the default
    stream is refused."""
    torch = need_gpu()
    a, b, ca, cb = pair(progress_thread=True, num_channels=1)  # few emulator streams
    try:
        n = 4 << 20
        src = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
        dst = torch.zeros(n, dtype=torch.uint8, device="cuda")
        ms, md = b.register(src), a.register(dst)
        want = int(src.sum().item())
        dst.sum().item()  # the sum's kernels loaded before any stream is held
        st = torch.cuda.Stream()
        st.wait_stream(torch.cuda.current_stream())
        torch.cuda.synchronize()
        for _ in range(5):
            dst.zero_()
            torch.cuda.synchronize()
            xr = ca.recv(md)
            try:
                xr.stream_wait(torch.cuda.default_stream())
                raise AssertionError("the default stream was held")
            except ValueError:
                pass
            xr.stream_wait(st)
            with torch.cuda.stream(st):
                got = dst.sum()  # queued behind the wait
            time.sleep(0.05)     # the stream must still be held: no send yet
            assert not st.query(), "the stream ran before the transfer ended"
            xs = cb.send(ms)
            xs.wait(TIMEOUT)
            xr.wait(TIMEOUT)
            st.synchronize()
            assert int(got.item()) == want
    finally:
        b.close()
        a.close()


def test_dlpack_only_object_and_layout_rules():
    torch = need_gpu()

    class DLPackOnly:  # what a JAX array offers: no __cuda_array_interface__
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    with tp.Session(gpu=0) as s:
        t = torch.arange(4096, dtype=torch.float32, device="cuda")
        mr = s.register(DLPackOnly(t))
        assert mr.cuda and mr.length == 4096 * 4 and mr.ptr == t.data_ptr()
        mr.close()
        try:
            s.register(torch.zeros((64, 64), device="cuda")[:, ::2])
        except ValueError as e:
            assert "not contiguous" in str(e)
        else:
            raise AssertionError("a strided CUDA tensor was registered")


def kv_pools(torch, layers=4, blocks=256, block_elems=16 * 128):
    shape = (layers, 2, blocks, block_elems)
    return (torch.zeros(shape, dtype=torch.float16, device="cuda"),
            torch.zeros(shape, dtype=torch.float16, device="cuda"))


def block_offsets(blocks, layers, nblk, block_bytes):
    arrays = np.arange(2 * layers, dtype=np.uint64)[:, None] * nblk
    return ((arrays + np.asarray(blocks, dtype=np.uint64)[None, :]) * block_bytes).ravel()


def test_kv_write_and_read_scattered_blocks():
    torch = need_gpu()
    layers, nblk, elems = 4, 256, 16 * 128
    bb = elems * 2
    a, b, ca, cb = pair()
    try:
        decode_pool, prefill_pool = kv_pools(torch, layers, nblk, elems)
        prefill_pool.copy_(torch.randn(prefill_pool.shape, device="cuda").half())
        torch.cuda.synchronize()
        m_dec, m_pre = a.register(decode_pool), b.register(prefill_pool)
        rng = np.random.default_rng(1)
        src = rng.permutation(nblk)[:64]
        dst = rng.permutation(nblk)[:64]
        # WRITE: prefill (b) into decode's (a) pool, notified
        rmr = cb.import_rmr(ca.export(m_dec, access=tp.ACCESS_WRITE))
        x = cb.write(tp.Segments(m_pre, block_offsets(src, layers, nblk, bb), bb),
                     tp.Segments(rmr, block_offsets(dst, layers, nblk, bb), bb),
                     notif=b"kv ready")
        deadline = time.monotonic() + TIMEOUT
        notes = []
        while not notes:
            notes = a.notif_poll()
            x.test()
            assert time.monotonic() < deadline
        assert notes == [(ca, b"kv ready")]
        complete(x, drive=(a,))
        torch.cuda.synchronize()
        assert torch.equal(decode_pool[:, :, dst], prefill_pool[:, :, src])
        # READ: decode (a) reads other blocks back from prefill (b)
        src2, dst2 = rng.permutation(nblk)[:32], rng.permutation(nblk)[:32]
        rmr2 = ca.import_rmr(cb.export(m_pre, access=tp.ACCESS_READ))
        x = ca.read(tp.Segments(m_dec, block_offsets(dst2, layers, nblk, bb), bb),
                    tp.Segments(rmr2, block_offsets(src2, layers, nblk, bb), bb))
        complete(x, drive=(b,))
        torch.cuda.synchronize()
        assert torch.equal(decode_pool[:, :, dst2], prefill_pool[:, :, src2])
    finally:
        b.close()
        a.close()


def test_layerwise_write_on_torch_events():
    """conn.write(..., event=torch.cuda.Event): each layer's WRITE posted right
    after its kernels were queued (behind a sleep, so that they usually run
    after every post); the notification on the last finds every layer."""
    torch = need_gpu()
    layers, n = 8, 1 << 20
    a, b, ca, cb = pair()
    try:
        src = torch.zeros(layers * n, dtype=torch.uint8, device="cuda")
        dst = torch.zeros(layers * n, dtype=torch.uint8, device="cuda")
        m_src, m_dst = b.register(src), a.register(dst)
        rmr = cb.import_rmr(ca.export(m_dst, access=tp.ACCESS_WRITE))
        st = torch.cuda.Stream()
        torch.cuda.synchronize()
        evs, xs = [], []
        with torch.cuda.stream(st):
            torch.cuda._sleep(20_000_000)
            for i in range(layers):
                src[i * n:(i + 1) * n].fill_(i + 1)     # layer i's "kernels"
                evs.append(torch.cuda.Event())
                evs[-1].record(st)
                xs.append(cb.write((m_src, i * n, n), (rmr, i * n, n), event=evs[-1],
                                   notif=b"all layers" if i == layers - 1 else None))
        deadline = time.monotonic() + TIMEOUT
        notes = []
        while not notes:
            notes = a.notif_poll()
            for x in xs:
                x.test()
            assert time.monotonic() < deadline
        assert notes == [(ca, b"all layers")]
        want = torch.arange(1, layers + 1, dtype=torch.uint8, device="cuda").repeat_interleave(n)
        assert torch.equal(dst, want)
        complete(*xs, drive=(a,))
        with raises_(ValueError):
            cb.write((m_src, 0, n), (rmr, 0, n), event=torch.cuda.Event())  # never recorded
    finally:
        b.close()
        a.close()


def raises_(exc):
    """pytest.raises without pytest (the GPU machine may lack it)."""
    class Ctx:
        def __enter__(self):
            return self

        def __exit__(self, t, v, tb):
            assert t is not None and issubclass(t, exc), f"{exc.__name__} not raised"
            return True
    return Ctx()


def test_example_kv_transfer_on_cuda():
    need_gpu()
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "examples", "python", "kv_transfer.py")
    for op in ("read", "write"):
        r = subprocess.run([sys.executable, script, "--device", "cuda", "--op", op],
                           capture_output=True, text=True, timeout=TIMEOUT * 2)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "blocks verified (cuda)" in r.stdout, r.stdout


def main():
    if cuda_torch() is None:
        print("test_gpu: no NumPy, or no torch with a CUDA GPU: skipped")
        return 77
    tests = [(k, v) for k, v in sorted(globals().items()) if k.startswith("test_")]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
            passed += 1
            print(f"PASS {name}", flush=True)
        except unittest.SkipTest as e:
            print(f"SKIP {name}: {e}", flush=True)
        except Exception as e:  # every failure is reported, then the status
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
