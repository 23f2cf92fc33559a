#!/usr/bin/env python3
"""Table and plots of a staleness sweep: every `asgd launch` run directory
(one holding summary.json) directly under SWEEP_DIR.

Writes SWEEP_DIR/summary.csv (the numbers, one row per run; columns in
experiments/README.md) and summary.md, prints the table, and (with matplotlib)
SWEEP_DIR/
  curves-w<N>.png      test metric vs training time and vs epochs, N workers; one
                       line per configuration (mean over seeds, band min..max)
  throughput.png       samples/s (and the workers' summed own rates) vs staleness bound
  target.png           time to target and epochs to target vs staleness bound
  staleness.png        histograms of staleness in clocks and in versions (staleness.csv)

The curves, time to target and epochs to target are the global model's: the
`global` rows of merged.csv (the servers' model, or the allreduce replicas'),
whose `epoch` counts the samples of all workers. --worker-curves also draws
each worker's own copy (dashed; first seed). A run whose merged.csv has no
global rows (an older asgd) falls back to worker 0's rows, with a warning and
curve_process = worker-0 in summary.csv. Run metadata (sync, bound, workers)
comes from summary.json; the seed from the run directory's name (...-seed<S>).
"""
import argparse
import csv
import math
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in experiments/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_common as pc  # noqa: E402
import summarize  # noqa: E402

SYNC_ORDER = {"ssp": 0, "asp": 1, "bsp": 2, "allreduce": 3}


def bound_key(s):
    """Position of a run on the staleness-bound axis: SSP s, ASP = inf."""
    if s["sync"] == "ssp":
        return float(s["staleness_bound"])
    if s["sync"] == "asp":
        return math.inf
    return None


def bound_label(s):
    return {"ssp": str(s.get("staleness_bound")), "asp": "inf"}.get(s["sync"], s["sync"])


def load_hist(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return ([int(r["staleness"]) for r in rows], [int(r["updates_by_clocks"]) for r in rows],
            [int(r["updates_by_versions"]) for r in rows])


def load_sweep(d, worker_curves=False):
    runs = []
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if not summarize.is_launch_run(p):
            continue
        s, rows = summarize.load(p, worker_curves)
        m = re.search(r"-seed(\d+)$", name)
        runs.append(dict(name=name, s=s, rows=rows, seed=int(m.group(1)) if m else None,
                         config=re.sub(r"-seed\d+$", "", name), hist=load_hist(os.path.join(p, "staleness.csv"))))
    runs.sort(key=lambda r: (r["s"]["workers"], SYNC_ORDER.get(r["s"]["sync"], 9),
                             r["s"].get("staleness_bound") or 0, r["seed"] or 0))
    return runs


def table(runs, target):
    """(summary.csv rows, Markdown/terminal header, formatted rows)."""
    rmse = bool(runs) and summarize.metric_of(runs[0]["s"]) == "rmse"
    mkey = "final_test_rmse" if rmse else "final_test_accuracy"
    data, text = [], []
    for r in runs:
        s = r["s"]
        tt = summarize.targets(s, r["rows"], target)
        row = {"run": r["name"], "sync": s["sync"],
               "staleness_bound": s.get("staleness_bound") if s["sync"] == "ssp" else None,
               "workers": s["workers"], "threads": s["threads"], "seed": r["seed"],
               "samples_per_s": s["samples_per_s"], "worker_samples_per_s": s.get("worker_samples_per_s"),
               "target": target, **tt, mkey: s.get(mkey), "final_test_loss": s.get("final_test_loss"),
               **summarize.staleness_columns(s), "worker_wait_s": s.get("worker_wait_s"), "wall_s": s.get("wall_s")}
        row.update(pc.worker0_fields(s))
        row["curve_process"] = s["curve_process"]
        data.append(row)
        f = summarize.fmt
        text.append([r["name"], s["sync"], bound_label(s) if s["sync"] in ("ssp", "asp") else "-", str(s["workers"]),
                     str(s["threads"]), f(r["seed"]), f(row["samples_per_s"], 0), f(row["worker_samples_per_s"], 0),
                     f(tt["time_to_target_s"], 2), f(tt["epochs_to_target"], 3), f(row[mkey], 4),
                     f(row["final_test_loss"], 4), f(row["staleness_clocks_mean"], 2),
                     f(row["staleness_clocks_p99"]), f(row["staleness_clocks_max"]),
                     f(row["staleness_versions_mean"], 2), f(row["worker_wait_s"], 2), f(row["wall_s"], 2)])
    header = ["run", "sync", "bound", "workers", "threads", "seed", "samples/s", "worker samples/s",
              "time to target (s)", "epochs to target", mkey.replace("final_", "final "), "final test loss",
              "stale clk mean", "stale clk p99", "stale clk max", "stale ver mean", "worker wait s", "train s"]
    return data, header, text


def write_table(d, title, runs, target):
    data, header, text = table(runs, target)
    lines = [f"### {title}", ""]
    if target is not None:
        lines += [f"Target: {target}. Time and epochs to target are the global model's; '-' = not reached.", ""]
    old = [r["name"] for r in runs if r["s"]["curve_process"] != "global"]
    if old:
        lines += ["No global rows (older asgd), worker 0's figures instead: " + ", ".join(old) + ".", ""]
    pc.write_tables(d, data, lines + pc.md_table(header, text),
                    terminal=[title + (f" (target {target})" if target is not None else "")]
                    + pc.text_table(header, text))


def band(ax, groups, xcol, ycol, label, i):
    """Mean line and min..max band over seeds in style i, x interpolated onto the
    union of the seeds' x; returns the mean's y values (for the y-range)."""
    import numpy as np
    curves = []
    for rows in groups:
        pts = [(r[xcol], r[ycol]) for r in rows if not math.isnan(r[ycol])]
        if pts:
            curves.append(np.array(pts))
    if not curves:
        return []
    if len(curves) == 1:
        pc.plot_curve(ax, curves[0][:, 0], curves[0][:, 1], i, label)
        return list(curves[0][:, 1])
    xs = np.unique(np.concatenate([c[:, 0] for c in curves]))
    xs = xs[xs <= min(c[-1, 0] for c in curves)]  # where every seed has data
    ys = np.array([np.interp(xs, c[:, 0], c[:, 1]) for c in curves])
    pc.plot_curve(ax, xs, ys.mean(axis=0), i, f"{label} ({len(curves)} seeds)")
    ax.fill_between(xs, ys.min(axis=0), ys.max(axis=0), color=pc.color(i), alpha=0.15, linewidth=0)
    return list(ys.mean(axis=0))


def config_label(s):
    return {"ssp": f"ssp s={s.get('staleness_bound')}", "asp": "asp (s=inf)"}.get(s["sync"], s["sync"])


def plots(d, title, runs, target):
    plt = pc.pyplot("plot_sweep")
    if not plt:
        return []
    import numpy as np
    rmse = summarize.metric_of(runs[0]["s"]) == "rmse"
    col, ylabel = ("test_rmse", "test RMSE (global model)") if rmse else ("test_accuracy", "test accuracy (global model)")
    workers = sorted({r["s"]["workers"] for r in runs})
    written = []

    # metric vs time and vs epochs, one figure per worker count
    for w in workers:
        configs = []
        for r in runs:
            if r["s"]["workers"] == w and r["config"] not in configs:
                configs.append(r["config"])
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
        ys = []
        for i, c in enumerate(configs):
            group = [r for r in runs if r["config"] == c]
            lab = config_label(group[0]["s"])
            if group[0]["s"]["curve_process"] != "global":
                lab += " (worker 0: no global rows)"
            ys.append(band(axes[0], [g["rows"] for g in group], "wall_s", col, lab, i))
            band(axes[1], [g["rows"] for g in group], "epoch", col, lab, i)
            for k, (proc, wrows) in enumerate(group[0]["s"]["worker_rows"].items()):
                ys.append([q[col] for q in wrows])
                for ax, x in zip(axes, ("wall_s", "epoch")):
                    ax.plot([q[x] for q in wrows], [q[col] for q in wrows], label=f"{config_label(group[0]['s'])}: "
                            f"{proc}" + (f", seed {group[0]['seed']}" if len(group) > 1 else ""),
                            **pc.worker_style(i, k, len(wrows)))
        axes[0].set(xlabel="training time (s, evaluation excluded)", ylabel=ylabel, title="metric vs wall time")
        axes[1].set(xlabel="epochs (samples of all workers / training-set size)", ylabel=ylabel,
                    title="metric vs epochs")
        for ax in axes:
            if target is not None:
                ax.axhline(target, color="grey", linestyle=":", linewidth=1, label=f"target {target}")
            pc.focus_ylim(ax, ys, higher_is_better=not rmse, target=target, cap=None if rmse else 1.0)
            ax.grid(alpha=0.3)
        pc.legend_right(axes[1])
        fig.suptitle(f"{title}: {w} worker(s)")
        written.append(pc.save_figure(fig, d, f"curves-w{w}.png", 100))

    # scalar vs staleness bound: categorical x (bounds in order, then bsp, allreduce)
    bounds = sorted({bound_key(r["s"]) for r in runs if bound_key(r["s"]) is not None})
    refs = [m for m in ("bsp", "allreduce") if any(r["s"]["sync"] == m for r in runs)]
    xticks = ["inf" if b == math.inf else str(int(b)) for b in bounds] + refs

    def xpos(s):
        b = bound_key(s)
        return bounds.index(b) if b is not None else len(bounds) + refs.index(s["sync"]) + 0.5

    def scalar_plot(ax, value, ylabel_, ttl, log=False):
        for i, w in enumerate(workers):
            pts = {}
            for r in runs:
                if r["s"]["workers"] != w:
                    continue
                v = value(r)
                if v is not None and not (isinstance(v, float) and math.isnan(v)):
                    pts.setdefault(xpos(r["s"]), []).append(v)
            xs = sorted(pts)
            if not xs:
                continue
            mean = [float(np.mean(pts[x])) for x in xs]
            lo = [mean[k] - min(pts[x]) for k, x in enumerate(xs)]
            hi = [max(pts[x]) - mean[k] for k, x in enumerate(xs)]
            line = [k for k, x in enumerate(xs) if x < len(bounds)]
            ref = [k for k, x in enumerate(xs) if x >= len(bounds)]
            st = pc.style(i)
            ax.errorbar([xs[k] for k in line], [mean[k] for k in line], yerr=[[lo[k] for k in line], [hi[k] for k in line]],
                        capsize=3, label=f"{w} worker(s)", **st)
            if ref:
                ax.errorbar([xs[k] for k in ref], [mean[k] for k in ref],
                            yerr=[[lo[k] for k in ref], [hi[k] for k in ref]], linestyle="none", capsize=3,
                            label=f"{w} worker(s): reference", **{**st, "markerfacecolor": "none"})
        ax.set_xticks(list(range(len(bounds))) + [len(bounds) + k + 0.5 for k in range(len(refs))])
        ax.set_xticklabels(xticks)
        ax.set(xlabel="staleness bound s (clocks; inf = ASP)" + (" | reference" if refs else ""),
               ylabel=ylabel_, title=ttl)
        if log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    scalar_plot(axes[0], lambda r: r["s"]["samples_per_s"], "samples / s (all samples / slowest worker's time)",
                "throughput", log=True)
    scalar_plot(axes[1], lambda r: r["s"].get("worker_samples_per_s"), "samples / s (sum of workers' own rates)",
                "workers' own rates", log=True)
    fig.suptitle(title + ("  (bars: min..max over seeds)" if any(r["seed"] not in (None, 1) for r in runs) else ""))
    pc.legend_right(axes[1])
    written.append(pc.save_figure(fig, d, "throughput.png", 100))

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    scalar_plot(axes[0], lambda r: summarize.targets(r["s"], r["rows"], target)["time_to_target_s"],
                "time to target (s, global model)", f"time to target {target} (missing points: not reached)")
    scalar_plot(axes[1], lambda r: summarize.targets(r["s"], r["rows"], target)["epochs_to_target"],
                "epochs to target (global model)", f"epochs to target {target}")
    fig.suptitle(title)
    pc.legend_right(axes[1])
    written.append(pc.save_figure(fig, d, "target.png", 100))

    hist_runs = [r for r in runs if r["hist"] and bound_key(r["s"]) is not None]
    if hist_runs:
        fig, axes = plt.subplots(2, len(workers), figsize=(5.5 * len(workers) + 1.5, 7.5), squeeze=False)
        first_seed = min(x["seed"] or 0 for x in hist_runs)
        for j, w in enumerate(workers):
            sel = [r for r in hist_runs if r["s"]["workers"] == w and r["seed"] in (None, first_seed)]
            for i, r in enumerate(sel):
                st, clk, ver = r["hist"]
                for row, counts in ((0, clk), (1, ver)):
                    tot = sum(counts) or 1
                    axes[row][j].step(st, [c / tot for c in counts], where="mid", label=config_label(r["s"]),
                                      **pc.style(i, len(st)))
            for row, what in ((0, "clocks (rounds)"), (1, "versions (updates in between)")):
                ax = axes[row][j]
                ax.set_xscale("symlog", linthresh=1)
                ax.set_yscale("log")
                ax.set(xlabel=f"staleness in {what}", ylabel="fraction of applied updates",
                       title=f"{w} worker(s): staleness in {what.split(' ')[0]}")
                ax.grid(alpha=0.3)
            pc.legend_right(axes[0][j])
        # One column per worker count can be narrower than the title: wrap it.
        import textwrap
        fig.suptitle("\n".join(textwrap.wrap(title + " (first seed)", width=int(11 * 5.5 * len(workers)))),
                     fontsize=10)
        written.append(pc.save_figure(fig, d, "staleness.png", 100))
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep_dir")
    ap.add_argument("--title", default=None)
    ap.add_argument("--target", type=float, default=None,
                    help="target metric (default: the target the runs were given, summary.json's config)")
    ap.add_argument("--worker-curves", action="store_true",
                    help="also draw each worker's own copy in curves-w<N>.png (dashed; first seed)")
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args()
    runs = load_sweep(a.sweep_dir, a.worker_curves)
    if not runs:
        print(f"plot_sweep: no run directories with summary.json under {a.sweep_dir}", file=sys.stderr)
        return 1
    title = a.title or os.path.basename(os.path.normpath(a.sweep_dir))
    target = a.target
    if target is None:
        target = next((summarize.own_target(r["s"]) for r in runs if summarize.own_target(r["s"]) is not None), None)
    write_table(a.sweep_dir, title, runs, target)
    out = [os.path.join(a.sweep_dir, "summary.csv"), os.path.join(a.sweep_dir, "summary.md")]
    if not a.no_plot:
        plots(a.sweep_dir, title, runs, target)
    print("wrote " + ", ".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
