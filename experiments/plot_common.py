"""What the experiment scripts share: reading `asgd train` / `asgd launch`
outputs (the global model's curve by default), the summary.csv/summary.md pair
(one writer, with the rule for what a summary.csv cell may hold), number
formatting, and plot styling (distinct colours and markers, legends outside
the data, a y-range on where the runs differ) when matplotlib is installed."""
import colorsys
import csv
import json
import math
import numbers
import os
import re
import sys

# ---- command line of plot_scaling.py, plot_compression.py, plot_hybrid.py ----------


def command_line(doc):
    """(results directory, CPU count for the captions, worker_curves) from
    `DIR [--cpus N] [--worker-curves]`, or None after printing doc when there is
    no DIR or -h/--help."""
    args = sys.argv[1:]
    if not args or args[0] in ("-h", "--help"):
        print(doc)
        return None
    cpus = args[args.index("--cpus") + 1] if "--cpus" in args else str(os.cpu_count())
    return args[0], cpus, "--worker-curves" in args


# ---- summary.csv -------------------------------------------------------------------

# Columns that hold labels (text); every other column of a summary.csv is
# numeric: a plain number or empty (missing). Column names are snake_case and
# name their unit (_s, _per_s, _ms, _mb, bytes_...) unless they are counts or ratios.
TEXT_COLUMNS = frozenset([
    "run", "finding", "scenario", "mode", "sync", "config", "link", "rate", "method", "lr_scaling",
    "compress", "model", "data", "curve_process",
])
COLUMN_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def csv_cell(column, v):
    """The summary.csv text of value v in column: numbers to 12 significant digits
    (bools as 1/0), None/NaN/inf as empty; a ValueError for anything a reader
    would have to clean (a number as formatted text, a label in a numeric column)."""
    if column in TEXT_COLUMNS:
        if v is None:
            return ""
        if not isinstance(v, str):
            raise ValueError("summary.csv column %s holds labels, got %r" % (column, v))
        return v
    if v is None:
        return ""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return format(float(v), ".12g") if math.isfinite(v) else ""
    raise ValueError("summary.csv column %s is numeric, got %r" % (column, v))


def write_tables(out, rows, lines, terminal=None):
    """rows (dicts; the columns are their keys in order of first appearance, a key
    a row lacks is empty) to out/summary.csv, lines (Markdown) to out/summary.md,
    and terminal (default: lines; [] prints nothing) to stdout."""
    columns = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    bad = [c for c in columns if not COLUMN_NAME.match(c)]
    if bad:
        raise ValueError("summary.csv column names must be snake_case: %s" % ", ".join(bad))
    cells = [[csv_cell(c, row.get(c)) for c in columns] for row in rows]
    with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows(cells)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    terminal = lines if terminal is None else terminal
    if terminal:
        print("\n".join(terminal))


def md_table(header, rows, align=None):
    """Markdown lines of a table; align: a '|---|--:|' row (default left-aligned)."""
    return (["| " + " | ".join(header) + " |", align or "|" + "---|" * len(header)]
            + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def text_table(header, rows):
    """Lines of a right-aligned plain-text table for the terminal."""
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    return ["  ".join(str(c).rjust(w) for c, w in zip(r, widths)) for r in [header] + rows]


# ---- reading runs ------------------------------------------------------------------


def load_summary(run_dir):
    """summary.json of a run directory, or None when the run has not finished."""
    path = os.path.join(run_dir, "summary.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def float_rows(rows):
    """CSV dict rows with every field but `process` as a float (empty -> nan)."""
    return [{k: (float(v) if v not in ("", None) else math.nan) for k, v in r.items() if k != "process"}
            for r in rows]


_warned = set()


def launch_curves(run_dir, worker_curves=False):
    """(curve_process, global rows, {worker process: rows}) from a launch run's
    merged.csv: the rows with process "global" (the servers' model, or the
    allreduce replicas'), and with worker_curves each worker's own copy. A
    merged.csv without global rows (an asgd before they were written) gives
    worker 0's rows instead, curve_process "worker-0", and a warning."""
    by = {}
    path = os.path.join(run_dir, "merged.csv")
    if os.path.exists(path):
        with open(path) as f:
            for r in csv.DictReader(f):
                by.setdefault(r["process"], []).append(r)
    workers = {p: float_rows(rs) for p, rs in sorted(by.items(), key=lambda kv: _worker_key(kv[0]))
               if p.startswith("worker-")} if worker_curves else {}
    if "global" in by:
        return "global", float_rows(by["global"]), workers
    if run_dir not in _warned:
        _warned.add(run_dir)
        print("warning: %s has no global rows (written by an older asgd); its curve and targets are "
              "worker 0's own copy" % path, file=sys.stderr)
    return "worker-0", float_rows(by.get("worker-0", [])), workers


def _worker_key(process):
    m = re.match(r"^worker-(\d+)$", process)
    return (0, int(m.group(1))) if m else (1, process)


def curve_owner(processes):
    """What a y label says the curves are, from the runs' curve_process values:
    "global model", or "see legend" when some runs fell back to worker 0."""
    return "global model" if set(processes) <= {"global"} else "see legend"


def metric_of(summary):
    """'accuracy' or 'rmse': the run's test metric."""
    return "rmse" if "final_test_rmse" in summary else "accuracy"


def to_target(rows, target, rmse=False):
    """(wall_s, samples, epoch) of the first row that met target, or Nones."""
    if target is not None:
        col = "test_rmse" if rmse else "test_accuracy"
        for r in rows:
            v = r.get(col, math.nan)
            if not math.isnan(v) and (v <= target if rmse else v >= target):
                return r["wall_s"], r["samples"], r["epoch"]
    return None, None, None


def worker0_fields(s):
    """Worker 0's own figures from a launch summary.json: worker0_time_to_target_s,
    worker0_samples_to_target, worker0_test_accuracy/_rmse. An older summary
    (no worker0_time_to_target_s) had worker 0's figures under the plain names."""
    old = "worker0_time_to_target_s" not in s
    metric = "worker0_test_" + metric_of(s)
    return {"worker0_time_to_target_s": s.get("time_to_target_s") if old else s.get("worker0_time_to_target_s"),
            "worker0_samples_to_target": s.get("samples_to_target") if old else s.get("worker0_samples_to_target"),
            metric: s.get(metric)}


def fmt(x, spec):
    """x formatted, or empty for a missing or NaN value."""
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def median(xs):
    xs = sorted(xs)
    k = len(xs) // 2
    return xs[k] if len(xs) % 2 else 0.5 * (xs[k - 1] + xs[k])


# ---- plotting ----------------------------------------------------------------------


def pyplot(prog):
    """matplotlib.pyplot (drawing to files), or None after saying why not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("%s: matplotlib not available (apt-get install python3-matplotlib); table only" % prog,
              file=sys.stderr)
        return None


# tab10, then ten darker colours unlike them; past 20, hues spread by the golden ratio.
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#08519c", "#a63603", "#006d2c",
          "#54278f", "#252525"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "h", "*", "d", "H", "8"]


def color(i):
    if i < len(COLORS):
        return COLORS[i]
    r, g, b = colorsys.hsv_to_rgb((i * 0.618034) % 1.0, 0.75, 0.65)
    return "#%02x%02x%02x" % (int(r * 255), int(g * 255), int(b * 255))


def style(i, n_points=None):
    """Line style of series i: its own colour and marker (markers spaced to ~12 a line)."""
    st = {"color": color(i), "marker": MARKERS[i % len(MARKERS)], "markersize": 5}
    if n_points:
        st["markevery"] = max(1, n_points // 12)
    return st


def worker_style(i, k, n_points=None):
    """A worker curve of series i (shown on request): the series' colour, thin,
    dashed, with hollow markers."""
    st = style(i, n_points)
    st.update(linestyle=(0, (4, 2 + k)), linewidth=0.9, alpha=0.6, markerfacecolor="none", markersize=4)
    return st


def plot_curve(ax, xs, ys, i, label, **kw):
    ax.plot(xs, ys, label=label, **{**style(i, len(xs)), **kw})


def finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def focus_ylim(ax, curves, higher_is_better=True, target=None, cap=None, pad=0.12):
    """Set ax's y-range on where the curves differ: from a bit below the lowest
    value of any curve's last quarter (its final value, or where a noisy curve
    still swings at the end) to a bit above the best value of all (reversed
    when lower is better), the target included; cap (e.g. 1.0 for accuracy)
    bounds the top. Early, untrained evaluations fall below and are cut off."""
    tails, values = [], []
    for c in curves:
        ys = [y for y in c if finite(y)]
        if ys:
            tails += ys[-max(1, len(ys) // 4):]
            values += ys
    if not tails:
        return
    if higher_is_better:
        lo, hi = min(tails), max(values)
    else:
        lo, hi = min(values), max(tails)
    if finite(target):
        lo, hi = min(lo, target), max(hi, target)
    span = hi - lo if hi > lo else max(abs(hi) * 0.05, 0.01)
    top = hi + pad * span
    if cap is not None and hi <= cap:
        top = min(top, cap + 0.25 * pad * span)
    ax.set_ylim(lo - pad * span, top)


def legend_right(ax, **kw):
    """The legend to the right of ax, outside its data area."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8, **kw)


def legend_below(ax, ncol=2, **kw):
    """The legend under ax's x label, outside its data area."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=ncol, fontsize=8, frameon=False, **kw)


def figure_legend(fig, axes, ncol=3):
    """One legend for panels that share their series, under the figure."""
    seen, handles, labels = set(), [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in seen:
                seen.add(lab)
                handles.append(h)
                labels.append(lab)
    if handles:
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(ncol, len(handles)),
                   fontsize=8, frameon=False)


def save_figure(fig, out, name, dpi):
    """fig laid out tightly (legends outside the axes included) to out/name."""
    import matplotlib.pyplot as plt
    fig.tight_layout()
    path = os.path.join(out, name)
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(fig)
    print("wrote %s" % path)
    return path
