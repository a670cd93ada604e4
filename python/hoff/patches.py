# patches.py — hoff's answers, in PyTorch's Python layer, to the torch.cuda memory calls that PyTorch's pluggable
# allocator cannot forward (the rows of seams.py that the shim's hooks do not cover): the memory statistics under
# PyTorch's keys and their resets, the memory fraction read back, cuDNN's benchmark mode and torch.compile's
# CUDA-graph modes turned off with one warning each, the refusals with hoff's message (allocator history, CUDA IPC,
# NCCL's allocator hook), and, when the shim is not built, empty_cache, the memory fraction and record_stream.
# Threading: apply() runs once, under hoff.install()'s lock; the replacement functions are safe on any thread (the
# warnings' once-flags and the fractions table have a lock).
"""hoff's Python-level answers to PyTorch's memory calls (see ``hoff.seams``).

Each answer replaces one of PyTorch's private bindings (``torch._C._cuda_*``)
or a public entry point, so that every caller of the public function gets it,
as PyTorch's own Python code looks those bindings up at each call.  On a
PyTorch built without CUDA the ``torch._C._cuda_*`` bindings are added.
"""

import json
import os
import threading
import warnings
from typing import Dict, Set

from . import _lib, compiled, seams, shim

_lock = threading.Lock()
_warned: Set[str] = set()
_fractions: Dict[int, float] = {}   # device -> the fraction the script set (torch.cuda.get_per_process_memory_fraction)
_applied = False


class HoffUnsupported(RuntimeError):
    """A PyTorch call that hoff, as PyTorch's CUDA allocator, cannot serve; the message says what to do."""


class HoffWarning(UserWarning):
    """A setting hoff turned off, or a feature that runs without hoff's shim; the message says why."""


def warn_once(key, text):
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(text, HoffWarning, stacklevel=3)


# --- statistics -------------------------------------------------------------------------------------------------

STAT_KEYS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
             "active_bytes", "inactive_split_bytes", "requested_bytes")


def _zero():
    return {"current": 0, "peak": 0, "allocated": 0, "freed": 0}


def _memstats(device):
    """The figures hoff counts at its PyTorch entry points for device (hoff_torch_memory_stats_json)."""
    import ctypes
    buf = ctypes.create_string_buffer(2048)
    if _lib.load().hoff_torch_memory_stats_json(int(device), buf, len(buf)) < 0:
        raise RuntimeError("hoff: %s" % _lib.last_error())
    return json.loads(buf.value.decode())


def _hoff_stats(device, t):
    """hoff's own counters of device (hoff_stats(3)), or {} when hoff has no context there yet, which t (its
    _memstats) tells without making one: a device PyTorch allocated on has one.  Asking for them makes the
    device one of _targets.devices_used(), so a later reset of t's figures cannot hide it."""
    from . import _targets
    a = t["allocation"]
    if int(device) not in _targets.devices_used() and not (a["current"] or a["allocated"] or a["freed"]):
        return {}
    return _targets.AllocatorTarget(int(device)).stats()


def memory_stats(device):
    """torch.cuda.memory_stats_as_nested_dict(device) under hoff: PyTorch's keys, hoff's figures.

    allocation, active: the blocks PyTorch holds from hoff; allocated_bytes, active_bytes: their bytes (hoff's
    block sizes); requested_bytes: the bytes PyTorch asked for; reserved_bytes: the bytes mapped in hoff's device
    and managed pools (a managed block counts whether it is on the device or evicted to the host; CUDA graphs'
    memory is hoff's graph_private_bytes), current and peak.  hoff keeps one pool per kind, not PyTorch's small and
    large pools: every figure is under "all" and "large_pool", and "small_pool" is 0.  What hoff keeps no figure of
    is 0: segments, inactive splits, oversize allocations and segments, the totals of reserved bytes mapped and
    freed, num_alloc_retries, num_sync_all_streams and num_device_free.
    """
    t = _memstats(device)
    st = _hoff_stats(device, t)
    reserved = {"current": int(st.get("device_pool_bytes", 0)) + int(st.get("managed_pool_bytes", 0)),
                "allocated": 0, "freed": 0}
    reserved["peak"] = max(reserved["current"], int(st.get("peak_pool_bytes", 0)))
    figures = {"allocation": t["allocation"], "active": t["allocation"], "allocated_bytes": t["allocated_bytes"],
               "active_bytes": t["allocated_bytes"], "requested_bytes": t["requested_bytes"],
               "reserved_bytes": reserved}
    out = {}
    for k in STAT_KEYS:
        f = figures.get(k)
        out[k] = {"all": dict(f) if f else _zero(), "small_pool": _zero(), "large_pool": dict(f) if f else _zero()}
    out["oversize_allocations"] = _zero()
    out["oversize_segments"] = _zero()
    out["num_alloc_retries"] = 0
    out["num_ooms"] = int(t["num_ooms"])
    out["num_sync_all_streams"] = 0
    out["num_device_alloc"] = int(st.get("cache_misses", 0))
    out["num_device_free"] = 0
    out["max_split_size"] = -1
    return out


def reset_peaks(device):
    rc = _lib.load().hoff_torch_reset_peaks(int(device))
    if rc < 0:
        raise RuntimeError("hoff: reset_peak_memory_stats(device=%s): %s" % (device, _lib.last_error()))


def reset_accumulated(device):
    _hoff_stats(device, _memstats(device))  # remember a device with a context before its counts go to 0
    rc = _lib.load().hoff_torch_reset_accumulated(int(device))
    if rc < 0:
        raise RuntimeError("hoff: reset_accumulated_memory_stats(device=%s): %s" % (device, _lib.last_error()))


def _device_index(device):
    if device is None or (isinstance(device, int) and device < 0):
        import torch
        return torch.cuda.current_device()
    return int(device)


# --- cuDNN benchmark ----------------------------------------------------------------------------------------------

CUDNN_TEXT = "hoff: torch.backends.cudnn.benchmark = True is " + seams.BY_ID["cudnn_benchmark"].message


def _cudnn_guard(setter):
    def set_benchmark(value):
        if value:
            warn_once("cudnn_benchmark", CUDNN_TEXT)
            value = False
        return setter(value)
    set_benchmark.__hoff_wrapped__ = setter
    return set_benchmark


def _patch_cudnn(torch):
    cudnn = torch.backends.cudnn
    raw = getattr(torch._C, "_set_cudnn_benchmark", None)
    if raw is None:
        return
    guarded = _cudnn_guard(raw)
    setattr(torch._C, "_set_cudnn_benchmark", guarded)  # torch.backends.cudnn.flags() and set_flags call it by name
    cls = type(cudnn)
    prop = cls.__dict__.get("benchmark")
    if prop is not None and hasattr(prop, "setter") and hasattr(prop, "getter"):
        # `benchmark` is a ContextProp holding the setter it was made with: give the class one with hoff's
        setattr(cls, "benchmark", type(prop)(prop.getter, guarded))
    if torch._C._get_cudnn_benchmark():
        guarded(True)


# --- torch.compile and CUDA graphs ----------------------------------------------------------------------------

COMPILE_MODES = {"reduce-overhead": "default", "max-autotune": "max-autotune-no-cudagraphs"}
COMPILE_TEXT = "hoff: torch.compile(mode=%r) " + seams.BY_ID["compile_cudagraphs"].message.replace("%", "%%")
GRAPH_OPTION_TEXT = "hoff: torch.compile with the option triton.cudagraphs " + seams.BY_ID["compile_cudagraphs"].message
CUDAGRAPHS_BACKEND_TEXT = ("hoff: torch.compile(backend='cudagraphs') "
                           + seams.BY_ID["compile_cudagraphs_backend"].message)


def _compile_guard(compile_fn):
    def compile(*args, **kwargs):
        mode = kwargs.get("mode")
        if isinstance(mode, str) and mode in COMPILE_MODES:
            warn_once("compile_mode:" + mode, COMPILE_TEXT % mode)
            kwargs["mode"] = COMPILE_MODES[mode]
        if kwargs.get("backend") == "cudagraphs":
            raise HoffUnsupported(CUDAGRAPHS_BACKEND_TEXT)
        opts = kwargs.get("options")
        if isinstance(opts, dict) and opts.get("triton.cudagraphs"):
            warn_once("compile_option", GRAPH_OPTION_TEXT)
            kwargs["options"] = dict(opts, **{"triton.cudagraphs": False})
        _graph_config_off()
        return compile_fn(*args, **kwargs)
    compile.__wrapped__ = compile_fn
    compile.__doc__ = compile_fn.__doc__
    compile.__hoff_wrapped__ = compile_fn
    return compile


def _graph_config_off():
    """torch._inductor.config.triton.cudagraphs set by the script (or a library) is turned off, once warned."""
    import sys
    cfg = sys.modules.get("torch._inductor.config")
    triton = getattr(cfg, "triton", None) if cfg is not None else None
    if triton is not None and getattr(triton, "cudagraphs", False):
        warn_once("compile_option", GRAPH_OPTION_TEXT)
        triton.cudagraphs = False


# --- refusals -------------------------------------------------------------------------------------------------

HISTORY_TEXT = "hoff: %s " + seams.BY_ID["memory_history"].message.replace("%", "%%")
IPC_TEXT = ("hoff: sharing a CUDA tensor with another process (%s) "
            + seams.BY_ID["cuda_ipc"].message.replace("%", "%%"))
MEMPOOL_TEXT = "hoff: torch.cuda.MemPool " + seams.BY_ID["mem_pool"].message
NCCL_HOOK = "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK"
NCCL_TEXT = "hoff: %s=%s " + seams.BY_ID["nccl_register_hook"].message.replace("%", "%%")


def _refuse(text):
    def refused(*args, **kwargs):
        raise HoffUnsupported(text)
    return refused


def _falsy(v):
    return v is None or v.strip().lower() in ("", "0", "false", "no", "off")


def _nccl_guard(init):
    def init_process_group(*args, **kwargs):
        v = os.environ.get(NCCL_HOOK)
        backend = kwargs.get("backend", args[0] if args else None)
        if not _falsy(v) and (backend is None or "nccl" in str(backend).lower()):
            raise HoffUnsupported(NCCL_TEXT % (NCCL_HOOK, v))
        return init(*args, **kwargs)
    init_process_group.__wrapped__ = init
    init_process_group.__doc__ = init.__doc__
    return init_process_group


# --- without the shim -----------------------------------------------------------------------------------------

NO_SHIM_TEXT = ("hoff: running without its PyTorch shim (%s).  hoff answers torch.cuda.empty_cache, "
                "set_per_process_memory_fraction and Tensor.record_stream from Python, but: a failed allocation "
                "is not raised as torch.cuda.OutOfMemoryError (PyTorch gets no memory and fails later), "
                "record_stream calls made from C++ (NCCL process groups, FSDP) do not reach hoff (run with "
                "HOFF_FREE_FENCE=device), and memory freed after a CUDA graph's capture stays with the graph "
                "until exit.  Install a C++ compiler (Debian: g++) and the CUDA runtime headers so that hoff can "
                "build it (hoff(7), 'The PyTorch shim').")


def _no_shim(torch, why):
    from . import allocator
    if shim.mode() != "off":
        warn_once("no_shim", NO_SHIM_TEXT % why)

    def empty_cache():
        allocator.empty_cache()
    setattr(torch._C, "_cuda_emptyCache", empty_cache)

    def record_stream(self, stream):
        allocator.record_stream(self, stream)
    setattr(torch.Tensor, "record_stream", record_stream)


# --- apply ----------------------------------------------------------------------------------------------------

def apply(torch, with_shim, why_no_shim=None):
    """Put hoff's answers in place (hoff.install() calls it once hoff is PyTorch's allocator)."""
    global _applied
    if _applied:
        return
    C = torch._C
    from . import allocator

    def memory_stats_binding(device):
        return memory_stats(_device_index(device))
    setattr(C, "_cuda_memoryStats", memory_stats_binding)
    setattr(C, "_cuda_resetPeakMemoryStats", lambda device: reset_peaks(_device_index(device)))
    setattr(C, "_cuda_resetAccumulatedMemoryStats", lambda device: reset_accumulated(_device_index(device)))

    set_fraction = getattr(C, "_cuda_setMemoryFraction", None)

    def set_memory_fraction(fraction, device):
        with _lock:
            _fractions[int(device)] = float(fraction)
        if with_shim and set_fraction is not None:
            return set_fraction(fraction, device)  # PyTorch's allocator forwards it to the shim's hook
        allocator.set_memory_fraction(fraction, device)
    setattr(C, "_cuda_setMemoryFraction", set_memory_fraction)

    def get_memory_fraction(device):
        with _lock:
            return _fractions.get(int(device), 1.0)
    setattr(C, "_cuda_getMemoryFraction", get_memory_fraction)

    # torch.accelerator (2.6+): its memory calls go to the device's registered allocator, not to the one
    # change_current_allocator installed; on CUDA they are hoff's.
    def on_cuda():
        try:
            return torch.accelerator.current_accelerator().type == "cuda"
        except Exception:
            return False

    def accel(name, ours):
        if not hasattr(C, name):
            return
        theirs = getattr(C, name)

        def call(*args):
            return ours(*args) if on_cuda() else theirs(*args)
        setattr(C, name, call)
    accel("_accelerator_getDeviceStats", lambda d: memory_stats(_device_index(d)))
    accel("_accelerator_resetPeakStats", lambda d: reset_peaks(_device_index(d)))
    accel("_accelerator_resetAccumulatedStats", lambda d: reset_accumulated(_device_index(d)))
    accel("_accelerator_emptyCache", lambda: C._cuda_emptyCache())
    accel("_accelerator_isAllocatorInitialized", lambda: True)

    _patch_cudnn(torch)
    if hasattr(torch, "compile"):  # 2.0+
        setattr(torch, "compile", _compile_guard(torch.compile))
        compiled.install(torch)  # each call of what it makes is one op to hoff (hoff.compiled)

    for name in ("_cuda_record_memory_history", "_cuda_record_memory_history_legacy"):
        if hasattr(C, name):
            setattr(C, name, _refuse(HISTORY_TEXT % "torch.cuda.memory._record_memory_history"))
    if hasattr(C, "_cuda_memorySnapshot"):
        setattr(C, "_cuda_memorySnapshot", _refuse(HISTORY_TEXT % "torch.cuda.memory_snapshot / _snapshot"))
    mem = getattr(torch.cuda, "memory", None)
    if mem is not None and isinstance(getattr(mem, "MemPool", None), type):  # 2.5+: torch.cuda.MemPool is this class
        setattr(mem.MemPool, "__init__", _refuse(MEMPOOL_TEXT))
    for name in ("_share_cuda_", "_new_shared_cuda"):
        if hasattr(torch.UntypedStorage, name):
            setattr(torch.UntypedStorage, name, _refuse(IPC_TEXT % ("UntypedStorage." + name)))
    try:
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d
        if hasattr(c10d, "init_process_group"):
            guarded = _nccl_guard(c10d.init_process_group)
            setattr(c10d, "init_process_group", guarded)
            setattr(dist, "init_process_group", guarded)
    except (ImportError, AttributeError, RuntimeError):
        pass  # a PyTorch built without torch.distributed
    if not with_shim:
        _no_shim(torch, why_no_shim or "not built")
    _applied = True
