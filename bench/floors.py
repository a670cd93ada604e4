#!/usr/bin/env python3
# floors.py — the table of working-set floors: for every model tests/sim_train.sh trains under `python -m hoff --sim`,
# the floor as a share of the activation peak, the op and phase that set it, and whether 50% and 25% are feasible.
# Reads the rows tests/sim_check.py appends to $SIM_FLOORS (one JSON object per checked run) and prints a Markdown
# table, or JSON with --json.  Threading: single-threaded.
"""usage: floors.py [--json] ROWS.jsonl [ROWS.jsonl ...]

Run the suite with the rows collected, then the table:

    SIM_FLOORS=/tmp/floors.jsonl make check TESTS=tests/sim_train.sh
    SIM_FLOORS=/tmp/floors.jsonl make check TESTS=tests/sim_torch2.sh SIM_TORCH2_FULL=1
    python3 bench/floors.py /tmp/floors.jsonl

A model's floor and activation peak come from its run at budget none (the
first recorded step's peak of offload bytes with no offload, gradients not
counted: recorded_peak_bytes), or its first run when it has none; "50%" and
"25%" say whether the plan at that budget was feasible (no plan can be when
the budget is below the floor).  Runs that are not a plain budget (the cnn
with HOFF_OFFLOAD_GRADIENTS=1, the negative control) are listed apart.
"""

import json
import sys


def load(paths):
    rows = []
    for p in paths:
        with open(p) as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rows.append(json.loads(line))
                except ValueError as e:
                    raise SystemExit("%s:%d: not a JSON row (%s)" % (p, n, e))
    return rows


def table(rows):
    models = {}
    for r in rows:
        m = models.setdefault(r["label"], {"runs": {}})
        m["runs"].setdefault(r["budget"], r)
    out = []
    for label, m in models.items():
        runs = m["runs"]
        base = runs.get("none") or next(iter(runs.values()))
        out.append({"model": label, "activation_peak_bytes": base["activation_peak_bytes"],
                    "floor_bytes": base["floor_bytes"], "floor_pct": base["floor_pct"], "op": base["op"],
                    "phase": base["phase"], "blocks": base.get("blocks"),
                    "kept_blocks": max(r.get("kept_blocks", 0) for r in runs.values()),
                    "feasible_50": runs["50%"]["plan"] == "feasible" if "50%" in runs else None,
                    "feasible_25": runs["25%"]["plan"] == "feasible" if "25%" in runs else None})
    return out


def mib(n):
    return "%.1f MiB" % (n / 2**20)


def yn(v):
    return "-" if v is None else ("yes" if v else "no")


def main(argv):
    js = "--json" in argv
    paths = [a for a in argv[1:] if a != "--json"]
    if not paths:
        raise SystemExit(__doc__)
    t = table(load(paths))
    if js:
        json.dump(t, sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    print("| model | activation peak | floor | floor % | op | phase | blocks | gradients kept | 50% | 25% |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in t:
        print("| %s | %s | %s | %.1f%% | `%s` | %s | %s | %s | %s | %s |"
              % (r["model"], mib(r["activation_peak_bytes"]), mib(r["floor_bytes"]), r["floor_pct"], r["op"],
                 r["phase"], r["blocks"], r["kept_blocks"], yn(r["feasible_50"]), yn(r["feasible_25"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
