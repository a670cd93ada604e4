#!/usr/bin/env python3
# seams.py — tests/gpu/run.sh's "seams" part (issue 26): every torch.cuda memory call of hoff's table
# (python/hoff/seams.py), made by a script run unchanged under `python -m hoff` on a real GPU, with what happened
# to each written as JSON: the row, the verdict the table promises, what the call did, and whether that is the
# promised behaviour.  Usage: seams.py --out FILE --hoff-library PATH (it re-runs itself under python -m hoff).
# Exit 0 when every call behaved as promised, 1 otherwise, 77 without a GPU.  Threading: one thread.
import argparse
import json
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.normpath(os.path.join(HERE, "..", "..", "python"))


def parent(args):
    env = dict(os.environ, HOFF_LIBRARY=args.hoff_library,
               PYTHONPATH=PYDIR + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""),
               HOFF_SEAMS_CHILD=args.out)
    env.setdefault("HOFF_SHIM_CACHE", os.path.join(os.path.dirname(os.path.abspath(args.out)), "shim-cache"))
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "hoff", os.path.abspath(__file__)], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=args.time_limit)
    text = r.stdout.decode(errors="replace")
    sys.stdout.write(text)
    try:
        with open(args.out) as f:
            report = json.load(f)
    except (OSError, ValueError):
        report = {"status": "failed", "reason": "the child under python -m hoff wrote no report (exit %d)"
                  % r.returncode, "calls": []}
    report["exit"] = r.returncode
    report["wall_s"] = round(time.time() - t0, 1)
    report["log_tail"] = text[-4000:]
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    return r.returncode


def child(out):
    import warnings
    import torch
    import hoff
    from hoff import patches, seams, shim

    calls = []

    def case(row, name, fn):
        rec = {"row": row, "call": name, "promised": seams.BY_ID[row].verdict}
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                ok, detail = fn()
                rec["outcome"] = "returned"
            except Exception as e:  # what happened is the result
                ok, detail = False, "%s: %s" % (type(e).__name__, str(e)[:600])
                rec["outcome"] = "raised"
                rec["traceback"] = traceback.format_exc()[-1500:]
            rec["warnings"] = [str(x.message)[:300] for x in w if issubclass(x.category, patches.HoffWarning)]
        rec["ok"] = bool(ok)
        rec["detail"] = detail
        calls.append(rec)
        print("seams: %-24s %-45s %s" % (row, name, "ok" if ok else "FAILED: %s" % detail), flush=True)

    def refused(fn, words):
        try:
            fn()
        except patches.HoffUnsupported as e:
            return all(x in str(e) for x in words), str(e)[:300]
        return False, "ran, where hoff promised to refuse it"

    dev = torch.device("cuda")
    x = torch.empty(1 << 22, device=dev)  # 16 MiB

    def stats():
        m = torch.cuda.memory_stats()
        need = ["allocated_bytes.all.current", "reserved_bytes.all.peak", "active_bytes.all.peak", "num_ooms",
                "requested_bytes.all.current", "num_alloc_retries"]
        miss = [k for k in need if k not in m]
        cur = torch.cuda.memory_allocated()
        ok = not miss and cur >= x.numel() * 4 and torch.cuda.max_memory_allocated() >= cur and \
            torch.cuda.memory_reserved() >= cur and "memory summary" in torch.cuda.memory_summary()
        return ok, {"missing": miss, "allocated": cur, "reserved": torch.cuda.memory_reserved()}
    case("memory_stats", "torch.cuda.memory_stats", stats)

    def reset():
        y = torch.empty(1 << 24, device=dev)
        del y
        high = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        after = torch.cuda.max_memory_allocated()
        torch.cuda.reset_accumulated_memory_stats()
        acc = torch.cuda.memory_stats()["allocation.all.allocated"]
        return after == torch.cuda.memory_allocated() and after < high and acc == 0, \
            {"peak_before": high, "peak_after": after, "allocated_after_reset": acc}
    case("stats_reset", "torch.cuda.reset_peak_memory_stats", reset)

    def fraction():
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(0.5)
        budget = hoff.memory_stats(0)["budget_bytes"]
        got = torch.cuda.get_per_process_memory_fraction()
        return abs(budget - total // 2) <= total // 100 and got == 0.5, {"budget": budget, "total": total,
                                                                          "get": got}
    case("memory_fraction", "torch.cuda.set_per_process_memory_fraction", fraction)
    case("memory_fraction_get", "torch.cuda.get_per_process_memory_fraction",
         lambda: (torch.cuda.get_per_process_memory_fraction() == 0.5, None))

    def empty():
        before = hoff.memory_stats(0)["cache_flushes"]
        torch.cuda.empty_cache()
        after = hoff.memory_stats(0)["cache_flushes"]
        return after == before + 1, {"cache_flushes": [before, after]}
    case("empty_cache", "torch.cuda.empty_cache", empty)

    def record():
        s = torch.cuda.Stream()
        before = shim.hook_counts().get("record_stream", 0)
        t = torch.ones(1 << 20, device=dev)
        with torch.cuda.stream(s):
            t.mul_(2)
        t.record_stream(s)
        del t
        torch.cuda.synchronize()
        after = shim.hook_counts().get("record_stream", 0)
        return after == before + 1, {"hook_calls": [before, after]}
    case("record_stream", "Tensor.record_stream", record)

    def cudnn():
        torch.backends.cudnn.benchmark = True
        conv = torch.nn.Conv2d(3, 8, 3).to(dev)
        y = conv(torch.randn(2, 3, 32, 32, device=dev))
        torch.cuda.synchronize()
        return torch.backends.cudnn.benchmark is False and y.shape == (2, 8, 30, 30), None
    case("cudnn_benchmark", "torch.backends.cudnn.benchmark", cudnn)

    def compiled():
        f = torch.compile(lambda a: a * 2 + 1, mode="reduce-overhead")
        a = torch.randn(1024, device=dev)
        return bool(torch.equal(f(a), a * 2 + 1)), None
    case("compile_cudagraphs", 'torch.compile(mode="reduce-overhead")', compiled)
    case("compile_cudagraphs_backend", 'torch.compile(backend="cudagraphs")',
         lambda: refused(lambda: torch.compile(lambda a: a, backend="cudagraphs"), ["cudagraphs"]))

    def graph():
        st0 = hoff.memory_stats(0)
        static_in = torch.randn(1 << 16, device=dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                static_in * 3
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_out = static_in * 3 + 1
        static_in.copy_(torch.arange(1 << 16, device=dev, dtype=torch.float32))
        g.replay()
        torch.cuda.synchronize()
        right = bool(torch.equal(static_out, static_in * 3 + 1))
        mid = hoff.memory_stats(0)
        del static_out
        g.reset()
        del g
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        st1 = hoff.memory_stats(0)
        d = {k: [st0.get(k), mid.get(k), st1.get(k)] for k in
             ("capture_allocs", "graph_pool_begins", "graph_pool_releases", "graph_released_bytes",
              "graph_private_bytes")}
        d["hooks"] = shim.hook_counts()
        ok = right and mid["capture_allocs"] > st0["capture_allocs"] and \
            st1.get("graph_pool_releases", 0) > st0.get("graph_pool_releases", 0)
        return ok, d
    case("cuda_graphs", "torch.cuda.graph", graph)

    def oom():
        before = torch.cuda.memory_stats()["num_ooms"]
        try:
            torch.empty(1 << 50, dtype=torch.uint8, device=dev)
        except torch.cuda.OutOfMemoryError as e:
            after = torch.cuda.memory_stats()["num_ooms"]
            return str(e).startswith("CUDA out of memory. Tried to allocate") and after == before + 1, str(e)[:400]
        return False, "no error"
    case("oom", "torch.cuda.OutOfMemoryError", oom)

    if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "memory_stats"):
        case("accelerator_memory", "torch.accelerator.memory_stats",
             lambda: ("allocated_bytes.all.current" in torch.accelerator.memory_stats(), None))
    case("memory_history", "torch.cuda.memory._record_memory_history",
         lambda: refused(lambda: torch.cuda.memory._record_memory_history(), ["without hoff"]))

    def ipc():
        from torch.multiprocessing import reductions
        return refused(lambda: reductions.reduce_tensor(torch.ones(4, device=dev)), ["CUDA IPC"])
    case("cuda_ipc", "torch.multiprocessing.Queue", ipc)
    if hasattr(torch.cuda, "MemPool"):
        case("mem_pool", "torch.cuda.MemPool", lambda: refused(lambda: torch.cuda.MemPool(), ["createOrIncrefPool"]))

    def nccl():
        import torch.distributed as dist
        os.environ["TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK"] = "1"
        try:
            return refused(lambda: dist.init_process_group("nccl", rank=0, world_size=1,
                                                          init_method="tcp://127.0.0.1:29533"),
                           ["TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK"])
        finally:
            del os.environ["TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK"]
    case("nccl_register_hook", "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", nccl)

    bad = [c for c in calls if not c["ok"]]
    report = {"status": "ok" if not bad else "failed",
              "reason": "" if not bad else "%d of %d calls did not behave as hoff's table promises: %s"
              % (len(bad), len(calls), ", ".join(c["call"] for c in bad)),
              "torch": torch.__version__, "shim": shim.path(), "hooks": shim.hook_counts(),
              "rows_not_tried": sorted(set(seams.BY_ID) - {c["row"] for c in calls}), "calls": calls}
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    return 0 if not bad else 1


def main():
    if os.environ.get("HOFF_SEAMS_CHILD"):
        return child(os.environ["HOFF_SEAMS_CHILD"])
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--hoff-library", required=True)
    ap.add_argument("--time-limit", type=int, default=240)
    args = ap.parse_args()
    try:
        import torch
        if not torch.cuda.is_available():
            with open(args.out, "w") as f:
                json.dump({"status": "skipped", "reason": "no CUDA device visible to PyTorch", "calls": []}, f)
            return 77
    except ImportError:
        with open(args.out, "w") as f:
            json.dump({"status": "skipped", "reason": "no torch", "calls": []}, f)
        return 77
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
