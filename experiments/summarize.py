#!/usr/bin/env python3
"""Summarise asgd runs: a table (stdout, CSV, Markdown) and convergence plots.

Each RUN argument is a path prefix: RUN.json is the run's JSON summary and
RUN.csv its per-evaluation log (see the README for both schemas).
"""
import argparse
import csv
import json
import math
import os
import sys


def load(prefix):
    with open(prefix + ".json") as f:
        summary = json.load(f)
    with open(prefix + ".csv") as f:
        rows = [{k: (float(v) if v != "" else math.nan) for k, v in r.items()} for r in csv.DictReader(f)]
    return summary, rows


def fmt(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) < 1e5 else f"{v:.0f}"
    return str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("runs", nargs="+", help="run prefixes (RUN.json, RUN.csv)")
    ap.add_argument("--out", required=True, help="directory for summary.csv, summary.md, curves.png")
    ap.add_argument("--title", default="asgd runs")
    a = ap.parse_args()

    runs = [(os.path.basename(p), *load(p)) for p in a.runs]
    metric = "final_test_accuracy" if "final_test_accuracy" in runs[0][1] else "final_test_rmse"
    baseline = runs[0][1]["samples_per_s"]
    header = ["run", "mode", "threads", "samples/s", "updates/s", "speed vs first", "time to target (s)",
              "epochs to target", "final " + metric.replace("final_", ""), "final test loss", "train s"]
    table = []
    for name, s, rows in runs:
        n_train = s["config"]["train_examples"]
        epochs_to_target = (s["samples_to_target"] / n_train) if s["samples_to_target"] is not None else None
        table.append([name, s["mode"], s["threads"], fmt(s["samples_per_s"], 0), fmt(s["updates_per_s"], 0),
                      fmt(s["samples_per_s"] / baseline, 2) + "x", fmt(s["time_to_target_s"], 2),
                      fmt(epochs_to_target, 3), fmt(s[metric], 4), fmt(s["final_test_loss"], 4), fmt(s["wall_s"], 2)])
    target = runs[0][1].get("target")
    widths = [max(len(str(r[i])) for r in [header] + table) for i in range(len(header))]
    print(a.title + (f" (target {runs[0][1]['target_metric']} {target})" if target is not None else ""))
    for r in [header] + table:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "summary.csv"), "w", newline="") as f:
        csv.writer(f).writerows([header] + table)
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write(f"### {a.title}\n\n| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n")
        for r in table:
            f.write("| " + " | ".join(str(c) for c in r) + " |\n")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("summarize: matplotlib not installed (apt-get install python3-matplotlib); no plot", file=sys.stderr)
        return 0
    col = "test_accuracy" if metric == "final_test_accuracy" else "test_rmse"
    label = "test accuracy" if col == "test_accuracy" else "test RMSE"
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for name, s, rows in runs:
        t = [r["wall_s"] for r in rows]
        e = [r["epoch"] for r in rows]
        m = [r[col] for r in rows]
        lab = f"{s['mode']} ({s['threads']} threads)"
        axes[0].plot(t, m, marker=".", label=lab)
        axes[1].plot(e, m, marker=".", label=lab)
    axes[2].bar([s["mode"] for _, s, _ in runs], [s["samples_per_s"] for _, s, _ in runs],
                color=["C%d" % i for i in range(len(runs))])
    axes[0].set(xlabel="training time (s, evaluation excluded)", ylabel=label, title="metric vs wall time")
    axes[1].set(xlabel="epochs (samples / training-set size)", ylabel=label, title="metric vs epochs")
    axes[2].set(ylabel="samples / s", title="throughput")
    if target is not None:
        for ax in axes[:2]:
            ax.axhline(target, color="grey", linestyle=":", linewidth=1)
    for ax in axes[:2]:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(a.title)
    fig.tight_layout()
    path = os.path.join(a.out, "curves.png")
    fig.savefig(path, dpi=110)
    print(f"wrote {a.out}/summary.csv, {a.out}/summary.md, {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
