#!/usr/bin/env python3
"""Summarise asgd runs: a table (terminal, summary.md), its data (summary.csv)
and convergence plots (curves.png).

Each RUN argument is either a path prefix of an `asgd train` run (RUN.json is
its JSON summary, RUN.csv its per-evaluation log; see the README for both
schemas) or the --run-dir of an `asgd launch` run (a directory holding
summary.json and merged.csv). The curves, time to target and epochs to target
are the global model's: a train run's own CSV, a launch run's `global` rows of
merged.csv (the servers' model, or the allreduce replicas'); with
--worker-curves each launch worker's own copy is drawn too (dashed). A
merged.csv without global rows (an older asgd) falls back to worker 0's rows,
with a warning and curve_process = worker-0 in summary.csv. When launch runs
are given, the table gains the workers' summed own rates, staleness in clocks,
the workers' wait and, under asp and ssp, the steps a worker achieved per
push and per pull (means; summary.csv has their p99 too:
steps_per_{push,pull}_{mean,p99}); summary.csv always has every column
(empty where a run has no such figure).
"""
import argparse
import csv
import json
import math
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in experiments/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_common as pc  # noqa: E402

metric_of = pc.metric_of


def is_launch_run(path):
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "summary.json"))


def load(prefix, worker_curves=False):
    """(summary, the global model's curve rows) of a train run prefix or a launch
    run directory. The summary gains launch (bool), curve_process ("global", or
    "worker-0" for a merged.csv without global rows) and worker_rows
    ({process: rows}, filled with worker_curves)."""
    if is_launch_run(prefix):
        summary = pc.load_summary(prefix)
        summary["launch"] = True
        summary["curve_process"], rows, summary["worker_rows"] = pc.launch_curves(prefix, worker_curves)
        return summary, rows
    with open(prefix + ".json") as f:
        summary = json.load(f)
    with open(prefix + ".csv") as f:
        rows = pc.float_rows(csv.DictReader(f))
    summary.update(launch=False, curve_process="global", worker_rows={})
    return summary, rows


def own_target(summary):
    """The target the run was given (--target-acc / --target-rmse), or None."""
    if summary.get("launch"):
        return (summary.get("config") or {}).get("target")
    return summary.get("target")


def targets(summary, rows, target):
    """{time_to_target_s, samples_to_target, epochs_to_target} of the curve's
    first evaluation that met target (None: not met): the summary's own figures
    when target is the run's own (or None), else from the rows."""
    if target is None or target == own_target(summary):
        if not summary.get("launch"):
            n_train = summary["config"]["train_examples"]
            stt = summary.get("samples_to_target")
            return {"time_to_target_s": summary.get("time_to_target_s"), "samples_to_target": stt,
                    "epochs_to_target": stt / n_train if stt is not None else None}
        if "epochs_to_target" in summary:
            return {k: summary.get(k) for k in ("time_to_target_s", "samples_to_target", "epochs_to_target")}
    t, n, e = pc.to_target(rows, target, metric_of(summary) == "rmse")
    return {"time_to_target_s": t, "samples_to_target": int(n) if n is not None else None, "epochs_to_target": e}


def epochs_to_target(summary, rows, target):
    return targets(summary, rows, target)["epochs_to_target"]


def mode_label(summary):
    if not summary.get("launch"):
        return summary["mode"]
    if summary["sync"] == "ssp":
        return "ssp s=%d" % summary["staleness_bound"]
    config = summary.get("config") or {}
    if summary["sync"] == "bsp" and config.get("backup_workers"):
        return "bsp b=%d" % config["backup_workers"]
    if summary["sync"] == "local":
        return "local H=%d" % config.get("local_steps", 0)
    return summary["sync"]


def staleness_text(summary, key="staleness_clocks"):
    st = summary.get(key)
    if not st or not st.get("updates"):
        return None
    return "%.2f/%d/%d" % (st["mean"], st["p99"], st["max"])


def staleness_columns(summary):
    """staleness_{clocks,versions}_{mean,p99,max} of a launch summary (None where absent)."""
    out = {}
    for key, name in (("staleness_clocks", "clocks"), ("staleness_updates", "versions")):
        st = summary.get(key) or {}
        for q in ("mean", "p99", "max"):
            out["staleness_%s_%s" % (name, q)] = st.get(q) if st.get("updates") else None
    return out


def period_columns(summary):
    """steps_per_{push,pull}_{mean,p99}: the periods a launch's workers achieved (None where absent)."""
    out = {}
    for key in ("steps_per_push", "steps_per_pull"):
        p = summary.get(key) or {}
        for q in ("mean", "p99"):
            out["%s_%s" % (key, q)] = p.get(q)
    return out


def period_text(summary):
    """The achieved steps per push and per pull, "26/27" (asp, ssp; None elsewhere)."""
    push, pull = (summary.get(k) or {} for k in ("steps_per_push", "steps_per_pull"))
    if push.get("mean") is None or summary.get("sync") not in ("asp", "ssp"):
        return None
    return "%.0f/%s" % (push["mean"], "-" if pull.get("mean") is None else "%.0f" % pull["mean"])


def fmt(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}" if abs(v) < 1e5 else f"{v:.0f}"
    return str(v)


def curve_label(summary):
    if summary.get("launch"):
        who = "" if summary["curve_process"] == "global" else "; worker 0, no global rows"
        return f"{mode_label(summary)} ({summary['workers']} workers x {summary['threads']} threads{who})"
    return f"{summary['mode']} ({summary['threads']} threads)"


def draw_curves(axes, runs, col, xcols=("wall_s", "epoch")):
    """Each run's global curve (style i) on axes (one per x column), its workers'
    dashed when loaded; returns the y lists drawn (for the y-range)."""
    ys = []
    for i, (name, s, rows) in enumerate(runs):
        for ax, x in zip(axes, xcols):
            pc.plot_curve(ax, [r[x] for r in rows], [r[col] for r in rows], i, curve_label(s))
            for k, (proc, wrows) in enumerate(s.get("worker_rows", {}).items()):
                if x == xcols[0]:
                    ys.append([r[col] for r in wrows])
                ax.plot([r[x] for r in wrows], [r[col] for r in wrows], label=f"{mode_label(s)}: {proc}",
                        **pc.worker_style(i, k, len(wrows)))
        ys.append([r[col] for r in rows])
    return ys


def peak_text(s):
    """The run's peak test loss, marked when above its untrained model's."""
    peak, untrained = s.get("peak_test_loss"), s.get("untrained_test_loss")
    if peak is None:
        return "-"
    return fmt(peak, 4) + (" (above untrained)" if untrained is not None and peak > untrained else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="run prefixes (RUN.json, RUN.csv) or launch run directories")
    ap.add_argument("--out", required=True, help="directory for summary.csv, summary.md, curves.png")
    ap.add_argument("--title", default="asgd runs")
    ap.add_argument("--target", type=float, default=None,
                    help="target metric for time and epochs to target (default: the first run's that has one)")
    ap.add_argument("--worker-curves", action="store_true",
                    help="also draw each launch worker's own copy (dashed)")
    a = ap.parse_args()

    runs = [(os.path.basename(os.path.normpath(p)), *load(p, a.worker_curves)) for p in a.runs]
    first = runs[0][1]
    rmse = metric_of(first) == "rmse"
    metric = "final_test_rmse" if rmse else "final_test_accuracy"
    baseline = first["samples_per_s"]
    target = a.target
    if target is None:
        target = next((own_target(s) for _, s, _ in runs if own_target(s) is not None), None)
    target_metric = "test_rmse" if rmse else "test_accuracy"
    any_launch = any(s.get("launch") for _, s, _ in runs)

    data, table = [], []
    for name, s, rows in runs:
        launch = s.get("launch")
        tt = targets(s, rows, target)
        row = {"run": name, "mode": s["sync"] if launch else s["mode"],
               "staleness_bound": s.get("staleness_bound") if launch and s["sync"] == "ssp" else None,
               "workers": s["workers"] if launch else None, "threads": s["threads"],
               "samples_per_s": s["samples_per_s"], "updates_per_s": None if launch else s.get("updates_per_s"),
               "samples_per_s_vs_first": s["samples_per_s"] / baseline if baseline else None,
               "target": target, **tt, metric: s.get(metric), "final_test_loss": s.get("final_test_loss"),
               "untrained_test_loss": s.get("untrained_test_loss"), "peak_test_loss": s.get("peak_test_loss"),
               "wall_s": s["wall_s"], "worker_samples_per_s": s.get("worker_samples_per_s"),
               **(staleness_columns(s) if launch else staleness_columns({})),
               "worker_wait_s": s.get("worker_wait_s") if launch else None,
               **(period_columns(s) if launch else period_columns({}))}
        w0 = pc.worker0_fields(s) if launch else {}
        row.update({k: w0.get(k) for k in ("worker0_time_to_target_s", "worker0_samples_to_target",
                                            "worker0_test_" + metric_of(first))})
        row["curve_process"] = s["curve_process"]
        data.append(row)
        threads = "%dx%d" % (s["workers"], s["threads"]) if launch else s["threads"]
        line = [name, mode_label(s), threads, fmt(s["samples_per_s"], 0),
                "-" if launch else fmt(s.get("updates_per_s"), 0),
                fmt(row["samples_per_s_vs_first"], 2) + "x", fmt(tt["time_to_target_s"], 2),
                fmt(tt["epochs_to_target"], 3), fmt(s.get(metric), 4), fmt(s.get("final_test_loss"), 4),
                peak_text(s), fmt(s["wall_s"], 2)]
        if any_launch:
            line += [fmt(s.get("worker_samples_per_s"), 0) if launch else "-",
                     fmt(staleness_text(s)), fmt(s.get("worker_wait_s"), 2) if launch else "-",
                     fmt(period_text(s) if launch else None)]
        table.append(line)
    header = ["run", "mode", "threads", "samples/s", "updates/s", "speed vs first", "time to target (s)",
              "epochs to target", "final " + metric.replace("final_", ""), "final test loss", "peak test loss", "train s"]
    if any_launch:
        header += ["worker samples/s", "staleness clk mean/p99/max", "worker wait s", "steps a push/pull"]
    title = a.title + (f" (target {target_metric} {target})" if target is not None else "")
    note = ("Time and epochs to target, final metric and loss: the global model (a train run's own log; a launch "
            "run's servers' model or allreduce replicas).")
    note += (" Peak test loss: the highest after the start; \"above untrained\" marks a run that got worse than "
             "its untrained model at some evaluation (it diverged, for a while or to the end).")
    old = [name for name, s, _ in runs if s["curve_process"] != "global"]
    if old:
        note += " No global rows in " + ", ".join(old) + ": their time and epochs to target are worker 0's."
    os.makedirs(a.out, exist_ok=True)
    pc.write_tables(a.out, data, [f"### {title}", "", note, ""] + pc.md_table(header, table),
                    terminal=[title] + pc.text_table(header, table))

    plt = pc.pyplot("summarize")
    if not plt:
        return 0
    col = "test_rmse" if rmse else "test_accuracy"
    label = "test RMSE" if rmse else "test accuracy"
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), gridspec_kw={"width_ratios": [1, 1, 0.8]})
    ys = draw_curves(axes[:2], runs, col)
    axes[2].bar(range(len(runs)), [s["samples_per_s"] for _, s, _ in runs],
                color=[pc.color(i) for i in range(len(runs))])
    axes[2].set_xticks(range(len(runs)), [mode_label(s) for _, s, _ in runs], rotation=30, ha="right")
    axes[0].set(xlabel="training time (s, evaluation excluded)", ylabel=label + " (global model)",
                title="metric vs wall time")
    axes[1].set(xlabel="epochs (samples of all workers / training-set size)", ylabel=label + " (global model)",
                title="metric vs epochs")
    axes[2].set(ylabel="samples / s", title="throughput")
    for ax in axes[:2]:
        if target is not None:
            ax.axhline(target, color="grey", linestyle=":", linewidth=1, label=f"target {target}")
        pc.focus_ylim(ax, ys, higher_is_better=not rmse, target=target, cap=None if rmse else 1.0)
        ax.grid(alpha=0.3)
    axes[2].grid(alpha=0.3, axis="y")
    fig.suptitle(a.title)
    pc.figure_legend(fig, axes[:2])
    pc.save_figure(fig, a.out, "curves.png", 110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
