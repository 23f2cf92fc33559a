#!/usr/bin/env python3
"""Summarise asgd runs: a table (stdout, CSV, Markdown) and convergence plots.

Each RUN argument is either a path prefix of an `asgd train` run (RUN.json is
its JSON summary, RUN.csv its per-evaluation log; see the README for both
schemas) or the --run-dir of an `asgd launch` run (a directory holding
summary.json and merged.csv). For a launch run the curves are worker 0's rows of
merged.csv: worker 0's own replica, evaluated as it trains (the final metric in
the table is the global model's, from summary.json). When launch runs are given,
the table gains the columns worker samples/s, staleness (clocks) mean/p99/max and
worker wait s; with train runs only it is unchanged.
"""
import argparse
import csv
import json
import math
import os
import sys


def read_rows(path, process=None):
    """CSV rows as floats (empty -> nan); with process, only that process's rows of a merged.csv."""
    with open(path) as f:
        out = []
        for r in csv.DictReader(f):
            if process is not None and r.get("process") != process:
                continue
            out.append({k: (float(v) if v != "" else math.nan) for k, v in r.items() if k != "process"})
        return out


def is_launch_run(path):
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "summary.json"))


def load(prefix):
    """(summary, curve rows) of a train run prefix or a launch run directory."""
    if is_launch_run(prefix):
        with open(os.path.join(prefix, "summary.json")) as f:
            summary = json.load(f)
        summary["launch"] = True
        return summary, read_rows(os.path.join(prefix, "merged.csv"), "worker-0")
    with open(prefix + ".json") as f:
        summary = json.load(f)
    return summary, read_rows(prefix + ".csv")


def metric_of(summary):
    """('accuracy'|'rmse') from a train or launch summary."""
    return "rmse" if "final_test_rmse" in summary else "accuracy"


def epochs_to_target(summary, rows, target):
    """Epochs at the first evaluation that met the target (train: the summary's
    samples_to_target; launch: the summary's epochs_to_target for its own target,
    else worker 0's rows, whose epoch counts passes of the whole run), or None."""
    if not summary.get("launch"):
        n_train = summary["config"]["train_examples"]
        return summary["samples_to_target"] / n_train if summary.get("samples_to_target") is not None else None
    if "epochs_to_target" in summary and (target is None or target == (summary.get("config") or {}).get("target")):
        return summary["epochs_to_target"]  # asgd launch's own count (runs since it records one)
    if target is None:
        return None
    rmse = metric_of(summary) == "rmse"
    for r in rows:
        v = r.get("test_rmse" if rmse else "test_accuracy", math.nan)
        if not math.isnan(v) and (v <= target if rmse else v >= target):
            return r["epoch"]
    return None


def mode_label(summary):
    if not summary.get("launch"):
        return summary["mode"]
    if summary["sync"] == "ssp":
        return "ssp s=%d" % summary["staleness_bound"]
    return summary["sync"]


def staleness_text(summary, key="staleness_clocks"):
    st = summary.get(key)
    if not st or not st.get("updates"):
        return None
    return "%.2f/%d/%d" % (st["mean"], st["p99"], st["max"])


def fmt(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) < 1e5 else f"{v:.0f}"
    return str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("runs", nargs="+", help="run prefixes (RUN.json, RUN.csv) or launch run directories")
    ap.add_argument("--out", required=True, help="directory for summary.csv, summary.md, curves.png")
    ap.add_argument("--title", default="asgd runs")
    ap.add_argument("--target", type=float, default=None,
                    help="target metric for launch runs' epochs to target (default: the first train run's)")
    a = ap.parse_args()

    runs = [(os.path.basename(os.path.normpath(p)), *load(p)) for p in a.runs]
    first = runs[0][1]
    metric = "final_test_accuracy" if metric_of(first) == "accuracy" else "final_test_rmse"
    baseline = first["samples_per_s"]
    target = first.get("target") if not first.get("launch") else None
    target_metric = first.get("target_metric", "test_" + metric_of(first))
    if a.target is not None:
        target = a.target
    elif target is None:
        target = next((s.get("target") for _, s, _ in runs if s.get("target") is not None), None)
    any_launch = any(s.get("launch") for _, s, _ in runs)
    header = ["run", "mode", "threads", "samples/s", "updates/s", "speed vs first", "time to target (s)",
              "epochs to target", "final " + metric.replace("final_", ""), "final test loss", "train s"]
    if any_launch:
        header += ["worker samples/s", "staleness clk mean/p99/max", "worker wait s"]
    table = []
    for name, s, rows in runs:
        launch = s.get("launch")
        threads = "%dx%d" % (s["workers"], s["threads"]) if launch else s["threads"]
        row = [name, mode_label(s), threads, fmt(s["samples_per_s"], 0),
               "-" if launch else fmt(s["updates_per_s"], 0),
               fmt(s["samples_per_s"] / baseline, 2) + "x", fmt(s["time_to_target_s"], 2),
               fmt(epochs_to_target(s, rows, target), 3), fmt(s.get(metric), 4), fmt(s["final_test_loss"], 4),
               fmt(s["wall_s"], 2)]
        if any_launch:
            row += [fmt(s.get("worker_samples_per_s"), 0) if launch else "-",
                    fmt(staleness_text(s)), fmt(s.get("worker_wait_s"), 2) if launch else "-"]
        table.append(row)
    widths = [max(len(str(r[i])) for r in [header] + table) for i in range(len(header))]
    print(a.title + (f" (target {target_metric} {target})" if target is not None else ""))
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
        lab = (f"{mode_label(s)} ({s['workers']} workers x {s['threads']} threads, worker 0)" if s.get("launch")
               else f"{s['mode']} ({s['threads']} threads)")
        axes[0].plot(t, m, marker=".", label=lab)
        axes[1].plot(e, m, marker=".", label=lab)
    axes[2].bar([mode_label(s) for _, s, _ in runs], [s["samples_per_s"] for _, s, _ in runs],
                color=["C%d" % i for i in range(len(runs))])
    axes[0].set(xlabel="training time (s, evaluation excluded)", ylabel=label, title="metric vs wall time")
    axes[1].set(xlabel="epochs (samples / training-set size)", ylabel=label, title="metric vs epochs")
    axes[2].set(ylabel="samples / s", title="throughput")
    if len(runs) > 4:
        axes[2].tick_params(axis="x", labelrotation=30)
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
