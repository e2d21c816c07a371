"""python -m tcpx_p2p.bench: bandwidth through the Python package, with
the settings and table of tcpx_perf, and optionally tcpx_perf itself run
alternately with the same settings for the ratio.

    python -m tcpx_p2p.bench loopback --size 1M,4M,64M [-n 20 -w 3] [--verify]
    python -m tcpx_p2p.bench kv [--layers 4 --blocks 1024 --block-size 64K] [--verify]
    ... --compare build/bin/tcpx_perf [--rounds 3]

loopback: two sessions in this process (a receiving thread and a sending
one) over a dial/accept connection; each iteration starts after a barrier,
and its time, as tcpx_perf's, is the receiver's, from posting the receive
until it completed.  kv: as `tcpx_perf kv loopback` (docs/benchmarks.md):
the target exports a pool of layers x {K, V} x blocks, the initiator moves
a batch of random scattered blocks with ONE Conn.write and a notification;
the time runs from building the batch's Segments (NumPy offsets) to the
write's completion.  GB/s = 10^9 bytes/s of completed payload.  NumPy is
required.  Exit status 0, 1 on a failure (verification included).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

import tcpx_p2p as tp

TOKEN = 8


def size_arg(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper()
    if t and t[-1] in mult:
        return int(float(t[:-1]) * mult[t[-1]])
    return int(t)


def sizes_arg(text):
    return [size_arg(t) for t in text.split(",") if t]


def stats(us, nbytes):
    """avg, p50, p99 (tcpx_perf's percentile rule) and GB/s."""
    s = sorted(us)
    n = len(s)

    def pct(p):
        k = int(p / 100.0 * n + 0.999999) - 1
        return s[min(max(k, 0), n - 1)]
    avg = sum(s) / n
    return {"time_us": avg, "p50_us": pct(50), "p99_us": pct(99),
            "gbps": nbytes / (avg * 1e3) if avg > 0 else 0.0}


def pattern(seed, key, it, n):
    """The bytes of iteration it: the same on both sides, never shared."""
    return np.random.default_rng([seed, key, it + 1000]).integers(0, 256, n, dtype=np.uint8)


def session_kwargs(o):
    kw = {"gpu": -1}
    if o.channels:
        kw["num_channels"] = o.channels
    if o.chunk:
        kw["chunk_bytes"] = o.chunk
    if o.window:
        kw["send_window"] = kw["recv_window"] = o.window
    if o.timeout:
        kw["timeout_ms"] = o.timeout
    return kw


def connect(a, b, timeout):
    out = {}
    with a.server("127.0.0.1", 0) as srv:
        t = threading.Thread(target=lambda: out.update(c=srv.accept(timeout=timeout)))
        t.start()
        cb = b.dial("127.0.0.1", srv.port, timeout=timeout)
        t.join(timeout)
    if "c" not in out:
        raise RuntimeError("accept did not complete")
    return out["c"], cb


def run_threads(rx, tx):
    """Run rx (receiver / target) in a thread and tx here; re-raise either."""
    err = []

    def wrap():
        try:
            rx()
        except BaseException as e:  # reported in this thread
            err.append(e)
    t = threading.Thread(target=wrap)
    t.start()
    try:
        tx()
    finally:
        t.join()
    if err:
        raise err[0]


class Loopback:
    def __init__(self, o):
        self.o = o
        self.recv_s = tp.Session(**session_kwargs(o))
        self.send_s = tp.Session(**session_kwargs(o))
        self.rc, self.sc = connect(self.recv_s, self.send_s, o.timeout_s)
        top = max(o.size)
        self.src = np.zeros(top, dtype=np.uint8)
        self.dst = np.zeros(top, dtype=np.uint8)
        self.smr = self.send_s.register(self.src)
        self.rmr = self.recv_s.register(self.dst)

    def info(self):
        return self.recv_s.query()

    def row(self, size):
        o, t = self.o, self.o.timeout_s
        us = []

        def receiver():
            for it in range(-o.warmup, o.iters):
                if o.verify:
                    self.dst[:size] = 0xA5
                self.rc.barrier(timeout=t)
                t0 = time.perf_counter()
                self.rc.recv(self.rmr, 0, size).wait(t)
                dt = (time.perf_counter() - t0) * 1e6
                if it >= 0:
                    us.append(dt)
                if o.verify:
                    want = pattern(o.seed, size, it, size)
                    if not np.array_equal(self.dst[:size], want):
                        bad = int(np.flatnonzero(self.dst[:size] != want)[0])
                        raise RuntimeError(f"verification FAILED: size {size}, iteration "
                                           f"{it}, first bad byte at offset {bad}")

        def sender():
            for it in range(-o.warmup, o.iters):
                if o.verify:
                    self.src[:size] = pattern(o.seed, size, it, size)
                self.sc.barrier(timeout=t)
                self.sc.send(self.smr, 0, size).wait(t)

        run_threads(receiver, sender)
        return stats(us, size)

    def close(self):
        self.send_s.close()
        self.recv_s.close()


class KV:
    def __init__(self, o):
        self.o = o
        L = o.layers
        if o.blocks % (2 * L) or o.pool_blocks % (2 * L) or o.pool_blocks < o.blocks:
            raise SystemExit("kv: --blocks and --pool-blocks must be multiples of 2 x layers, "
                             "pool-blocks >= blocks")
        self.nblk = o.pool_blocks // (2 * L)
        self.ids = o.blocks // (2 * L)
        self.tgt_s = tp.Session(**session_kwargs(o))
        self.ini_s = tp.Session(**session_kwargs(o))
        self.tc, self.ic = connect(self.tgt_s, self.ini_s, o.timeout_s)
        pool_bytes = o.pool_blocks * max(o.block_size)
        self.tpool = np.zeros(pool_bytes, dtype=np.uint8)
        self.ipool = np.zeros(pool_bytes, dtype=np.uint8)
        self.tmr = self.tgt_s.register(self.tpool)
        self.imr = self.ini_s.register(self.ipool)
        self.tctl, self.ictl = bytearray(2 * TOKEN), bytearray(2 * TOKEN)
        self.tcm, self.icm = self.tgt_s.register(self.tctl), self.ini_s.register(self.ictl)
        self.rmr = self.ic.import_rmr(self.tc.export(self.tmr))

    def info(self):
        return self.ini_s.query()

    def batch(self, rng, bs):
        """Offsets (initiator, target) of one batch, layer by layer."""
        src = rng.permutation(self.nblk)[:self.ids].astype(np.uint64)
        dst = rng.permutation(self.nblk)[:self.ids].astype(np.uint64)
        a = np.arange(2 * self.o.layers, dtype=np.uint64)[:, None] * self.nblk
        return ((a + src[None, :]) * bs).ravel(), ((a + dst[None, :]) * bs).ravel()

    def row(self, bs):
        o, t = self.o, self.o.timeout_s
        us = []
        batches = []
        rng = np.random.default_rng([o.seed, bs])
        for it in range(-o.warmup, o.iters):
            batches.append(self.batch(rng, bs))

        def target():
            for k, it in enumerate(range(-o.warmup, o.iters)):
                done = self.tc.recv(self.tcm, TOKEN, TOKEN)
                go = self.tc.send(self.tcm, 0, TOKEN)
                want = b"kv %d" % it
                notes = self.tgt_s.notif_poll(1, timeout=t)  # drives the session
                if not notes:
                    raise RuntimeError("kv: no notification")
                if notes[0][1] != want:
                    raise RuntimeError(f"kv: notification {notes[0][1]!r}, expected {want!r}")
                go.wait(t)
                done.wait(t)
                if o.verify:
                    data = pattern(o.seed, bs, it, o.blocks * bs).reshape(o.blocks, bs)
                    for j, d_ in enumerate(batches[k][1].tolist()):
                        if not np.array_equal(self.tpool[d_:d_ + bs], data[j]):
                            raise RuntimeError(f"kv: verification FAILED: block size {bs}, "
                                               f"iteration {it}, segment {j}, target offset "
                                               f"{d_}")

        def initiator():
            for k, it in enumerate(range(-o.warmup, o.iters)):
                go = self.ic.recv(self.icm, TOKEN, TOKEN)
                soff, doff = batches[k]
                if o.verify:
                    data = pattern(o.seed, bs, it, o.blocks * bs).reshape(o.blocks, bs)
                    for j, s_ in enumerate(soff.tolist()):
                        self.ipool[s_:s_ + bs] = data[j]
                go.wait(t)
                t0 = time.perf_counter()
                local = tp.Segments(self.imr, soff, bs)
                remote = tp.Segments(self.rmr, doff, bs)
                self.ic.write(local, remote, notif=b"kv %d" % it).wait(t)
                dt = (time.perf_counter() - t0) * 1e6
                if it >= 0:
                    us.append(dt)
                self.ic.send(self.icm, 0, TOKEN).wait(t)

        run_threads(target, initiator)
        return stats(us, o.blocks * bs)

    def close(self):
        self.rmr.close()
        self.ini_s.close()
        self.tgt_s.close()


def perf_row(o, value):
    """tcpx_perf with the same settings for one size (block size): its record."""
    common = ["-n", str(o.iters), "-w", str(o.warmup), "--mem", "host"]
    if o.channels:
        common += ["--channels", str(o.channels)]
    if o.chunk:
        common += ["--chunk", str(o.chunk)]
    if o.window:
        common += ["--window", str(o.window)]
    if o.timeout:
        common += ["--timeout", str(o.timeout)]
    if o.verify:
        common.append("--verify")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "perf.json")
        if o.mode == "loopback":
            cmd = [o.compare, "loopback", "-s", str(value), "-q"] + common
        else:
            cmd = [o.compare, "kv", "loopback", "--layers", str(o.layers), "--blocks",
                   str(o.blocks), "--pool-blocks", str(o.pool_blocks), "--block-size",
                   str(value), "--seed", str(o.seed)] + common
        r = subprocess.run(cmd + ["--json", out], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, timeout=o.timeout_s * 10)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
        with open(out) as f:
            return json.load(f)[0], cmd


def median(v):
    s = sorted(v)
    return s[len(s) // 2]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tcpx_p2p.bench",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["loopback", "kv"])
    p.add_argument("-s", "--size", type=sizes_arg, default=[1 << 20, 4 << 20, 64 << 20],
                   help="loopback: sizes, a comma list (K/M/G; default 1M,4M,64M)")
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup", type=int, default=3)
    p.add_argument("--channels", type=int)
    p.add_argument("--chunk", type=size_arg)
    p.add_argument("--window", type=int)
    p.add_argument("--timeout", type=int, help="ms: connection and per-transfer deadline")
    p.add_argument("--verify", action="store_true", help="check every byte of every iteration")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--blocks", type=int, default=1024)
    p.add_argument("--block-size", type=sizes_arg, default=[64 << 10])
    p.add_argument("--pool-blocks", type=int)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--compare", metavar="TCPX_PERF",
                   help="also run this tcpx_perf with the same settings, alternately")
    p.add_argument("--rounds", type=int, default=1,
                   help="with --compare: rounds of (tcpx_perf, Python) per row; medians")
    p.add_argument("--json", help="write the rows as a JSON array to this file")
    o = p.parse_args(argv)
    o.pool_blocks = o.pool_blocks or 4 * o.blocks
    o.timeout_s = (o.timeout or 60000) / 1000.0
    if o.iters < 1 or o.warmup < 0 or o.rounds < 1:
        p.error("-n must be >= 1, -w >= 0, --rounds >= 1")
    bench = Loopback(o) if o.mode == "loopback" else KV(o)
    rows = []
    try:
        info = bench.info()
        print(f"# tcpx_p2p.bench {o.mode}: plugin {info['plugin_name']} (ABI v"
              f"{info['plugin_abi']}, {info['plugin_path']}), net dev {info['net_dev']}; "
              f"Python {sys.version.split()[0]}, tcpx_p2p {tp.library_version()}")
        print(f"# mem host, channels {o.channels or 'default'}, chunk {info['chunk_bytes']}, "
              f"window {o.window or 'default'}, warm-up {o.warmup}, iters {o.iters}"
              f"{', verified' if o.verify else ''}"
              + (f"; tcpx_perf alternately, {o.rounds} round(s), medians" if o.compare else ""))
        if o.mode == "kv":
            print(f"# one Conn.write of {o.blocks} blocks a batch ({o.blocks // (2 * o.layers)} "
                  f"random block ids x {o.layers} layers x K,V) with a notification; pool "
                  f"{o.pool_blocks} blocks per peer; time = building the Segments to completion")
        else:
            print("# time = average per transfer, the receiver's, from posting to completion")
        print("# GB/s = 10^9 bytes/s of completed payload")
        head = f"# {'size(B)' if o.mode == 'loopback' else 'block(B)':>11} {'iters':>8} " \
               f"{'time(us)':>12} {'GB/s':>10} {'p50(us)':>12} {'p99(us)':>12}"
        if o.compare:
            head += f" {'perfGB/s':>10} {'py/perf':>8}"
        print(head, flush=True)
        for value in (o.size if o.mode == "loopback" else o.block_size):
            py, perf, cmd = [], [], None
            for _ in range(o.rounds):
                if o.compare:
                    rec, cmd = perf_row(o, value)
                    perf.append(rec)
                py.append(bench.row(value))
            r = min(py, key=lambda x: abs(x["gbps"] - median([q["gbps"] for q in py])))
            line = f"  {value:>11} {o.iters:>8} {r['time_us']:>12.1f} {r['gbps']:>10.3f} " \
                   f"{r['p50_us']:>12.1f} {r['p99_us']:>12.1f}"
            rec = {"bench": o.mode, "size" if o.mode == "loopback" else "block_size": value,
                   "iters": o.iters, **r, "rounds": [q["gbps"] for q in py]}
            if o.compare:
                pg = median([q["gbps"] for q in perf])
                line += f" {pg:>10.3f} {r['gbps'] / pg if pg else 0:>8.3f}"
                rec.update(perf_gbps=pg, perf_rounds=[q["gbps"] for q in perf],
                           ratio=r["gbps"] / pg if pg else 0, perf_command=" ".join(cmd))
            rows.append(rec)
            print(line, flush=True)
    except (tp.Error, RuntimeError) as e:
        print(f"tcpx_p2p.bench: {e}", file=sys.stderr)
        return 1
    finally:
        bench.close()
    if o.json:
        with open(o.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
