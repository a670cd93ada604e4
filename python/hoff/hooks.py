# hooks.py — exact access marks from torch.autograd.graph.saved_tensors_hooks: pack is a saved block's last
# forward use, unpack its first backward use; the block is the tensor's storage (its base address).
# Threading: pack runs on the forward thread, unpack on autograd's backward thread(s); the counters are
# updated under a lock, the marks themselves go to targets that lock on the C side.
"""Access marks for saved activations.

hoff tracks allocations, and PyTorch allocates storages: every view,
reshape, transpose or exact duplicate of a tensor shares its storage, so
they are all one hoff block, the one that starts at the storage's data
pointer (``untyped_storage().data_ptr()``; ``storage().data_ptr()`` before
PyTorch 2.0).  A tensor's own ``data_ptr()`` is not used: a view's points
into the middle of the block.

Both marks are *reads*: at pack the forward pass has already written the
block (its allocation counts as the write), and the unpacked tensor is read
by backward.  Marking pack as a write would let a planner think the contents
before it dead.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterable, List, Literal, Optional, Set, Tuple

from . import compiled
from .opmarks import quiet, storage_of

if TYPE_CHECKING:
    import torch


def storage_ptr(t: torch.Tensor) -> Optional[int]:
    """The base address of t's storage (its hoff block), or None (no storage)."""
    return storage_of(t)[0]


# --- other saved_tensors_hooks (save_on_cpu, checkpointing's) next to hoff's -----------------------------------
# PyTorch runs only the innermost saved_tensors_hooks of a thread: save_on_cpu inside a hoff step turns hoff's
# pack/unpack marks off for the tensors saved there, and a hoff step inside save_on_cpu turns save_on_cpu off.
# Neither is an error (the op marks still mark every aten use of a block), but it is said once each.

_hook_tls = threading.local()
_warned: Set[str] = set()
_patched = False


def _depths():
    d = getattr(_hook_tls, "d", None)
    if d is None:
        d = _hook_tls.d = {"hoff": 0, "other": 0}
    return d


def _warn_once(key, msg):
    if key not in _warned:
        _warned.add(key)
        import warnings
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _patch_hooks():
    """Count the saved_tensors_hooks that are not hoff's (per thread), to say when they shadow each other."""
    global _patched
    if _patched:
        return
    import torch
    cls = torch.autograd.graph.saved_tensors_hooks
    enter, exit_ = cls.__enter__, cls.__exit__

    def __enter__(self, *a):
        if not getattr(self, "_hoff_own", False):
            d = _depths()
            if d["hoff"] > 0:
                _warn_once("inner", "hoff: %s entered inside a hoff step: PyTorch runs only the innermost "
                           "saved_tensors_hooks, so hoff's pack/unpack access marks are off for the tensors saved "
                           "inside it (the op marks still mark their uses; both work)" % type(self).__name__)
            d["other"] += 1
        return enter(self, *a)

    def __exit__(self, *a):
        if not getattr(self, "_hoff_own", False):
            _depths()["other"] -= 1
        return exit_(self, *a)

    cls.__enter__, cls.__exit__ = __enter__, __exit__
    _patched = True


class AccessHooks:
    """A context manager that installs pack/unpack hooks marking accesses on
    every target.  With log=True, .log collects (kind, block) per mark, kind
    "pack" or "unpack", block what the first target reports (the recorder's
    serial, or the address for the allocator) or None if it is no block."""

    def __init__(self, targets: Iterable[Any], log: bool = False) -> None:
        self.targets = list(targets)
        self.log: Optional[List[Tuple[str, Optional[int]]]] = [] if log else None
        self.packed = 0
        self.packed_bytes = 0  # the bytes of the storages packed (a storage saved twice counts twice)
        self.unpacked = 0
        self.unmatched = 0  # saved tensors that are no block of the first target
        self.mode_missing = 0  # unpacks on a thread the op-marks mode did not reach
        self.op_mode: Any = None    # the session's OpMarks mode, if any
        self._lock = threading.Lock()
        self._cm: Any = None

    def _mark(self, kind, ptr):
        block = None
        for i, tg in enumerate(self.targets):
            b = tg.access(ptr, 0) if ptr else None
            if i == 0:
                block = b
        with self._lock:
            if kind == "pack":
                self.packed += 1
            else:
                self.unpacked += 1
            if block is None:
                self.unmatched += 1
            if self.log is not None:
                self.log.append((kind, block))
        return block

    def pack(self, t: torch.Tensor) -> Tuple[torch.Tensor, Optional[int], int]:
        ptr, nbytes = storage_of(t)
        self._mark("pack", ptr)
        with self._lock:
            self.packed_bytes += nbytes
        compiled.saved(nbytes)
        # A detached alias: it keeps the storage alive as autograd would, but
        # holds no grad_fn, so a saved output makes no reference cycle.  Its
        # aten detach is the package's, not the model's: no op mark.
        with quiet():
            return (t.detach(), ptr, t._version)

    def unpack(self, packed: Tuple[torch.Tensor, Optional[int], int]) -> torch.Tensor:
        t, ptr, version = packed
        if t._version != version:
            # Autograd checks a saved tensor's version only when no saved_tensors_hooks are set; with ours set it
            # would hand back the modified bytes and give wrong gradients silently.  Raise what autograd raises.
            raise RuntimeError("one of the variables needed for gradient computation has been modified by an "
                               "inplace operation: [%s %s] is at version %d; expected version %d instead "
                               "(seen by hoff's saved-tensor hooks)"
                               % (t.type(), list(t.shape), t._version, version))
        self._mark("unpack", ptr)
        if self.op_mode is not None:
            import torch
            if torch._C._len_torch_dispatch_stack() == 0:
                # Backward runs on a thread without the mode: its ops get no
                # boundary, so windows opened there last until the free (safe).
                with self._lock:
                    self.mode_missing += 1
        return t

    def __enter__(self) -> AccessHooks:
        import torch
        _patch_hooks()
        d = _depths()
        if d["other"] > 0:
            _warn_once("outer", "hoff: a hoff step began inside other saved_tensors_hooks (save_on_cpu?): PyTorch "
                       "runs only the innermost, so those are off for the tensors saved in the step, which hoff "
                       "offloads instead")
        self._cm = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)
        self._cm._hoff_own = True
        self._cm.__enter__()
        d["hoff"] += 1
        return self

    def __exit__(self, et: Optional[type], ev: Optional[BaseException], tb: Any) -> Literal[False]:
        cm, self._cm = self._cm, None
        if cm is not None:
            _depths()["hoff"] -= 1
            cm.__exit__(et, ev, tb)
        return False
