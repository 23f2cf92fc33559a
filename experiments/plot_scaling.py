#!/usr/bin/env python3
"""Table and plots for experiments/scaling.

    /usr/bin/python3 experiments/plot_scaling.py results/scaling [--cpus 2] [--worker-curves]

Reads every run directory <mode>-<rule>-n<N>-r<R>/ (summary.json,
worker-*.json, merged.csv) and writes summary.csv (the numbers, one row per
configuration), summary.md and scaling.png. Repeats of a configuration (the same seed: the same arithmetic,
other timings) are combined by their median wall time, samples/s and time to
target, and their range is shown. Speedup and
efficiency compare each run with the 1-worker run of the same mode and rule:
speedup = wall(1) / wall(N) for the same epochs, efficiency = speedup / N;
time-to-target speedup = ttt(1) / ttt(N) (empty when either missed the target).
Time to target and the accuracy curves are the global model's (merged.csv's
global rows; worker 0's, with a warning, for a run without them);
--worker-curves adds each worker's own copy (dashed).
"""
import json
import os
import re
import sys

import plot_common as pc
from plot_common import command_line, fmt, load_summary, median, pyplot, save_figure, write_tables


def load(out, worker_curves):
    runs = []
    for name in sorted(os.listdir(out)):
        m = re.fullmatch(r"(weak|strong)-(none|linear|sqrt)-n(\d+)-r(\d+)", name)
        s = load_summary(os.path.join(out, name)) if m else None
        if not s:
            continue
        workers = []
        for k in range(s["workers"]):
            with open(os.path.join(out, name, "worker-%d.json" % k)) as f:
                workers.append(json.load(f))
        proc, curve, wcurves = pc.launch_curves(os.path.join(out, name), worker_curves)
        runs.append({"name": name, "mode": m.group(1), "rule": m.group(2), "n": int(m.group(3)),
                     "repeat": int(m.group(4)), "s": s, "w": workers, "curve": curve, "curve_process": proc,
                     "worker_curves": wcurves})
    # One entry per configuration: the median of its repeats (the curve of the first).
    configs = {}
    for r in runs:
        configs.setdefault((r["mode"], r["rule"], r["n"]), []).append(r)
    merged = []
    for (mode, rule, n), reps in configs.items():
        reps.sort(key=lambda r: r["repeat"])
        first = reps[0]
        s = dict(first["s"])
        walls = [r["s"]["wall_s"] for r in reps]
        ttts = [r["s"]["time_to_target_s"] for r in reps]
        s["wall_s"] = median(walls)
        s["samples_per_s"] = median([r["s"]["samples_per_s"] for r in reps])
        s["time_to_target_s"] = median(ttts) if all(t is not None for t in ttts) else None
        merged.append({"mode": mode, "rule": rule, "n": n, "s": s, "w": first["w"], "curve": first["curve"],
                       "curve_process": first["curve_process"], "worker_curves": first["worker_curves"],
                       "repeats": len(reps), "wall_range": (min(walls), max(walls))})
    merged.sort(key=lambda r: (r["mode"] != "strong", ["none", "linear", "sqrt"].index(r["rule"]), r["n"]))
    return merged



def main():
    cli = command_line(__doc__)
    if not cli:
        return 0
    out, cpus, worker_curves = cli
    runs = load(out, worker_curves)
    if not runs:
        print("plot_scaling: no runs under %s" % out, file=sys.stderr)
        return 1
    base = {(r["mode"], r["rule"]): r for r in runs if r["n"] == 1}
    rows = []
    for r in runs:
        s, b = r["s"], base.get((r["mode"], r["rule"]))
        wall, ttt = s["wall_s"], s["time_to_target_s"]
        speed = b["s"]["wall_s"] / wall if b and wall else None
        ttt_speed = b["s"]["time_to_target_s"] / ttt if b and ttt and b["s"]["time_to_target_s"] else None
        rows.append({
            "mode": r["mode"], "lr_scaling": r["rule"], "workers": r["n"], "batch_per_worker": s["batch"],
            "total_batch": s["total_batch"], "lr": r["w"][0]["lr"], "epochs": s["config"]["epochs"],
            "repeats": r["repeats"], "wall_s": wall, "wall_s_min": r["wall_range"][0], "wall_s_max": r["wall_range"][1],
            "samples_per_s": s["samples_per_s"], "speedup": speed,
            "efficiency": speed / r["n"] if speed else None, "target": s["config"]["target"],
            "time_to_target_s": ttt, "time_to_target_speedup": ttt_speed,
            "final_test_accuracy": s["final_test_accuracy"],
            "bytes_out_per_worker": s["bytes_out"] / r["n"] if s["bytes_out"] is not None else None,
            "compress": s["config"].get("compress", "none"), "curve_process": r["curve_process"],
        })
    target = runs[0]["s"]["config"]["target"]
    lines = ["Machine: %s CPUs; every worker is a process on it, so runs with more than %s workers share the cores "
             "(oversubscribed). Target accuracy %s; speedup = wall(1 worker) / wall(N) for the same epochs, "
             "efficiency = speedup / N, ttt = the global model's time to target (none: missed in a repeat); wall, samples/s and ttt are medians "
             "of %d repeats (wall range in brackets)." % (cpus, cpus, target, max(r["repeats"] for r in runs)), "",
             "| mode | lr rule | N | batch/worker | total batch | lr | wall s | samples/s | speedup | efficiency | "
             "ttt s | ttt speedup | final acc | MB out/worker |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for row in rows:
        lines.append("| %s | %s | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["mode"], row["lr_scaling"], row["workers"], row["batch_per_worker"], row["total_batch"],
            fmt(row["lr"], ".4g"), "%s [%s-%s]" % (fmt(row["wall_s"], ".2f"), fmt(row["wall_s_min"], ".2f"),
                                                 fmt(row["wall_s_max"], ".2f")), fmt(row["samples_per_s"], ".0f"),
            fmt(row["speedup"], ".2f"), fmt(row["efficiency"], ".2f"), fmt(row["time_to_target_s"], ".2f"),
            fmt(row["time_to_target_speedup"], ".2f"), fmt(row["final_test_accuracy"], ".4f"),
            fmt(row["bytes_out_per_worker"] / 1e6 if row["bytes_out_per_worker"] is not None else None, ".1f")))
    write_tables(out, rows, lines)
    plt = pyplot("plot_scaling")
    if not plt:
        return 0
    fig, ax = plt.subplots(1, 4, figsize=(21, 4.8))
    groups = {}
    for row in rows:
        groups.setdefault((row["mode"], row["lr_scaling"]), []).append(row)
    ns = sorted({row["workers"] for row in rows})
    ax[0].plot(ns, ns, "k:", label="ideal")
    for i, ((mode, rule), g) in enumerate(groups.items()):
        label = "%s%s" % (mode, "" if rule == "none" else ", lr " + rule)
        xs = [row["workers"] for row in g]
        ax[0].plot(xs, [row["speedup"] or float("nan") for row in g], label=label, **pc.style(i))
        ax[1].plot(xs, [row["efficiency"] or float("nan") for row in g], label=label, **pc.style(i))
        ax[2].plot(xs, [row["time_to_target_s"] if row["time_to_target_s"] is not None else float("nan") for row in g],
                   label=label, **pc.style(i))
    ax[0].set(xlabel="workers", ylabel="speedup (same epochs)", title="speedup (%s CPUs)" % cpus)
    ax[1].set(xlabel="workers", ylabel="efficiency", title="efficiency = speedup / N")
    ax[2].set(xlabel="workers", ylabel="seconds (global model)", title="time to accuracy %s" % target)
    nmax = max(ns)
    ys = []
    for i, r in enumerate(runs):
        if r["n"] == nmax and r["curve"]:
            label = "%s%s, N=%d" % (r["mode"], "" if r["rule"] == "none" else ", lr " + r["rule"], r["n"])
            if r["curve_process"] != "global":
                label += " (worker 0: no global rows)"
            k = list(groups).index((r["mode"], r["rule"]))
            pc.plot_curve(ax[3], [c["epoch"] for c in r["curve"]], [c["test_accuracy"] for c in r["curve"]], k, label)
            ys.append([c["test_accuracy"] for c in r["curve"]])
            for j, (proc, wrows) in enumerate(r["worker_curves"].items()):
                ax[3].plot([c["epoch"] for c in wrows], [c["test_accuracy"] for c in wrows],
                           label="%s: %s" % (label, proc), **pc.worker_style(k, j, len(wrows)))
                ys.append([c["test_accuracy"] for c in wrows])
    ax[3].axhline(target, color="grey", linestyle=":", linewidth=1, label="target")
    pc.focus_ylim(ax[3], ys, target=target, cap=1.0)
    ax[3].set(xlabel="epochs", ylabel="test accuracy (%s)" % pc.curve_owner(r["curve_process"] for r in runs),
              title="accuracy per epoch at N=%d" % nmax)
    for a in ax:
        a.grid(alpha=0.3)
    ax[0].set_xscale("log", base=2)
    ax[1].set_xscale("log", base=2)
    ax[2].set_xscale("log", base=2)
    pc.figure_legend(fig, ax[:3], ncol=4)
    pc.legend_right(ax[3])
    save_figure(fig, out, "scaling.png", 110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
