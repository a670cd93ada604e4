# hoff — the PyTorch package of hoff, a CUDA allocator that keeps training activations inside a device-memory
# budget: the allocator install, OffloadSession steps, skip_offload regions, access marks, CPU recording mode,
# hoff-plan advise's recompute advice applied to a model (hoff.recompute).
# Threading: see each module; the public functions are safe to call from any thread unless noted.
"""hoff for PyTorch.

Two lines put a script under hoff::

    import hoff
    hoff.install(hoff.OffloadConfig(max_resident_activation_mb=8192))   # before any CUDA tensor

    session = hoff.OffloadSession()
    for batch in data:
        with session:                       # one training step: warmup, then replay
            loss = model(batch).sum()
            loss.backward()
            optimizer.step()

or with no change at all: ``python -m hoff train.py ARGS`` (see hoff.__main__).
Under ``hoff-record`` (CPU recording mode) the same marks go to the recorder,
so a CPU training step can be traced on a machine without a GPU.
"""

from __future__ import annotations

from typing import Any, Dict

from .errors import HoffError, LibraryNotFound
from .allocator import (empty_cache, install, is_installed, library_path, memory_stats, record_stream,
                        set_memory_fraction)
from .config import OffloadConfig
from .hooks import AccessHooks, storage_ptr
from .session import OffloadSession, implicit_session, mark, mark_op, region_depth, skip_offload, step
from . import _record
from . import recompute, swap
from .recompute import apply_recompute, checkpoint_policy, load_advice
from . import _lib, _native


def _check_bundle() -> None:
    """A pip-built package checks at import that its bundled libhoff loads (its runtime libraries are
    installed), and warns with the missing library's name and package when not (python/README.md)."""
    import os
    import warnings
    if os.environ.get("HOFF_LIBRARY") or not _native.library():
        return
    try:
        _lib.load()
    except LibraryNotFound as e:
        warnings.warn(str(e), RuntimeWarning, stacklevel=3)


_check_bundle()


def native_build() -> Dict[str, Any]:
    """The pip build bundled in this package (backends, features, runtime libraries: hoff/_native/build.json);
    {} for a package installed with HOFF_PIP_NATIVE=0."""
    return _native.info()


def recording() -> bool:
    """True when this process runs under hoff-record (CPU recording mode)."""
    return _record.active()


def record_stats() -> Dict[str, Any]:
    """The recorder's state under hoff-record ({} otherwise)."""
    return _record.stats()


__version__: str = "0.1.0"

__all__ = [
    "AccessHooks", "HoffError", "LibraryNotFound", "OffloadConfig", "OffloadSession", "apply_recompute",
    "checkpoint_policy", "empty_cache", "implicit_session", "install", "is_installed", "library_path",
    "load_advice", "mark", "mark_op", "memory_stats", "native_build", "record_stats", "record_stream", "recompute",
    "recording", "region_depth", "set_memory_fraction", "skip_offload", "step", "storage_ptr", "swap",
]
