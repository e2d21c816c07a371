#!/usr/bin/env python3
"""How often control enters each file of src/core per unit of work and per pass,
from the call counts of two callgrind runs (the difference cancels set-up and
tear-down, as in scripts/callgrind_delta.py).

    callgrind_entries.py [--obj NAME] [--under DIR] [--pass FN] OUT1 UNITS1 OUT2 UNITS2

An entry into file F is a call whose callee is defined in F and whose caller is
not (a call inside F is no entry; an inlined callee counts in its caller's
function, as callgrind sees it).  Calls are counted within objects whose file
name starts with NAME (default libtcpx_p2p.so), for callee files whose path has
DIR (default src/core/) in it.  Per pass: over the calls of FN (default
tp__pass_conn), one conn's pass.  Reads the raw callgrind format; run valgrind
with --dump-instr=no.
"""
import argparse
import collections
import os
import sys

from callgrind_delta import NAME_SPACE, expand


def entries(path, obj):
    """(caller file, callee file) -> calls, and callee function -> calls."""
    names = {"ob": {}, "fl": {}, "fn": {}}
    ob = fl = fn = ""
    cob = cfl = cfn = None
    edges = collections.Counter()
    fcalls = collections.Counter()
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            key, sep, val = line.rstrip("\n").partition("=")
            if not sep or key not in NAME_SPACE and key != "calls":
                continue
            if key == "calls":
                n = int(val.split()[0])
                callee_ob = cob if cob is not None else ob
                callee_fl = cfl if cfl is not None else fl
                if os.path.basename(ob).startswith(obj) and \
                        os.path.basename(callee_ob).startswith(obj):
                    if callee_fl != fl:
                        edges[(fl, callee_fl)] += n
                    fcalls[cfn] += n
                cob = cfl = cfn = None
                continue
            val = expand(names, key, val)
            if key == "ob":
                ob = val
            elif key == "fl":
                fl = val
            elif key == "fn":
                fn = val
                cob = cfl = cfn = None
            elif key == "cob":
                cob = val
            elif key in ("cfi", "cfl"):
                cfl = val
            elif key == "cfn":
                cfn = val
    return edges, fcalls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--obj", default="libtcpx_p2p.so")
    ap.add_argument("--under", default="src/core/")
    ap.add_argument("--pass", dest="pass_fn", default="tp__pass_conn")
    ap.add_argument("out1")
    ap.add_argument("units1", type=int)
    ap.add_argument("out2")
    ap.add_argument("units2", type=int)
    a = ap.parse_args()
    if a.units2 <= a.units1:
        sys.exit("callgrind_entries: UNITS2 must be larger than UNITS1")
    (e1, c1), (e2, c2) = entries(a.out1, a.obj), entries(a.out2, a.obj)
    du = a.units2 - a.units1
    passes = (c2[a.pass_fn] - c1[a.pass_fn]) / du
    into = collections.Counter()
    for (src, dst), n in e2.items():
        if a.under in dst:
            into[dst] += n - e1.get((src, dst), 0)
    print("# entries into each file per unit (%d -> %d units), and per pass "
          "(%s: %.2f a unit)" % (a.units1, a.units2, a.pass_fn, passes))
    print("%10s %10s  %s" % ("per unit", "per pass", "file"))
    for path, n in sorted(into.items(), key=lambda kv: -kv[1]):
        if n <= 0:
            continue
        short = path[path.find(a.under) + len(a.under):] if a.under in path else path
        print("%10.1f %10.2f  %s" % (n / du, n / du / passes if passes else 0, short))


if __name__ == "__main__":
    main()
