"""What plot_scaling.py, plot_compression.py and plot_hybrid.py share: reading
an `asgd launch` run directory, number formatting for the tables, and
matplotlib when it is installed."""
import csv
import json
import math
import os
import sys


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
