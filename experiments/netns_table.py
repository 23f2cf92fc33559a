#!/usr/bin/env python3
"""Table and plot of a network sweep (experiments/netns_sweep): every run directory
<rate>-<delay>ms-<mode>-seed<S>/ directly under SWEEP_DIR holding summary.json.

Prints the table and writes SWEEP_DIR/summary.csv (the numbers, one row per run;
columns in experiments/README.md), summary.md (mean over seeds, min..max where
several) and, with matplotlib, network.png: samples/s and time to target per
link, one bar per consistency model (seeds as min..max error bars).

Columns: RTT = mean ping host 1 -> host 0 before the run (netns_cluster --ping);
samples/s = all samples / the slowest worker's training time; time and epochs to
target and the final metric are the global model's (the `global` rows of
merged.csv and summary.json; a run without global rows, from an older asgd,
falls back to worker 0's with a warning); wait s = training held (SSP bound,
BSP's round), summed over workers; pull wait s = the workers' communication
threads blocked in pulls, summed (overlaps training under ASP/SSP); MB/worker =
bytes a worker sent; staleness in clocks (mean/max) and in versions (mean).
Allreduce workers record neither bytes nor waiting (only comm_s): '-' in the
table, empty in summary.csv.
"""
import argparse
import json
import math
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in experiments/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_common as pc  # noqa: E402
import summarize  # noqa: E402

MODE_ORDER = {"asp": 0, "ssp": 1, "bsp": 2, "allreduce": 3}
RUN_NAME = re.compile(r"^(?P<rate>[^-]+)-(?P<delay>[0-9.]+)ms-(?P<mode>[a-z]+)-seed(?P<seed>\d+)$")


def rate_bits(rate):
    """'10gbit' -> 1e10 (for ordering links fastest first); unshaped = inf."""
    m = re.match(r"^([0-9.]+)([kmgt]?)(bit|bps)$", rate)
    if not m:
        return math.inf
    v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)]
    return v * (8 if m.group(3) == "bps" else 1)


def ping_rtt_ms(run_dir):
    try:
        with open(os.path.join(run_dir, "cluster.log")) as f:
            m = re.search(r"rtt min/avg/max/mdev = [0-9.]+/([0-9.]+)/", f.read())
        return float(m.group(1)) if m else None
    except OSError:
        return None


def load_runs(d):
    runs = []
    for name in sorted(os.listdir(d)):
        m = RUN_NAME.match(name)
        p = os.path.join(d, name)
        if not m or not summarize.is_launch_run(p):
            continue
        s, rows = summarize.load(p)
        workers = []
        for k in range(s["workers"]):
            with open(os.path.join(p, f"worker-{k}.json")) as f:
                workers.append(json.load(f))
        target = (s.get("config") or {}).get("target")
        ring = s["sync"] == "allreduce"
        tt = summarize.targets(s, rows, target)
        runs.append(dict(
            name=name, rate=m.group("rate"), delay=float(m.group("delay")), mode=m.group("mode"),
            seed=int(m.group("seed")), rtt=ping_rtt_ms(p), s=s,
            samples_per_s=s["samples_per_s"], worker_samples_per_s=s.get("worker_samples_per_s"),
            tt=tt["time_to_target_s"], et=tt["epochs_to_target"], st=tt["samples_to_target"],
            acc=s.get("final_test_accuracy", s.get("final_test_rmse")), train_s=s["wall_s"],
            # The ring records neither bytes nor its waiting apart from comm_s: '-' rather than 0.
            wait=None if ring else sum(w.get("wait_s", 0) for w in workers),
            pull_wait=None if ring else sum(w.get("pull_wait_s", 0) for w in workers),
            mb_out=None if ring else sum(w.get("bytes_out", 0) for w in workers) / len(workers) / 1e6,
            clk=s.get("staleness_clocks"), ver=s.get("staleness_updates"),
            stopped=any(w.get("stopped_at_time_limit") for w in workers), target=target))
    runs.sort(key=lambda r: (-rate_bits(r["rate"]), r["delay"], MODE_ORDER.get(r["mode"], 9), r["seed"]))
    return runs


def mode_label(r, staleness):
    return f"ssp s={staleness}" if r["mode"] == "ssp" and staleness is not None else r["mode"]


def fmt(v, digits=2):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}f}"


def agg(vals, digits=2):
    """mean (min..max) over seeds; '-' for a seed that missed counts as missing."""
    got = [v for v in vals if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not got:
        return "-"
    mean = sum(got) / len(got)
    text = fmt(mean, digits)
    if len(vals) > 1:
        text += f" ({fmt(min(got), digits)}..{fmt(max(got), digits)})" if len(got) > 1 else ""
        if len(got) < len(vals):
            text += f" [{len(got)}/{len(vals)}]"
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep_dir")
    ap.add_argument("--title", default="asgd across network namespaces")
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args()
    runs = load_runs(a.sweep_dir)
    if not runs:
        print(f"netns_table: no finished runs under {a.sweep_dir}", file=sys.stderr)
        return 1
    staleness = None
    for r in runs:
        if r["mode"] == "ssp":
            with open(os.path.join(a.sweep_dir, r["name"], "summary.json")) as f:
                staleness = json.load(f).get("staleness_bound")
    target = next((r["target"] for r in runs if r["target"] is not None), None)

    metric = "final_test_" + summarize.metric_of(runs[0]["s"])
    data = []
    for r in runs:
        s = r["s"]
        bits = rate_bits(r["rate"])
        row = {"run": r["name"], "rate": r["rate"], "rate_bit_per_s": bits if math.isfinite(bits) else None,
               "delay_ms": r["delay"], "rtt_ms": r["rtt"], "mode": r["mode"],
               "staleness_bound": s.get("staleness_bound") if r["mode"] == "ssp" else None, "seed": r["seed"],
               "workers": s["workers"], "samples_per_s": r["samples_per_s"],
               "worker_samples_per_s": r["worker_samples_per_s"], "target": r["target"],
               "time_to_target_s": r["tt"], "samples_to_target": r["st"], "epochs_to_target": r["et"],
               metric: r["acc"], "final_test_loss": s.get("final_test_loss"), "wall_s": r["train_s"],
               "stopped_at_time_limit": r["stopped"], "worker_wait_s": r["wait"], "pull_wait_s": r["pull_wait"],
               "mb_out_per_worker": r["mb_out"], **summarize.staleness_columns(s)}
        row.update(pc.worker0_fields(s))
        row["curve_process"] = s["curve_process"]
        data.append(row)

    groups = {}
    for r in runs:
        groups.setdefault((r["rate"], r["delay"], r["mode"]), []).append(r)
    header = ["link", "RTT ms", "mode", "samples/s", "time to target s", "epochs to target", "final " + metric[6:],
              "train s", "wait s", "pull wait s", "MB/worker", "stale clk mean/max", "stale ver mean"]
    table = []
    for (rate, delay, mode), rs in groups.items():
        clk = [r["clk"] for r in rs if r["clk"] and r["clk"].get("updates")]
        table.append([f"{rate}, {delay:g} ms", agg([r["rtt"] for r in rs]), mode_label(rs[0], staleness),
                      agg([r["samples_per_s"] for r in rs], 0),
                      agg([r["tt"] for r in rs]) + ("" if any(r["tt"] is not None for r in rs) else
                                                    (" (time limit)" if all(r["stopped"] for r in rs) else "")),
                      agg([r["et"] for r in rs]), agg([r["acc"] for r in rs], 4),
                      agg([r["train_s"] for r in rs]), agg([r["wait"] for r in rs]),
                      agg([r["pull_wait"] for r in rs]), agg([r["mb_out"] for r in rs], 1),
                      (f"{sum(c['mean'] for c in clk) / len(clk):.1f}/{max(c['max'] for c in clk)}" if clk else "-"),
                      agg([r["ver"]["mean"] if r["ver"] and r["ver"].get("updates") else None for r in rs])])
    seeds = sorted({r["seed"] for r in runs})
    title = a.title + (f" (target test accuracy {target})" if target is not None else "") + \
        (f"; mean (min..max) over seeds {seeds}" if len(seeds) > 1 else f"; seed {seeds[0]}")
    pc.write_tables(a.sweep_dir, data, [f"### {title}", ""] + pc.md_table(header, table),
                    terminal=[title] + pc.text_table(header, table))
    if a.no_plot:
        return 0
    plt = pc.pyplot("netns_table")
    if not plt:
        return 0
    links = []
    for r in runs:
        if (r["rate"], r["delay"]) not in links:
            links.append((r["rate"], r["delay"]))
    modes = sorted({r["mode"] for r in runs}, key=lambda m: MODE_ORDER.get(m, 9))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.4))
    width = 0.8 / len(modes)
    hatches = ["", "//", "..", "xx", "\\\\", "oo"]
    for i, mode in enumerate(modes):
        for ax, key in zip(axes, ("samples_per_s", "tt")):
            xs, ys, lo, hi = [], [], [], []
            for j, link in enumerate(links):
                vals = [r[key] for r in groups.get((link[0], link[1], mode), []) if r[key] is not None]
                if not vals:
                    continue
                m = sum(vals) / len(vals)
                xs.append(j + (i - (len(modes) - 1) / 2) * width)
                ys.append(m)
                lo.append(m - min(vals))
                hi.append(max(vals) - m)
            label = mode_label({"mode": mode}, staleness)
            k = MODE_ORDER.get(mode, 4)
            ax.bar(xs, ys, width, yerr=[lo, hi] if len(seeds) > 1 else None, capsize=3, label=label,
                   color=pc.color(k), hatch=hatches[k % len(hatches)], edgecolor="white", linewidth=0)
    for ax in axes:
        ax.set_xticks(range(len(links)))
        ax.set_xticklabels([f"{rate}\n{delay:g} ms one-way" for rate, delay in links])
        ax.set_yscale("log")
        ax.grid(alpha=0.3, axis="y")
    pc.legend_right(axes[1])
    axes[0].set(ylabel="samples / s (log scale)", title="throughput")
    axes[1].set(ylabel="seconds (log scale)",
                title="time to target (global model)" + (f", test accuracy {target}" if target is not None else "")
                + "; no bar: not reached")
    fig.suptitle(a.title)
    pc.save_figure(fig, a.sweep_dir, "network.png", 110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
