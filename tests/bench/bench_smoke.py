#!/usr/bin/env python3
"""Smoke tests of the benchmark programs and scripts, one case per run:

    bench_smoke.py BUILD_DIR SOURCE_DIR CASE

Every case runs real transfers (or the real failure path) and checks bytes
through --verify, exit codes and the JSON records.  Exit status: 0 pass,
1 fail, 77 skip.  TCPX_P2P_PLUGIN must name the emulator plugin.
"""
import fcntl
import json
import os
import random
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time

SKIP = 77


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def clean_env(**extra):
    """The caller's TCPX_P2P_* / NCCL_* / launcher settings would change what
    the programs do; keep only the plugin path."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("TCPX_P2P_", "NCCL_", "TCPX_EMU_", "UCCL_TCPX_"))
                   or k in ("OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"))}
    if "TCPX_P2P_PLUGIN" in os.environ:
        env["TCPX_P2P_PLUGIN"] = os.environ["TCPX_P2P_PLUGIN"]
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(cmd, env=None, timeout=60, expect=0):
    p = subprocess.run(cmd, env=env or clean_env(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
    if expect is not None and p.returncode != expect:
        sys.stdout.write(p.stdout)
        sys.stderr.write(p.stderr)
        raise Fail("%s: exit %d, expected %d" % (" ".join(cmd), p.returncode, expect))
    return p


def load_json(path):
    try:
        with open(path) as f:
            recs = json.load(f)
    except (OSError, ValueError) as e:
        raise Fail("%s: %s" % (path, e))
    check(isinstance(recs, list), "%s: not a JSON array" % path)
    return recs


def sweep(lo, hi, factor):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s = max(int(s * factor), s + 1)
    return out


def check_records(recs, sizes, iters, **cfg):
    got = [r.get("size") for r in recs]
    check(got == sizes, "sizes %s, expected %s" % (got, sizes))
    for r in recs:
        for k in ("iters", "time_us", "gbps", "p50_us", "p99_us", "config"):
            check(k in r, "record for %s lacks %s" % (r["size"], k))
        check(r["iters"] == iters, "iters %s, expected %d" % (r["iters"], iters))
        # gbps comes with 4 decimals: a slow run's (a loaded sanitizer
        # build) rounds to 0, which only a rate below 0.0001 explains
        # (an iteration moves at least size bytes).
        check(r["time_us"] > 0 and (r["gbps"] > 0 or r["size"] / (r["time_us"] * 1e3) < 1e-4),
              "no bandwidth at %d: %s" % (r["size"], r))
        check(0 < r["p50_us"] <= r["p99_us"], "percentiles out of order: %s" % r)
        # GB/s is 1e9 bytes/s of the average time (twice the bytes both ways).
        mult = 2 if r["config"].get("bidir") else 1
        want = mult * r["size"] / (r["time_us"] * 1e3)
        check(abs(r["gbps"] - want) <= 1e-3 * want + 1e-4,
              "gbps %s does not match size/time %.4f" % (r["gbps"], want))
        for k, v in cfg.items():
            check(r["config"].get(k) == v, "config %s = %r, expected %r"
                  % (k, r["config"].get(k), v))


PORT_DIR = os.path.join(tempfile.gettempdir(), "tcpx_p2p-test-ports")
_port_claims = []  # lock files held open until this process exits


def free_port(count=1):
    """A port P of 127.0.0.1 with P .. P + count - 1 free now (multi-pair
    runs listen on port + k) and picked by no other test while this one
    runs.  A port the kernel hands out (bind to 0) is not enough: it comes
    from the ephemeral range, where any test's outgoing connection may take
    it between the probe and the listen.  So the ports come from below that
    range, each claimed with flock on a file under PORT_DIR (the shell
    tests' tp_free_port uses the same files).  The probe binds without
    SO_REUSEADDR, so a port that a TIME_WAIT entry still holds is skipped."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(v) for v in f.read().split())
    first, last = (10000, lo - 1) if lo > 12000 else (hi + 1, 65535)
    os.makedirs(PORT_DIR, exist_ok=True)
    rng = random.SystemRandom()
    for _ in range(200):
        base = rng.randint(first, last - count + 1)
        claims = []
        try:
            for k in range(count):
                f = open(os.path.join(PORT_DIR, str(base + k)), "a")
                claims.append(f)
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
                    t.bind(("127.0.0.1", base + k))
        except OSError:
            for f in claims:
                f.close()
            continue
        _port_claims.extend(claims)
        return base
    raise Fail("no %d consecutive free ports on 127.0.0.1" % count)


class Ctx:
    def __init__(self, build, src, tmp):
        self.build, self.src, self.tmp = build, src, tmp
        self.perf = os.path.join(build, "bin", "tcpx_perf")
        check(os.access(self.perf, os.X_OK), "no %s: build tcpx_perf first" % self.perf)
        check(os.path.isfile(os.environ.get("TCPX_P2P_PLUGIN", "")),
              "TCPX_P2P_PLUGIN does not name the emulator plugin")

    def path(self, name):
        return os.path.join(self.tmp, name)

    def script(self, name):
        return os.path.join(self.src, "scripts", name)


def case_sweep(c):
    out = c.path("sweep.json")
    run([c.perf, "loopback", "--mem", "host", "-b", "4K", "-e", "4M", "-f", "4", "-n", "3",
         "-w", "1", "--verify", "--json", out], env=clean_env(TCPX_P2P_NUM_CHANNELS=3))
    check_records(load_json(out), sweep(4096, 4 << 20, 4), 3, mem="host", verify=True,
                  warmup=1, bidir=False, channels=3, role="server", chunk_bytes=2 << 20)


def check_usage_line(line, size, unit):
    """A --switches line: two switch counts, then CPU µs that are user +
    system (each printed to 0.1) and more than nothing."""
    m = re.match(r"# %d bytes: ([0-9.]+) voluntary, ([0-9.]+) involuntary context switches, "
                 r"([0-9.]+) us of CPU \(user ([0-9.]+), system ([0-9.]+)\) per %s" % (size, unit),
                 line)
    check(m is not None, "not a switches line for %d bytes: %s" % (size, line))
    cpu, user, system = (float(m.group(i)) for i in (3, 4, 5))
    check(cpu > 0 and abs(cpu - user - system) <= 0.15, "CPU %s is not user + system" % line)


def case_switches(c):
    # One comment line per size after its row, with two counts >= 0 and the
    # CPU time; the rows themselves unchanged, and nothing of it in JSON on
    # stdout.
    p = run([c.perf, "loopback", "--mem", "host", "-b", "4K", "-e", "64K", "-f", "4", "-n", "5",
             "-w", "1", "--switches", "-q"])
    lines = [l for l in p.stdout.splitlines() if l.strip()]
    sizes = [4096, 16384, 65536]
    for size in sizes:
        rows = [i for i, l in enumerate(lines) if l.split() and l.split()[0] == str(size)]
        check(len(rows) == 1, "no single row for %d: %s" % (size, p.stdout))
        check_usage_line(lines[rows[0] + 1], size, "transfer")
    check(len([l for l in lines if "context switches" in l]) == len(sizes),
          "switch lines other than one per size: %s" % p.stdout)
    p = run([c.perf, "loopback", "--mem", "host", "-s", "4K", "-n", "3", "-w", "1",
             "--switches", "-q", "--json", "-"])
    check("context switches" not in p.stdout, "switch line in JSON on stdout: %s" % p.stdout)
    json.loads(p.stdout)


def case_bidir(c):
    out = c.path("bidir.json")
    p = run([c.perf, "loopback", "--mem", "host", "--bidir", "--chunk", "256K", "-b", "64K",
             "-e", "2M", "-f", "8", "-n", "3", "-w", "1", "--verify", "--json", out])
    check("bidirectional" in p.stdout, "table header does not say bidirectional")
    check_records(load_json(out), sweep(64 << 10, 2 << 20, 8), 3, bidir=True, verify=True,
                  chunk_bytes=256 << 10)


def case_inflight(c):
    # Each conn's share as 7 transfers at once (sizes that divide by neither
    # 2 nor 7), both ways, every byte verified; channel shares cut in 3.
    out = c.path("inflight.json")
    p = run([c.perf, "loopback", "--mem", "host", "--conns", "2", "--inflight", "7", "--bidir",
             "--chunks-per-channel", "3", "-b", "1001", "-e", "4M", "-f", "64", "-n", "2",
             "-w", "1", "--verify", "--json", out])
    check(re.search(r"as 7 transfers posted at once", p.stdout),
          "header does not give --inflight: %s" % p.stdout)
    check(re.search(r"up to 3 a channel's share", p.stdout),
          "header does not give --chunks-per-channel: %s" % p.stdout)
    check_records(load_json(out), sweep(1001, 4 << 20, 64), 2, conns=2, inflight=7,
                  chunks_per_channel=3, bidir=True, verify=True, role="server")


def case_conns(c):
    # Sizes that do not divide by 4: the last conn carries the remainder,
    # and --verify checks every conn's share of the buffer.
    out = c.path("conns.json")
    p = run([c.perf, "loopback", "--mem", "host", "--conns", "4", "-b", "1001", "-e", "4M",
             "-f", "8", "-n", "3", "-w", "1", "--verify", "--json", out])
    check(re.search(r"conns 4, ", p.stdout), "header does not give the conns: %s" % p.stdout)
    m = re.search(r"# set-up ([0-9.]+) ms", p.stdout)
    check(m, "header does not give the set-up time: %s" % p.stdout)
    recs = load_json(out)
    check_records(recs, sweep(1001, 4 << 20, 8), 3, conns=4, verify=True, role="server")
    setup = {r.get("setup_ms") for r in recs}
    check(len(setup) == 1, "setup_ms differs between records: %s" % setup)
    setup = setup.pop()
    check(isinstance(setup, (int, float)) and 0 < setup < 60000, "setup_ms %r" % setup)
    check(abs(setup - float(m.group(1))) < 0.1, "setup_ms %s, header %s" % (setup, m.group(1)))
    # Both directions on each conn, two processes.
    for attempt in range(3):
        port = str(free_port())
        args = ["--conns", "3", "--bidir", "-b", "100000", "-e", "1M", "-f", "10", "-n", "2",
                "-w", "1", "--verify", "--timeout", "20000"]
        rcs, sj, cj = two_processes(
            c, "conns", [c.perf, "server", "--bind", "127.0.0.1", "-p", port] + args,
            [c.perf, "client", "-H", "127.0.0.1", "-p", port] + args, clean_env(), clean_env())
        if rcs == [0, 0]:
            break
        with open(c.path("conns-server.log")) as f:
            if "listen" not in f.read() or attempt == 2:
                raise Fail("server/client --conns 3 exit statuses %s" % rcs)
    for path, role in ((sj, "server"), (cj, "client")):
        check_records(load_json(path), [100000, 1000000], 2, conns=3, bidir=True, role=role)


def case_progress_ab(c):
    script = os.path.join(c.src, "bench", "progress_ab.py")
    out = c.path("ab.json")
    p = run([sys.executable, script, "--perf", c.perf, "--reps", "2", "--json", out,
             "--env", "TCPX_P2P_NUM_CHANNELS=3",
             "loopback --mem host -s 1M -n 2 -w 1 --conns 2 --verify"], timeout=120)
    runs = load_json(out)
    check(sorted((r["mode"], r["rep"]) for r in runs) ==
          [("eager", 0), ("eager", 1), ("strict", 0), ("strict", 1)], "runs: %s" % runs)
    for r in runs:
        cfg = r["record"]["config"]
        check(cfg["conns"] == 2 and cfg["channels"] == 3 and cfg["verify"],
              "config not passed on: %s" % cfg)
    rows = [l.split() for l in p.stdout.splitlines() if l.strip() and not l.startswith("#")]
    check(len(rows) == 1, "table: %s" % p.stdout)
    med = {m: sorted(r["gbps"] for r in runs if r["mode"] == m) for m in ("strict", "eager")}
    want = (sum(med["strict"]) / 2) / (sum(med["eager"]) / 2)
    check(abs(float(rows[0][2]) - want) < 0.01, "ratio %s, expected %.2f" % (rows[0][2], want))
    run([sys.executable, script, "--perf", c.perf, "--reps", "1", "loopback --bogus"], expect=1)


def check_pairs(recs, sizes, iters, npairs, **cfg):
    """Multi-session records: per size, pairs 0..npairs-1, then the aggregate."""
    check(len(recs) == len(sizes) * (npairs + 1),
          "%d records, expected %d" % (len(recs), len(sizes) * (npairs + 1)))
    for i, size in enumerate(sizes):
        group = recs[i * (npairs + 1):(i + 1) * (npairs + 1)]
        pairs, agg = group[:-1], group[-1]
        check([r.get("pair") for r in pairs] == list(range(npairs)),
              "pair indices %s at %d" % ([r.get("pair") for r in pairs], size))
        check(not any(r.get("aggregate") for r in pairs) and agg.get("aggregate") is True
              and agg.get("pair") == -1, "aggregate record misplaced at %d" % size)
        check_records(pairs, [size] * npairs, iters, pairs=npairs, **cfg)
        check(agg["size"] == size and agg["iters"] == iters
              and 0 < agg["p50_us"] <= agg["p99_us"], "aggregate record: %s" % agg)
        for k, v in dict(cfg, pairs=npairs).items():
            check(agg["config"].get(k) == v, "aggregate config %s = %r, expected %r"
                  % (k, agg["config"].get(k), v))
        check(len(agg["config"].get("gpus", [])) == npairs
              and len(agg["config"].get("net_devs", [])) == npairs,
              "aggregate lacks the pairs' gpus/net_devs: %s" % agg["config"])
        # All pairs' bytes over each iteration's wall time: never faster than
        # the sum of the pairs, never slower than the slowest pair.
        mult = 2 if agg["config"].get("bidir") else 1
        want = npairs * mult * size / (agg["time_us"] * 1e3)
        check(abs(agg["gbps"] - want) <= 1e-3 * want + 1e-4,
              "aggregate gbps %s is not %d pairs' bytes / time (%.4f)" % (agg["gbps"], npairs, want))
        slowest = max(r["time_us"] for r in pairs)
        check(agg["time_us"] >= slowest * 0.999,
              "aggregate time %s below the slowest pair's %s" % (agg["time_us"], slowest))


def case_pairs(c):
    out = c.path("pairs.json")
    p = run([c.perf, "loopback", "--mem", "host", "--pairs", "4", "-b", "1001", "-e", "4M",
             "-f", "64", "-n", "3", "-w", "1", "--verify", "--json", out])
    check("4 pairs in one process" in p.stdout, "header does not say 4 pairs: %s" % p.stdout)
    rows = [l.split() for l in p.stdout.splitlines() if l.strip() and not l.startswith("#")]
    check([r[1] for r in rows] == ["0", "1", "2", "3", "all"] * 3, "table: %s" % p.stdout)
    check_pairs(load_json(out), sweep(1001, 4 << 20, 64), 3, 4, mem="host", verify=True,
                role="server", bidir=False)
    # With --conns and --bidir: every conn of every pair, both ways, verified.
    out = c.path("pairs-bidir.json")
    run([c.perf, "loopback", "--mem", "host", "--pairs", "2", "--conns", "3", "--bidir",
         "-s", "1M", "-n", "3", "-w", "1", "--verify", "--json", out])
    check_pairs(load_json(out), [1 << 20], 3, 2, conns=3, bidir=True, verify=True)
    # Channels striped over the emulator's two devices: each pair reports its NICs.
    out = c.path("pairs-nics.json")
    p = run([c.perf, "loopback", "--mem", "host", "--pairs", "2", "-s", "1M", "-n", "2", "-w", "1",
             "--verify", "--json", out], env=clean_env(TCPX_EMU_NDEV=2, TCPX_P2P_NICS="all"))
    recs = load_json(out)
    check_pairs(recs, [1 << 20], 2, 2, verify=True)
    check(all(r["config"].get("nics") == [0, 1] for r in recs[:2]),
          "pairs do not report nics [0, 1]: %s" % [r["config"].get("nics") for r in recs[:2]])
    # The per-NIC lines: each NIC carries half of every pair's 2 channels.
    nic_rates = {}
    for line in p.stdout.splitlines():
        if line.startswith("# nic "):
            nic_rates[int(line.split()[2].rstrip(":"))] = float(line.split(":")[1].split()[0])
    pair_sum = sum(r["gbps"] for r in recs[:2])
    check(sorted(nic_rates) == [0, 1] and
          all(abs(v - pair_sum / 2) < 0.01 + 0.01 * pair_sum for v in nic_rates.values()),
          "per-NIC lines %s do not share %.3f GB/s evenly: %s" % (nic_rates, pair_sum, p.stdout))
    for args in (["--pairs", "0"], ["--pairs", "65"], ["--pairs", "2", "--mem", "cuda"],
                 ["--gpus", "0-3"], ["--gpus", "0,1", "--pairs", "2"],
                 ["--gpus", "3-1", "--mem", "cuda"], ["--gpus", "0,,1", "--mem", "cuda"],
                 ["--gpus", "0-1", "-g", "1", "--mem", "cuda"]):
        run([c.perf, "loopback"] + args, expect=2)
    if not has_gpu():
        run([c.perf, "loopback", "--mem", "cuda", "--gpus", "0,0", "-s", "1M"], expect=SKIP)


def case_pairs_server_client(c):
    args = ["--pairs", "2", "--conns", "2"] + peer_args()
    for attempt in range(3):
        port = free_port(2)
        rcs, sj, cj = two_processes(
            c, "pairs", [c.perf, "server", "--bind", "127.0.0.1", "-p", str(port)] + args,
            [c.perf, "client", "-H", "127.0.0.1", "-p", str(port)] + args,
            clean_env(), clean_env())
        if rcs == [0, 0]:
            break
        # Someone else may have taken port or port + 1 between probe and listen.
        with open(c.path("pairs-server.log")) as f:
            if "listen" not in f.read() or attempt == 2:
                raise Fail("server/client --pairs 2 exit statuses %s" % rcs)
    sizes = sweep(256 << 10, 1 << 20, 2)
    check_pairs(load_json(sj), sizes, 3, 2, role="server", verify=True, conns=2)
    check_pairs(load_json(cj), sizes, 3, 2, role="client", verify=True, conns=2)
    # Peers with different numbers of pairs fail (the pair hello), not hang.
    port = free_port(3)
    rcs, _, _ = two_processes(
        c, "pairs-mismatch",
        [c.perf, "server", "--bind", "127.0.0.1", "-p", str(port), "--pairs", "3"] + peer_args(),
        [c.perf, "client", "-H", "127.0.0.1", "-p", str(port), "--pairs", "2"] + peer_args(),
        clean_env(), clean_env())
    check(rcs == [1, 1], "mismatched --pairs: exit statuses %s" % rcs)


def case_dump_config(c):
    with open(os.path.join(c.src, "src", "util", "config.c")) as f:
        names = set(re.findall(r'\{\s*"(TCPX_P2P_[A-Z0-9_]+)"', f.read()))
    check(len(names) >= 5, "found only %s in the settings table" % sorted(names))
    names |= {"TCPX_P2P_PERF_SIZE", "TCPX_P2P_PERF_ITERS", "TCPX_P2P_PERF_CONNS"}
    p = run([c.perf, "--dump-config"], env=clean_env(TCPX_P2P_CHUNK_BYTES="1M",
                                                     TCPX_P2P_PERF_ITERS=7,
                                                     TCPX_P2P_PERF_CONNS=5))
    listed = {}
    for line in p.stdout.splitlines():
        m = re.match(r"(TCPX_P2P_[A-Z0-9_]+)\s*=\s*(\S+)", line)
        if m:
            listed[m.group(1)] = m.group(2)
    missing = names - set(listed)
    check(not missing, "--dump-config omits %s" % sorted(missing))
    check(listed["TCPX_P2P_CHUNK_BYTES"] == "1048576",
          "TCPX_P2P_CHUNK_BYTES=1M shows as %s" % listed["TCPX_P2P_CHUNK_BYTES"])
    check(listed["TCPX_P2P_PERF_ITERS"] == "7", "TCPX_P2P_PERF_ITERS=7 not shown")
    check(listed["TCPX_P2P_PERF_CONNS"] == "5", "TCPX_P2P_PERF_CONNS=5 not shown")
    p = run([c.perf, "--dump-config", "--conns", "9"])
    check(re.search(r"^TCPX_P2P_PERF_CONNS\s*=\s*9\s", p.stdout, re.M),
          "--conns 9 not shown by --dump-config")


def case_bad_flag(c):
    for args in (["loopback", "--bogus"], ["loopback", "--mem", "gpu"], ["loopback", "-n", "0"],
                 ["loopback", "--window", "17"], ["loopback", "--conns", "0"],
                 ["loopback", "--conns", "65"], ["loopback", "--channels", "0"],
                 ["loopback", "--channels", "17"], ["loopback", "--inflight", "0"],
                 ["loopback", "--inflight", "65"], ["loopback", "--chunks-per-channel", "0"],
                 ["loopback", "--chunks-per-channel", "17"],
                 ["sideways"], [], ["client", "-p", "99999"]):
        p = run([c.perf] + args, expect=2)
        check("usage" in p.stderr or "bad value" in p.stderr,
              "%s: no usage message on stderr" % args)
    # auto without a launcher rank cannot pick a side.
    run([c.perf, "auto", "-H", "127.0.0.1"], expect=2)
    # --channels takes the library's whole range (TCPX_P2P_MAX_CHANNELS): 16 runs.
    run([c.perf, "loopback", "--mem", "host", "--channels", "16", "-s", "64K", "-n", "1",
         "-w", "0", "--verify", "-q"])


def kv_run(c, op):
    """tcpx_perf kv loopback --op OP over two block sizes, verified: one record per
    block size, its numbers consistent."""
    out = c.path("kv-%s.json" % op)
    run([c.perf, "kv", "loopback", "--op", op, "--layers", "2", "--block-size", "16K,64K",
         "--blocks", "32", "--pool-blocks", "128", "-n", "3", "-w", "1", "--verify",
         "--timeout", "10000", "--json", out], env=clean_env(TCPX_P2P_CHUNK_BYTES=256 << 10))
    recs = load_json(out)
    check([r.get("block_size") for r in recs] == [16384, 65536],
          "%s: block sizes %s" % (op, [r.get("block_size") for r in recs]))
    for r in recs:
        check(r["bench"] == "kv" and r["op"] == op and r["blocks"] == 32, "record %s" % r)
        check(r["size"] == 32 * r["block_size"] and r["iters"] == 3, "record %s" % r)
        check(r["gbps"] > 0 and abs(r["gbps"] - r["size"] / (r["time_us"] * 1e3))
              <= 1e-3 * r["gbps"] + 1e-4, "GB/s is not size/time: %s" % r)
        check(r["requests_per_batch"] == -(-r["size"] // (256 << 10)),
              "requests/batch %s for %d bytes" % (r["requests_per_batch"], r["size"]))
        # The ratio of equal sizes is the ratio of times; the GB/s fields
        # carry 4 decimals, too few on a loaded machine (0.0361 / 0.0392).
        check(r["contig"]["gbps"] > 0 and abs(r["kv_over_contig"] - r["contig"]["time_us"] /
              r["time_us"]) <= 1e-3 * r["kv_over_contig"] + 1e-4,
              "kv/contig ratio: %s" % r)
        check(r["config"]["layers"] == 2 and r["config"]["pool_blocks"] == 128 and
              r["config"]["verify"] is True, "config %s" % r["config"])


def case_kv(c):
    kv_run(c, "write")


def case_kv_read(c):
    kv_run(c, "read")


def case_kv_bad_flag(c):
    for args in (["kv", "loopback", "--blocks", "7"], ["kv", "loopback", "--layers", "0"],
                 ["kv", "loopback", "--block-size", "16K,12"], ["kv", "loopback", "--op", "copy"],
                 ["kv", "loopback", "--pool-blocks", "16", "--blocks", "32"],
                 ["kv", "loopback", "--pairs", "2"], ["kv", "loopback", "-s", "1M"],
                 ["kv", "loopback", "--bidir"], ["kv", "loopback", "--inflight", "2"],
                 ["loopback", "--layers", "2"]):
        p = run([c.perf] + args, expect=2)
        check(p.stderr.strip(), "%s: no message on stderr" % args)


def case_loopback_fail(c):
    """One side of a loopback fails (TCPX_P2P_PERF_TEST_FAIL, test builds): the
    other stops with it instead of waiting out its 120 s deadline in an accept
    or a dial, and the injected failure is the error printed.  Single, multi-
    session and kv runs; before the conns exist and at the first timed
    iteration.  The 60 s limit only catches the old wait; no time is asserted.
    A side still blocked after the grace goes with the process (_exit), its
    threads unjoined: TSan's thread-leak report would be about that, not a bug."""
    tsan = os.environ.get("TSAN_OPTIONS", "")
    tsan = (tsan + " " if tsan else "") + "report_thread_leaks=0"
    modes = {"single": ["loopback", "-s", "1M", "-n", "3"],
             "pairs": ["loopback", "--pairs", "2", "-s", "1M", "-n", "3"],
             "kv": ["kv", "loopback", "--layers", "2", "--block-size", "16K", "--blocks", "32",
                    "-n", "3"]}
    for mode, args in sorted(modes.items()):
        for side in ("server", "client"):
            for point in ("connect", "run"):
                what = "%s %s:%s" % (mode, side, point)
                try:
                    p = run([c.perf] + args + ["--mem", "host", "--verify", "-q",
                                               "--timeout", "120000"],
                            env=clean_env(TCPX_P2P_PERF_TEST_FAIL="%s:%s" % (side, point),
                                          TSAN_OPTIONS=tsan),
                            expect=1)
                except subprocess.TimeoutExpired:
                    raise Fail("%s: the other side did not stop" % what)
                errors = [l for l in p.stderr.splitlines()
                          if l.startswith("tcpx_perf:") and "still blocked" not in l]
                want = "tcpx_perf: %s: injected failure at %s" % (side, point)
                check(errors and errors[0].startswith(want),
                      "%s: first error %r, expected %r" % (what, errors[:1], want))
                check(len(errors) == 1, "%s: errors after the first: %s" % (what, errors[1:]))


def has_gpu():
    try:
        p = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, universal_newlines=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and "GPU 0" in p.stdout


def case_cuda_skip(c):
    for mem in ("cuda", "pinned", "pin"):
        args = [c.perf, "loopback", "--mem", mem, "--gpu", "0,0", "-s", "1M", "-n", "2", "-w", "1",
                "--verify"]
        if has_gpu():
            run(args)  # with a GPU the same run must pass, verified
            continue
        p = run(args, expect=SKIP)
        check("no usable CUDA device" in p.stderr, "no skip message: %r" % p.stderr)


def start(cmd, env, log):
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def finish(procs, logs, timeout=60):
    rcs = []
    for p in procs:
        try:
            rcs.append(p.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    q.kill()
                    q.wait()
            rcs.append("timeout")
    if any(rc != 0 for rc in rcs):
        for path in logs:
            with open(path) as f:
                sys.stdout.write("---- %s\n%s" % (path, f.read()))
    return rcs


def two_processes(c, name, server_cmd, client_cmd, server_env, client_env):
    """Run both peers; returns (rcs, server records, client records)."""
    sj, cj = c.path(name + "-server.json"), c.path(name + "-client.json")
    sl, cl = c.path(name + "-server.log"), c.path(name + "-client.log")
    with open(sl, "w") as slog, open(cl, "w") as clog:
        srv = start(server_cmd + ["--json", sj], server_env, slog)
        cli = start(client_cmd + ["--json", cj], client_env, clog)
        rcs = finish([srv, cli], [sl, cl])
    return rcs, sj, cj


def peer_args():
    return ["-b", "256K", "-e", "1M", "-f", "2", "-n", "3", "-w", "1", "--verify",
            "--timeout", "20000"]


def printed_port(proc, log, timeout=30):
    """The port a `tcpx_perf server -p 0` printed in its log."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open(log) as f:
            m = re.search(r"^tcpx_perf: listening on port (\d+)$", f.read(), re.M)
        if m:
            return m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise Fail("the server printed no port: %s" % open(log).read()[-2000:])


def case_server_client(c):
    # -p 0: the server takes any free port and prints it; the client dials it.
    sj, cj = c.path("sc-server.json"), c.path("sc-client.json")
    sl, cl = c.path("sc-server.log"), c.path("sc-client.log")
    with open(sl, "w") as slog, open(cl, "w") as clog:
        srv = start([c.perf, "server", "--bind", "127.0.0.1", "-p", "0", "--json", sj]
                    + peer_args(), clean_env(), slog)
        try:
            port = printed_port(srv, sl)
        except Fail:
            srv.kill()
            srv.wait()
            raise
        cli = start([c.perf, "client", "-H", "127.0.0.1", "-p", port, "--json", cj]
                    + peer_args(), clean_env(), clog)
        rcs = finish([srv, cli], [sl, cl])
    check(rcs == [0, 0], "server -p 0 / client exit statuses %s" % rcs)
    sizes = sweep(256 << 10, 1 << 20, 2)
    check_records(load_json(sj), sizes, 3, role="server", verify=True)
    check_records(load_json(cj), sizes, 3, role="client", verify=True)
    # Any port is a server's alone, of one pair.
    for args in (["client", "-H", "127.0.0.1"], ["server", "--pairs", "2"]):
        p = run([c.perf] + args + ["-p", "0", "-s", "4K"], expect=2)
        check("--port 0" in p.stderr, "no reason for refusing -p 0: %s" % p.stderr)


def case_auto(c):
    port = str(free_port())
    cmd = [c.perf, "auto", "-p", port] + peer_args()
    rcs, sj, cj = two_processes(
        c, "auto", cmd, cmd, clean_env(OMPI_COMM_WORLD_RANK=0),
        clean_env(OMPI_COMM_WORLD_RANK=1, TCPX_P2P_PEER="127.0.0.1"))
    check(rcs == [0, 0], "auto ranks 0/1 exit statuses %s" % rcs)
    check_records(load_json(sj), sweep(256 << 10, 1 << 20, 2), 3, role="server")
    check_records(load_json(cj), sweep(256 << 10, 1 << 20, 2), 3, role="client")


def case_a3_local(c):
    out = c.path("a3")
    p = run([c.script("run_a3_8gpu.sh"), "--local", "2", "--out", out, "--build-dir", c.build,
             "-b", "256K", "-e", "1M", "-f", "4", "-n", "3", "-w", "1", "--verify"],
            timeout=120)
    sizes = sweep(256 << 10, 1 << 20, 4)
    per = []
    for g in range(2):
        recs = load_json(os.path.join(out, "local-gpu%d.json" % g))
        check_records(recs, sizes, 3, mem="host", verify=True)
        per.append({r["size"]: r["gbps"] for r in recs})
    rows = [l.split() for l in p.stdout.splitlines() if l.strip() and l.split()[0].isdigit()]
    check([int(r[0]) for r in rows] == sizes, "summary sizes: %s" % p.stdout)
    for r in rows:
        s = int(r[0])
        check(abs(float(r[3]) - (per[0][s] + per[1][s])) < 0.01,
              "total %s is not the sum of the pairs at %d" % (r[3], s))
    # A pair that fails must fail the run.
    run([c.script("run_a3_8gpu.sh"), "--local", "1", "--out", c.path("a3bad"),
         "--build-dir", c.build, "--bogus-perf-flag"], expect=1)


STUB_PERF = """#!/bin/sh
# tcpx_perf with host memory instead of GPUs: exercises compare_nccl.sh.
real=%s
fail=%s
[ "$fail" = 1 ] && { echo "stub failure" >&2; exit 1; }
set -- "$@" END
while [ "$1" != END ]; do
	case $1 in
	--mem) set -- "$@" --mem host; shift 2 ;;
	--gpu|-g) shift 2 ;;
	*) set -- "$@" "$1"; shift ;;
	esac
done
shift
exec "$real" %s "$@"
"""


def make_stub_build(c, name, fail_nccl):
    root = c.path(name)
    os.makedirs(os.path.join(root, "bin"))
    os.symlink(os.path.join(c.build, "lib"), os.path.join(root, "lib"))
    for prog, mode, fail in (("tcpx_perf", "", 0), ("nccl_pair", "loopback --mem host",
                                                    1 if fail_nccl else 0)):
        path = os.path.join(root, "bin", prog)
        with open(path, "w") as f:
            f.write(STUB_PERF % (c.perf, fail, mode))
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return root


def case_compare_script(c):
    build = make_stub_build(c, "stub", False)
    out = c.path("cmp")
    p = run([c.script("compare_nccl.sh"), "--build-dir", build, "--out", out, "--iters", "2",
             "--warmup", "1", "--sizes", "512K:2M"], timeout=120)
    names = ["nccl_sock", "nccl_sock_2x4", "tcpx_emu", "tcpx_emu_2x4"]
    res = {}
    for n in names:
        recs = load_json(os.path.join(out, n + ".json"))
        check_records(recs, sweep(512 << 10, 2 << 20, 2), 2)
        res[n] = {r["size"]: r["gbps"] for r in recs}
    with open(os.path.join(out, "compare.txt")) as f:
        table = f.read()
    check(table in p.stdout, "the table is not printed")
    rows = [l.split() for l in table.splitlines() if l and not l.startswith("#")]
    check(rows[0][:5] == ["size"] + names, "header %s" % rows[0])
    check([r[0] for r in rows[1:]] == ["512K", "1M", "2M"], "table sizes %s" % rows[1:])
    for r, s in zip(rows[1:], (512 << 10, 1 << 20, 2 << 20)):
        for i, n in enumerate(names):
            check(abs(float(r[1 + i]) - res[n][s]) < 0.001, "%s at %d" % (n, s))
        want = res["tcpx_emu"][s] / res["nccl_sock"][s]
        check(abs(float(r[5]) - want) < 0.01, "ratio %s, expected %.2f" % (r[5], want))
    bad = make_stub_build(c, "stubbad", True)
    run([c.script("compare_nccl.sh"), "--build-dir", bad, "--out", c.path("cmpbad"),
         "--iters", "2", "--sizes", "512K:1M"], expect=1)
    run([c.script("compare_nccl.sh"), "--sizes", "512K"], expect=2)


def case_plot(c):
    data = c.path("plot.json")
    run([c.perf, "loopback", "--mem", "host", "-b", "64K", "-e", "4M", "-f", "4", "-n", "3",
         "-w", "1", "--json", data])
    png = c.path("plot.png")
    p = run([c.script("plot_bench.py"), "-o", png, "--label", "emu", data, data], expect=None)
    if p.returncode == 1 and "matplotlib is missing" in p.stderr:
        print(p.stderr.strip())
        return SKIP
    check(p.returncode == 0, "plot_bench.py: exit %d: %s" % (p.returncode, p.stderr))
    with open(png, "rb") as f:
        head = f.read(8)
    check(head == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % png)
    check(os.path.getsize(png) > 10000, "PNG suspiciously small")
    broken = c.path("broken.json")
    with open(broken, "w") as f:
        f.write("[{\"size\": 1}")
    p = run([c.script("plot_bench.py"), "-o", c.path("x.png"), broken], expect=1)
    check("plot_bench:" in p.stderr, "no message for a broken file")
    return 0


def case_env_scripts(c):
    env = clean_env(NCCL_SOCKET_NTHREADS=3)
    p = run(["bash", "-c", 'set -u; . "$0"; env', c.script("tcpx_env.sh")], env=env)
    got = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
    want = {"NCCL_SOCKET_NTHREADS": "3", "NCCL_NSOCKS_PERTHREAD": "4",
            "NCCL_DYNAMIC_CHUNK_SIZE": "524288", "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
            "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": "eth1,eth2,eth3,eth4",
            "NCCL_GPUDIRECTTCPX_FORCE_ACK": "0"}
    for k, v in want.items():
        check(got.get(k) == v, "tcpx_env.sh: %s=%r, expected %r" % (k, got.get(k), v))
    run(["bash", c.script("tcpx_env.sh")], expect=2)
    for g in range(8):
        p = run([c.script("run_two_node.sh"), "client", "--peer", "10.0.0.2", "--gpu", str(g),
                 "--build-dir", c.build, "--dry-run", "--", "-s", "1M"])
        check("TCPX_P2P_NET_DEV=%d" % (g // 2) in p.stdout.splitlines(),
              "GPU %d: net dev not %d: %s" % (g, g // 2, p.stdout))
        check("-> eth%d " % (1 + g // 2) in p.stderr, "GPU %d: NIC: %s" % (g, p.stderr))
        cmd = p.stdout.splitlines()[-1]
        check(re.search(r"tcpx_perf client --mem cuda --gpu %d --host 10\.0\.0\.2 -s 1M" % g,
                        cmd), "GPU %d: command %s" % (g, cmd))
    run([c.script("run_two_node.sh"), "client", "--dry-run"], expect=2)


def case_nccl_pair(c):
    pair = os.path.join(c.build, "bin", "nccl_pair")
    if not os.access(pair, os.X_OK):
        print("nccl_pair not built (needs CUDA and NCCL): skipping")
        return SKIP
    run([pair, "--bogus"], expect=2)
    run([pair, "-g", "1,1"], expect=2)
    out = c.path("nccl.json")
    p = run([pair, "-b", "64K", "-e", "4M", "-f", "8", "-n", "3", "-w", "1", "--verify",
             "--json", out], env=clean_env(NCCL_SOCKET_NTHREADS=2), expect=None)
    if p.returncode == SKIP:
        check("skipping" in p.stderr, "77 without a message")
        print(p.stderr.strip())
        return SKIP
    check(p.returncode == 0, "nccl_pair exit %d: %s" % (p.returncode, p.stderr))
    recs = load_json(out)
    check_records(recs, sweep(64 << 10, 4 << 20, 8), 3, bench="nccl_pair", verify=True)
    check(recs[0]["config"]["env"].get("NCCL_SOCKET_NTHREADS") == "2", "env not echoed")
    return 0


def case_tcp_probe(c):
    probe = os.path.join(c.build, "bin", "tcp_probe")
    check(os.access(probe, os.X_OK), "no %s" % probe)
    run([probe, "--bogus"], expect=2)
    run([probe, "loopback", "-S", "0"], expect=2)
    run([probe, "client", "-H", "127.0.0.1", "--bounce"], expect=2)  # the receiver's flag
    # 3 sockets, 2 threads: thread 0 serves sockets 0 and 2 in turn; a size
    # that does not divide by 3 gives the last socket the remainder.
    out = c.path("probe.json")
    p = run([probe, "loopback", "-S", "3", "-T", "2", "--call", "64K", "-b", "1001",
             "-e", "4M", "-f", "16", "-n", "3", "-w", "1", "--verify", "--json", out])
    check("3 sockets, 2 threads" in p.stdout, "header does not give the layout: %s" % p.stdout)
    check_records(load_json(out), sweep(1001, 4 << 20, 16), 3, bench="tcp_probe",
                  role="loopback", sockets=3, threads=2, call_bytes=64 << 10, verify=True,
                  warmup=1)
    # --bounce: shares that start inside a page (3 sockets, odd sizes), read
    # into shuffled pool pages and copied out; --verify samples every copy
    # (a byte in 64, a pattern that differs per iteration).
    out = c.path("probe-bounce.json")
    p = run([probe, "loopback", "-S", "3", "--bounce", "-b", "1001", "-e", "1M", "-f", "32",
             "-n", "3", "-w", "1", "--verify", "--json", out])
    check("bounce pages" in p.stdout, "header does not say --bounce: %s" % p.stdout)
    p = run([probe, "loopback", "-b", "4K", "-e", "64K", "-f", "16", "-n", "3", "-w", "1",
             "--switches"])
    lines = p.stdout.splitlines()
    for size in (4096, 65536):
        rows = [i for i, l in enumerate(lines) if l.split() and l.split()[0] == str(size)]
        check(len(rows) == 1, "no single row for %d: %s" % (size, p.stdout))
        check_usage_line(lines[rows[0] + 1], size, "message")
    check_records(load_json(out), sweep(1001, 1 << 20, 32), 3, bench="tcp_probe",
                  sockets=3, verify=True, bounce=True)
    for attempt in range(3):
        port = str(free_port())
        rcs, _, cj = two_processes(
            c, "probe", [probe, "server", "--bind", "127.0.0.1", "-p", port, "-T", "1"],
            [probe, "client", "-H", "127.0.0.1", "-p", port, "-S", "2", "-s", "1M", "-n", "3",
             "-w", "1", "--verify"], clean_env(), clean_env())
        if rcs == [0, 0]:
            break
        with open(c.path("probe-server.log")) as f:
            if "listen" not in f.read() or attempt == 2:
                raise Fail("tcp_probe server/client exit statuses %s" % rcs)
    check_records(load_json(cj), [1 << 20], 3, role="client", sockets=2, threads=2)


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in CASES:
        sys.stderr.write("usage: bench_smoke.py BUILD_DIR SOURCE_DIR {%s}\n"
                         % "|".join(sorted(CASES)))
        return 1
    tmp = tempfile.mkdtemp(prefix="bench_smoke.")
    try:
        rc = CASES[sys.argv[3]](Ctx(os.path.abspath(sys.argv[1]),
                                    os.path.abspath(sys.argv[2]), tmp))
    except Fail as e:
        print("FAIL %s: %s (files in %s)" % (sys.argv[3], e, tmp))
        return 1
    except subprocess.TimeoutExpired as e:
        print("FAIL %s: timed out: %s (files in %s)" % (sys.argv[3], e.cmd, tmp))
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    print("%s %s" % ("SKIP" if rc == SKIP else "PASS", sys.argv[3]))
    return rc or 0


if __name__ == "__main__":
    sys.exit(main())
