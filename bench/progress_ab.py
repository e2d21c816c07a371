#!/usr/bin/env python3
"""A/B of the emulator's progress models: tcpx_perf runs under
TCPX_EMU_PROGRESS=strict and =eager, interleaved, repeated; medians.

    bench/progress_ab.py [--perf PATH] [--reps N] [--env NAME=VALUE]... CASE...

Each CASE is one quoted tcpx_perf argument string, e.g.
"loopback --mem host -s 64M --channels 2 -n 20 -w 3".  Every repetition
runs every case once in each mode, alternating which mode goes first, so
drift of the machine lands on both alike.  Printed per case: the median
GB/s of the reporting peer (its last record: give one size), strict/eager,
and the median set-up time (setup_ms) in each mode; --json FILE writes the
runs.  The caller's TCPX_EMU_PROGRESS is ignored; the rest of the
environment is passed on.  Exit status: 0, 1 when a run failed, 2 usage.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys

MODES = ("strict", "eager")


def run_once(perf, args, env, timeout):
    cmd = [perf] + args + ["--json", "-"]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=timeout)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise RuntimeError("%s: exit %d" % (" ".join(cmd), p.returncode))
    recs = json.loads(p.stdout)
    return recs[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--perf", default="build/bin/tcpx_perf", help="tcpx_perf binary")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="extra environment for every run")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    ap.add_argument("--json", help="write every run's record here")
    ap.add_argument("cases", nargs="+", metavar="CASE")
    o = ap.parse_args()
    if o.reps < 1 or any("=" not in e for e in o.env):
        ap.error("--reps must be >= 1 and --env NAME=VALUE")
    env = {k: v for k, v in os.environ.items() if k != "TCPX_EMU_PROGRESS"}
    env.update(e.split("=", 1) for e in o.env)
    cases = [shlex.split(c) for c in o.cases]
    runs = []
    try:
        for rep in range(o.reps):
            for ci, args in enumerate(cases):
                order = MODES if (rep + ci) % 2 == 0 else MODES[::-1]
                for mode in order:
                    r = run_once(o.perf, args, dict(env, TCPX_EMU_PROGRESS=mode), o.timeout)
                    runs.append({"case": o.cases[ci], "mode": mode, "rep": rep,
                                 "gbps": r["gbps"], "setup_ms": r.get("setup_ms"),
                                 "record": r})
                    print("rep %d %-6s %7.3f GB/s  set-up %8.1f ms  %s"
                          % (rep, mode, r["gbps"], r.get("setup_ms", 0), o.cases[ci]),
                          file=sys.stderr, flush=True)
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
        print("progress_ab: %s" % e, file=sys.stderr)
        return 1
    if o.json:
        with open(o.json, "w") as f:
            json.dump(runs, f, indent=1)
    print("# median of %d; GB/s = 10^9 bytes/s; env %s" % (o.reps, " ".join(o.env) or "-"))
    print("# %-8s %-8s %-6s %-10s %-10s  case" % ("strict", "eager", "ratio", "setup_s",
                                                  "setup_e"))
    for c in o.cases:
        med = {}
        for m in MODES:
            sel = [r for r in runs if r["case"] == c and r["mode"] == m]
            med[m] = (statistics.median(r["gbps"] for r in sel),
                      statistics.median(r["setup_ms"] or 0 for r in sel))
        print("  %-8.3f %-8.3f %-6.2f %-10.1f %-10.1f  %s"
              % (med["strict"][0], med["eager"][0], med["strict"][0] / med["eager"][0],
                 med["strict"][1], med["eager"][1], c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
