#!/usr/bin/env python3
"""window_check.py — re-counts a plan (the JSON of ``hoff-plan show --json``) op by op, written from the
rules in doc/design.md ("Use windows") without any of the planner's code:

- an access (or the allocation, a write) opens a use window on its block, closed by the next op mark,
  the block's free or the step's end;
- nothing moves or drops a block inside a window (an action planned "after" an event fires when the next
  event comes: after an op mark has closed the windows), and a block is back before an access opens one;
- per op (the events between two op marks), every block the op touches counts as resident over the whole
  op from its allocation, besides the blocks the walk has on the device: a plan called feasible keeps
  that within its budget.

Prints one line; exit 1 with the first breach, 2 on bad usage.  Threading: a script.

usage: window_check.py SHOW.json
"""
import json
import sys


def check(d):
    budget = d["budget_bytes"]
    feasible = d["summary"]["feasible"]
    events = d["events"]
    nbytes, movable, state = {}, {}, {}
    in_window = set()
    breaches = []
    away_at = []     # per event: live managed blocks away from the device there
    resident_at = []  # per event: managed bytes on the device there (a block freed there counts)
    ops = [{"first": 0, "touched": set()}]

    def apply(a, i, when):
        b = a["block"]
        if a["kind"] in ("evict", "release"):
            if b in in_window:
                breaches.append(f"event {i}: {a['kind']} ({when}) of block {b} inside its use window")
            if not movable.get(b, False):
                breaches.append(f"event {i}: {a['kind']} of block {b}, which cannot move")
            if state.get(b) == "dev":
                state[b] = "away"
        elif a["kind"] == "prefetch":
            if state.get(b) != "away":
                breaches.append(f"event {i}: prefetch of block {b}, which is not away")
            state[b] = "dev"

    pending = []
    for e in events:
        i, k = e["ev"], e["kind"]
        if k == "op":
            in_window.clear()  # the previous op's work is enqueued
            ops[-1]["last"] = i - 1
            ops.append({"first": i, "touched": set()})
        for a in pending:  # the previous event's "after" actions fire now
            apply(a, i - 1, "after")
        pending = e["after"]
        for a in e["before"]:
            apply(a, i, "before")
        if k == "alloc":
            b = e["block"]
            nbytes[b] = e["bytes"] if e["pool"] == "managed" else 0
            movable[b] = e["pool"] == "managed" and not e["pinned"]
            state[b] = "dev"
            in_window.add(b)
            ops[-1]["touched"].add(b)
        elif k == "access":
            b = e["block"]
            if state.get(b) != "dev" and nbytes.get(b, 0):
                breaches.append(f"event {i}: access of block {b} while it is away")
            state[b] = "dev"
            in_window.add(b)
            ops[-1]["touched"].add(b)
        resident_at.append(sum(nbytes[b] for b, s in state.items() if s == "dev"))
        away_at.append({b for b, s in state.items() if s == "away"})
        if k == "free":
            state[e["block"]] = "gone"
            in_window.discard(e["block"])
    in_window.clear()  # the step's end
    for a in pending:
        apply(a, len(events) - 1, "after")
    ops[-1]["last"] = len(events) - 1

    worst, worst_op = 0, None
    for op in ops:
        for i in range(op["first"], op["last"] + 1):
            v = resident_at[i] + sum(nbytes[b] for b in op["touched"] & away_at[i])
            if v > worst:
                worst, worst_op = v, op["first"]
    if feasible and budget and worst > budget:
        breaches.append(f"the plan is called feasible, but the op starting at event {worst_op} holds {worst} "
                        f"bytes, over the budget of {budget} (counted per op)")
    return breaches, len(ops), worst


def main(argv):
    if len(argv) != 2:
        print("usage: window_check.py SHOW.json", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        d = json.load(f)
    breaches, nops, worst = check(d)
    if breaches:
        more = f" (and {len(breaches) - 1} more)" if len(breaches) > 1 else ""
        print("FAIL: " + breaches[0] + more)
        return 1
    s = d["summary"]
    print(f"ok: {nops} ops, per-op peak {worst} bytes, budget {d['budget_bytes']}, "
          f"{'feasible' if s['feasible'] else 'infeasible'}, floor {s.get('floor_bytes')}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
