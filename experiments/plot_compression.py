#!/usr/bin/env python3
"""Table and plots for experiments/compression.

    /usr/bin/python3 experiments/plot_compression.py results/compression [--cpus 2]

Reads every run directory <link>-<sync>-<method>-ef<on|off>/ (summary.json,
worker-*.json, merged.csv) and writes summary.csv, summary.md and
compression.png. Bytes per epoch are per worker (the mean over workers): sent
(the compressed exchanges) and received (allreduce: from the ring neighbour;
bsp: the float32 pulls). "vs none" compares with the uncompressed run of the
same link and sync mode.
"""
import os
import re
import sys

from plot_common import command_line, fmt, load_summary, pyplot, save_figure, worker0_curve, write_tables


def load(out):
    runs = []
    for name in sorted(os.listdir(out)):
        m = re.fullmatch(r"(.+)-(allreduce|bsp|asp|ssp)-(.+)-ef(on|off)", name)
        s = load_summary(os.path.join(out, name)) if m else None
        if not s:
            continue
        curve = [(c[0], c[2]) for c in worker0_curve(os.path.join(out, name))]
        runs.append({"name": name, "link": m.group(1), "sync": m.group(2), "method": s["config"]["compress"],
                     "ef": m.group(4) == "on", "s": s, "curve": curve})
    return runs


def main():
    cli = command_line(__doc__)
    if not cli:
        return 0
    out, cpus = cli
    runs = load(out)
    if not runs:
        print("plot_compression: no runs under %s" % out, file=sys.stderr)
        return 1
    base = {(r["link"], r["sync"]): r for r in runs if r["method"] == "none"}
    rows = []
    for r in runs:
        s = r["s"]
        epochs, workers = s["config"]["epochs"], s["workers"]
        b = base.get((r["link"], r["sync"]))
        ttt, bttt = s["time_to_target_s"], b["s"]["time_to_target_s"] if b else None
        rows.append({
            "link": r["link"], "sync": r["sync"], "method": r["method"], "error_feedback": "on" if r["ef"] else "off",
            "ratio": s["compression_ratio"],
            "mb_out_per_epoch": s["bytes_out"] / workers / epochs / 1e6,
            "mb_in_per_epoch": s["bytes_in"] / workers / epochs / 1e6,
            "wall_s": s["wall_s"], "wall_vs_none": s["wall_s"] / b["s"]["wall_s"] if b else None,
            "time_to_target_s": ttt, "ttt_vs_none": ttt / bttt if ttt and bttt else None,
            "final_test_accuracy": s["final_test_accuracy"],
        })
    order = ["none", "fp16"]
    rows.sort(key=lambda x: (x["link"], x["sync"], x["method"] not in order,
                             order.index(x["method"]) if x["method"] in order else 0, x["method"], x["error_feedback"]))
    s0 = runs[0]["s"]
    lines = ["%s CPUs; 2 workers x 1 thread; target accuracy %s; bytes per worker per epoch; \"vs none\": this run's "
             "time / the uncompressed run's (below 1: faster)." % (cpus, s0["config"]["target"]), "",
             "| link | sync | method | error feedback | ratio | MB out/epoch | MB in/epoch | wall s | vs none | "
             "ttt s | vs none | final acc |",
             "|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for row in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["link"], row["sync"], row["method"], row["error_feedback"], fmt(row["ratio"], ".2f"),
            fmt(row["mb_out_per_epoch"], ".2f"), fmt(row["mb_in_per_epoch"], ".2f"), fmt(row["wall_s"], ".2f"),
            fmt(row["wall_vs_none"], ".2f"), fmt(row["time_to_target_s"], ".2f"), fmt(row["ttt_vs_none"], ".2f"),
            fmt(row["final_test_accuracy"], ".4f")))
    write_tables(out, rows, lines)
    plt = pyplot("plot_compression")
    if not plt:
        return 0
    groups = sorted({(row["link"], row["sync"]) for row in rows})
    fig, ax = plt.subplots(len(groups), 3, figsize=(18, 4.2 * len(groups)), squeeze=False)
    for gi, (link, sync) in enumerate(groups):
        g = [row for row in rows if row["link"] == link and row["sync"] == sync]
        labels = ["%s%s" % (row["method"], " +ef" if row["error_feedback"] == "on" else "") for row in g]
        xs = range(len(g))
        ax[gi][0].bar(xs, [row["mb_out_per_epoch"] for row in g], color="tab:blue", label="sent")
        ax[gi][0].bar(xs, [row["mb_in_per_epoch"] for row in g], bottom=[row["mb_out_per_epoch"] for row in g],
                      color="tab:orange", alpha=0.6, label="received")
        ax[gi][0].set_xticks(list(xs), labels, rotation=45, ha="right", fontsize=8)
        ax[gi][0].set(ylabel="MB per worker per epoch", title="%s, %s: bytes" % (sync, link))
        ax[gi][0].legend(fontsize=8)
        ax[gi][1].bar(xs, [row["time_to_target_s"] if row["time_to_target_s"] is not None else 0 for row in g])
        ax[gi][1].set_xticks(list(xs), labels, rotation=45, ha="right", fontsize=8)
        ax[gi][1].set(ylabel="seconds (0: target missed)", title="%s, %s: time to accuracy %s" %
                      (sync, link, s0["config"]["target"]))
        for r in runs:
            if r["link"] == link and r["sync"] == sync and r["curve"]:
                ax[gi][2].plot([c[0] for c in r["curve"]], [c[1] for c in r["curve"]], ".-", ms=3,
                               label="%s%s" % (r["method"], " +ef" if r["ef"] else ""))
        ax[gi][2].set(xlabel="training seconds", ylabel="test accuracy (worker 0)", title="%s, %s" % (sync, link))
        ax[gi][2].legend(fontsize=7)
        for a in ax[gi]:
            a.grid(alpha=0.3)
    save_figure(fig, out, "compression.png", 100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
