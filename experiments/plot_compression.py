#!/usr/bin/env python3
"""Table and plots for experiments/compression.

    /usr/bin/python3 experiments/plot_compression.py results/compression [--cpus 2] [--worker-curves]

Reads every run directory <link>-<sync>-<method>-ef<on|off>/ (summary.json,
worker-*.json, merged.csv) and writes summary.csv (the numbers, one row per
run), summary.md and compression.png. Bytes per epoch are per worker (the mean
over workers): sent (the compressed exchanges) and received (allreduce: from the
ring neighbour; bsp: the float32 pulls). "vs none" compares with the
uncompressed run of the same link and sync mode. Time to target and the
accuracy curves are the global model's (merged.csv's global rows; worker 0's,
with a warning, for a run without them); --worker-curves adds each worker's
own copy (dashed).
"""
import os
import re
import sys

import plot_common as pc
from plot_common import command_line, fmt, load_summary, pyplot, save_figure, write_tables


def load(out, worker_curves):
    runs = []
    for name in sorted(os.listdir(out)):
        m = re.fullmatch(r"(.+)-(allreduce|bsp|asp|ssp)-(.+)-ef(on|off)", name)
        s = load_summary(os.path.join(out, name)) if m else None
        if not s:
            continue
        proc, rows, workers = pc.launch_curves(os.path.join(out, name), worker_curves)
        runs.append({"name": name, "link": m.group(1), "sync": m.group(2), "method": s["config"]["compress"],
                     "ef": m.group(4) == "on", "s": s, "curve_process": proc, "rows": rows, "workers": workers})
    return runs


def main():
    cli = command_line(__doc__)
    if not cli:
        return 0
    out, cpus, worker_curves = cli
    runs = load(out, worker_curves)
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
            "run": r["name"], "link": r["link"], "sync": r["sync"], "method": r["method"], "error_feedback": r["ef"],
            "workers": workers, "epochs": epochs, "compression_ratio": s["compression_ratio"],
            "mb_out_per_worker_epoch": s["bytes_out"] / workers / epochs / 1e6,
            "mb_in_per_worker_epoch": s["bytes_in"] / workers / epochs / 1e6,
            "wall_s": s["wall_s"], "wall_s_vs_none": s["wall_s"] / b["s"]["wall_s"] if b else None,
            "target": s["config"]["target"], "time_to_target_s": ttt,
            "time_to_target_vs_none": ttt / bttt if ttt and bttt else None,
            "final_test_accuracy": s["final_test_accuracy"], **pc.worker0_fields(s), "curve_process": r["curve_process"],
        })
    order = ["none", "fp16"]
    rows.sort(key=lambda x: (x["link"], x["sync"], x["method"] not in order,
                             order.index(x["method"]) if x["method"] in order else 0, x["method"], x["error_feedback"]))
    runs.sort(key=lambda r: [x["run"] for x in rows].index(r["name"]))
    s0 = runs[0]["s"]
    lines = ["%s CPUs; 2 workers x 1 thread; target accuracy %s; bytes per worker per epoch; \"vs none\": this run's "
             "time / the uncompressed run's (below 1: faster); ttt: time to target of the global model." % (cpus, s0["config"]["target"]), "",
             "| link | sync | method | error feedback | ratio | MB out/epoch | MB in/epoch | wall s | vs none | "
             "ttt s | vs none | final acc |",
             "|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for row in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["link"], row["sync"], row["method"], "on" if row["error_feedback"] else "off",
            fmt(row["compression_ratio"], ".2f"), fmt(row["mb_out_per_worker_epoch"], ".2f"),
            fmt(row["mb_in_per_worker_epoch"], ".2f"), fmt(row["wall_s"], ".2f"), fmt(row["wall_s_vs_none"], ".2f"),
            fmt(row["time_to_target_s"], ".2f"), fmt(row["time_to_target_vs_none"], ".2f"),
            fmt(row["final_test_accuracy"], ".4f")))
    write_tables(out, rows, lines)
    plt = pyplot("plot_compression")
    if not plt:
        return 0
    groups = sorted({(row["link"], row["sync"]) for row in rows})
    fig, ax = plt.subplots(len(groups), 3, figsize=(19, 4.4 * len(groups)), squeeze=False)
    for gi, (link, sync) in enumerate(groups):
        g = [row for row in rows if row["link"] == link and row["sync"] == sync]
        labels = ["%s%s" % (row["method"], " +ef" if row["error_feedback"] else "") for row in g]
        xs = range(len(g))
        ax[gi][0].bar(xs, [row["mb_out_per_worker_epoch"] for row in g], color=pc.color(0), label="sent")
        ax[gi][0].bar(xs, [row["mb_in_per_worker_epoch"] for row in g], bottom=[row["mb_out_per_worker_epoch"] for row in g],
                      color=pc.color(1), hatch="//", edgecolor="white", linewidth=0, label="received")
        ax[gi][0].set_xticks(list(xs), labels, rotation=45, ha="right", fontsize=8)
        ax[gi][0].set(ylabel="MB per worker per epoch", title="%s, %s: bytes" % (sync, link))
        pc.legend_right(ax[gi][0])
        ax[gi][1].bar(xs, [row["time_to_target_s"] if row["time_to_target_s"] is not None else 0 for row in g],
                      color=[pc.color(i) for i in range(len(g))])
        ax[gi][1].set_xticks(list(xs), labels, rotation=45, ha="right", fontsize=8)
        ax[gi][1].set(ylabel="seconds (0: target missed)", title="%s, %s: time to accuracy %s (global model)" %
                      (sync, link, s0["config"]["target"]))
        ys = []
        for i, r in enumerate(x for x in runs if x["link"] == link and x["sync"] == sync):
            label = "%s%s" % (r["method"], " +ef" if r["ef"] else "")
            if r["curve_process"] != "global":
                label += " (worker 0: no global rows)"
            pc.plot_curve(ax[gi][2], [c["wall_s"] for c in r["rows"]], [c["test_accuracy"] for c in r["rows"]], i, label)
            ys.append([c["test_accuracy"] for c in r["rows"]])
            for k, (proc, wrows) in enumerate(r["workers"].items()):
                ax[gi][2].plot([c["wall_s"] for c in wrows], [c["test_accuracy"] for c in wrows],
                               label="%s: %s" % (label, proc), **pc.worker_style(i, k, len(wrows)))
                ys.append([c["test_accuracy"] for c in wrows])
        ax[gi][2].axhline(s0["config"]["target"], color="grey", linestyle=":", linewidth=1, label="target")
        pc.focus_ylim(ax[gi][2], ys, target=s0["config"]["target"], cap=1.0)
        ax[gi][2].set(xlabel="training seconds", ylabel="test accuracy (%s)" % pc.curve_owner(r["curve_process"] for r in runs),
                       title="%s, %s" % (sync, link))
        pc.legend_right(ax[gi][2])
        for a in ax[gi]:
            a.grid(alpha=0.3)
    save_figure(fig, out, "compression.png", 100)
    return 0


if __name__ == "__main__":
    sys.exit(main())
