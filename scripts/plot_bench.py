#!/usr/bin/env python3
"""Plot tcpx_perf / nccl_pair JSON results: GB/s against message size.

usage: plot_bench.py [-o OUT.png] [--label NAME ...] [--metric gbps|time_us|p50_us|p99_us]
                     [--title TEXT] RESULT.json [RESULT.json ...]

One line per file, named by --label (in file order) or by the file's name;
a file whose records repeat a size (several configurations appended) gets
one line per configuration.  The x axis is log2 of the size.  Needs
matplotlib: on Debian/Ubuntu `apt-get install python3-matplotlib` (or
`pip install matplotlib`).  Exit status: 0, 1 on unreadable input, 2 usage.
"""
import argparse
import json
import os
import sys

METRICS = {
    "gbps": "GB/s (10^9 bytes/s)",
    "time_us": "average time per transfer (us)",
    "p50_us": "median time (us)",
    "p99_us": "p99 time (us)",
}


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        # A pyenv or venv python3 first on PATH does not see Debian's package.
        sysp = "/usr/bin/python3"
        if (os.path.realpath(sys.executable) != os.path.realpath(sysp)
                and os.access(sysp, os.X_OK) and not os.environ.get("TP_PLOT_REEXEC")):
            os.environ["TP_PLOT_REEXEC"] = "1"
            os.execv(sysp, [sysp, os.path.abspath(__file__)] + sys.argv[1:])
        sys.exit("plot_bench: matplotlib is missing: apt-get install python3-matplotlib "
                 "(Debian/Ubuntu) or pip install matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def human(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


def config_label(cfg):
    """A short name for one record's configuration, for files that mix them."""
    if not isinstance(cfg, dict):
        return "?"
    if cfg.get("bench") == "nccl_pair":
        env = cfg.get("env") or {}
        return "nccl %s %sx%s" % (env.get("NCCL_NET") or "default",
                                  env.get("NCCL_SOCKET_NTHREADS") or "-",
                                  env.get("NCCL_NSOCKS_PERTHREAD") or "-")
    keys = ("mem", "channels", "chunk_bytes", "chunks_per_channel", "unpack", "bidir")
    return " ".join("%s=%s" % (k, cfg[k]) for k in keys if k in cfg)


def load_series(path, label, metric):
    """[(label, [(size, value), ...])] for one JSON file."""
    with open(path) as f:
        recs = json.load(f)
    if not isinstance(recs, list) or not recs:
        raise ValueError("%s: not a non-empty JSON array of records" % path)
    groups = {}
    order = []
    for r in recs:
        if "size" not in r or metric not in r:
            raise ValueError("%s: a record lacks 'size' or '%s'" % (path, metric))
        key = json.dumps(r.get("config"), sort_keys=True)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append((int(r["size"]), float(r[metric])))
    if len(order) == 1:
        return [(label, sorted(groups[order[0]]))]
    return [("%s: %s" % (label, config_label(json.loads(k))), sorted(groups[k]))
            for k in order]


def main():
    ap = argparse.ArgumentParser(description="Plot tcpx_perf/nccl_pair JSON results "
                                 "(needs python3-matplotlib).")
    ap.add_argument("files", nargs="+", metavar="RESULT.json")
    ap.add_argument("-o", "--output", default="bench.png", help="PNG to write")
    ap.add_argument("--label", action="append", default=[],
                    help="line name, once per file in order (default: file name)")
    ap.add_argument("--metric", choices=sorted(METRICS), default="gbps")
    ap.add_argument("--title", default="point-to-point bandwidth")
    a = ap.parse_args()
    if len(a.label) > len(a.files):
        ap.error("more --label than files")

    series = []
    try:
        for i, path in enumerate(a.files):
            label = a.label[i] if i < len(a.label) else \
                os.path.splitext(os.path.basename(path))[0]
            series += load_series(path, label, a.metric)
    except (OSError, ValueError) as e:
        sys.exit("plot_bench: %s" % e)

    plt = import_pyplot()
    fig, ax = plt.subplots(figsize=(9, 5.5))
    sizes = set()
    for label, pts in series:
        xs = [p[0] for p in pts]
        sizes.update(xs)
        ax.plot(xs, [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ticks = sorted(sizes)
    if len(ticks) > 12:
        ticks = ticks[::(len(ticks) + 11) // 12]
    ax.set_xticks(ticks)
    ax.set_xticklabels([human(s) for s in ticks], rotation=45)
    ax.minorticks_off()
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(METRICS[a.metric])
    if a.metric == "gbps":
        ax.set_ylim(bottom=0)
    ax.set_title(a.title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    try:
        fig.savefig(a.output, dpi=120)
    except OSError as e:
        sys.exit("plot_bench: %s" % e)
    print("plot_bench: wrote %s (%d line%s)" % (a.output, len(series),
                                                "" if len(series) == 1 else "s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
