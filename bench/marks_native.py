#!/usr/bin/env python3
# marks_native.py — issue 27's question measured before it is built: per aten op, what hoff's Python op marks
# (python/hoff/opmarks.py, a TorchDispatchMode) cost against what the same marks cost from a C++ RecordFunction
# callback (bench/marks_native_probe.cpp, compiled here against the running PyTorch), in one run, relative to the
# op's own cost; prints JSON.  Threading: a script, one thread.
"""Cost of op marks: Python TorchDispatchMode against a C++ RecordFunction callback.

usage: HOFF_BACKEND=sim bench/marks_native.py [--ops N] [--repeat R]

For two ops, an in-place add of two 1 MiB float32 tensors (each argument at
hoff's managed_min, so every op also makes its access marks) and of two
16-element ones (op boundaries only), the time per op: with no session, in
a session without op marks, with hoff's Python op marks, and with the probe's
native marks into the same context (hoff_access, hoff_mark_op); medians of R
loops of N ops, one torch thread.  The probe keeps no phase, sim clock or log:
it is the cost floor of a native mechanism, not one.  Needs a C++ compiler and
PyTorch's headers (the CUDA wheel ships them) and libhoff.so (HOFF_LIBRARY or
./build/.libs/libhoff.so).
"""
import argparse
import ctypes
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)


def build_probe(torch, out):
    root = os.path.dirname(os.path.abspath(torch.__file__))
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    cmd = [os.environ.get("CXX") or "c++", "-O2", "-DNDEBUG", "-std=c++17", "-shared", "-fPIC",
           "-fvisibility=hidden", "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi, "-I" + os.path.join(root, "include"),
           os.path.join(HERE, "marks_native_probe.cpp"), "-L" + os.path.join(root, "lib"), "-lc10", "-ltorch_cpu",
           "-Wl,-rpath," + os.path.join(root, "lib"), "-o", out]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    if r.returncode != 0:
        sys.exit("marks_native.py: the probe does not build:\n%s" % r.stdout[-3000:])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ops", type=int, default=3000)
    p.add_argument("--repeat", type=int, default=9)
    a = p.parse_args()
    os.environ.setdefault("HOFF_LIBRARY", os.path.join(TOP, "build", ".libs", "libhoff.so"))
    if os.environ.get("HOFF_BACKEND") != "sim":
        sys.exit("marks_native.py: run it with HOFF_BACKEND=sim (the marks go to a sim context)")
    sys.path.insert(0, os.path.join(TOP, "python"))
    import torch
    import hoff
    from hoff import _lib
    torch.set_num_threads(1)
    lib = _lib.load()
    with tempfile.TemporaryDirectory() as d:
        so = os.path.join(d, "probe.so")
        build_probe(torch, so)
        probe = ctypes.CDLL(so)
    probe.probe_add.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    ctx = lib.hoff_torch_context(0)
    min_bytes = hoff.OffloadSession(hoff.OffloadConfig(), mode="allocator").targets[0].min_block_bytes()

    def timed(x, y):
        ts = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            for _ in range(a.ops):
                x.add_(y)
            ts.append((time.perf_counter() - t0) / a.ops * 1e6)
        return statistics.median(ts)

    out = {"machine": {"cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
                       "python": platform.python_version()}, "ops": a.ops, "repeat": a.repeat,
           "min_bytes": min_bytes, "cases": {}}
    for name, n in (("add_ 1 MiB (access marks and boundary)", 1 << 18), ("add_ 16 floats (boundary only)", 16)):
        x, y = torch.zeros(n), torch.ones(n)
        r = {"none": timed(x, y)}
        with hoff.OffloadSession(hoff.OffloadConfig(op_marks=False), mode="allocator"):
            r["session_no_marks"] = timed(x, y)
        with hoff.OffloadSession(hoff.OffloadConfig(), mode="allocator"):
            r["python_marks"] = timed(x, y)
        with hoff.OffloadSession(hoff.OffloadConfig(op_marks=False), mode="allocator"):
            if probe.probe_add(ctx, _lib.path().encode(), min_bytes) != 0:
                sys.exit("marks_native.py: the probe cannot find libhoff's entry points")
            r["native_marks"] = timed(x, y)
            probe.probe_remove()
        base = r["session_no_marks"]
        out["cases"][name] = {
            "us_per_op": {k: round(v, 3) for k, v in r.items()},
            "python_marks_us": round(r["python_marks"] - base, 3),
            "native_marks_us": round(r["native_marks"] - base, 3),
            "python_marks_vs_op": round((r["python_marks"] - base) / r["none"], 3),
            "native_marks_vs_op": round((r["native_marks"] - base) / r["none"], 3),
        }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
