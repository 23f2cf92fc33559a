#!/usr/bin/env python3
"""Table and plot for experiments/hybrid.

    /usr/bin/python3 experiments/plot_hybrid.py results/hybrid [--cpus 2] [--worker-curves]

Reads the run directories <link>-<mode>/ (link: loopback or a rate such as
100mbit; mode: hybrid, asp, bsp, allreduce) and writes summary.csv (the
numbers, one row per run), summary.md and hybrid.png: bytes per worker per
epoch (sent, received), wall time and time to target, and test accuracy
against training seconds, one row of plots per link. Time to target and the
curves are the global model's (merged.csv's global rows; worker 0's, with a
warning, for a run without them); --worker-curves adds each worker's own copy.
"""
import os
import sys

import plot_common as pc
from plot_common import command_line, fmt, load_summary, pyplot, save_figure, write_tables

MODES = ["hybrid", "asp", "ssp", "bsp", "allreduce"]


def main():
    cli = command_line(__doc__)
    if not cli:
        return 0
    out, cpus, worker_curves = cli
    runs = []
    links = sorted({d.rsplit("-", 1)[0] for d in os.listdir(out) if os.path.isdir(os.path.join(out, d)) and "-" in d})
    for link in links:
        for mode in MODES:
            run_dir = os.path.join(out, "%s-%s" % (link, mode))
            s = load_summary(run_dir)
            if not s:
                continue
            runs.append((link, mode, s, pc.launch_curves(run_dir, worker_curves)))
    if not runs:
        print("plot_hybrid: no runs under %s" % out, file=sys.stderr)
        return 1
    rows = []
    for link, mode, s, curves in runs:
        w, e = s["workers"], s["config"]["epochs"]
        rows.append({"run": "%s-%s" % (link, mode), "link": link, "mode": mode, "epochs": e,
                     "target": s["config"]["target"], "workers": w, "servers": s["servers"], "wall_s": s["wall_s"],
                     "samples_per_s": s["samples_per_s"], "mb_out_per_worker_epoch": s["bytes_out"] / w / e / 1e6,
                     "mb_in_per_worker_epoch": s["bytes_in"] / w / e / 1e6, "time_to_target_s": s["time_to_target_s"],
                     "final_test_accuracy": s["final_test_accuracy"], **pc.worker0_fields(s),
                     "curve_process": curves[0]})
    s0 = runs[0][2]
    lines = ["%s CPUs, %d workers x 1 thread (+ %d server shard(s) where used), all on this machine; data %s; "
             "bytes per worker per epoch; ttt = the global model's time to the row's target accuracy." %
             (cpus, s0["workers"], max(r["servers"] for r in rows), s0["config"]["data"]), "",
             "| link | mode | epochs | target | wall s | samples/s | MB out/epoch | MB in/epoch | ttt s | final acc |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for row in rows:
        lines.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            row["link"], row["mode"], row["epochs"], row["target"], fmt(row["wall_s"], ".2f"), fmt(row["samples_per_s"], ".0f"),
            fmt(row["mb_out_per_worker_epoch"], ".1f"), fmt(row["mb_in_per_worker_epoch"], ".1f"),
            fmt(row["time_to_target_s"], ".2f"), fmt(row["final_test_accuracy"], ".4f")))
    write_tables(out, rows, lines)
    plt = pyplot("plot_hybrid")
    if not plt:
        return 0
    links = sorted({row["link"] for row in rows})
    fig, axes = plt.subplots(len(links), 3, figsize=(17, 4.4 * len(links)), squeeze=False)
    for li, link in enumerate(links):
        ax = axes[li]
        lrows = [row for row in rows if row["link"] == link]
        xs = range(len(lrows))
        names = [row["mode"] for row in lrows]
        ax[0].bar(xs, [row["mb_out_per_worker_epoch"] for row in lrows], color=pc.color(0), label="sent")
        ax[0].bar(xs, [row["mb_in_per_worker_epoch"] for row in lrows],
                  bottom=[row["mb_out_per_worker_epoch"] for row in lrows], color=pc.color(1), hatch="//",
                  edgecolor="white", linewidth=0, label="received")
        ax[0].set_xticks(list(xs), names)
        ax[0].set(ylabel="MB per worker per epoch", title="%s: bytes" % link)
        pc.legend_below(ax[0])
        ax[1].bar([x - 0.2 for x in xs], [row["wall_s"] for row in lrows], width=0.4, color=pc.color(2),
                  label="wall (all epochs)")
        ax[1].bar([x + 0.2 for x in xs], [row["time_to_target_s"] or 0 for row in lrows], width=0.4,
                  color=pc.color(3), hatch="//", edgecolor="white", linewidth=0,
                  label="to accuracy %s, global model (0: missed)" % lrows[0]["target"])
        ax[1].set_xticks(list(xs), names)
        ax[1].set(ylabel="seconds", title="%s: time (%s CPUs)" % (link, cpus))
        pc.legend_below(ax[1], ncol=1)
        ys = []
        for i, (rl, mode, _, (proc, crows, workers)) in enumerate(r for r in runs if r[0] == link):
            label = mode + ("" if proc == "global" else " (worker 0: no global rows)")
            pc.plot_curve(ax[2], [c["wall_s"] for c in crows], [c["test_accuracy"] for c in crows], i, label)
            ys.append([c["test_accuracy"] for c in crows])
            for k, (wp, wrows) in enumerate(workers.items()):
                ax[2].plot([c["wall_s"] for c in wrows], [c["test_accuracy"] for c in wrows],
                           label="%s: %s" % (mode, wp), **pc.worker_style(i, k, len(wrows)))
                ys.append([c["test_accuracy"] for c in wrows])
        ax[2].axhline(lrows[0]["target"], color="grey", linestyle=":", linewidth=1, label="target")
        pc.focus_ylim(ax[2], ys, target=lrows[0]["target"], cap=1.0)
        ax[2].set(xlabel="training seconds", ylabel="test accuracy (%s)" % pc.curve_owner(r["curve_process"] for r in lrows),
                  title="%s: accuracy against time" % link)
        pc.legend_right(ax[2])
        for a in ax:
            a.grid(alpha=0.3)
    save_figure(fig, out, "hybrid.png", 100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
