# sim_check.py — tests/sim_train.sh's verdict on one `python -m hoff --sim` run against the plain run: bitwise equal
# digests (every step's loss and gradients, the final parameters), peak resident <= budget in every replay step
# whose plan is feasible, bytes moved at a budget, no window violation and no touch of a released block.
# Threading: single-threaded.
"""usage: sim_check.py LABEL PLAIN_DIGEST SIM_DIGEST SIM_STATS BUDGET(none|N%)"""

import json
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
    peaks = ",".join("%s:%.1fM" % (s["phase"][0], s["peak_resident_bytes"] / 2**20) for s in d["steps"])
    print(("%s budget %s (%.1f MiB): step peaks %s; %d replay steps, %d feasible; moved %.1f MiB out, %.1f MiB "
          "back; faults %d (%d from the fault handler); %s"
          % (label, budget, d["final"]["budget_bytes"] / 2**20, peaks, len(replay), len(feasible), moved / 2**20,
             back / 2**20, d["final"]["faults"], d["final"]["touch_faults"],
             "ok" if not fails else "FAIL: " + "; ".join(fails))))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
