#!/usr/bin/env python3
"""Run GPU tests of a build tree under compute-sanitizer's tools.

    scripts/gpu_sanitize.py [--build build-gpu] [--tools memcheck,racecheck,...]
                            [--timeout S] TEST[=ARGS] ...

Each TEST is a CTest name of the build (e.g. test_unpack_kernel,
test_cuda_transfer.kernel); =ARGS replaces its arguments (a smaller run:
"test_cuda_transfer.kernel=kernel 8").  The test runs with the environment
and working directory CTest gives it, once per tool (default: memcheck,
racecheck, synccheck, initcheck), with --error-exitcode 99 and
--target-processes all.  One line per run: test, tool, exit status,
seconds and the tool's summary; a run that reported errors also prints its
first error lines and keeps its whole output in BUILD/gpu_sanitize/.
On the GPU machine, run it as an extra command of scripts/gpu_ci.sh, whose
environment finds the carried cmocka:
    scripts/gpu_ci.sh 'scripts/gpu_sanitize.py test_unpack_kernel ...'
Exit status: 0 when every run was clean (or skipped, 77), 1 otherwise, 2 on
a usage error or when compute-sanitizer is not found.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time


def find_sanitizer():
    for d in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"):
        p = os.path.join(d, "bin", "compute-sanitizer") if d else ""
        if p and os.access(p, os.X_OK):
            return p
    return shutil.which("compute-sanitizer")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build-gpu")
    ap.add_argument("--tools", default="memcheck,racecheck,synccheck,initcheck")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per run")
    ap.add_argument("tests", nargs="+", metavar="TEST[=ARGS]")
    a = ap.parse_args()
    san = find_sanitizer()
    if not san:
        print("gpu_sanitize: compute-sanitizer not found (CUDA_HOME, /usr/local/cuda, PATH)",
              file=sys.stderr)
        return 2
    listing = subprocess.run(["ctest", "--test-dir", a.build, "--show-only=json-v1"],
                             capture_output=True, text=True)
    if listing.returncode:
        print("gpu_sanitize: ctest cannot list %s: %s" % (a.build, listing.stderr.strip()),
              file=sys.stderr)
        return 2
    tests = {t["name"]: t for t in json.loads(listing.stdout)["tests"]}
    logs = os.path.join(a.build, "gpu_sanitize")
    os.makedirs(logs, exist_ok=True)
    status = 0
    for spec in a.tests:
        name, _, args = spec.partition("=")
        t = tests.get(name)
        if not t:
            print("gpu_sanitize: no test %s in %s" % (name, a.build), file=sys.stderr)
            return 2
        cmd = t["command"][:1] + args.split() if args else t["command"]
        env, cwd = dict(os.environ), None
        for p in t.get("properties", []):
            if p["name"] == "ENVIRONMENT":
                env.update(kv.partition("=")[::2] for kv in p["value"])
            elif p["name"] == "WORKING_DIRECTORY":
                cwd = p["value"]
        for tool in a.tools.split(","):
            # The tests provoke API errors on purpose (an invalid device
            # ordinal) and check the codes themselves, and the library
            # probes with calls that may fail (cuMemRetainAllocationHandle
            # on a bounce buffer that cuMemMap did not map): memcheck looks
            # at memory accesses only.
            extra = {"racecheck": ["--racecheck-report", "all"],
                     "memcheck": ["--report-api-errors", "no"]}.get(tool, [])
            t0 = time.time()
            try:
                r = subprocess.run([san, "--tool", tool, "--error-exitcode", "99",
                                    "--target-processes", "all"] + extra + cmd,
                                   env=env, cwd=cwd, capture_output=True, text=True,
                                   timeout=a.timeout)
                out, rc = r.stdout + r.stderr, r.returncode
            except subprocess.TimeoutExpired as e:
                out = ((e.stdout or b"").decode(errors="replace") +
                       (e.stderr or b"").decode(errors="replace"))
                rc = "timeout"
            summary = sorted({l.strip("= ").strip() for l in out.splitlines()
                              if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l})
            print("%-32s %-9s %-7s %6.1f s  %s" % (spec, tool, rc, time.time() - t0,
                                                   "; ".join(summary)[:160]))
            if rc in (0, 77):
                continue
            status = 1
            log = os.path.join(logs, "%s-%s.log" % (re.sub(r"\W+", "_", spec), tool))
            with open(log, "w") as f:
                f.write(out)
            for l in [l for l in out.splitlines() if l.startswith("========= ")][:8]:
                print("    " + l[:200])
            print("    (all of it: %s)" % log)
    return status


if __name__ == "__main__":
    sys.exit(main())
