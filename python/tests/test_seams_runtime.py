# test_seams_runtime.py — hoff's answers to PyTorch's memory calls, through PyTorch's own CUDAPluggableAllocator
# on a machine without a GPU (issue 26): the shim's hooks reach libhoff, torch.cuda's statistics are hoff's under
# PyTorch's keys, the out-of-memory error has PyTorch's shape, cuDNN benchmark and torch.compile's CUDA-graph
# modes are turned off with one warning, the unsupported calls fail with hoff's message, and without the shim the
# Python-level answers stand in.  Needs PyTorch 2.x with its C++ headers (the CUDA wheel) and a C++ compiler.
# Threading: each scenario runs in a child process (an allocator is changed once per process); the shim is built
# once per session into a temporary cache.
import json
import os
import shutil
import sys

import pytest

from conftest import missing, run

# A child: a PyTorch without a driver made to look like one with a GPU up to hoff.install() (change_current_allocator
# itself is PyTorch's real one), hoff's contexts on the sim backend, then the scenario, which prints one JSON line.
PRELUDE = r"""
import ctypes, json, sys, warnings
import torch
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
warnings.simplefilter("always")
import hoff
from hoff import patches, shim
caught = []
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    hoff.install()
    caught += [str(x.message) for x in w]
S = shim.loaded()
def selftest(what, size=0, fraction=0.0, ptr=None, id0=0, id1=0):
    out = ctypes.c_void_p()
    msg = ctypes.create_string_buffer(4096)
    rc = S.hoff_shim_selftest(what, size, fraction, ptr, id0, id1, ctypes.byref(out), msg, len(msg))
    return rc, out.value, msg.value.decode()
def stats():
    return hoff.memory_stats(0)
"""


@pytest.fixture(scope="module")
def torch2(torch):
    mem = getattr(torch.cuda, "memory", None)
    if mem is None or not hasattr(mem, "CUDAPluggableAllocator"):  # a version hoff cannot install into
        pytest.skip("PyTorch %s has no CUDAPluggableAllocator (2.x needed)" % torch.__version__)
    inc = os.path.join(os.path.dirname(torch.__file__), "include", "torch", "csrc", "cuda",
                       "CUDAPluggableAllocator.h")
    if not os.path.isfile(inc):
        missing("PyTorch %s ships no C++ headers (the CUDA wheel has them)" % torch.__version__)
    if not (shutil.which("c++") or shutil.which("g++")):
        missing("no C++ compiler")
    return torch


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("shim-cache"))


def scenario(body, cache, **env):
    base = dict(HOFF_BACKEND="sim", HOFF_SIM_DEVICE="1G", HOFF_SHIM_CACHE=cache, HOFF_LOG_LEVEL="warn")
    base.update(env)
    r = run([sys.executable, "-c", PRELUDE + body], timeout=600, **base)
    assert r.returncode == 0, "child failed:\n" + r.stdout[-3000:] + r.stderr[-6000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines, r.stdout + r.stderr
    return json.loads(lines[-1]), r.stderr


HOOKS = r"""
before = stats()
rc7, p, _ = selftest(7, size=1 << 20)                 # PyTorch's malloc -> the shim -> hoff_torch_alloc
rc3, _, _ = selftest(3, ptr=p)                        # recordStream of a live block: hoff takes it quietly
sys.stderr.write("--- foreign ---\n"); sys.stderr.flush()
rc3b, _, _ = selftest(3, ptr=0x1000)                  # ...and names a pointer that is not its own
sys.stderr.write("--- end ---\n"); sys.stderr.flush()
out = ctypes.c_void_p(p)
S.hoff_shim_selftest(8, 0, 0.0, None, 0, 0, ctypes.byref(out), None, 0)
torch._C._cuda_emptyCache()                           # torch.cuda.empty_cache's binding -> reset hook
torch._C._cuda_setMemoryFraction(0.25, 0)             # set_per_process_memory_fraction's -> fraction hook
frac = torch._C._cuda_getMemoryFraction(0)
selftest(4, id0=0, id1=7); selftest(5, id0=0, id1=7); selftest(6, id0=0, id1=7)   # a graph pool's life
after = stats()
print(json.dumps({"shim": shim.path(), "hooks": shim.hook_counts(), "rc": [rc7, rc3, rc3b],
                  "flushes": [before["cache_flushes"], after["cache_flushes"]], "budget": after["budget_bytes"],
                  "fraction": frac, "allocs": after["allocs"], "frees": after["frees"],
                  "pool_begins": after.get("graph_pool_begins"), "pool_releases": after.get("graph_pool_releases"),
                  "warnings": caught}))
"""


def test_hooks_reach_hoff(torch2, cache, libhoff):
    out, err = scenario(HOOKS, cache)
    assert out["shim"] and out["shim"].startswith(cache), out
    assert out["warnings"] == [], out["warnings"]  # the shim was built: nothing is lost, nothing to say
    h = out["hooks"]
    assert h["empty_cache"] == 1 and h["memory_fraction"] == 1 and h["record_stream"] == 2, h
    assert h["graph_pool_begin"] == h["graph_pool_end"] == h["graph_pool_release"] == 1, h
    assert out["rc"] == [0, 0, 0]
    # each hook's effect is hoff's: a flush, a budget of a quarter of the (sim) device, the pool counters
    assert out["flushes"][1] == out["flushes"][0] + 1
    assert out["budget"] == (1 << 30) // 4 and out["fraction"] == 0.25
    assert out["allocs"] == 1 and out["frees"] == 1
    assert out["pool_begins"] == 1 and out["pool_releases"] == 1
    foreign = err.split("--- foreign ---")[1].split("--- end ---")[0]
    assert "not a live hoff block" in foreign, err
    assert "not a live hoff block" not in err.split("--- foreign ---")[0]


STATS = r"""
torch.cuda.is_initialized = lambda: True            # torch.cuda's readers return {} before CUDA is initialised
torch.cuda.memory.is_initialized = torch.cuda.is_initialized
ptrs = [selftest(7, size=n)[1] for n in (3 << 20, 5 << 20, 1000)]
m = torch.cuda.memory_stats(0)
peak1 = torch.cuda.max_memory_allocated(0)
cur1 = torch.cuda.memory_allocated(0)
for p in ptrs[:2]:
    o = ctypes.c_void_p(p); S.hoff_shim_selftest(8, 0, 0.0, None, 0, 0, ctypes.byref(o), None, 0)
cur2 = torch.cuda.memory_allocated(0)
peak2 = torch.cuda.max_memory_allocated(0)
torch.cuda.reset_peak_memory_stats(0)
peak3 = torch.cuda.max_memory_allocated(0)
oom = selftest(0, size=1 << 50)
m2 = torch.cuda.memory_stats(0)
torch.cuda.reset_accumulated_memory_stats(0)
m3 = torch.cuda.memory_stats(0)
summary = torch.cuda.memory_summary(0)
nested = torch._C._cuda_memoryStats(0)
accel = None
if hasattr(torch, "accelerator") and hasattr(torch.accelerator, "memory_stats"):
    torch.accelerator.current_accelerator = lambda *a, **k: torch.device("cuda")   # as on a GPU machine
    accel = torch.accelerator.memory_stats(0)
print(json.dumps({"m": m, "peak1": peak1, "cur1": cur1, "cur2": cur2, "peak2": peak2, "peak3": peak3,
                  "reserved": torch.cuda.memory_reserved(0), "max_reserved": torch.cuda.max_memory_reserved(0),
                  "oom": oom, "m2": m2, "m3": m3, "summary": summary, "keys": sorted(nested),
                  "hoff_peak": hoff.memory_stats(0).get("peak_in_use_bytes"), "accel": accel}))
"""


def test_memory_stats_are_hoffs_under_pytorchs_keys(torch2, cache, libhoff):
    out, _ = scenario(STATS, cache)
    m = out["m"]
    # every key PyTorch documents for memory_stats is there (memory_summary reads them all)
    for k in ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
              "active_bytes", "inactive_split_bytes", "requested_bytes"):
        for pool in ("all", "small_pool", "large_pool"):
            for f in ("current", "peak", "allocated", "freed"):
                assert "%s.%s.%s" % (k, pool, f) in m, (k, pool, f)
    for k in ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free",
              "max_split_size"):
        assert k in m
    assert m["requested_bytes.all.current"] == (3 << 20) + (5 << 20) + 1000
    assert m["allocation.all.current"] == m["active.all.current"] == 3
    assert m["allocated_bytes.all.current"] >= m["requested_bytes.all.current"]
    assert out["cur1"] == out["peak1"] == m["allocated_bytes.all.current"]
    assert out["cur2"] < out["cur1"] and out["peak2"] == out["peak1"]
    assert out["peak3"] == out["cur2"]            # reset_peak_memory_stats: the peak is the current again
    assert out["hoff_peak"] is not None and out["hoff_peak"] <= out["peak1"]
    assert out["reserved"] >= out["cur2"] and out["max_reserved"] >= out["reserved"]
    assert out["oom"][0] == 2                     # a c10::OutOfMemoryError
    assert out["m2"]["num_ooms"] == 1
    assert out["m2"]["allocation.all.allocated"] == 3 and out["m2"]["allocation.all.freed"] == 2
    assert out["m3"]["num_ooms"] == 0 and out["m3"]["allocation.all.allocated"] == 0   # reset_accumulated
    assert out["m3"]["allocation.all.current"] == 1
    assert "PyTorch CUDA memory summary" in out["summary"]
    assert "allocated_bytes" in out["keys"] and "num_ooms" in out["keys"]
    if out["accel"] is not None:  # torch.accelerator (2.6+) on CUDA: the same figures
        assert out["accel"]["allocation.all.current"] == 1
        assert out["accel"]["allocated_bytes.all.current"] == out["m3"]["allocated_bytes.all.current"]


RESET_FIRST = r"""
torch.cuda.is_initialized = lambda: True
torch.cuda.memory.is_initialized = torch.cuda.is_initialized
_, p, _ = selftest(7, size=4 << 20)                  # PyTorch allocates and frees: hoff caches the block
o = ctypes.c_void_p(p); S.hoff_shim_selftest(8, 0, 0.0, None, 0, 0, ctypes.byref(o), None, 0)
torch.cuda.reset_accumulated_memory_stats(0)         # before any statistics were read
m = torch.cuda.memory_stats(0)
print(json.dumps({"reserved": m["reserved_bytes.all.current"], "allocated": m["allocation.all.allocated"]}))
"""


def test_reset_before_the_first_read_keeps_hoffs_figures(torch2, cache, libhoff):
    # the reset zeroes the counts that tell a device with a context; hoff's pools still hold the cached block
    out, _ = scenario(RESET_FIRST, cache)
    assert out["allocated"] == 0
    assert out["reserved"] >= 4 << 20, out


OOM = r"""
rc, _, msg = selftest(0, size=3 << 40)
print(json.dumps({"rc": rc, "msg": msg}))
"""


def test_out_of_memory_has_pytorchs_shape(torch2, cache, libhoff):
    out, _ = scenario(OOM, cache)
    assert out["rc"] == 2, out                    # c10::OutOfMemoryError: torch.cuda.OutOfMemoryError in Python
    msg = out["msg"]
    assert msg.startswith("CUDA out of memory. Tried to allocate 3.0 TiB."), msg
    assert "GPU 0 has a total capacity of 1.0 GiB" in msg
    assert "hoff could not allocate it:" in msg and "hoff.memory_stats()" in msg


SETTINGS = r"""
import torch.backends.cudnn
res = {}
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    torch.backends.cudnn.benchmark = True
    res["after_set"] = torch.backends.cudnn.benchmark
    with torch.backends.cudnn.flags(enabled=True, benchmark=True):
        res["in_flags"] = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    res["cudnn_warnings"] = [str(x.message) for x in w if issubclass(x.category, patches.HoffWarning)]
seen = []
def fake_compile(*a, **k):
    seen.append(k)
    return a[0] if a else None
guard = patches._compile_guard(fake_compile)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    guard(len, mode="reduce-overhead"); guard(len, mode="reduce-overhead"); guard(len, mode="max-autotune")
    guard(len, options={"triton.cudagraphs": True}); guard(len, mode="default")
    res["compile_warnings"] = [str(x.message) for x in w if issubclass(x.category, patches.HoffWarning)]
try:
    guard(len, backend="cudagraphs"); res["backend"] = "ran"
except patches.HoffUnsupported as e:
    res["backend"] = str(e)
res["seen"] = seen
res["compile_is_guarded"] = getattr(torch.compile, "__hoff_wrapped__", None) is not None
print(json.dumps(res))
"""


def test_cudnn_benchmark_and_compile_graphs_turned_off(torch2, cache, libhoff):
    out, _ = scenario(SETTINGS, cache)
    assert out["after_set"] is False and out["in_flags"] is False
    assert len(out["cudnn_warnings"]) == 1 and "cacheInfo" in out["cudnn_warnings"][0]
    assert out["compile_is_guarded"]
    modes = [k.get("mode") for k in out["seen"]]
    assert modes == ["default", "default", "max-autotune-no-cudagraphs", None, "default"]
    assert out["seen"][3]["options"] == {"triton.cudagraphs": False}
    w = out["compile_warnings"]
    assert len(w) == 3, w   # once per mode, once for the option
    assert any("mode='reduce-overhead'" in x and "getCheckpointState" in x for x in w)
    assert "backend='cudagraphs'" in out["backend"]


REFUSALS = r"""
import os
res = {}
def attempt(name, f):
    try:
        f(); res[name] = "ran"
    except patches.HoffUnsupported as e:
        res[name] = "hoff: " + str(e)
    except Exception as e:
        res[name] = "other: %s: %s" % (type(e).__name__, e)
attempt("history", lambda: torch.cuda.memory._record_memory_history(max_entries=10))
attempt("snapshot", lambda: torch._C._cuda_memorySnapshot(None))
attempt("ipc", lambda: torch.UntypedStorage(8)._share_cuda_())
attempt("mempool", lambda: torch.cuda.MemPool())
os.environ["TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK"] = "1"
import torch.distributed as dist
attempt("nccl", lambda: dist.init_process_group("nccl", rank=0, world_size=1, init_method="tcp://127.0.0.1:1"))
print(json.dumps(res))
"""


def test_unsupported_calls_fail_with_hoffs_message(torch2, cache, libhoff):
    out, _ = scenario(REFUSALS, cache)
    assert out["history"].startswith("hoff: hoff: torch.cuda.memory._record_memory_history refused at the call"), out
    assert "without hoff" in out["history"]
    assert out["snapshot"].startswith("hoff: hoff: torch.cuda.memory_snapshot")
    assert "CUDA IPC" in out["ipc"] and out["ipc"].startswith("hoff: ")
    assert out["mempool"].startswith("hoff: hoff: torch.cuda.MemPool refused") and "createOrIncrefPool" in out["mempool"]
    assert "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK=1" in out["nccl"] and out["nccl"].startswith("hoff: ")


NO_SHIM = r"""
before = stats()
torch._C._cuda_emptyCache()
after = stats()
torch._C._cuda_setMemoryFraction(0.5, 0)
print(json.dumps({"shim": shim.path(), "warnings": caught, "flushes": [before["cache_flushes"],
                  after["cache_flushes"]], "budget": stats()["budget_bytes"],
                  "record_stream": torch.Tensor.record_stream.__module__}))
"""


def test_without_the_shim_python_answers_and_says_what_is_lost(torch2, tmp_path, libhoff):
    # no compiler on PATH and an empty cache: the shim cannot be built
    out, _ = scenario(NO_SHIM, str(tmp_path / "empty"), PATH="/nonexistent", CXX="")
    assert out["shim"] is None
    assert len(out["warnings"]) == 1 and "without its PyTorch shim" in out["warnings"][0]
    assert "no C++ compiler" in out["warnings"][0] and "OutOfMemoryError" in out["warnings"][0]
    assert out["flushes"][1] == out["flushes"][0] + 1
    assert out["budget"] == (1 << 30) // 2
    assert out["record_stream"] == "hoff.patches"
    out, _ = scenario(NO_SHIM, str(tmp_path / "empty"), PATH="/nonexistent", CXX="", HOFF_SHIM="0")
    assert out["warnings"] == [] and out["shim"] is None


def test_shim_required_fails_install(torch2, tmp_path, libhoff):
    r = run([sys.executable, "-c", PRELUDE], HOFF_BACKEND="sim", HOFF_SHIM="1", PATH="/nonexistent", CXX="",
            HOFF_SHIM_CACHE=str(tmp_path / "c"))
    assert r.returncode != 0
    assert "HOFF_SHIM=1" in r.stderr and "no C++ compiler" in r.stderr


def test_bad_hoff_shim_value(torch2, tmp_path, libhoff):
    r = run([sys.executable, "-c", PRELUDE], HOFF_BACKEND="sim", HOFF_SHIM="maybe",
            HOFF_SHIM_CACHE=str(tmp_path / "c"))
    assert r.returncode != 0 and "HOFF_SHIM='maybe'" in r.stderr and "expected auto, 0" in r.stderr
