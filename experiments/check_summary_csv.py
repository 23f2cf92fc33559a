#!/usr/bin/env python3
"""Check that summary.csv files are data a reader can load without cleaning.

    experiments/check_summary_csv.py PATH...    (files, or directories searched for summary.csv)

Every file: a header of unique snake_case names; every row as long as the
header; in every numeric column (all but plot_common.TEXT_COLUMNS, the label
columns) each cell empty (missing) or a finite number that float() reads as it
stands ("0.84 s", "x2.1", "n/a", "-", "nan" fail); no cell with surrounding
blanks. Prints one line per file; exit status 1 when any file fails, 2 when
no summary.csv was found.
"""
import csv
import math
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in experiments/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot_common import COLUMN_NAME, TEXT_COLUMNS  # noqa: E402


def problems(path):
    out = []
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return ["empty file"]
    header, body = rows[0], rows[1:]
    if not body:
        out.append("no rows")
    if len(set(header)) != len(header):
        out.append("repeated column names")
    out += ["column %r is not snake_case" % c for c in header if not COLUMN_NAME.match(c)]
    for n, row in enumerate(body, 2):
        if len(row) != len(header):
            out.append("line %d: %d cells for %d columns" % (n, len(row), len(header)))
            continue
        for c, v in zip(header, row):
            if v != v.strip():
                out.append("line %d, %s: blanks around %r" % (n, c, v))
            elif c not in TEXT_COLUMNS and v != "":
                try:
                    ok = math.isfinite(float(v))
                except ValueError:
                    ok = False
                if not ok:
                    out.append("line %d, %s: %r is not a number" % (n, c, v))
    return out


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(sys.argv) > 1 else 2
    files = []
    for p in sys.argv[1:]:
        if os.path.isdir(p):
            for d, _, names in sorted(os.walk(p)):
                files += [os.path.join(d, n) for n in names if n == "summary.csv"]
        else:
            files.append(p)
    if not files:
        print("check_summary_csv: no summary.csv under %s" % " ".join(sys.argv[1:]), file=sys.stderr)
        return 2
    failed = 0
    for path in files:
        found = problems(path)
        if found:
            failed += 1
            print("FAIL %s: %s%s" % (path, "; ".join(found[:5]), " (+%d more)" % (len(found) - 5) if len(found) > 5 else ""))
        else:
            with open(path, newline="") as f:
                n = sum(1 for _ in f) - 1
            print("ok   %s (%d rows)" % (path, n))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
