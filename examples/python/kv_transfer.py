#!/usr/bin/env python3
"""KV-cache hand-off between a prefill and a decode process with tcpx_p2p.

Each process owns a paged KV pool: LAYERS x {K, V} x BLOCKS blocks of
BLOCK_TOKENS x HEAD_DIM half floats, as vLLM-style engines lay it out.  The
prefill process has computed one request's KV in some of its blocks; the
decode process allocated other blocks for it in its own pool.  Over one
connection (dial/accept on 127.0.0.1):

  --op read  (default)  prefill exports its pool for reading and sends the
                        descriptor and its block table; decode READs the
                        request's blocks of every layer, K and V, with ONE
                        Conn.read, then notifies prefill that it may free them.
  --op write            decode exports its pool for writing and sends its
                        block table; prefill WRITEs every block with ONE
                        Conn.write carrying a notification, which decode
                        polls for.

Memory is PyTorch CUDA tensors when torch and a GPU are there (--device
auto), NumPy arrays otherwise.  `--mode both` (the default) runs prefill
here and decode in a child process; `--mode prefill|decode --port P` runs
one side.  Exits 0 after decode checked every element of every block.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

import tcpx_p2p as tp

LAYERS, BLOCKS, BLOCK_TOKENS, HEAD_DIM = 4, 64, 16, 128
BLOCK_BYTES = BLOCK_TOKENS * HEAD_DIM * 2          # float16
PREFILL_BLOCKS = [7, 3, 12, 40, 41, 42, 63, 0]     # where prefill holds the request
DECODE_BLOCKS = [5, 6, 20, 21, 22, 50, 1, 33]      # where decode wants it
TIMEOUT = 60.0
# The control message: a region descriptor and a block table.
CTRL = np.dtype([("desc", np.uint8, tp.RDESC_SIZE), ("n", np.uint32),
                 ("block", np.uint32, len(PREFILL_BLOCKS))])


def make_pool(device, sentinel):
    """A pool whose every element is `sentinel`, a value no block holds: a
    block that was not written (or was written with stale bytes) shows."""
    shape = (LAYERS, 2, BLOCKS, BLOCK_TOKENS * HEAD_DIM)
    if device == "cuda":
        import torch
        pool = torch.full(shape, sentinel, dtype=torch.float16, device="cuda")
        # The fill runs on torch's stream, the library works on its own:
        # memory handed to it must have no work pending elsewhere.
        torch.cuda.synchronize()
        return pool
    return np.full(shape, sentinel, dtype=np.float16)


def block_values(layer, kv, block):
    """What prefill computed for (layer, K or V, its block): exact in fp16."""
    base = ((layer * 2 + kv) * BLOCKS + block) % 200
    return base + (np.arange(BLOCK_TOKENS * HEAD_DIM) % 4) * 0.25


def block_offsets(blocks):
    """Byte offsets of the blocks in every layer's K and V array, layer by layer."""
    arrays = np.arange(LAYERS * 2, dtype=np.uint64)[:, None] * BLOCKS
    return ((arrays + np.asarray(blocks, dtype=np.uint64)[None, :]) * BLOCK_BYTES).ravel()


def to_host(pool):
    return pool.cpu().numpy() if hasattr(pool, "cpu") else pool


def poll_notification(session, timeout=TIMEOUT):
    """Notifications arrive only while the session is driven: poll it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        notes = session.notif_poll()
        if notes:
            return notes[0][1]
    raise TimeoutError("no notification")


def prefill(args, server, session):
    pool = make_pool(args.device, -2.0)
    host = np.full(pool.shape, -2.0, dtype=np.float16)
    for layer in range(LAYERS):
        for kv in range(2):
            for b in PREFILL_BLOCKS:
                host[layer, kv, b] = block_values(layer, kv, b)
    if args.device == "cuda":
        import torch
        pool.copy_(torch.from_numpy(host))
        torch.cuda.synchronize()
    else:
        pool[...] = host
    conn = server.accept(timeout=TIMEOUT)
    pool_mr = session.register(pool)
    ctrl = np.zeros(1, dtype=CTRL)
    ctrl_mr = session.register(ctrl)
    if args.op == "read":
        ctrl["desc"][0] = np.frombuffer(conn.export(pool_mr, access=tp.ACCESS_READ), np.uint8)
        ctrl["n"], ctrl["block"][0] = len(PREFILL_BLOCKS), PREFILL_BLOCKS
        conn.send(ctrl_mr).wait(TIMEOUT)
        note = poll_notification(session)        # decode has read the blocks
        print(f"prefill: decode says {note.decode()!r}: the request's blocks may be freed",
              flush=True)
    else:
        conn.recv(ctrl_mr).wait(TIMEOUT)
        rmr = conn.import_rmr(ctrl["desc"][0].tobytes())
        local = tp.Segments(pool_mr, block_offsets(PREFILL_BLOCKS), BLOCK_BYTES)
        remote = tp.Segments(rmr, block_offsets(ctrl["block"][0][:ctrl["n"][0]]), BLOCK_BYTES)
        t0 = time.perf_counter()
        conn.write(local, remote, notif=b"request 1 ready").wait(TIMEOUT)
        ms = (time.perf_counter() - t0) * 1e3
        print(f"prefill: wrote {len(local)} blocks ({local.total >> 10} KiB) in one Conn.write, "
              f"{ms:.1f} ms", flush=True)
    conn.barrier(timeout=TIMEOUT)                # neither side closes while the other moves
    conn.close()


def decode(args, session):
    conn = session.dial("127.0.0.1", args.port, timeout=TIMEOUT)
    pool = make_pool(args.device, -1.0)
    pool_mr = session.register(pool)
    ctrl = np.zeros(1, dtype=CTRL)
    ctrl_mr = session.register(ctrl)
    mine = block_offsets(DECODE_BLOCKS)
    if args.op == "read":
        conn.recv(ctrl_mr).wait(TIMEOUT)
        rmr = conn.import_rmr(ctrl["desc"][0].tobytes())
        remote = tp.Segments(rmr, block_offsets(ctrl["block"][0][:ctrl["n"][0]]), BLOCK_BYTES)
        local = tp.Segments(pool_mr, mine, BLOCK_BYTES)
        if args.device == "cuda":
            # The check below once now: CUDA loads a kernel at its first launch, and
            # loading may wait for every running kernel, the one holding the stream too.
            pool[:, :, DECODE_BLOCKS].float().sum().item()
            import torch
            decode = torch.cuda.Stream()  # non-blocking: the default stream cannot be held
            decode.wait_stream(torch.cuda.current_stream())
        t0 = time.perf_counter()
        x = conn.read(local, remote)
        if args.device == "cuda":
            # The decode step's stream waits for the blocks on the GPU, not this
            # thread: what torch queues on it next runs once every byte is in place.
            x.stream_wait(decode)
            with torch.cuda.stream(decode):
                got = pool[:, :, DECODE_BLOCKS].float().sum()  # queued behind the wait
        x.wait(TIMEOUT)   # drives the transfer (no progress thread here): before
        ms = (time.perf_counter() - t0) * 1e3  # anything that blocks on the stream
        print(f"decode: read {len(local)} blocks ({local.total >> 10} KiB) in one Conn.read, "
              f"{ms:.1f} ms", flush=True)
        if args.device == "cuda":
            want = sum(float(block_values(layer, kv, theirs).astype(np.float32).sum())
                       for layer in range(LAYERS) for kv in range(2)
                       for theirs in PREFILL_BLOCKS)
            decode.synchronize()  # the sum was queued on decode, behind the wait
            if abs(got.item() - want) > 1e-3 * max(1.0, abs(want)):
                raise SystemExit(f"decode: the stream read {got.item()}, want {want}")
            print("decode: a kernel queued behind Xfer.stream_wait saw every block", flush=True)
        conn.notify(b"request 1 read")
    else:
        ctrl["desc"][0] = np.frombuffer(conn.export(pool_mr, access=tp.ACCESS_WRITE), np.uint8)
        ctrl["n"], ctrl["block"][0] = len(DECODE_BLOCKS), DECODE_BLOCKS
        conn.send(ctrl_mr).wait(TIMEOUT)
        note = poll_notification(session)        # the blocks are in place now
        print(f"decode: notification {note.decode()!r}", flush=True)
    host = to_host(pool)
    for layer in range(LAYERS):
        for kv in range(2):
            for theirs, ours in zip(PREFILL_BLOCKS, DECODE_BLOCKS):
                if not np.array_equal(host[layer, kv, ours], block_values(layer, kv, theirs)):
                    raise SystemExit(f"decode: layer {layer} {'KV'[kv]} block {ours} is wrong")
    others = np.ones(BLOCKS, dtype=bool)
    others[DECODE_BLOCKS] = False
    if not (host[:, :, others] == -1.0).all():
        raise SystemExit("decode: a block outside the request was written")
    print(f"decode: all {LAYERS * 2 * len(DECODE_BLOCKS)} blocks verified ({args.device})",
          flush=True)
    conn.barrier(timeout=TIMEOUT)
    conn.close()


def pick_device(want):
    if want != "auto":
        return want
    try:
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["both", "prefill", "decode"], default="both")
    p.add_argument("--op", choices=["read", "write"], default="read")
    p.add_argument("--port", type=int, default=0, help="prefill's port (0: any, with both)")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    args = p.parse_args()
    args.device = pick_device(args.device)
    gpu = 0 if args.device == "cuda" else -1
    with tp.Session(gpu=gpu) as session:
        if args.mode == "decode":
            decode(args, session)
            return 0
        with session.server("127.0.0.1", args.port) as server:
            child = None
            if args.mode == "both":
                child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--mode",
                                          "decode", "--op", args.op, "--port", str(server.port),
                                          "--device", args.device])
            else:
                print(f"prefill: listening on port {server.port}", flush=True)
            try:
                prefill(args, server, session)
            finally:
                if child:
                    child.wait(TIMEOUT)
            return child.returncode if child else 0


if __name__ == "__main__":
    sys.exit(main())
