# session.py — OffloadSession (one `with` block is one training step: warmup, then plan, then replay),
# skip_offload regions, op marks, and hoff.step() for scripts that mark step boundaries instead.
# Threading: the active session is a contextvars.ContextVar; region stacks are per thread; the implicit session
# of hoff.step() is guarded by _step_lock.
"""Steps, regions and op marks."""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import sys
import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Literal, Optional, TypeVar, overload

from . import _targets, compiled, grads
from .config import OffloadConfig
from .hooks import AccessHooks
from . import opmarks

if TYPE_CHECKING:
    import torch

_F = TypeVar("_F", bound=Callable[..., Any])

_active: contextvars.ContextVar[Optional[OffloadSession]] = contextvars.ContextVar("hoff_active_session", default=None)
_warned_empty = False


def _current_targets():
    s = _active.get()
    if s is not None:
        return s.targets
    return _targets.resolve("auto")


class OffloadSession:
    """One ``with session:`` block is one training step.

    The first step is the warmup: hoff records every allocation, free, access
    and op mark of the step (keeping the budget by evicting online); when the
    block exits, hoff plans the schedule; later blocks replay it.  If the block
    raises, every queued transfer is waited for, the step is abandoned (a
    warmup's recording is dropped, so the next step records again; a replay's
    remaining actions are counted as skipped) and the exception propagates.

    mode: "auto" sends the marks to hoff's allocator when ``hoff.install()``
    made it PyTorch's, and to hoff-record when the process runs under it
    (CPU recording mode); "allocator" always uses the allocator context of the
    device (hoff's simulated device without a GPU), "record" only hoff-record.
    """

    def __init__(self, config: Optional[OffloadConfig] = None, *, mode: str = "auto",
                 device: Optional[int] = None) -> None:
        if config is None:
            config = OffloadConfig()
        if not isinstance(config, OffloadConfig):
            raise TypeError("config: expected an hoff.OffloadConfig, got %r" % (config,))
        if mode not in ("auto", "allocator", "record"):
            raise ValueError("mode: expected 'auto', 'allocator' or 'record', got %r" % (mode,))
        self.config = config
        self.mode = mode
        self.device = device
        self.steps = 0          # steps completed
        self.aborted = 0        # steps abandoned on an exception
        self.phase = "idle"     # "warmup", "replay" or "fallback" while in a step; of the last step after it
        self.hooks: Optional[AccessHooks] = None       # the AccessHooks of the open step (with access_marks)
        self.last_hooks: Optional[AccessHooks] = None  # ...and of the last step, once it is over
        self.ops: Any = None         # the OpMarks mode of the open step (with op_marks)
        self.last_ops: Any = None    # ...and of the last step, once it is over
        self.log_accesses = False
        self._warned_mode = False
        self._targets: Optional[List[Any]] = None
        self._configured = False
        self._token: Any = None
        self._open = False

    @property
    def targets(self) -> List[Any]:
        if self._targets is None:
            self._targets = _targets.resolve(self.mode, self.device)
            if not self._targets:
                global _warned_empty
                if not _warned_empty:
                    _warned_empty = True
                    warnings.warn("hoff: this OffloadSession marks nothing: hoff is not PyTorch's allocator "
                                  "(call hoff.install() before any CUDA tensor, or run the script with "
                                  "'python -m hoff') and the process is not under hoff-record",
                                  RuntimeWarning, stacklevel=3)
        return self._targets

    @property
    def in_step(self) -> bool:
        return self._open

    def _configure(self):
        opts = self.config.options()
        if opts:
            for t in self.targets:
                t.configure(opts)
        self._configured = True

    def _phase(self):
        for t in self.targets:
            p = t.phase()
            if p is not None:
                return p
        return "replay" if self.steps else "warmup"

    def __enter__(self) -> OffloadSession:
        cur = _active.get()
        if cur is not None:
            if cur is _implicit.session and _implicit.source == "auto":
                _implicit.yield_to_explicit()
            else:
                raise RuntimeError("hoff: OffloadSession blocks do not nest (a step is already open%s)"
                                   % (": hoff.step() opened it" if cur is _implicit.session else ""))
        targets = self.targets
        if not self._configured:
            self._configure()
        begun = []
        try:
            for t in targets:
                t.step_begin()
                begun.append(t)
        except BaseException:
            for t in begun:
                with contextlib.suppress(Exception):
                    t.step_abort()
            raise
        self._open = True
        self.phase = self._phase()
        grads.install()  # gradients and the optimizer's step stay out of the budget (hoff.grads)
        grads.set_step_targets(targets, self.config.offload_gradients)
        try:
            if self.config.access_marks and targets:
                self.hooks = AccessHooks(targets, log=self.log_accesses)
                self.hooks.__enter__()
            if self.config.op_marks and targets:
                self.ops = opmarks.make(targets, log=self.log_accesses)
                self.ops.__enter__()
                if self.hooks is not None and not getattr(self.ops, "native", False):
                    self.hooks.op_mode = self.ops  # the Python mode: unpacks check that it reached their thread
        except BaseException:
            self._close_marks(*sys.exc_info())
            grads.set_step_targets(None)
            self._open = False
            for t in targets:
                with contextlib.suppress(Exception):
                    t.step_abort()
            raise
        self._token = _active.set(self)
        return self

    def _close_marks(self, et, ev, tb):
        """Leave the op-marks mode, then the pack/unpack hooks (the reverse of entering)."""
        ops, self.ops = self.ops, None
        if ops is not None:
            ops.__exit__(et, ev, tb)
            self.last_ops = ops
            opmarks.set_last(ops)
        hooks, self.hooks = self.hooks, None
        if hooks is not None:
            hooks.__exit__(et, ev, tb)
            self.last_hooks = hooks
            if ops is not None and et is None and getattr(ops, "native", False):
                compiled.explain(hooks.packed_bytes)  # a compiled region holding most of the step, said once
            if hooks.mode_missing and not self._warned_mode:
                self._warned_mode = True
                warnings.warn("hoff: %d saved tensors were unpacked on a thread the op-marks mode did not "
                              "reach: backward ops there have no op boundaries, so their use windows last "
                              "until the free (correct, but less is offloaded)" % hooks.mode_missing,
                              RuntimeWarning, stacklevel=3)

    def __exit__(self, et: Optional[type], ev: Optional[BaseException], tb: Any) -> Literal[False]:
        if not self._open:
            return False
        try:
            _active.reset(self._token)
        except ValueError:  # left from another context: just clear it
            _active.set(None)
        self._token = None
        self._close_marks(et, ev, tb)
        grads.close_optimizer()  # a step boundary inside an optimizer's step, or one that raised
        grads.set_step_targets(None)
        self._open = False
        if et is None:
            first = None
            for t in self.targets:
                try:
                    t.step_end()
                except _targets.HoffError as e:
                    first = first or e
            self.steps += 1
            if first is not None:
                raise first
        else:
            # Transfers are waited for and the step is dropped; the user's
            # exception is the one that propagates.
            for t in self.targets:
                with contextlib.suppress(Exception):
                    t.step_abort()
            self.aborted += 1
        return False

    def stats(self) -> Dict[str, Any]:
        """hoff's statistics from the session's first target (see hoff.memory_stats)."""
        for t in self.targets:
            return t.stats()
        return {}


# --- regions ------------------------------------------------------------------------------

_regions = threading.local()


def _region_stack():
    st = getattr(_regions, "stack", None)
    if st is None:
        st = _regions.stack = []
    return st


def region_depth() -> int:
    """How many skip_offload regions are open on this thread."""
    return len(_region_stack())


class _SkipOffload(contextlib.ContextDecorator):
    def __init__(self, name=None):
        self.name = name

    def __enter__(self):
        targets = _current_targets()
        opened = []
        try:
            for t in targets:
                t.region_begin()
                opened.append(t)
            if self.name:
                for t in targets:
                    t.mark_op(self.name)
        except BaseException:
            for t in opened:
                with contextlib.suppress(Exception):
                    t.region_end()
            raise
        _region_stack().append(targets)
        return self

    def __exit__(self, et, ev, tb):
        targets = _region_stack().pop()
        first = None
        for t in targets:
            try:
                t.region_end()
            except Exception as e:  # keep closing the others
                first = first or e
        if first is not None and et is None:
            raise first
        return False


@overload
def skip_offload(fn: None = None, *, name: Optional[str] = None) -> _SkipOffload: ...


@overload
def skip_offload(fn: _F, *, name: Optional[str] = None) -> _F: ...


def skip_offload(fn: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None) -> Any:
    """Mark a region whose allocations hoff never offloads (the RFC's opaque
    region: one virtual op).  Use as ``@skip_offload``, ``@skip_offload()``,
    ``@skip_offload(name="attn")`` or ``with skip_offload():``.  Regions nest;
    a decorated function's region is marked as an op named after it."""
    if fn is None:
        return _SkipOffload(name)
    if not callable(fn):
        raise TypeError("skip_offload: expected a function to decorate, got %r (use skip_offload() "
                        "as a context manager)" % (fn,))
    return functools.wraps(fn)(_SkipOffload(name or getattr(fn, "__qualname__", None))(fn))


# --- op marks -----------------------------------------------------------------------------

def mark_op(name: Optional[str] = None) -> None:
    """An op boundary in the current step (recorded in the trace; the planner
    attaches actions to it)."""
    for t in _current_targets():
        t.mark_op(name)


_Boundary = None


def _boundary_fn():
    global _Boundary
    if _Boundary is None:
        import torch

        class _B(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, name):
                ctx.hoff_name = name
                return x.view_as(x)

            @staticmethod
            def backward(ctx, g):
                mark_op(ctx.hoff_name + ".bwd")
                return g, None

        _Boundary = _B
    return _Boundary


def mark(tensor: torch.Tensor, name: str) -> torch.Tensor:
    """An op boundary at tensor in both passes: marks NAME.fwd now, and
    NAME.bwd when backward has computed tensor's gradient.  Returns the
    tensor (a view of it when it requires grad: do not modify it in place)."""
    mark_op(name + ".fwd")
    try:
        import torch
        if torch.is_grad_enabled() and getattr(tensor, "requires_grad", False):
            return _boundary_fn().apply(tensor, name)
    except ImportError:
        pass
    return tensor


# --- hoff.step(): step boundaries instead of blocks -------------------------------------------

class _Implicit:
    """The session hoff.step() and the launcher's step-mark convention drive."""

    def __init__(self):
        self.lock = threading.RLock()
        self.session: Optional[OffloadSession] = None
        self.source: Optional[str] = None      # "user" (hoff.step) or "auto" (the launcher's HOFF_STEP_MARK)
        self.auto_enabled = True
        self.registered = False

    def boundary(self, source):
        with self.lock:
            if source == "auto" and not self.auto_enabled:
                return
            if source == "user":
                if self.session is not None and self.session.in_step and self.source == "auto":
                    self.yield_to_explicit()
                self.auto_enabled = False
            cur = _active.get()
            if cur is not None and cur is not self.session:
                if source == "auto":
                    return  # the script marks its own steps
                raise RuntimeError("hoff.step() inside an OffloadSession block: mark steps one way or the other")
            if self.session is None:
                self.session = OffloadSession()
                if not self.registered:
                    atexit.register(self.close)
                    self.registered = True
            self.source = source
            if self.session.in_step:
                self.session.__exit__(None, None, None)
            self.session.__enter__()

    def yield_to_explicit(self):
        """The script marks steps itself: drop the open automatic step and stop marking."""
        with self.lock:
            self.auto_enabled = False
            if self.session is not None and self.session.in_step:
                self.session.__exit__(RuntimeError, RuntimeError("superseded"), None)
                self.session.aborted -= 1

    def close(self, failed=False):
        """End (or, after a failure, abandon) the open step; at exit."""
        with self.lock:
            s = self.session
            if s is None or not s.in_step:
                return
            if failed:
                s.__exit__(RuntimeError, RuntimeError("the script failed"), None)
            else:
                with contextlib.suppress(Exception):
                    s.__exit__(None, None, None)


_implicit = _Implicit()


def step() -> None:
    """A step boundary: ends the open step (if any) and begins the next.  Call
    it at the top of every training iteration (the first call opens step 0);
    the step open at exit is ended then.  For scripts that do not use
    ``with OffloadSession():`` blocks."""
    _implicit.boundary("user")


def implicit_session() -> Optional[OffloadSession]:
    """The session hoff.step() drives (None before the first call)."""
    return _implicit.session
