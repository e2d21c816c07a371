"""python -m tcpx_p2p.bench_aio: many small transfers in flight, awaited
from asyncio, and what the waiting costs.

    python -m tcpx_p2p.bench_aio [-n 10000] [-s 4K] [--rounds 3] [--waiter fd,executor]

Two host sessions in this process (each with its progress thread) joined
over the emulator; n receives and n sends of s bytes are posted at once,
then every one is awaited with asyncio.gather.  Waiters:
  fd        tcpx_p2p.aio: one reader on the session's completion fd
  executor  the earlier design: each await a wait() in the loop's default
            executor, in 50 ms slices
Printed per waiter and round: wall time from the first post to the last
completion, the process's CPU time (user + system) over the same span, and
the most Python threads the process had (the library's own
threads are not Python threads).  Every byte is checked.
"""
import argparse
import asyncio
import resource
import sys
import threading
import time

import numpy as np

import tcpx_p2p as tp

from .bench import connect, size_arg

SLICE_S = 0.05


def _executor_wait(x):
    while True:
        try:
            x.wait(SLICE_S)
            return
        except tp.TimedOut:
            if x.done:
                return


async def _await_executor(x):
    await asyncio.get_running_loop().run_in_executor(None, _executor_wait, x)


def _cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one_round(ca, cb, ms, md, n, size, waiter):
    peak = [threading.active_count()]

    async def main():
        def watch():
            peak[0] = max(peak[0], threading.active_count())
            if not done.is_set():
                loop.call_later(0.01, watch)
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        watch()
        rx = [ca.recv(md, offset=k * size, length=size) for k in range(n)]
        tx = [cb.send(ms, offset=k * size, length=size) for k in range(n)]
        if waiter == "fd":
            await asyncio.gather(*(tp.wait_async(x) for x in rx + tx))
        else:
            await asyncio.gather(*(_await_executor(x) for x in rx + tx))
        done.set()
        peak[0] = max(peak[0], threading.active_count())
        return rx + tx

    cpu0, t0 = _cpu_s(), time.monotonic()
    xs = asyncio.run(main())
    wall, cpu = time.monotonic() - t0, _cpu_s() - cpu0
    if not all(x.ok for x in xs):
        raise RuntimeError("a transfer failed")
    return wall, cpu, peak[0]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tcpx_p2p.bench_aio",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("-n", "--count", type=int, default=10000)
    p.add_argument("-s", "--size", type=size_arg, default=4096)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--waiter", default="fd,executor")
    p.add_argument("--channels", type=int)
    o = p.parse_args(argv)
    waiters = o.waiter.split(",")
    if o.count < 1 or o.size < 1 or o.rounds < 1 or \
            any(w not in ("fd", "executor") for w in waiters):
        p.error("-n, -s, --rounds must be >= 1; --waiter: fd and/or executor")
    kw = {"gpu": -1, "progress_thread": True}
    if o.channels:
        kw["num_channels"] = o.channels
    a, b = tp.Session(**kw), tp.Session(**kw)
    try:
        ca, cb = connect(a, b, 60.0)
        src = np.random.default_rng(7).integers(0, 256, o.count * o.size, dtype=np.uint8)
        dst = np.zeros_like(src)
        ms, md = b.register(src), a.register(dst)
        print(f"# tcpx_p2p.bench_aio: {o.count} receives + {o.count} sends of {o.size} B in "
              f"flight, awaited from asyncio; sessions with progress threads; Python "
              f"{sys.version.split()[0]}, tcpx_p2p {tp.library_version()}")
        print(f"# {'waiter':>9} {'round':>5} {'wall(s)':>9} {'cpu(s)':>8} {'pythreads':>9} "
              f"{'xfers/s':>10}")
        for r in range(o.rounds):
            for w in waiters:
                dst[:] = 0
                wall, cpu, peak = one_round(ca, cb, ms, md, o.count, o.size, w)
                if not np.array_equal(dst, src):
                    raise RuntimeError("received bytes differ")
                print(f"  {w:>9} {r:>5} {wall:>9.3f} {cpu:>8.3f} {peak:>9} "
                      f"{2 * o.count / wall:>10.0f}", flush=True)
    except (tp.Error, RuntimeError) as e:
        print(f"tcpx_p2p.bench_aio: {e}", file=sys.stderr)
        return 1
    finally:
        b.close()
        a.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
