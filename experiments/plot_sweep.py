#!/usr/bin/env python3
"""Table and plots of a staleness sweep: every `asgd launch` run directory
(one holding summary.json) directly under SWEEP_DIR.

Writes SWEEP_DIR/summary.csv (raw numbers, one row per run) and summary.md, prints
the table, and (with matplotlib) SWEEP_DIR/
  curves-w<N>.png      test metric vs training time and vs epochs, N workers; one
                       line per configuration (mean over seeds, band min..max)
  throughput.png       samples/s (and the workers' summed own rates) vs staleness bound
  target.png           time to target and epochs to target vs staleness bound
  staleness.png        histograms of staleness in clocks and in versions (staleness.csv)

The curves are worker 0's rows of merged.csv: worker 0's replica, evaluated as it
trains (its `epoch` counts passes of the whole run). The table's final metric is
the global model's (summary.json); time to target is worker 0's (summary.json),
epochs to target the epoch of worker 0's first row that met the target.
Run metadata (sync, bound, workers) comes from summary.json; the seed from the
run directory's name (…-seed<S>) since summary.json does not record it.
"""
import argparse
import csv
import math
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in experiments/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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


def load_sweep(d):
    runs = []
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if not summarize.is_launch_run(p):
            continue
        s, rows = summarize.load(p)
        m = re.search(r"-seed(\d+)$", name)
        runs.append(dict(name=name, s=s, rows=rows, seed=int(m.group(1)) if m else None,
                         config=re.sub(r"-seed\d+$", "", name), hist=load_hist(os.path.join(p, "staleness.csv"))))
    runs.sort(key=lambda r: (r["s"]["workers"], SYNC_ORDER.get(r["s"]["sync"], 9),
                             r["s"].get("staleness_bound") or 0, r["seed"] or 0))
    return runs


def table(runs, target):
    rmse = runs and summarize.metric_of(runs[0]["s"]) == "rmse"
    mkey = "final_test_rmse" if rmse else "final_test_accuracy"
    header = ["run", "sync", "bound", "workers", "threads", "seed", "samples/s", "worker samples/s",
              "time to target (s)", "epochs to target", mkey.replace("final_", "final "), "final test loss",
              "stale clk mean", "stale clk p99", "stale clk max", "stale ver mean", "worker wait s", "train s"]
    raw = []
    for r in runs:
        s = r["s"]
        st = s.get("staleness_clocks") or {}
        sv = s.get("staleness_updates") or {}
        raw.append([r["name"], s["sync"], bound_label(s) if s["sync"] in ("ssp", "asp") else "-", s["workers"],
                    s["threads"], r["seed"], s["samples_per_s"], s.get("worker_samples_per_s"),
                    s.get("time_to_target_s"), summarize.epochs_to_target(s, r["rows"], target), s.get(mkey),
                    s.get("final_test_loss"), st.get("mean"), st.get("p99"), st.get("max"), sv.get("mean"),
                    s.get("worker_wait_s"), s.get("wall_s")])
    return header, raw


def fmt_row(row):
    digits = {6: 0, 7: 0, 8: 2, 9: 3, 10: 4, 11: 4, 12: 2, 15: 2, 16: 2, 17: 2}
    return [summarize.fmt(v, digits.get(i, 3)) if isinstance(v, float) else summarize.fmt(v)
            for i, v in enumerate(row)]


def write_table(d, title, header, raw, target):
    with open(os.path.join(d, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows([["" if v is None else v for v in row] for row in raw])
    rows = [fmt_row(r) for r in raw]
    with open(os.path.join(d, "summary.md"), "w") as f:
        f.write(f"### {title}\n\n")
        if target is not None:
            f.write(f"Target: {target}. Time to target is worker 0's; '-' = not reached.\n\n")
        f.write("| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n")
        for r in rows:
            f.write("| " + " | ".join(r) + " |\n")
    widths = [max(len(str(x[i])) for x in [header] + rows) for i in range(len(header))]
    print(title + (f" (target {target})" if target is not None else ""))
    for r in [header] + rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))


def band(ax, groups, xcol, ycol, label, color):
    """Mean line and min..max band over seeds; x interpolated onto the union of the seeds' x."""
    import numpy as np
    curves = []
    for rows in groups:
        pts = [(r[xcol], r[ycol]) for r in rows if not math.isnan(r[ycol])]
        if pts:
            curves.append(np.array(pts))
    if not curves:
        return
    if len(curves) == 1:
        ax.plot(curves[0][:, 0], curves[0][:, 1], marker=".", label=label, color=color)
        return
    xs = np.unique(np.concatenate([c[:, 0] for c in curves]))
    xs = xs[xs <= min(c[-1, 0] for c in curves)]  # where every seed has data
    ys = np.array([np.interp(xs, c[:, 0], c[:, 1]) for c in curves])
    ax.plot(xs, ys.mean(axis=0), label=f"{label} ({len(curves)} seeds)", color=color)
    ax.fill_between(xs, ys.min(axis=0), ys.max(axis=0), color=color, alpha=0.2, linewidth=0)


def config_label(s):
    return {"ssp": f"ssp s={s.get('staleness_bound')}", "asp": "asp (s=inf)"}.get(s["sync"], s["sync"])


def plots(d, title, runs, target):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    rmse = summarize.metric_of(runs[0]["s"]) == "rmse"
    col, ylabel = ("test_rmse", "test RMSE (worker 0)") if rmse else ("test_accuracy", "test accuracy (worker 0)")
    workers = sorted({r["s"]["workers"] for r in runs})
    written = []

    # metric vs time and vs epochs, one figure per worker count
    for w in workers:
        configs = []
        for r in runs:
            if r["s"]["workers"] == w and r["config"] not in configs:
                configs.append(r["config"])
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
        for i, c in enumerate(configs):
            group = [r for r in runs if r["config"] == c]
            lab = config_label(group[0]["s"])
            color = plt.cm.viridis(i / max(1, len(configs) - 1)) if len(configs) > 1 else "C0"
            band(axes[0], [g["rows"] for g in group], "wall_s", col, lab, color)
            band(axes[1], [g["rows"] for g in group], "epoch", col, lab, color)
        axes[0].set(xlabel="training time (s, evaluation excluded)", ylabel=ylabel, title="metric vs wall time")
        axes[1].set(xlabel="epochs (samples of all workers / training-set size)", ylabel=ylabel,
                    title="metric vs epochs")
        for ax in axes:
            if target is not None:
                ax.axhline(target, color="grey", linestyle=":", linewidth=1)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"{title}: {w} worker(s)")
        fig.tight_layout()
        path = os.path.join(d, f"curves-w{w}.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)

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
            color = f"C{i}"
            ax.errorbar([xs[k] for k in line], [mean[k] for k in line], yerr=[[lo[k] for k in line], [hi[k] for k in line]],
                        marker="o", color=color, capsize=3, label=f"{w} worker(s)")
            if ref:
                ax.errorbar([xs[k] for k in ref], [mean[k] for k in ref],
                            yerr=[[lo[k] for k in ref], [hi[k] for k in ref]], marker="s", linestyle="none",
                            color=color, capsize=3)
        ax.set_xticks(list(range(len(bounds))) + [len(bounds) + k + 0.5 for k in range(len(refs))])
        ax.set_xticklabels(xticks)
        ax.set(xlabel="staleness bound s (clocks; inf = ASP)" + (" | reference" if refs else ""),
               ylabel=ylabel_, title=ttl)
        if log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    scalar_plot(axes[0], lambda r: r["s"]["samples_per_s"], "samples / s (all samples / slowest worker's time)",
                "throughput", log=True)
    scalar_plot(axes[1], lambda r: r["s"].get("worker_samples_per_s"), "samples / s (sum of workers' own rates)",
                "workers' own rates", log=True)
    fig.suptitle(title + ("  (bars: min..max over seeds)" if any(r["seed"] not in (None, 1) for r in runs) else ""))
    fig.tight_layout()
    path = os.path.join(d, "throughput.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    scalar_plot(axes[0], lambda r: r["s"].get("time_to_target_s"), "time to target (s, worker 0)",
                f"time to target {target} (missing points: not reached)")
    scalar_plot(axes[1], lambda r: summarize.epochs_to_target(r["s"], r["rows"], target), "epochs to target",
                f"epochs to target {target} (worker 0's evaluations)")
    fig.suptitle(title)
    fig.tight_layout()
    path = os.path.join(d, "target.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)

    hist_runs = [r for r in runs if r["hist"] and bound_key(r["s"]) is not None]
    if hist_runs:
        fig, axes = plt.subplots(2, len(workers), figsize=(5.5 * len(workers), 7.5), squeeze=False)
        for j, w in enumerate(workers):
            sel = [r for r in hist_runs if r["s"]["workers"] == w and (r["seed"] in (None, min(
                x["seed"] or 0 for x in hist_runs)))]
            for i, r in enumerate(sel):
                st, clk, ver = r["hist"]
                color = plt.cm.viridis(i / max(1, len(sel) - 1)) if len(sel) > 1 else "C0"
                for row, counts in ((0, clk), (1, ver)):
                    tot = sum(counts) or 1
                    axes[row][j].step(st, [c / tot for c in counts], where="mid", color=color, marker=".",
                                      label=config_label(r["s"]))
            for row, what in ((0, "clocks (rounds)"), (1, "versions (updates in between)")):
                ax = axes[row][j]
                ax.set_xscale("symlog", linthresh=1)
                ax.set_yscale("log")
                ax.set(xlabel=f"staleness in {what}", ylabel="fraction of applied updates",
                       title=f"{w} worker(s): staleness in {what.split(' ')[0]}")
                ax.grid(alpha=0.3)
                ax.legend(fontsize=7)
        # One column per worker count can be narrower than the title: wrap it.
        import textwrap
        fig.suptitle("\n".join(textwrap.wrap(title + " (first seed)", width=int(11 * 5.5 * len(workers)))),
                     fontsize=10)
        fig.tight_layout()
        path = os.path.join(d, "staleness.png")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep_dir")
    ap.add_argument("--title", default=None)
    ap.add_argument("--target", type=float, default=None, help="target metric (summary.json does not record it)")
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args()
    runs = load_sweep(a.sweep_dir)
    if not runs:
        print(f"plot_sweep: no run directories with summary.json under {a.sweep_dir}", file=sys.stderr)
        return 1
    title = a.title or os.path.basename(os.path.normpath(a.sweep_dir))
    header, raw = table(runs, a.target)
    write_table(a.sweep_dir, title, header, raw, a.target)
    out = [os.path.join(a.sweep_dir, "summary.csv"), os.path.join(a.sweep_dir, "summary.md")]
    if not a.no_plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("plot_sweep: matplotlib not installed (apt-get install python3-matplotlib); no plots",
                  file=sys.stderr)
        else:
            out += plots(a.sweep_dir, title, runs, a.target)
    print("wrote " + ", ".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
