# sim_check.py — tests/sim_train.sh's verdict on one `python -m hoff --sim` run against the plain run: bitwise equal
# digests (every step's loss and gradients, the final parameters), peak resident <= budget in every replay step
# whose plan is feasible, bytes moved at a budget, no window violation and no touch of a released block; no
# gradient moved and no working-set floor set in the optimizer's step (hoff.grads), with the floor reported.
# Threading: single-threaded.
"""usage: sim_check.py LABEL PLAIN_DIGEST SIM_DIGEST SIM_STATS BUDGET(none|N%)"""

import json
import os
import sys


def main(argv):
    label, plain, sim, stats, budget = argv[1:6]
    fails = []
    a, b = json.load(open(plain)), json.load(open(sim))
    for k in ("loss", "grads"):
        for i, (x, y) in enumerate(zip(a[k], b[k])):
            if x != y:
                fails.append("step %d: %s differ from the plain run" % (i, k))
        if len(a[k]) != len(b[k]):
            fails.append("%s: %d steps against the plain run's %d" % (k, len(b[k]), len(a[k])))
    if a.get("params") != b.get("params"):
        fails.append("final parameters differ from the plain run")
    d = json.load(open(stats))
    integ = d["integrity"]
    for k in ("window_violations", "discard_touches", "crc_errors"):
        if integ[k]:
            fails.append("%s = %d" % (k, integ[k]))
    moved = sum(s["bytes_evicted"] for s in d["steps"])
    back = sum(s["bytes_prefetched"] + s["bytes_faulted"] for s in d["steps"])
    replay = [s for s in d["steps"] if s["phase"] == "replay"]
    feasible = [s for s in replay if s["plan_feasible"] and s["budget_bytes"]]
    for s in feasible:
        if s["peak_resident_bytes"] > s["budget_bytes"]:
            fails.append("step %d (replay, feasible plan): peak resident %d > budget %d"
                         % (s["step"], s["peak_resident_bytes"], s["budget_bytes"]))
    if budget != "none":
        if not d["final"]["budget_bytes"]:
            fails.append("no budget was set")
        if moved == 0:
            fails.append("no bytes moved at budget %s" % budget)
        if not replay:
            fails.append("no replay step")
    if d["preload"].get("fallbacks"):
        fails.append("%d candidates fell back to glibc" % d["preload"]["fallbacks"])
    # Gradients and the optimizer's step are not activations (hoff.grads): no gradient is ever moved, and the
    # working-set floor never comes from the optimizer's step.  HOFF_OFFLOAD_GRADIENTS=1 brings them back, and
    # then both may fail: tests/sim_train.sh runs that once to show this check can fail.
    fin = d["final"]
    floor = d.get("floor") or {}
    if fin.get("kept_evicted"):
        fails.append("%d gradient or optimizer blocks were evicted before hoff kept them" % fin["kept_evicted"])
    if floor.get("phase") == "optimizer":
        fails.append("the working-set floor (%.1f MiB) is set in the optimizer's step, by %s"
                     % (floor.get("bytes", 0) / 2**20, floor.get("op")))
    act = next((s.get("recorded_peak_bytes", 0) for s in d["steps"] if s.get("recorded_peak_bytes")), 0)
    if floor.get("bytes") and act:
        feas = "feasible" if any(s["plan_feasible"] for s in replay) else "infeasible"
        row = {"label": label, "budget": budget, "floor_bytes": floor["bytes"], "activation_peak_bytes": act,
               "floor_pct": round(100.0 * floor["bytes"] / act, 1), "op": floor.get("op"),
               "phase": floor.get("phase"), "blocks": floor.get("blocks"), "plan": feas,
               "kept_blocks": fin.get("keep_marks", 0) + fin.get("kept_allocs", 0)}
        print("%s budget %s: floor %.1f MiB = %.1f%% of the activation peak %.1f MiB, %d blocks in %s (%s); plan %s"
              % (label, budget, floor["bytes"] / 2**20, row["floor_pct"], act / 2**20, row["blocks"] or 0,
                 row["op"], row["phase"], feas))
        out = os.environ.get("SIM_FLOORS")
        if out:  # bench/floors.py collects these rows into the table of floors
            with open(out, "a") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
    peaks = ",".join("%s:%.1fM" % (s["phase"][0], s["peak_resident_bytes"] / 2**20) for s in d["steps"])
    print(("%s budget %s (%.1f MiB): step peaks %s; %d replay steps, %d feasible; moved %.1f MiB out, %.1f MiB "
          "back; faults %d (%d from the fault handler); %s"
          % (label, budget, d["final"]["budget_bytes"] / 2**20, peaks, len(replay), len(feasible), moved / 2**20,
             back / 2**20, d["final"]["faults"], d["final"]["touch_faults"],
             "ok" if not fails else "FAIL: " + "; ".join(fails))))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
