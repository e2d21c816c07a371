#!/usr/bin/env python3
"""Summarize a timeline written by a test-hook build (TCPX_P2P_TEST_TIMELINE=FILE,
docs/benchmarks.md "Timeline"): for transfers made one at a time, each event's
first and last time after the send's post (and before the next send's post),
median and 10th-90th percentiles over the transfers, in µs.

usage: scripts/timeline.py FILE [--skip N]   (N: transfers left out first, warm-up)
"""
import sys


def main():
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    skip = 0
    if "--skip" in args:
        skip = int(args[args.index("--skip") + 1])
    marks = []
    with open(args[0]) as f:
        for line in f:
            if line.startswith("#"):
                continue
            ns, ev, _ = line.split()
            marks.append((int(ns), ev))
    marks.sort()
    rounds, cur = [], None
    for ns, ev in marks:
        if ev == "send_post":
            cur = {"t0": ns, "ev": {}}
            rounds.append(cur)
            continue
        if cur is not None:
            first_last = cur["ev"].setdefault(ev, [ns, ns])
            first_last[1] = ns
    rounds = rounds[skip:]
    if not rounds:
        print("no transfers in the timeline")
        return 1
    order = {}
    for r in rounds:
        for ev, (a, b) in r["ev"].items():
            order.setdefault(ev, []).append(((a - r["t0"]) / 1e3, (b - r["t0"]) / 1e3))

    def pct(v, q):
        v = sorted(v)
        return v[min(len(v) - 1, int(q * len(v)))]

    print("# %d transfers; us after the send's post: median (p10-p90) of the first and last mark"
          % len(rounds))
    print("# %-15s %6s %26s %26s" % ("event", "count", "first", "last"))
    rows = sorted(order.items(), key=lambda kv: pct([a for a, _ in kv[1]], 0.5))
    for ev, v in rows:
        firsts = [a for a, _ in v]
        lasts = [b for _, b in v]
        print("  %-15s %6d %8.1f (%6.1f-%7.1f) %8.1f (%6.1f-%7.1f)" % (
            ev, len(v), pct(firsts, .5), pct(firsts, .1), pct(firsts, .9),
            pct(lasts, .5), pct(lasts, .1), pct(lasts, .9)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
