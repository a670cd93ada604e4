# allocator.py — making hoff PyTorch's CUDA allocator (CUDAPluggableAllocator), and the calls that stand in for
# torch.cuda's own memory functions under it.  Threading: install() is process-wide and idempotent, under a lock.
"""hoff as PyTorch's CUDA allocator."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Dict, Optional

from . import _lib, _record, _targets, grads, patches, shim
from .config import OffloadConfig
from .hooks import storage_ptr

if TYPE_CHECKING:
    import torch

_install_lock = threading.Lock()

TOO_LATE = ("hoff.install() came too late: PyTorch's CUDA allocator is already initialised "
            "(a CUDA tensor was created, or torch.cuda allocated, before this call), and PyTorch "
            "cannot swap an initialised allocator.  Call hoff.install() first thing in the script, "
            "before any CUDA tensor exists, or run the script unchanged with 'python -m hoff "
            "script.py ...', which installs hoff before the script starts.")


def install(config: Optional[OffloadConfig] = None) -> str:
    """Make hoff the CUDA allocator of this process's PyTorch.

    Call it before anything allocates CUDA memory.  config (an OffloadConfig)
    sets hoff's options for every device (otherwise the HOFF_* variables and
    hoff's defaults apply).  Returns the path of the libhoff.so in use.
    Raises RuntimeError when CUDA is not available, when PyTorch is older
    than 2.0 (no CUDAPluggableAllocator), or when it is too late.
    """
    if config is not None and not isinstance(config, OffloadConfig):
        raise TypeError("config: expected an hoff.OffloadConfig, got %r" % (config,))
    with _install_lock:
        if _targets.installed():
            if config is not None:
                _configure_all(config)
            return _lib.path()
        try:
            import torch
        except ImportError as e:
            raise RuntimeError("hoff.install() needs PyTorch (import torch failed: %s)" % e) from e
        if not torch.cuda.is_available():
            hint = ("this PyTorch (%s) is built without CUDA" % torch.__version__
                    if getattr(torch.version, "cuda", None) is None else "no CUDA device is visible")
            raise RuntimeError(
                "hoff.install(): CUDA is not available (%s).  hoff is a CUDA allocator; to study a "
                "model on a machine without a GPU, record its CPU training step with hoff-record "
                "(hoff-record -o step.trace.gz -- python3 script.py) and replay it with "
                "'hoff-plan simulate step.trace.gz --budget 25%%'." % hint)
        mem = getattr(torch.cuda, "memory", None)
        if mem is None or not hasattr(mem, "CUDAPluggableAllocator") or not hasattr(mem, "change_current_allocator"):
            raise RuntimeError("hoff.install() needs PyTorch >= 2.0 (torch.cuda.memory.CUDAPluggableAllocator); "
                               "this is PyTorch %s" % torch.__version__)
        lib = _lib.load()
        if config is not None:
            _configure_all(config)
        native, why = _load_shim(torch)
        if native is not None:  # the shim's alloc/free: PyTorch's OutOfMemoryError, and every hook (hoff.shim)
            allocator = mem.CUDAPluggableAllocator(shim.path(), "hoff_shim_alloc", "hoff_shim_free")
        else:
            allocator = mem.CUDAPluggableAllocator(_lib.path(), "hoff_torch_alloc", "hoff_torch_free")
        try:
            mem.change_current_allocator(allocator)
        except RuntimeError as e:
            if "already initialized" in str(e) or "initialized allocator" in str(e):
                raise RuntimeError(TOO_LATE) from e
            raise
        if native is not None:
            shim.attach(native)
        lib.hoff_torch_init(torch.cuda.device_count())
        patches.apply(torch, native is not None, why)
        _targets.set_installed()
        grads.install()  # gradients and the optimizer's step stay out of the budget (hoff.grads)
        return _lib.path()


def _load_shim(torch):
    """(the loaded shim, None), or (None, why not) when HOFF_SHIM allows going on without it."""
    m = shim.mode()
    if m == "off":
        return None, "HOFF_SHIM=0"
    try:
        lib = shim.load(torch, _lib.path())
        if not shim.has_allocator(lib):
            raise shim.ShimError("it was built without its CUDA half: %s" % shim.cuda_half(torch))
        return lib, None
    except shim.ShimError as e:
        if m == "required":
            raise RuntimeError("hoff.install(): HOFF_SHIM=1 and hoff's PyTorch shim cannot be used: %s" % e) from e
        return None, str(e)


def _configure_all(config):
    import ctypes
    lib = _lib.load()
    err = ctypes.create_string_buffer(1024)
    for name, value in config.options().items():
        rc = lib.hoff_torch_configure(-1, name.encode(), value.encode(), err, len(err))
        if rc != 0:
            msg = err.value.decode(errors="replace") or _lib.last_error()
            if rc == -16:
                raise _targets.HoffError("hoff: %s" % msg, 16)
            raise ValueError("hoff: %s" % msg)


def is_installed() -> bool:
    """True once hoff.install() has made hoff PyTorch's CUDA allocator."""
    return _targets.installed()


def memory_stats(device: Optional[int] = None) -> Dict[str, Any]:
    """hoff's statistics as a dict (PyTorch's own torch.cuda.memory_stats does
    not work under a pluggable allocator).

    Under hoff's allocator (or when this process used the allocator context of
    the device): the device context's counters (hoff_stats(3)), with "source":
    "allocator".  Under hoff-record only: the recorder's state, with "source":
    "record".  Otherwise RuntimeError.
    """
    dev = _targets.default_device() if device is None else int(device)
    if _targets.installed() or dev in _targets.devices_used():
        return _targets.AllocatorTarget(dev).stats()
    if _record.active():
        return _record.stats()
    raise RuntimeError("hoff.memory_stats(): hoff is not PyTorch's allocator in this process (call "
                       "hoff.install() or run under 'python -m hoff') and the process is not under hoff-record")


def empty_cache() -> None:
    """Return hoff's cached, unused blocks of every device (torch.cuda.empty_cache's work)."""
    _lib.load().hoff_torch_empty_cache()


def set_memory_fraction(fraction: float, device: Optional[int] = None) -> None:
    """hoff's budget for activations on device becomes fraction of its memory
    (torch.cuda.set_per_process_memory_fraction's work under hoff)."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise ValueError("fraction: expected a number more than 0 and at most 1, got %r" % (fraction,))
    dev = _targets.default_device() if device is None else int(device)
    _lib.load().hoff_torch_set_memory_fraction(float(fraction), dev)


def record_stream(tensor: torch.Tensor, stream: Any) -> None:
    """tensor is also used on stream: hoff frees its block only once the work
    queued on stream by then is done (Tensor.record_stream's work, which a
    pluggable allocator does not get from Python)."""
    ptr = storage_ptr(tensor)
    if not ptr:
        raise ValueError("record_stream: the tensor has no storage")
    _lib.load().hoff_torch_record_stream(ptr, getattr(stream, "cuda_stream", stream))


def library_path() -> str:
    """Where libhoff.so was found (see hoff._lib for the search order)."""
    return _lib.path()
