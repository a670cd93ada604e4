#!/usr/bin/env python3
# marks.py — what hoff's per-aten-op marks (python/hoff/opmarks.py) cost: the training step of each bench model on
# CPU without an OffloadSession, with one whose op marks are off, and with them on; prints JSON.
# Threading: a script; each run is a child process, one at a time.
"""Cost of the op marks.

usage: bench/marks.py [--steps N] [--repeat R] [MODEL...]   (models: gpt wide cnn)

Each (model, variant) runs R times as its own process (N steps each, the
first step dropped as warmup); a variant's step time is the median over
the kept steps of all runs.  The session runs in 'allocator' mode: the marks
go to hoff's context on the sim device (CPU tensors are not its blocks, so
each access is a lookup that finds nothing, as cheap as a hit).  Per aten op:
(on - off) / aten ops per step.  Needs libhoff.so (HOFF_LIBRARY or
./build/.libs/libhoff.so).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
VARIANTS = {"none": ["--no-session"], "off": ["--no-op-marks"], "on": []}


def run(model, variant, steps):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(TOP, "python") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("HOFF_LIBRARY", os.path.join(TOP, "build", ".libs", "libhoff.so"))
    args = [sys.executable, os.path.join(HERE, "models", model + ".py"), "--steps", str(steps), "--json",
            "--session-mode", "allocator"] + VARIANTS[variant]
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, check=False)
    if r.returncode != 0:
        sys.exit("marks.py: %s (%s) failed:\n%s" % (model, variant, r.stderr[-2000:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


def micro(n=3000):
    """Per-op cost without model compute: n cheap aten ops (a 1 MiB storage, so each
    also gets its access marks) in a session with op marks off and on; medians of 5."""
    import time
    import torch
    sys.path.insert(0, os.path.join(TOP, "python"))
    import hoff
    x = torch.zeros(1 << 18)  # 1 MiB of float32: at hoff's managed_min
    res = {}
    for v, cfg in (("none", None), ("off", hoff.OffloadConfig(op_marks=False)), ("on", hoff.OffloadConfig())):
        s = hoff.OffloadSession(cfg, mode="allocator") if cfg else None
        ts = []
        for _ in range(5):
            with (s if s is not None else open(os.devnull)):
                t0 = time.perf_counter()
                for _ in range(n):
                    x.add_(1.0)
                ts.append((time.perf_counter() - t0) / n * 1e6)
        res[v] = statistics.median(ts)
    return {"op": "aten.add_.Scalar on 1 MiB", "us_per_op": res, "marks_us_per_op": res["on"] - res["off"]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("models", nargs="*", default=["gpt", "wide", "cnn"])
    p.add_argument("--micro-only", action="store_true", help="only the per-op loop, no model")
    a = p.parse_args()
    if a.steps < 2 or a.repeat < 1:
        p.error("--steps must be at least 2 (the first is dropped) and --repeat at least 1")
    import torch
    out = {"machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                       "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                       "python": platform.python_version()},
           "steps": a.steps, "repeat": a.repeat, "micro": micro(), "models": {}}
    print(json.dumps({"micro": out["micro"]}), file=sys.stderr, flush=True)
    for m in ([] if a.micro_only else a.models):
        res, ops, acc = {}, None, None
        for _ in range(a.repeat):  # interleaved, so drift hits every variant alike
            for v in VARIANTS:
                j = run(m, v, a.steps)
                res.setdefault(v, []).extend(j["step_s"][1:])
                if v == "on":
                    ops, acc = j["aten_ops"], j["op_accesses"]
        med = {v: statistics.median(t) for v, t in res.items()}
        out["models"][m] = {
            "step_s": med, "aten_ops_per_step": ops, "op_accesses_per_step": acc,
            "on_vs_off": med["on"] / med["off"], "on_vs_none": med["on"] / med["none"],
            "us_per_aten_op": (med["on"] - med["off"]) / ops * 1e6 if ops else None,
            "samples": {v: len(t) for v, t in res.items()},
        }
        print(json.dumps({m: out["models"][m]}), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
