#!/usr/bin/env python3
"""Instructions of one shared object per unit of work, by the difference of two
callgrind runs (scripts/chunk_cost.sh).

    callgrind_delta.py [--obj NAME] [--top N] [--json] OUT1 UNITS1 OUT2 UNITS2

OUTn is a callgrind.out file of a run that did UNITSn units of work (chunks).
Self cost only (what an object's own instructions cost, not its callees in
libc, the plugin or the kernel, which valgrind does not see anyway), summed
over the functions whose object's file name starts with NAME (default
libtcpx_p2p.so).  What both runs share (start-up, set-up, tear-down) cancels
in (Ir(OUT2) - Ir(OUT1)) / (UNITS2 - UNITS1).

Reads the raw format (valgrind docs, "Callgrind Format Specification"):
ob=/fl=/fn= set the object, file and function of the cost lines that follow,
"(id) name" defines a compressed name and "(id)" reuses it, and the cost line
right after a calls= line is the call's inclusive cost, not the caller's own.
"""
import argparse
import json
import os
import re
import sys

_NAME = re.compile(r"^\((\d+)\)(?: (.*))?$")
# Each name key and the space of compressed names it draws from.
NAME_SPACE = {"ob": "ob", "cob": "ob", "fl": "fl", "fi": "fl", "fe": "fl", "cfi": "fl",
              "cfl": "fl", "fn": "fn", "cfn": "fn"}


def expand(names, key, val):
    """A name key's value with its compression undone: "(id) name" defines
    id in the key's space of names (a dict per space) and "(id)" reuses it."""
    m = _NAME.match(val)
    table = names[NAME_SPACE[key]]
    if m:
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        val = table.get(m.group(1), val)
    return val


class Profile:
    def __init__(self, path):
        self.total = 0          # every object: the summary line
        self.obj = {}           # object path -> self Ir
        self.fn = {}            # (object path, file, function) -> self Ir
        self._parse(path)

    def _parse(self, path):
        names = {"ob": {}, "fl": {}, "fn": {}}
        ob = fl = fn = ""
        skip = False  # the next cost line is a call's inclusive cost
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if not line:
                    continue
                c = line[0]
                if c.isdigit() or c in "+-*":
                    if skip:
                        skip = False
                        continue
                    parts = line.split()
                    ir = int(parts[1]) if len(parts) > 1 else 0
                    if ir:
                        self.obj[ob] = self.obj.get(ob, 0) + ir
                        key = (ob, fl, fn)
                        self.fn[key] = self.fn.get(key, 0) + ir
                    continue
                key, sep, val = line.partition("=")
                if not sep:
                    if line.startswith("summary:"):
                        self.total = int(line.split()[1])
                    continue
                if key == "calls":
                    skip = True
                    continue
                if key not in NAME_SPACE:
                    continue
                val = expand(names, key, val)
                if key == "ob":
                    ob = val
                elif key == "fl":
                    fl = val
                elif key == "fn":
                    fn = val

    def of(self, prefix):
        return sum(v for k, v in self.obj.items() if os.path.basename(k).startswith(prefix))

    def fns(self, prefix):
        return {k: v for k, v in self.fn.items() if os.path.basename(k[0]).startswith(prefix)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--obj", default="libtcpx_p2p.so", help="object file name prefix")
    ap.add_argument("--plugin", default="libnccl-net-memnet.so",
                    help="a second object to report (the plugin)")
    ap.add_argument("--top", type=int, default=10, help="functions to list")
    ap.add_argument("--json", action="store_true", help="one JSON record on stdout")
    ap.add_argument("out1")
    ap.add_argument("units1", type=int)
    ap.add_argument("out2")
    ap.add_argument("units2", type=int)
    a = ap.parse_args()
    if a.units2 <= a.units1:
        sys.exit("callgrind_delta: UNITS2 must be larger than UNITS1")
    p1, p2 = Profile(a.out1), Profile(a.out2)
    du = a.units2 - a.units1
    lib1, lib2 = p1.of(a.obj), p2.of(a.obj)
    if not lib1 or not lib2:
        sys.exit("callgrind_delta: no cost in an object named %s* (is it the right "
                 "library?)" % a.obj)
    f1, f2 = p1.fns(a.obj), p2.fns(a.obj)
    top = sorted(((f2.get(k, 0) - f1.get(k, 0)) / du, k) for k in set(f1) | set(f2))
    top = [(v, k) for v, k in reversed(top) if v > 0][:a.top]
    rec = {
        "units": [a.units1, a.units2],
        "lib_ir": [lib1, lib2],
        "lib_per_unit": (lib2 - lib1) / du,
        "plugin_per_unit": (p2.of(a.plugin) - p1.of(a.plugin)) / du,
        "program_per_unit": (p2.total - p1.total) / du,
        "top": [{"function": k[2], "file": k[1], "per_unit": round(v, 2)} for v, k in top],
    }
    if a.json:
        json.dump(rec, sys.stdout)
        print()
        return
    print("%s: %.1f Ir per unit (%d -> %d Ir over %d -> %d units); plugin %.1f, whole "
          "program %.1f" % (a.obj, rec["lib_per_unit"], lib1, lib2, a.units1, a.units2,
                            rec["plugin_per_unit"], rec["program_per_unit"]))
    for v, k in top:
        print("  %8.1f  %s (%s)" % (v, k[2], k[1]))


if __name__ == "__main__":
    main()
