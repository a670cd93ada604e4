# sim_overhead.py — the cost of `python -m hoff --sim` itself: a model's step time plain on CPU against the same
# script under --sim (budget none, and a budget that moves bytes), on one or more Pythons (Debian's torch 1.13, a
# PyTorch 2.x environment), printed as one JSON object.
# Threading: single-threaded; runs each configuration as a child process, one after another.
"""usage: python3 bench/sim_overhead.py [--model M] [--python PY]... [--steps N] [--budgets none,50%] [-- MODEL ARGS]

M is a bench model (gpt, wide, cnn) or one of tests/sim_zoo.py's PyPI models
(gpt2, llama: transformers; resnet: torchvision; they need a PyTorch 2.x
environment such as build/venv-torch2, made by ./quickstart test).  Each
--python is an interpreter with torch to measure on (default: this one).
Needs a built hoff (HOFF_LIBRARY, or the build tree's .libs found through
--build DIR, default ./build).  The step times are the model's own
(bench/models/common.py --json, tests/sim_zoo.py --json), so the launcher's
start-up and the re-exec are not in them; the first step (warmup: recording
and planning) and the others (replay) are reported apart."""

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
ZOO = ("gpt2", "llama", "resnet")  # tests/sim_zoo.py's models: their shapes are its own


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
    ap.add_argument("--model", default="gpt", choices=sorted(SMALL) + list(ZOO))
    ap.add_argument("--python", action="append", metavar="PY",
                    help="an interpreter with torch to measure on; repeat it for several (default: this one)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--budgets", default="none,50%")
    ap.add_argument("--build", default=os.path.join(TOP, "build"))
    ap.add_argument("rest", nargs="*", help="model arguments (default: the small shapes of tests/sim_train.sh)")
    a = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("HOFF_LIBRARY", os.path.join(os.path.abspath(a.build), ".libs", "libhoff.so"))
    env["PYTHONPATH"] = os.path.join(TOP, "python") + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if a.model in ZOO:
        margs = a.rest
        script = [os.path.join(TOP, "tests", "sim_zoo.py"), a.model, "none"] + margs
    else:
        margs = a.rest or SMALL[a.model]
        script = [os.path.join(TOP, "bench", "models", a.model + ".py")] + margs
    script += ["--steps", str(a.steps), "--json"]
    res = {"model": a.model, "args": margs, "steps": a.steps, "runs": []}
    for py in a.python or [sys.executable]:
        ver = subprocess.run([py, "-c", "import torch; print(torch.__version__, torch.get_num_threads())"],
                             stdout=subprocess.PIPE, check=True).stdout.decode().split()
        one = {"python": py, "torch": ver[0], "intra_op_threads": int(ver[1])}
        plain = summary(run([py] + script, env))
        one["plain"] = plain
        for b in a.budgets.split(","):
            s = summary(run([py, "-m", "hoff", "--sim", "--budget", b] + script, env))
            s["overhead_later"] = round(s["later_median_s"] / plain["later_median_s"], 3)
            one["sim_budget_" + b] = s
        res["runs"].append(one)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
