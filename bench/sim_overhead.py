# sim_overhead.py — the cost of `python -m hoff --sim` itself: a bench model's step time plain on CPU against the
# same script under --sim (budget none, and a budget that moves bytes), printed as one JSON object.
# Threading: single-threaded; runs each configuration as a child process, one after another.
"""usage: python3 bench/sim_overhead.py [--model gpt|wide|cnn] [--steps N] [--budgets none,50%] [-- MODEL ARGS]

Needs a built hoff (HOFF_LIBRARY, or the build tree's .libs found through
--build DIR, default ./build) and a python3 with torch.  The step times are
the model's own (bench/models/common.py --json), so the launcher's start-up
and the re-exec are not in them; the first step (warmup: recording and
planning) and the others (replay) are reported apart."""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
SMALL = {"gpt": ["--seq", "256", "--d-model", "128", "--layers", "6", "--heads", "4", "--vocab", "1024"],
         "wide": ["--seq", "384", "--d-model", "128", "--heads", "8", "--vocab", "512"],
         "cnn": ["--batch", "4", "--size", "128", "--width", "32", "--classes", "100"]}


def run(cmd, env):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False)
    out = r.stdout.decode(errors="replace")
    if r.returncode != 0:
        sys.stderr.write(out + r.stderr.decode(errors="replace"))
        raise SystemExit("sim_overhead: %s exited %d" % (" ".join(cmd), r.returncode))
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            return json.loads(line)["step_s"]
    raise SystemExit("sim_overhead: no JSON line from %s" % " ".join(cmd))


def summary(steps):
    later = steps[1:] or steps
    return {"first_s": round(steps[0], 4), "later_median_s": round(statistics.median(later), 4),
            "steps_s": [round(x, 4) for x in steps]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt", choices=sorted(SMALL))
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--budgets", default="none,50%")
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("rest", nargs="*", help="model arguments (default: the small shapes of tests/sim_train.sh)")
    a = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("HOFF_LIBRARY", os.path.join(os.path.abspath(a.build), ".libs", "libhoff.so"))
    env["PYTHONPATH"] = os.path.join(TOP, "python") + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    script = [os.path.join(TOP, "bench", "models", a.model + ".py")] + (a.rest or SMALL[a.model]) + \
        ["--steps", str(a.steps), "--json"]
    res = {"model": a.model, "args": a.rest or SMALL[a.model], "steps": a.steps, "python": sys.executable}
    plain = summary(run([sys.executable] + script, env))
    res["plain"] = plain
    for b in a.budgets.split(","):
        s = summary(run([sys.executable, "-m", "hoff", "--sim", "--budget", b] + script, env))
        s["overhead_later"] = round(s["later_median_s"] / plain["later_median_s"], 3)
        res["sim_budget_" + b] = s
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
