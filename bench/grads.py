#!/usr/bin/env python3
# grads.py — what keeping gradients and the optimizer's step out of the budget buys: each bench model under
# `python -m hoff --sim` at the same budgets (50% and 25% of its activation peak, in bytes), with hoff's default
# (gradients kept, hoff.grads) against its peer, the same hoff with HOFF_OFFLOAD_GRADIENTS=1 (gradients and the
# optimizer's blocks offload candidates, as before issue 25), in the same run.  Prints JSON.
# Threading: single-threaded; each run is a child process.
"""usage: grads.py [--python PY] [--steps N] [--models gpt,wide,cnn] BUILDDIR

Per model and budget, for both settings: the plan's feasibility, the
working-set floor (bytes, phase, op), and over the replayed steps the bytes
moved (evicted + prefetched + paged in) and the stall on the sim's virtual
clock (per replayed step, the mean), plus whether every step's loss and
gradients were bitwise equal to the plain run.  The budget is the same number
of bytes for both: a share of the activation peak the default run records
(recorded_peak_bytes of a run with no budget).
"""

import json
import os
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = {  # the shapes tests/sim_train.sh trains
    "gpt": ["gpt.py", "--seq", "256", "--d-model", "128", "--layers", "6", "--heads", "4", "--vocab", "1024"],
    "wide": ["wide.py", "--seq", "384", "--d-model", "128", "--heads", "8", "--vocab", "512"],
    "cnn": ["cnn.py", "--batch", "4", "--size", "128", "--width", "32", "--classes", "100"],
}


def run(py, build, model, steps, budget, tmp, offload, digest_path):
    stats = os.path.join(tmp, "stats.json")
    env = dict(os.environ, HOFF_LIBRARY=os.path.join(build, ".libs", "libhoff.so"),
               PYTHONPATH=os.path.join(TOP, "python") + (os.pathsep + os.environ["PYTHONPATH"]
                                                          if os.environ.get("PYTHONPATH") else ""))
    env.pop("HOFF_OFFLOAD_GRADIENTS", None)
    if offload:
        env["HOFF_OFFLOAD_GRADIENTS"] = "1"
    script = [os.path.join(TOP, "bench", "models", MODELS[model][0])] + MODELS[model][1:]
    cmd = [py] + (["-m", "hoff", "--sim", "--budget", str(budget), "--stats-json", stats] if budget is not None
                  else []) + script + ["--steps", str(steps), "--digest", digest_path]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit("grads.py: %s failed (exit %d):\n%s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return json.load(open(stats)) if budget is not None else None


def summary(d, plain_digest, digest_path):
    replay = [s for s in d["steps"] if s["phase"] == "replay"]
    n = max(len(replay), 1)
    moved = sum(s["bytes_evicted"] + s["bytes_prefetched"] + s["bytes_faulted"] for s in replay)
    return {"feasible": bool(replay) and all(s["plan_feasible"] for s in replay),
            "floor_bytes": d["floor"].get("bytes", 0), "floor_phase": d["floor"].get("phase"),
            "floor_op": d["floor"].get("op"), "replay_steps": len(replay),
            "moved_bytes_per_step": moved // n, "stall_ns_per_step": sum(s["stall_ns"] for s in replay) // n,
            "kept_evicted": d["final"].get("kept_evicted", 0),
            "bitwise_equal": json.load(open(digest_path)) == json.load(open(plain_digest))}


def main(argv):
    py, steps, models, build = sys.executable, 5, list(MODELS), None
    args = list(argv[1:])
    while args:
        a = args.pop(0)
        if a == "--python":
            py = args.pop(0)
        elif a == "--steps":
            steps = int(args.pop(0))
        elif a == "--models":
            models = [m for m in args.pop(0).split(",") if m]
        elif a.startswith("-"):
            raise SystemExit(__doc__)
        else:
            build = a
    if not build or any(m not in MODELS for m in models):
        raise SystemExit(__doc__)
    out = {"steps": steps, "python": py, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for m in models:
            plain = os.path.join(tmp, m + ".plain")
            run(py, build, m, steps, None, tmp, False, plain)
            base = run(py, build, m, steps, "none", tmp, False, os.path.join(tmp, "x"))
            peak = next(s["recorded_peak_bytes"] for s in base["steps"] if s.get("recorded_peak_bytes"))
            rows = {"activation_peak_bytes": peak}
            for pct in (50, 25):
                budget = peak * pct // 100
                row = {"budget_bytes": budget}
                for name, offload in (("hoff", False), ("offload_gradients", True)):
                    dig = os.path.join(tmp, "%s.%d.%s" % (m, pct, name))
                    row[name] = summary(run(py, build, m, steps, budget, tmp, offload, dig), plain, dig)
                h, o = row["hoff"], row["offload_gradients"]
                row["moved_ratio"] = round(h["moved_bytes_per_step"] / o["moved_bytes_per_step"], 3) \
                    if o["moved_bytes_per_step"] else None
                row["stall_ratio"] = round(h["stall_ns_per_step"] / o["stall_ns_per_step"], 3) \
                    if o["stall_ns_per_step"] else None
                rows["%d%%" % pct] = row
            out["models"][m] = rows
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
