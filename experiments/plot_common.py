"""What plot_scaling.py, plot_compression.py and plot_hybrid.py share: their
command line, reading an `asgd launch` run directory, number formatting, the
summary.csv/summary.md pair, and matplotlib when it is installed."""
import csv
import json
import math
import os
import sys


def command_line(doc):
    """(results directory, CPU count for the captions) from `DIR [--cpus N]`,
    or None after printing doc when there is no DIR or -h/--help."""
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(doc)
        return None
    cpus = args[args.index("--cpus") + 1] if "--cpus" in args else str(os.cpu_count())
    return args[0], cpus


def write_tables(out, rows, lines):
    """rows (dicts with the same keys; None written empty) to out/summary.csv,
    lines to out/summary.md and to stdout."""
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if v is None else v) for k, v in row.items()})
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def save_figure(fig, out, name, dpi):
    """fig laid out tightly and written to out/name."""
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=dpi)
    print("wrote %s" % os.path.join(out, name))


def load_summary(run_dir):
    """summary.json of a run directory, or None when the run has not finished."""
    path = os.path.join(run_dir, "summary.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def worker0_curve(run_dir):
    """Worker 0's evaluations from merged.csv: (wall_s, epoch, test_accuracy) tuples."""
    curve = []
    merged = os.path.join(run_dir, "merged.csv")
    if os.path.exists(merged):
        with open(merged) as f:
            for row in csv.DictReader(f):
                if row["process"] == "worker-0" and row["test_accuracy"]:
                    curve.append((float(row["wall_s"]), float(row["epoch"]), float(row["test_accuracy"])))
    return curve


def fmt(x, spec):
    """x formatted, or empty for a missing or NaN value."""
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def median(xs):
    xs = sorted(xs)
    k = len(xs) // 2
    return xs[k] if len(xs) % 2 else 0.5 * (xs[k - 1] + xs[k])


def pyplot(prog):
    """matplotlib.pyplot (drawing to files), or None after saying why not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("%s: matplotlib not available; table only" % prog, file=sys.stderr)
        return None
