#!/usr/bin/env python3
"""Table and plot for experiments/hybrid.

    /usr/bin/python3 experiments/plot_hybrid.py results/hybrid [--cpus 2]

Reads the run directories <link>-<mode>/ (link: loopback or a rate such as
100mbit; mode: hybrid, asp, bsp, allreduce) and writes summary.csv,
summary.md and hybrid.png: bytes per worker per epoch (sent, received), wall
time and time to target, and test accuracy against training seconds, one row
of plots per link.
"""
import os
import sys

from plot_common import command_line, fmt, load_summary, pyplot, save_figure, worker0_curve, write_tables

MODES = ["hybrid", "asp", "ssp", "bsp", "allreduce"]


def main():
    cli = command_line(__doc__)
    if not cli:
        return 0
    out, cpus = cli
    runs = []
    links = sorted({d.rsplit("-", 1)[0] for d in os.listdir(out) if os.path.isdir(os.path.join(out, d)) and "-" in d})
    for link in links:
        for mode in MODES:
            run_dir = os.path.join(out, "%s-%s" % (link, mode))
            s = load_summary(run_dir)
            if not s:
                continue
            curve = [(c[0], c[2]) for c in worker0_curve(run_dir)]
            runs.append((link, mode, s, curve))
    if not runs:
        print("plot_hybrid: no runs under %s" % out, file=sys.stderr)
        return 1
    rows = []
    for link, mode, s, _ in runs:
        w, e = s["workers"], s["config"]["epochs"]
        rows.append({"link": link, "mode": mode, "epochs": e, "target": s["config"]["target"], "workers": w, "servers": s["servers"], "wall_s": s["wall_s"],
                     "samples_per_s": s["samples_per_s"], "mb_out_per_epoch": s["bytes_out"] / w / e / 1e6,
                     "mb_in_per_epoch": s["bytes_in"] / w / e / 1e6, "time_to_target_s": s["time_to_target_s"],
                     "final_test_accuracy": s["final_test_accuracy"]})
    s0 = runs[0][2]
    lines = ["%s CPUs, %d workers x 1 thread (+ %d server shard(s) where used), all on this machine; data %s; "
             "bytes per worker per epoch; ttt = time to the row's target accuracy." %
             (cpus, s0["workers"], max(r["servers"] for r in rows), s0["config"]["data"]), "",
             "| link | mode | epochs | target | wall s | samples/s | MB out/epoch | MB in/epoch | ttt s | final acc |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for row in rows:
        lines.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            row["link"], row["mode"], row["epochs"], row["target"], fmt(row["wall_s"], ".2f"), fmt(row["samples_per_s"], ".0f"),
            fmt(row["mb_out_per_epoch"], ".1f"), fmt(row["mb_in_per_epoch"], ".1f"),
            fmt(row["time_to_target_s"], ".2f"), fmt(row["final_test_accuracy"], ".4f")))
    write_tables(out, rows, lines)
    plt = pyplot("plot_hybrid")
    if not plt:
        return 0
    links = sorted({row["link"] for row in rows})
    fig, axes = plt.subplots(len(links), 3, figsize=(16, 4.2 * len(links)), squeeze=False)
    for li, link in enumerate(links):
        ax = axes[li]
        lrows = [row for row in rows if row["link"] == link]
        xs = range(len(lrows))
        names = [row["mode"] for row in lrows]
        ax[0].bar(xs, [row["mb_out_per_epoch"] for row in lrows], label="sent")
        ax[0].bar(xs, [row["mb_in_per_epoch"] for row in lrows], bottom=[row["mb_out_per_epoch"] for row in lrows],
                  alpha=0.6, label="received")
        ax[0].set_xticks(list(xs), names)
        ax[0].set(ylabel="MB per worker per epoch", title="%s: bytes" % link)
        ax[0].legend()
        ax[1].bar([x - 0.2 for x in xs], [row["wall_s"] for row in lrows], width=0.4, label="wall (all epochs)")
        ax[1].bar([x + 0.2 for x in xs], [row["time_to_target_s"] or 0 for row in lrows], width=0.4,
                  label="to accuracy %s (0: missed)" % lrows[0]["target"])
        ax[1].set_xticks(list(xs), names)
        ax[1].set(ylabel="seconds", title="%s: time (%s CPUs)" % (link, cpus))
        ax[1].legend(fontsize=8)
        for rl, mode, _, curve in runs:
            if rl == link:
                ax[2].plot([c[0] for c in curve], [c[1] for c in curve], ".-", label=mode)
        ax[2].set(xlabel="training seconds", ylabel="test accuracy (worker 0)", title="%s: accuracy against time" % link)
        ax[2].legend()
        for a in ax:
            a.grid(alpha=0.3)
    save_figure(fig, out, "hybrid.png", 100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
