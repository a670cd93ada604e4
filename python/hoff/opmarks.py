# opmarks.py — op boundaries from PyTorch's dispatcher: for every aten op, the accesses of its tensors' blocks and
# then an op boundary once the op's kernels are enqueued; natively (the shim's RecordFunction callback,
# _shim/hoff_marks.cpp) where the shim builds, else a Python TorchDispatchMode with the same rule.
# Threading: the native callback runs on every thread; the Python mode reaches every thread autograd runs backward
# on through PyTorch's ThreadLocalState (the dispatch-mode stack is part of it, 1.13 and 2.x); counters are atomics
# (native) or updated under a lock (Python); the targets lock on the C side.
"""Op boundaries at every aten op.

A use window (hoff(7)) opened by an access mark may close only once every
kernel that may use the block under that access has been enqueued.  Inside
an ``OffloadSession`` step the package pushes :class:`OpMarks`, a
``TorchDispatchMode``.  Its ``__torch_dispatch__`` sits below autograd, so it
runs for each aten op after autograd has packed that op's saved inputs
(forward) or after a backward node has unpacked what it saved:

1. it marks a read of the block of every tensor argument (a block is a
   tensor's storage, see :func:`hoff.storage_ptr`);
2. it calls the op: its kernels are enqueued (on a GPU) or run (on CPU);
3. it marks a write of the block of every output that is a new storage or
   an argument the op's schema says it writes (``add_``, ``out=``); views
   of an argument are covered by the read;
4. it marks an op boundary named after the op (``aten.mm.default``), with
   the op's phase (``hoff_set_phase`` when it changes: forward, backward,
   loss or optimizer, :func:`hoff.grads.op_phase`), so that a working-set
   floor says which op and phase set it.

So each kernel's reads lie inside a window that closes only after the
kernel was enqueued, and a block's last access is its last aten use: a
release planned after it can never precede a later kernel of the same
backward formula.

Only storages of at least the targets' smallest offload candidate (hoff's
``managed_min``, ``HOFF_MANAGED_MIN``, 1 MiB by default; hoff-record's
threshold) get access marks; every op gets its boundary.  Aten ops that the
package's own pack/unpack hooks run (a ``detach``) are not marked.

Two implementations of that rule:

* **native** (:class:`NativeMarks`, the default where hoff's shim builds,
  see :mod:`hoff.shim`): a thread-local ``RecordFunction`` callback in C++, about
  0.5-1 µs of CPU per op (``bench/marks.py``).  It marks the ops called through
  the dispatcher from outside any other op: ``aten.linear`` as one op where
  the Python mode, below autograd, sees its ``t`` and ``addmm``; every tensor
  it touches is marked, so its kernels lie inside the windows as before.  It
  reaches autograd's backward threads through PyTorch's ThreadLocalState (as
  a dispatch mode does), marks nothing on intra-op worker threads (they run
  part of an op), skips ops on fake or meta
  tensors (TorchDynamo tracing: no memory, no kernel), and does not stop
  TorchDynamo from running compiled frames (:mod:`hoff.compiled`).
* **Python** (:func:`mode_class`, a ``TorchDispatchMode``): where the shim
  cannot be built (no C++ compiler or no PyTorch headers), with
  ``HOFF_SHIM=0``, for targets the shim does not know (a test's), and for a
  session that logs its accesses (``log_accesses``).  About 20 µs of CPU per
  op (more with access marks), and TorchDynamo runs no compiled frame under a
  dispatch mode.
"""

import threading
from typing import Any, Dict, List

from .grads import op_phase

_tls = threading.local()


def suppressed():
    """True while this thread runs the package's own hooks (their aten ops are not the model's)."""
    return getattr(_tls, "quiet", 0) > 0


_native = {"lib": None, "tried": False, "why": None}


def native_lib():
    """The shim (ctypes.CDLL) whose marks this process uses, or None (the Python mode).  Built or loaded at the
    first step (hoff.shim); under HOFF_SHIM=auto a failure is warned once, under HOFF_SHIM=1 it raises."""
    if _native["tried"]:
        return _native["lib"]
    from . import shim
    m = shim.mode()
    lib, why = None, "HOFF_SHIM=0"
    if m != "off":
        try:
            import torch
            from . import _lib
            try:
                path = _lib.path()
            except Exception:  # no libhoff (hoff-record's recorder only): the marks go to the recorder
                path = None
            lib, why = shim.load(torch, path), None
        except shim.ShimError as e:
            if m == "required":
                raise RuntimeError("hoff: HOFF_SHIM=1 and hoff's PyTorch shim cannot be used for the op marks: %s"
                                   % e) from e
            why = str(e)
            import warnings
            warnings.warn("hoff: the op marks run in Python (a TorchDispatchMode: about 20 us of CPU per aten op or more, "
                          "and torch.compile'd code runs eagerly inside hoff's steps) because hoff's PyTorch shim "
                          "cannot be built: %s" % e, RuntimeWarning, stacklevel=3)
    _native.update(lib=lib, tried=True, why=why)
    return lib


def native_why():
    """Why the marks run in Python (None: native, or not decided yet)."""
    return _native["why"] if _native["lib"] is None else None


_last = [None]


def last_marks():
    """The marks of the last step that ended (NativeMarks or the Python mode), or None."""
    return _last[0]


def set_last(marks):
    _last[0] = marks


def _native_quiet(delta):
    lib = _native["lib"]
    if lib is not None:
        lib.hoff_marks_quiet(delta)


class quiet:
    """Context manager: the aten ops run inside are not the model's; they bypass every
    TorchDispatchMode (torch.utils._mode_utils.no_dispatch, 1.13 and 2.x), so they are not
    marked and cost no Python dispatch.  (On 1.13 a mode would also see a saved
    wrapped number, the 2 of ``x * 2``, as a Python int, which detach refuses.)"""

    __slots__ = ("_guard",)

    def __enter__(self):
        from torch.utils._mode_utils import no_dispatch
        _tls.quiet = getattr(_tls, "quiet", 0) + 1
        _native_quiet(1)
        self._guard = no_dispatch()
        self._guard.__enter__()
        return self

    def __exit__(self, et, ev, tb):
        g, self._guard = self._guard, None
        try:
            g.__exit__(et, ev, tb)
        finally:
            _tls.quiet -= 1
            _native_quiet(-1)
        return False


def storage_of(t):
    """(base address, bytes) of t's storage, or (None, 0) when it has none (hooks.storage_ptr too)."""
    try:
        if hasattr(t, "untyped_storage"):
            s = t.untyped_storage()
        else:  # PyTorch < 2.0: a TypedStorage, whose nbytes() are its untyped bytes
            s = t.storage()
        return (s.data_ptr() or None), s.nbytes()
    except Exception:  # sparse, nested, meta or fake tensors have no plain storage
        return None, 0


def _tensors(x, out):
    """Append every tensor in x (nested lists/tuples/dicts) to out."""
    import torch
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _tensors(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _tensors(y, out)
    return out


def _written_args(func):
    """Indices of func's schema arguments it writes (alias_info.is_write), cached on the op."""
    w = _WRITTEN.get(func)
    if w is None:
        try:
            w = tuple(i for i, a in enumerate(func._schema.arguments)
                      if a.alias_info is not None and a.alias_info.is_write)
            names = tuple(func._schema.arguments[i].name for i in w)
        except Exception:  # an op without a schema: every output counts as written
            w, names = None, None
        w = (w, names)
        _WRITTEN[func] = w
    return w


_WRITTEN: Dict[Any, Any] = {}
_NAMES: Dict[Any, str] = {}
_TENSOR_ARGS: Dict[Any, Any] = {}


def _tensor_args(func):
    """Indices of func's positional arguments whose schema type is Tensor (cached)."""
    idx = _TENSOR_ARGS.get(func)
    if idx is None:
        import torch
        try:
            idx = tuple(i for i, a in enumerate(func._schema.arguments)
                        if isinstance(a.type, torch._C.TensorType) and not a.kwarg_only)
        except Exception:
            idx = ()
        _TENSOR_ARGS[func] = idx
    return idx


def _rewrap_numbers(func, args):
    """PyTorch 1.13 hands a mode a saved wrapped number (the 2 of ``x * 2``, which
    autograd saves as a 0-dim tensor) as a Python number; ops such as the detach
    autograd runs on it at unpack refuse one.  Give such an argument back as a
    0-dim tensor (the dtype a wrapped number has: int64, float64 or complex128)."""
    fix = None
    for i in _tensor_args(func):
        if i < len(args) and isinstance(args[i], (bool, int, float, complex)):
            if fix is None:
                import torch
                fix = list(args)
            fix[i] = torch.tensor(args[i])
    return args if fix is None else tuple(fix)


_RETURNS_TENSOR: Dict[Any, Any] = {}


def _rewrap_result(func, out):
    """The same on the way out: 1.13 turns an op's wrapped-number result (detach of
    one) into a Python number, which the dispatcher then refuses as the Tensor
    the schema returns.  (An op that returns a number, item's, keeps it.)"""
    if isinstance(out, (bool, int, float, complex)):
        import torch
        r = _RETURNS_TENSOR.get(func)
        if r is None:
            try:
                rets = func._schema.returns
                r = len(rets) == 1 and isinstance(rets[0].type, torch._C.TensorType)
            except Exception:
                r = False
            _RETURNS_TENSOR[func] = r
        if r:
            return torch.tensor(out)
    return out


def _op_name(func):
    n = _NAMES.get(func)
    if n is None:
        n = _NAMES[func] = str(func)  # "aten.mm.default" on 1.13 and 2.x
    return n


def _mode_base():
    from torch.utils._python_dispatch import TorchDispatchMode
    return TorchDispatchMode


_cls = None


def mode_class():
    """The OpMarks class (built on first use: importing hoff does not import torch)."""
    global _cls
    if _cls is None:
        base = _mode_base()

        class OpMarks(base):
            """A TorchDispatchMode marking accesses and an op boundary per aten op (see the module)."""

            def __init__(self, targets, min_bytes, log=False):
                super().__init__()
                self.targets = list(targets)
                self.min_bytes = int(min_bytes)
                self.log = [] if log else None
                self.ops = 0          # op boundaries marked
                self.accesses = 0     # access marks made
                self.threads = set()  # idents of the threads it ran on
                self._lock = threading.Lock()
                self._phase = None    # the phase last set on the targets (hoff.grads.op_phase)

            def _access(self, ptr, write):
                first = None
                for i, tg in enumerate(self.targets):
                    b = tg.access(ptr, write)
                    if i == 0:
                        first = b
                return first

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                args = _rewrap_numbers(func, args)
                if suppressed():
                    return _rewrap_result(func, func(*args, **kwargs))
                min_bytes = self.min_bytes
                reads = {}
                for t in _tensors(kwargs, _tensors(args, [])):
                    p, n = storage_of(t)
                    if p is not None and n >= min_bytes and p not in reads:
                        reads[p] = None
                log = self.log
                for p in reads:
                    b = self._access(p, 0)
                    if log is not None:
                        log.append(("read", p, b))
                out = _rewrap_result(func, func(*args, **kwargs))
                # Writes: new storages among the outputs, and the arguments the schema writes.
                writes = []
                widx, wnames = _written_args(func)
                for t in _tensors(out, []):
                    p, n = storage_of(t)
                    if p is None or n < min_bytes:
                        continue
                    if p not in reads or widx is None:
                        writes.append(p)
                if widx:
                    for i, name in zip(widx, wnames):
                        a = args[i] if i < len(args) else kwargs.get(name)
                        for t in _tensors(a, []):
                            p, n = storage_of(t)
                            if p is not None and n >= min_bytes:
                                writes.append(p)
                done = set()
                for p in writes:
                    if p in done:
                        continue
                    done.add(p)
                    b = self._access(p, 1)
                    if log is not None:
                        log.append(("write", p, b))
                name = _op_name(func)
                ph = op_phase(name)
                if ph is not self._phase:  # recorded with the marks that follow (hoff_set_phase)
                    self._phase = ph
                    for tg in self.targets:
                        sp = getattr(tg, "set_phase", None)  # a target without phases (a test's) skips them
                        if sp is not None:
                            sp(ph)
                for tg in self.targets:
                    tg.mark_op(name)
                with self._lock:
                    self.ops += 1
                    self.accesses += len(reads) + len(done)
                    self.threads.add(threading.get_ident())
                    if log is not None:
                        log.append(("op", name, None))
                return out

        _cls = OpMarks
    return _cls


def min_block_bytes(targets):
    """The smallest block any target can have (storages below it need no access mark)."""
    sizes = [t.min_block_bytes() for t in targets]
    return min(sizes) if sizes else 0


class NativeMarks:
    """The shim's marks (_shim/hoff_marks.cpp) for one step: a context manager with the Python mode's counters
    (ops, accesses, threads) and no log."""

    KINDS = {"allocator": 0, "record": 1}

    def __init__(self, lib, targets, min_bytes):
        self.lib = lib
        self.targets = list(targets)
        self.min_bytes = int(min_bytes)
        self.log = None
        self.native = True
        self.ops = self.accesses = self.skipped = self.compiled_ops = self.unwrapped_compiled = 0
        self.threads = ()
        self.handles = []     # hooks hoff.compiled registered on this step's tensors (removed at its end)
        self._on = False

    @classmethod
    def supports(cls, targets):
        return bool(targets) and all(getattr(t, "kind", None) in cls.KINDS for t in targets)

    def __enter__(self):
        import ctypes
        from . import grads
        n = len(self.targets)
        kinds = (ctypes.c_int * n)(*[self.KINDS[t.kind] for t in self.targets])
        ctxs = (ctypes.c_void_p * n)(*[t.ctx if t.kind == "allocator" else None for t in self.targets])
        err = ctypes.create_string_buffer(512)
        words = ",".join(grads.LOSS_WORDS).encode()
        grads.set_phase_listener(self.lib.hoff_marks_phase_state)
        if self.lib.hoff_marks_start(kinds, ctxs, n, self.min_bytes, words, err, len(err)) != 0:
            grads.set_phase_listener(None)
            raise RuntimeError("hoff: the shim's op marks cannot start: %s" % err.value.decode(errors="replace"))
        self._on = True
        global _running
        _running = self
        return self

    def counts(self):
        """[op boundaries, access marks, ops skipped (no memory), threads, aten ops inside compiled regions, runs of
        compiled frames no hoff region covered]."""
        import ctypes
        arr = (ctypes.c_uint64 * 6)()
        self.lib.hoff_marks_counts(arr, 6)
        return [int(x) for x in arr]

    def __exit__(self, et, ev, tb):
        global _running
        if self._on:
            from . import grads
            if _running is self:
                _running = None
            self.lib.hoff_marks_stop()
            grads.set_phase_listener(None)
            self._on = False
            self.ops, self.accesses, self.skipped, nthreads, self.compiled_ops, self.unwrapped_compiled = self.counts()
            self.threads = tuple(range(nthreads))
            if self.unwrapped_compiled:
                _warn_unwrapped(self.unwrapped_compiled)
            handles, self.handles = self.handles, []
            for h in handles:  # a compiled region whose backward did not run (no backward, or it raised)
                h.remove()
        return False


_warned_unwrapped: List[str] = []


def _warn_unwrapped(n):
    """Say once that compiled frames ran in a step that hoff's torch.compile wrapper did not see."""
    if _warned_unwrapped:
        return
    _warned_unwrapped.append(n)
    import warnings
    warnings.warn("hoff: %d runs of TorchDynamo-compiled code in this step were not made through torch.compile after "
                  "hoff was installed (torch._dynamo.optimize, or a model compiled before hoff.install()): hoff sees "
                  "no read of the blocks they were given, so it may move one they use.  Call torch.compile after "
                  "hoff.install() (python -m hoff installs hoff before the script runs)" % n,
                  RuntimeWarning, stacklevel=3)


_running = None  # the NativeMarks of the open step


def running():
    """The NativeMarks of the open step, or None (no step, or the Python mode)."""
    return _running


def make(targets, log=False):
    """The op marks of a step on targets (enter it with ``with``): native where the shim is available and knows
    every target, the Python mode otherwise or when log is asked for."""
    if not log and NativeMarks.supports(targets):
        lib = native_lib()
        if lib is not None:
            return NativeMarks(lib, targets, min_block_bytes(targets))
    return mode_class()(targets, min_block_bytes(targets), log=log)
