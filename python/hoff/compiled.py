# compiled.py — torch.compile under hoff: what torch.compile returns is wrapped so that, inside a step with the
# shim's native marks, each call of a compiled region is one op for hoff, forward and backward, with the blocks it
# reads and writes marked at its edges; and a region that holds most of a step's activations is explained once.
# Threading: a region's forward runs on the caller's thread, its backward hooks on autograd's; the figures are
# updated under _lock.
"""Compiled regions.

The code ``torch.compile`` generates (Inductor's kernels) is no aten op:
hoff's marks see only the aten ops a compiled region still calls (an
``mm`` Inductor leaves to its library), not the kernels between them.  So
hoff treats each call of what ``torch.compile`` returned as one op:

* **forward**: a read of the block of every tensor argument, then the call
  with no op boundary inside (the shim's ``hoff_marks_opaque``: the aten ops
  inside keep their access marks), then a write of every output that is a
  new block and the boundary ``compiled:NAME.fwd``.  What the region saves
  for backward is marked by hoff's pack hooks, inside the region.
* **backward**: from the first gradient of one of its outputs (a hook on the
  outputs) to the last gradient of its inputs (a hook on the inputs), or,
  when no input needs a gradient (a whole model fed with data), until every
  autograd node the call made has run (hooks on those nodes), no boundary;
  then ``compiled:NAME.bwd``.  A region whose backward does not finish in
  its step ends with the step.

So every window opened in or at the edge of a region lasts until its end,
and the region's kernels run inside it; between regions (between the blocks
of a model compiled per block, as torchtitan does) hoff moves the saved
activations of one region until the backward region that reads them.  Inside
one region nothing moves: a model compiled whole is one region, and hoff
says so once, with the bytes it saves for backward (:func:`explain`).

This needs the native marks (:mod:`hoff.opmarks`): with the Python mode a
TorchDynamo frame does not run compiled at all inside hoff's steps.
"""

import functools
import threading
from typing import Any, Dict, Set

from . import opmarks

_lock = threading.Lock()
# name -> {"forward_calls", "backward_calls", "saved_bytes" (its last forward's), "aten_ops" (the aten ops its
# forward calls ran: Inductor's library calls such as mm; an eager region would run every op of its code),
# "compiled_calls" (forward calls whose outputs autograd attributes to AOTAutograd's CompiledFunction: PyTorch's own
# word that compiled code ran, not hoff's)}
_regions: Dict[str, Dict[str, Any]] = {}
_open = threading.local()  # the region whose forward runs on this thread (its saved bytes are counted)
_explained: Set[str] = set()
EXPLAIN_SHARE = 2.0 / 3.0  # a region saving more of the step's saved bytes than this is explained


def figures():
    """{name: {"forward_calls", "backward_calls", "saved_bytes", "aten_ops", "compiled_calls"}} of every compiled
    region called in a step."""
    with _lock:
        return {k: dict(v) for k, v in _regions.items()}


def _entry(name):
    e = _regions.get(name)
    if e is None:
        e = _regions[name] = {"forward_calls": 0, "backward_calls": 0, "saved_bytes": 0, "aten_ops": 0,
                                 "compiled_calls": 0}
    return e


def saved(nbytes):
    """hoff's pack hook saved nbytes for backward (counted for the region open on this thread, if any)."""
    if getattr(_open, "name", None) is not None:
        _open.saved += nbytes


def _is_compiling(torch):
    f = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if f is None:
        f = getattr(getattr(torch, "_dynamo", None), "is_compiling", None)
    return bool(f()) if f is not None else False


def _stream(t):
    if t.is_cuda:
        import torch
        return torch.cuda.current_stream(t.device).cuda_stream or None
    return None


def _mark(lib, tensors, write, skip=()):
    """Mark an access of the block of each tensor (once per block, none in skip); returns the blocks marked."""
    done = set()
    for t in tensors:
        p, n = opmarks.storage_of(t)
        if p is None or p in done or p in skip:
            continue
        done.add(p)
        lib.hoff_marks_access(p, n, 1 if write else 0, _stream(t))
    return done


class _Backward:
    """The backward of one region call: opened by the first output gradient, closed by the last input one."""

    def __init__(self, lib, name, n_inputs):
        self.lib, self.name, self.left = lib, name, n_inputs
        self.open = False

    def begin(self, grad):
        if not self.open:
            self.open = True
            self.lib.hoff_marks_opaque(1)
            with _lock:
                _entry(self.name)["backward_calls"] += 1
        _mark(self.lib, [grad], False)

    def end(self, grad):
        if grad is not None:
            _mark(self.lib, [grad], True)
        self.left -= 1
        if self.left == 0 and self.open:
            self.open = False
            self.lib.hoff_marks_opaque(-1)
            self.lib.hoff_marks_boundary(("compiled:%s.bwd" % self.name).encode())


def _ran_compiled(outs):
    """Does autograd attribute one of outs to AOTAutograd's CompiledFunction (through at most two view nodes)?"""
    for t in outs:
        todo = [(getattr(t, "grad_fn", None), 0)]
        while todo:
            node, depth = todo.pop()
            if node is None:
                continue
            if "CompiledFunction" in type(node).__name__:
                return True
            if depth < 2:
                todo.extend((n, depth + 1) for n, _ in getattr(node, "next_functions", ()))
    return False


def _nodes_made(outs):
    """The autograd nodes reachable from outs, but the parameters' AccumulateGrad: when no input of the region
    needs a gradient, every one of them was made by the region's call."""
    seen, todo = {}, [t.grad_fn for t in outs]
    while todo:
        n = todo.pop()
        if n is None or id(n) in seen or type(n).__name__ == "AccumulateGrad":
            continue
        seen[id(n)] = n
        todo.extend(m for m, _ in getattr(n, "next_functions", ()))
    return list(seen.values())


def _call(marks, fn, name, args, kwargs):
    import torch
    lib = marks.lib
    ins = opmarks._tensors(kwargs, opmarks._tensors(args, []))
    read = _mark(lib, ins, False)
    outer = getattr(_open, "name", None), getattr(_open, "saved", 0)
    _open.name, _open.saved = name, 0
    ops_before = marks.counts()[4]
    lib.hoff_marks_opaque(1)
    try:
        out = fn(*args, **kwargs)
    finally:
        lib.hoff_marks_opaque(-1)
        saved_bytes = _open.saved
        _open.name, _open.saved = outer
    outs = opmarks._tensors(out, [])
    _mark(lib, outs, True, skip=read)
    lib.hoff_marks_boundary(("compiled:%s.fwd" % name).encode())
    ops = marks.counts()[4] - ops_before
    with _lock:
        e = _entry(name)
        e["forward_calls"] += 1
        e["aten_ops"] += ops
        e["compiled_calls"] += 1 if _ran_compiled(outs) else 0
        e["saved_bytes"] = saved_bytes
    if torch.is_grad_enabled():
        grad_outs = [t for t in outs if t.requires_grad and t.grad_fn is not None]
        grad_ins = [t for t in ins if t.requires_grad]
        if grad_outs:
            bw = _Backward(lib, name, 0)
            for t in grad_outs:
                marks.handles.append(t.register_hook(bw.begin))
            if grad_ins:  # the region's backward ends when the gradients of its inputs are there
                bw.left = len(grad_ins)
                for t in grad_ins:
                    marks.handles.append(t.register_hook(bw.end))
            else:  # ...or, with no input needing one, when every autograd node it made has run
                nodes = _nodes_made(grad_outs)
                bw.left = len(nodes)
                for n in nodes:
                    marks.handles.append(n.register_hook(lambda gi, go, bw=bw: bw.end(None)))
    return out


def region(fn, name):
    """fn (what torch.compile made) as a hoff region named name."""
    if getattr(fn, "_hoff_region", None) is not None:
        return fn

    @functools.wraps(fn)
    def call(*args, **kwargs):
        marks = opmarks.running()
        if marks is None:
            return fn(*args, **kwargs)
        import torch
        if _is_compiling(torch):  # traced into by an outer compile: the outer region is the op
            return fn(*args, **kwargs)
        return _call(marks, fn, name, args, kwargs)

    call._hoff_region = name
    return call


def _name_of(obj):
    mod = getattr(obj, "_orig_mod", None)
    if mod is not None:
        return type(mod).__name__
    owner = getattr(obj, "__self__", None)  # nn.Module.compile(): torch.compile(self._call_impl)
    if owner is not None and hasattr(owner, "forward"):
        return type(owner).__name__
    return getattr(obj, "__name__", None) or type(obj).__name__


def wrap_result(torch, made, model):
    """What torch.compile(model) made, with its calls as hoff regions (an OptimizedModule keeps its type)."""
    name = _name_of(model)
    om = getattr(getattr(torch, "_dynamo", None), "eval_frame", None)
    om = getattr(om, "OptimizedModule", None)
    if om is not None and isinstance(made, om):
        fwd = made.__dict__.get("forward")
        if fwd is not None:
            made.forward = region(fwd, name)
        return made
    if callable(made):
        return region(made, name)
    return made


def wrap_compile(torch, compile_fn):
    """torch.compile with its results wrapped (the decorator form, torch.compile(mode=...)(fn), too)."""
    if getattr(compile_fn, "_hoff_regions", False):
        return compile_fn

    @functools.wraps(compile_fn)
    def compile(model=None, *args, **kwargs):
        if model is None:
            def deco(m):
                return wrap_result(torch, compile_fn(m, *args, **kwargs), m)
            return deco
        return wrap_result(torch, compile_fn(model, *args, **kwargs), model)

    compile._hoff_regions = True
    compile.__hoff_wrapped__ = compile_fn
    return compile


def install(torch):
    """Wrap torch.compile (PyTorch 2.x; nn.Module.compile calls it) once."""
    fn = getattr(torch, "compile", None)
    if fn is not None and not getattr(fn, "_hoff_regions", False):
        torch.compile = wrap_compile(torch, fn)


def explain(step_saved_bytes):
    """Say once per region that hoff sees a region saving more than EXPLAIN_SHARE of the step's saved bytes
    (step_saved_bytes, hoff's pack marks) as one op, with those bytes; returns the lines said."""
    import sys
    lines = []
    if step_saved_bytes <= 0:
        return lines
    for name, e in figures().items():
        b = e["saved_bytes"]
        if name in _explained or b <= EXPLAIN_SHARE * step_saved_bytes:
            continue
        _explained.add(name)
        line = ("hoff: the compiled region %s saves %.1f MiB for backward (%.0f%% of the step's saved activations) "
                "and is one op to hoff: nothing inside it moves, and those bytes can move only between its forward "
                "and its backward.  Compile per block instead (torch.compile on each transformer block, as "
                "torchtitan does) to let hoff move them during forward and backward."
                % (name, b / 2**20, 100.0 * b / step_saved_bytes))
        sys.stderr.write(line + "\n")
        lines.append(line)
    return lines
