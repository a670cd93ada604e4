# recompute.py — hoff-plan advise's recompute advice applied to a PyTorch model: load_advice (the --json object,
# validated), apply_recompute (each advised forward op found by one forward of the model under a TorchDispatchMode,
# with the module calls it runs in and the ops that save what it makes, and the smallest module call holding them
# wrapped in non-reentrant checkpointing) and checkpoint_policy (a selective activation checkpointing policy for
# PyTorch 2.4+).
# Threading: load_advice is pure; apply_recompute and RecomputeHandle.remove() run on the thread that owns the model,
# not while it trains; the wrapped forwards count their calls without a lock (a model's forward runs on one thread);
# a RecomputePolicy is called by checkpointing's dispatch modes on the forward thread and autograd's backward thread,
# never both at once (backward starts after forward), and counts under a lock.
"""Recompute instead of offload: ``hoff-plan advise`` applied to a model.

``hoff-plan advise TRACE --budget B --json`` reads a recorded step and says
which forward ops to recompute in backward rather than offload (issue 29).
Its ``recompute`` list names each op as the trace's op marks do: the op
(``aten.gelu.default``), its ``occurrence`` (the K-th op of that name in the
step's forward) and its ``interval`` (its index among the forward's ops).
The forward is every op of the step before the first backward op, the
loss's included, and what the step ran before the model (the batch's
``randint``, a ``loss.item()`` of the step before) too.  Two ways to apply it:

* :func:`apply_recompute` (PyTorch 1.13 and 2.x): runs one forward of the
  model on example inputs under a ``TorchDispatchMode``, forward hooks on
  every submodule and saved-tensor hooks as in a hoff step, so that it sees
  the ops the Python marks (``HOFF_SHIM=0``) record, in their order, the
  module calls each runs in, and which ops save what each makes for
  backward.  It finds each advised (op, occurrence) (``aten::gelu``, a
  native RecordFunction name, matches every overload of ``gelu``) and wraps
  the forward of one module in
  ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`` for the
  advised calls: by default (scope ``"savers"``) the innermost module call
  holding the op and every op that saves its outputs (a Llama MLP for its
  SiLU, whose output the MLP's multiply saves), else (``"leaf"``) the leaf
  module running it.  What the wrapped call saved is dropped after its
  forward and the call runs again at the first backward use of it (hoff's
  model of a recomputed op, at module granularity).  An op that no such
  module holds (the loss's, in the model's own forward; an op whose outputs
  nothing saves) is listed in :attr:`RecomputeHandle.unmapped`, never
  dropped silently.  The handle's ``offsets`` (interval minus the op's index
  in the mapping forward) are one number when the two forwards agree: how
  many ops the step ran before the model's forward.  Occurrences count those
  ops too, so an op of the same name run before the model (a data
  transform's) shifts them.  An advised op's ``ops`` (the producers of the
  forward temporaries its recompute reads, which it runs too) must lie in
  the wrapped call as well.
* :func:`checkpoint_policy` (PyTorch 2.4+): a policy for selective
  activation checkpointing (``create_selective_checkpoint_contexts``):
  ``PREFER_RECOMPUTE`` for the advised (op, occurrence), ``MUST_SAVE`` for
  the others (in-place, random and allocating ops are recomputed too, see
  there).  Op-exact, but SAC recomputes a checkpointed region at its first
  backward use and keeps every ``MUST_SAVE`` output, temporaries included,
  until then; checkpoint the whole forward as one region, or the ops outside
  it are not counted.

Checkpointing a module frees only what is saved inside it, which is why the
default scope climbs to the savers: a ``Linear``'s output saved by the next
module stays however the ``Linear`` is checkpointed.  The climb also
recomputes more than the advice asked (the whole call) and, in backward,
holds the call's remade activations next to the gradients: on the
transformers GPT-2 the advised step's activation peak fell from 64 to 32 MiB
and its working-set floor rose from 16 to 22 MiB (tests/sim_recompute.sh).
The native marks (the shim's, the default) record top-level ops
(``aten.linear.default``), which a dispatch mode never sees: record the
trace with ``HOFF_SHIM=0`` for advice this module can map, or the composite
ops are listed unmapped.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import threading
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from .errors import HoffError

__all__ = ["AdvisedOp", "Advice", "RecomputeHandle", "RecomputePolicy", "WrappedModule", "Unmapped",
           "apply_recompute", "checkpoint_policy", "load_advice", "op_key"]

CHOICES = ("combined", "offload_only", "full_checkpoint")
_MISSING = object()
# "aten.gelu.default", "aten.gelu" (a packet), "aten::gelu", "aten::add.Tensor"; a namespace and a name.
_DOTTED = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?$")
_COLONS = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?$")

OpKey = Tuple[str, str, Optional[str]]


def op_key(name: str) -> OpKey:
    """(namespace, op, overload or None) of an op mark's name: ``aten.gelu.default`` -> ('aten', 'gelu',
    'default'), ``aten::gelu`` and ``aten.gelu`` -> ('aten', 'gelu', None), ``aten::add.Tensor`` -> ('aten', 'add',
    'Tensor').  A key without an overload matches every overload of the op.  HoffError (EINVAL) for other text."""
    if isinstance(name, str):
        m = _COLONS.match(name) or _DOTTED.match(name)
        if m:
            return m.group(1), m.group(2), m.group(3)
    raise HoffError("hoff: recompute advice: op %r is not an op mark's name; expected 'namespace.op.overload' "
                    "(aten.gelu.default, the Python marks) or 'namespace::op' (aten::gelu, the native marks)"
                    % (name,), errno.EINVAL)


def _packet(key: OpKey) -> OpKey:
    return key[0], key[1], None


class AdvisedOp:
    """One forward op the advice recomputes: op (the mark's name), occurrence (its index among the step's forward
    ops of that name), interval (its index among all forward ops), event, cost_ns, bytes; key is op_key(op); chain
    the other forward ops its recompute runs ((op, occurrence, interval): the producers of forward temporaries it
    reads, from the advice's "ops")."""

    __slots__ = ("op", "occurrence", "interval", "event", "cost_ns", "bytes", "key", "chain")

    def __init__(self, op: str, occurrence: int, interval: int, event: int, cost_ns: int, nbytes: int,
                 chain: Sequence[Tuple[str, int, int]] = ()) -> None:
        self.op = op
        self.occurrence = occurrence
        self.interval = interval
        self.event = event
        self.cost_ns = cost_ns
        self.bytes = nbytes
        self.key = op_key(op)
        self.chain = list(chain)

    def __repr__(self) -> str:
        return "AdvisedOp(%s #%d, interval %d, %d bytes)" % (self.op, self.occurrence, self.interval, self.bytes)


class Advice:
    """hoff-plan advise --json, validated: chosen (combined, offload_only or full_checkpoint), budget_bytes,
    ops (the recompute list, in forward order) and raw (the whole object as read)."""

    def __init__(self, raw: Dict[str, Any], ops: List[AdvisedOp]) -> None:
        self.raw = raw
        self.ops = ops
        self.chosen: str = raw["chosen"]
        self.budget_bytes: int = raw["budget_bytes"]
        self.trace: Optional[str] = raw.get("trace")

    def __repr__(self) -> str:
        return "Advice(%s, budget %d bytes, %d ops to recompute)" % (self.chosen, self.budget_bytes, len(self.ops))


def _bad(what: str) -> HoffError:
    return HoffError("hoff: recompute advice: %s (expected hoff-plan advise TRACE --budget B --json's object)"
                     % what, errno.EINVAL)


def _count(d: Mapping[str, Any], field: str, where: str) -> int:
    v = d.get(field, _MISSING)
    if v is _MISSING:
        raise _bad("%s has no %r" % (where, field))
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _bad("%s: %r is %r; expected an integer >= 0" % (where, field, v))
    return v


def _chain(e: Mapping[str, Any], where: str) -> List[Tuple[str, int, int]]:
    """The (op, occurrence, interval) of each entry of an advised op's "ops" (optional: the ops its recompute
    runs)."""
    ops = e.get("ops", [])
    if not isinstance(ops, list):
        raise _bad("%s: 'ops' is a %s; expected a list of {op, occurrence, interval}" % (where, type(ops).__name__))
    out = []
    for k, o in enumerate(ops):
        w = "%s: ops[%d]" % (where, k)
        if not isinstance(o, dict) or not isinstance(o.get("op"), str):
            raise _bad("%s is %r; expected an object {op, occurrence, interval} with op a string" % (w, o))
        try:
            op_key(o["op"])
        except HoffError as err:
            raise _bad("%s: %s" % (w, str(err).split(": ", 2)[-1]))
        out.append((o["op"], _count(o, "occurrence", w), _count(o, "interval", w)))
    return out


def load_advice(source: Union[str, "os.PathLike[str]", Mapping[str, Any], Advice]) -> Advice:
    """The advice of ``hoff-plan advise ... --json``: a path to its output, or the object already parsed (a dict);
    an Advice is returned as is.  HoffError (EINVAL) naming the field that is wrong and what is accepted."""
    if isinstance(source, Advice):
        return source
    if isinstance(source, Mapping):
        raw: Any = dict(source)
        where = "the object given"
    else:
        path = os.fspath(source)
        try:
            with open(path) as f:
                text = f.read()
        except OSError as e:
            raise HoffError("hoff: recompute advice: cannot read %s: %s" % (path, e.strerror), e.errno or 0)
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise _bad("%s is not JSON (%s)" % (path, e))
        where = path
    if not isinstance(raw, dict):
        raise _bad("%s holds a %s, not an object" % (where, type(raw).__name__))
    chosen = raw.get("chosen", _MISSING)
    if chosen is _MISSING:
        raise _bad("%s has no 'chosen'" % where)
    if chosen not in CHOICES:
        raise _bad("%s: 'chosen' is %r; expected one of %s" % (where, chosen, ", ".join(CHOICES)))
    _count(raw, "budget_bytes", where)
    rec = raw.get("recompute", _MISSING)
    if rec is _MISSING:
        raise _bad("%s has no 'recompute' list" % where)
    if not isinstance(rec, list):
        raise _bad("%s: 'recompute' is a %s; expected a list of ops" % (where, type(rec).__name__))
    ops: List[AdvisedOp] = []
    seen: Dict[Tuple[OpKey, int], int] = {}
    for i, e in enumerate(rec):
        w = "%s: recompute[%d]" % (where, i)
        if not isinstance(e, dict):
            raise _bad("%s is a %s; expected an object with op, occurrence, interval, event, cost_ns, bytes"
                       % (w, type(e).__name__))
        op = e.get("op", _MISSING)
        if op is _MISSING:
            raise _bad("%s has no 'op'" % w)
        if not isinstance(op, str):
            raise _bad("%s: 'op' is %r; expected an op mark's name such as aten.gelu.default" % (w, op))
        try:
            key = op_key(op)
        except HoffError as err:
            raise _bad("%s: %s" % (w, str(err).split(": ", 2)[-1]))
        a = AdvisedOp(op, _count(e, "occurrence", w), _count(e, "interval", w), _count(e, "event", w),
                      _count(e, "cost_ns", w), _count(e, "bytes", w), _chain(e, w))
        a.chain = [c for c in a.chain if (op_key(c[0]), c[1]) != (key, a.occurrence)]  # the op itself leads "ops"
        if ops and a.interval <= ops[-1].interval:
            raise _bad("%s: interval %d is not after the previous op's %d; the list is in forward order"
                       % (w, a.interval, ops[-1].interval))
        k = (key, a.occurrence)
        if k in seen:
            raise _bad("%s: %s occurrence %d is already recompute[%d]" % (w, op, a.occurrence, seen[k]))
        seen[k] = i
        ops.append(a)
    if chosen == "offload_only" and ops:
        raise _bad("%s: 'chosen' is offload_only but 'recompute' lists %d ops" % (where, len(ops)))
    return Advice(raw, ops)


# --- the mapping forward ------------------------------------------------------------------------------------------

class _Op:
    """An op of the mapping forward: its name, the module calls it ran in (path: (module name, call index) from the
    model's own call inward; the last is the innermost), the storages it made (new ones, not its arguments') and the
    ops that saved one of them for backward (savers, indices into the forward's ops)."""

    __slots__ = ("name", "key", "path", "made", "savers")

    def __init__(self, name: str, path: Tuple[Tuple[str, int], ...]) -> None:
        self.name = name
        self.key = op_key(name)
        self.path = path
        self.made: List[int] = []
        self.savers: Set[int] = set()

    @property
    def module(self) -> Optional[str]:
        return self.path[-1][0] if self.path else None

    @property
    def call(self) -> int:
        return self.path[-1][1] if self.path else 0


def _storages(x: Any) -> Set[int]:
    from .opmarks import _tensors, storage_of
    out = set()
    for t in _tensors(x, []):
        p, _ = storage_of(t)
        if p is not None:
            out.add(p)
    return out


def _trace_forward(model: Any, args: Sequence[Any], kwargs: Mapping[str, Any], grad: bool) -> List[_Op]:
    """The ops of one forward of model (as the Python marks see them in a step: aten ops below autograd, the loss's
    included, none of the saved-tensor hooks'), each with the module calls it ran in, the storages it made and the
    ops that saved them (autograd saves an op's inputs before the op runs and its outputs after it: a tensor packed
    before the next call of the Python API is the last op's, one packed after it the next op's when it is one of its
    arguments).  The RNG states and the
    model's buffers (BatchNorm's running statistics) are put back."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from .opmarks import _op_name, _rewrap_numbers, _rewrap_result

    stack: List[Tuple[str, int]] = []
    calls: Dict[str, int] = {}
    ops: List[_Op] = []
    maker: Dict[int, int] = {}      # storage -> the op that made it (the latest: an address freed and reused)
    pending: List[int] = []         # storages packed since the last op
    quiet = [0]

    def settle(inputs: Optional[Set[int]]) -> None:
        """Give the storages packed since the last op to their savers: the op about to run when an argument of
        its (index len(ops)), else the last op; None: a Python-level call begins, so the last op's outputs."""
        for p in pending:
            saver = len(ops) if (inputs is not None and p in inputs) or not ops else len(ops) - 1
            made_by = maker.get(p)
            if made_by is not None:
                ops[made_by].savers.add(saver)
        del pending[:]

    class Calls(TorchFunctionMode):
        """A call of the Python API begins: what was packed until now is the last op's outputs (autograd saves
        them as the op returns); its inputs' saves come after this."""

        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if not quiet[0]:
                settle(None)
            return func(*args, **(kwargs or {}))

    class OpOrder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            if quiet[0]:
                return _rewrap_result(func, func(*_rewrap_numbers(func, args), **kwargs))
            inputs = _storages((args, kwargs))
            settle(inputs)
            out = _rewrap_result(func, func(*_rewrap_numbers(func, args), **kwargs))
            op = _Op(_op_name(func), tuple(stack))
            for p in _storages(out) - inputs:
                op.made.append(p)
                maker[p] = len(ops)
            ops.append(op)
            return out

    # hoff's saved-tensor hooks, as in a recorded step: autograd runs no detach of its own for a saved output, and
    # the hooks' detach is no op of the model's (hoff.hooks.AccessHooks.pack).
    def pack(t: Any) -> Any:
        quiet[0] += 1
        try:
            pending.extend(_storages(t))
            return t.detach()
        finally:
            quiet[0] -= 1

    handles = []
    for mname, m in model.named_modules():
        def pre(_m: Any, _a: Any, mname: str = mname) -> None:
            c = calls.get(mname, 0)
            calls[mname] = c + 1
            stack.append((mname, c))

        def post(_m: Any, _a: Any, _o: Any, mname: str = mname) -> None:
            if stack and stack[-1][0] == mname:
                stack.pop()
        handles.append(m.register_forward_pre_hook(pre))
        handles.append(m.register_forward_hook(post))
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    devices: List[int] = []
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        devices = list(range(torch.cuda.device_count()))
    try:
        with torch.random.fork_rng(devices=devices), torch.set_grad_enabled(grad):
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), OpOrder(), Calls():
                out = model(*args, **kwargs)
                settle(None)
            del out
    finally:
        for h in handles:
            h.remove()
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)
    return ops


class WrappedModule:
    """A module apply_recompute wrapped: name (its qualified name in the model, '' for the model itself),
    type, calls (the indices of its calls in a forward that are checkpointed) and ops (the advised ops it runs)."""

    __slots__ = ("name", "type", "calls", "ops")

    def __init__(self, name: str, type_: str, calls: Set[int], ops: List[AdvisedOp]) -> None:
        self.name = name
        self.type = type_
        self.calls = calls
        self.ops = ops

    def __repr__(self) -> str:
        return "WrappedModule(%r %s, calls %s, %d ops)" % (self.name, self.type, sorted(self.calls), len(self.ops))


class Unmapped:
    """An advised op apply_recompute left as it was: op, and reason (no module call holds it and what saves its
    outputs, nothing saves them, a non-leaf module runs it under scope "leaf", or the forward never ran it)."""

    __slots__ = ("op", "reason")

    def __init__(self, op: AdvisedOp, reason: str) -> None:
        self.op = op
        self.reason = reason

    def __repr__(self) -> str:
        return "Unmapped(%s #%d: %s)" % (self.op.op, self.op.occurrence, self.reason)


class RecomputeHandle:
    """What apply_recompute did: wrapped (WrappedModule per module checkpointed), unmapped (Unmapped per advised
    op left as it was), offsets (interval minus the op's index in this forward, per mapped op: one value when the
    trace's forward and this one agree; it is the number of forward ops the step ran before the model's forward) and
    forward_ops (how many forward ops the mapping forward ran).  remove() puts every forward back."""

    def __init__(self, model: Any, wrapped: List[WrappedModule], unmapped: List[Unmapped], offsets: List[int],
                 forward_ops: int) -> None:
        self.model = model
        self.wrapped = wrapped
        self.unmapped = unmapped
        self.offsets = offsets
        self.forward_ops = forward_ops
        self._restore: List[Tuple[Any, Any, Callable[..., Any]]] = []
        self._hooks: List[Any] = []
        self._calls: Dict[int, int] = {}

    def summary(self) -> str:
        """One line per wrapped module and per unmapped op."""
        lines = ["hoff recompute: %d modules checkpointed, %d advised ops unmapped (of a %d-op forward)"
                 % (len(self.wrapped), len(self.unmapped), self.forward_ops)]
        for w in self.wrapped:
            lines.append("  checkpointed %s (%s), calls %s: %s" % (
                w.name or "<model>", w.type, ",".join(str(c) for c in sorted(w.calls)),
                ", ".join("%s #%d" % (o.op, o.occurrence) for o in w.ops)))
        for u in self.unmapped:
            lines.append("  not applied: %s #%d: %s" % (u.op.op, u.op.occurrence, u.reason))
        return "\n".join(lines)

    def as_dict(self) -> Dict[str, Any]:
        """The summary as JSON-ready data."""
        return {"wrapped": [{"module": w.name, "type": w.type, "calls": sorted(w.calls),
                             "ops": [[o.op, o.occurrence] for o in w.ops]} for w in self.wrapped],
                "unmapped": [{"op": u.op.op, "occurrence": u.op.occurrence, "reason": u.reason}
                             for u in self.unmapped],
                "offsets": sorted(set(self.offsets)), "forward_ops": self.forward_ops}

    def remove(self) -> None:
        """Give every wrapped module its forward back, as it was (its own attribute, or none); idempotent.
        HoffError (EBUSY) when something replaced a wrapped forward since: remove that first."""
        for module, old, wrapper in self._restore:
            if module.__dict__.get("forward") is not wrapper:
                raise HoffError("hoff: recompute: the forward of %s was replaced after apply_recompute wrapped it; "
                                "undo that first" % type(module).__name__, errno.EBUSY)
        for module, old, wrapper in reversed(self._restore):
            if old is _MISSING:
                del module.__dict__["forward"]
            else:
                module.__dict__["forward"] = old
        self._restore = []
        for h in self._hooks:
            h.remove()
        self._hooks = []

    def __enter__(self) -> "RecomputeHandle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()

    def __repr__(self) -> str:
        return "RecomputeHandle(%d wrapped, %d unmapped)" % (len(self.wrapped), len(self.unmapped))


def _find(ops: List[_Op], key: OpKey, occurrence: int) -> Tuple[Optional[int], int]:
    """(index in ops of the occurrence-th op of key, or None; how many ops of that key the forward ran)."""
    exact = key[2] is not None
    n = 0
    for i, o in enumerate(ops):
        if (o.key if exact else _packet(o.key)) == key:
            if n == occurrence:
                return i, n + 1
            n += 1
    return None, n


AdviceSource = Union[str, "os.PathLike[str]", Mapping[str, Any], Advice]


SCOPES = ("savers", "leaf")


def _place(ops: List[_Op], i: int, chain: List[int], scope: str, mods: Mapping[str, Any],
           leaf: Set[str]) -> Tuple[Optional[Tuple[Tuple[str, int], ...]], str]:
    """The module call (its path) to checkpoint for forward op i, whose recompute also runs the ops chain, or None
    and why not."""
    o = ops[i]
    if not o.path:
        return None, "it ran outside every module's forward"
    if scope == "leaf":
        if o.module not in leaf:
            return None, ("it runs in the forward of %s (%s), which has submodules: only leaf modules are checkpointed"
                          % (o.module or "<model>", type(mods[o.module]).__name__))
        return o.path, ""
    savers = set(o.savers)
    for j in chain:
        savers |= ops[j].savers
    if not savers:
        return None, "nothing in this forward saves what it makes for backward: recomputing it frees nothing"
    path = o.path
    for j in sorted(savers | set(chain)):  # the deepest call holding the ops it runs and every op saving theirs
        path = path[:_common(path, ops[j].path)]
    if len(path) <= 1:
        far = min(savers | set(chain), key=lambda j: (_common(ops[j].path, o.path), -abs(j - i)))
        return None, ("what it makes is saved by %s in %s: only the model's whole forward holds both, and "
                      "checkpointing that recomputes it all" % (ops[far].name, ops[far].module or "<model>"))
    return path, ""


def _common(p: Tuple[Tuple[str, int], ...], q: Tuple[Tuple[str, int], ...]) -> int:
    k = 0
    while k < len(p) and k < len(q) and p[k] == q[k]:
        k += 1
    return k


def apply_recompute(model: Any, advice: AdviceSource, *example_args: Any, grad: bool = True,
                    scope: str = "savers", **example_kwargs: Any) -> RecomputeHandle:
    """Checkpoint the modules of model whose recompute makes again what the advised ops made.

    One forward of model(*example_args, **example_kwargs) finds each advised op (by name and occurrence among the
    forward's ops, as the Python marks record them) and the module calls it runs in.  scope says which module call
    gets its forward wrapped in non-reentrant checkpointing:

    * "savers" (the default): the innermost module call that holds the op and every op that saves what it made
      for backward (the SiLU's output saved by the MLP's multiply: the MLP).  Checkpointing a module frees only
      what is saved inside it, so this is the smallest call whose recompute frees the op's outputs as hoff-plan
      advise models it.  An op whose outputs only the model's whole forward holds with their savers (the loss's,
      run in the model's own forward) is reported, not wrapped.
    * "leaf": the leaf module (no children) running the op, as named; what it makes stays saved by any op
      outside it (a Linear's output saved by the next module), so the wrap may free little.

    A wrapped module is checkpointed for the calls (the n-th call in a forward, counted from the model's own
    forward) that ran an advised op; a module inside another wrapped call is left alone (the outer recompute
    covers it).  The mapping forward runs with gradients on (grad=False: under no_grad, for scope "leaf" only, as
    nothing is saved then) and in the model's current mode (train()); it puts back the RNG states and the buffers,
    so training is as without it (forward hooks do run in it).  The example inputs must make the forward the
    recorded step ran (same shapes and branches).

    Returns a RecomputeHandle (its summary() says what was wrapped and which ops were not applied); remove() undoes
    it.  A wrapped forward is the module's instance attribute, so its hooks keep running around it.  HoffError
    (EINVAL) for an unknown scope, or scope "savers" with grad=False."""
    import torch
    from torch.utils.checkpoint import checkpoint

    if scope not in SCOPES:
        raise HoffError("hoff: apply_recompute: scope %r; expected one of %s" % (scope, ", ".join(SCOPES)),
                        errno.EINVAL)
    if scope == "savers" and not grad:
        raise HoffError("hoff: apply_recompute: scope 'savers' needs the mapping forward with gradients "
                        "(grad=True): under no_grad nothing is saved, so no op's savers are known", errno.EINVAL)
    adv = load_advice(advice)
    ops = _trace_forward(model, example_args, example_kwargs, grad)
    mods = dict(model.named_modules())
    leaf = {n for n, m in mods.items() if next(iter(m.children()), None) is None}
    chosen: Dict[Tuple[Tuple[str, int], ...], List[AdvisedOp]] = {}
    unmapped: List[Unmapped] = []
    offsets: List[int] = []
    for a in adv.ops:
        i, n = _find(ops, a.key, a.occurrence)
        if i is None:
            unmapped.append(Unmapped(a, "this forward ran %d %s ops (occurrence %d is past them)"
                                     % (n, a.op, a.occurrence) if n else "this forward never ran %s" % a.op))
            continue
        offsets.append(a.interval - i)
        chain = []
        for cop, cocc, _ in a.chain:
            j, _n = _find(ops, op_key(cop), cocc)
            if j is None:
                break
            chain.append(j)
        if len(chain) < len(a.chain):
            unmapped.append(Unmapped(a, "its recompute runs %s #%d, which this forward did not run"
                                     % (a.chain[len(chain)][0], a.chain[len(chain)][1])))
            continue
        path, why = _place(ops, i, chain, scope, mods, leaf)
        if path is None:
            unmapped.append(Unmapped(a, why))
        else:
            chosen.setdefault(path, []).append(a)
    # A call inside another chosen call is covered by it: its ops go to the outer one.
    for path in sorted(chosen, key=len):
        outer = next((p for p in chosen if len(p) < len(path) and path[:len(p)] == p), None)
        if outer is not None:
            chosen[outer].extend(chosen.pop(path))
    plan: Dict[str, Tuple[Set[int], List[AdvisedOp]]] = {}
    for path, aops in chosen.items():
        calls, got = plan.setdefault(path[-1][0], (set(), []))
        calls.add(path[-1][1])
        got.extend(aops)
    if len(set(offsets)) > 1:
        warnings.warn("hoff: recompute advice: the advised ops' intervals and this forward's op order disagree "
                      "(offsets %s): the trace was recorded with the native op marks, which see top-level ops only "
                      "(record it with HOFF_SHIM=0), or the example inputs do not make the recorded step's forward"
                      % sorted(set(offsets)), RuntimeWarning, stacklevel=2)
    wrapped = [WrappedModule(n, type(mods[n]).__name__, calls, sorted(aops, key=lambda o: o.interval))
               for n, (calls, aops) in plan.items()]
    handle = RecomputeHandle(model, wrapped, unmapped, offsets, len(ops))
    counts = handle._calls

    def reset(_m: Any, _a: Any) -> None:
        counts.clear()
    handle._hooks.append(model.register_forward_pre_hook(reset))
    for w in wrapped:
        module = mods[w.name]
        old = module.__dict__.get("forward", _MISSING)
        inner = module.forward
        key = id(module)
        calls = frozenset(w.calls)

        def forward(*args: Any, _inner: Callable[..., Any] = inner, _key: int = key,
                    _calls: frozenset = calls, **kwargs: Any) -> Any:
            c = counts.get(_key, 0)
            counts[_key] = c + 1
            if c in _calls and torch.is_grad_enabled():
                return checkpoint(_inner, *args, use_reentrant=False, **kwargs)
            return _inner(*args, **kwargs)
        functools.update_wrapper(forward, inner)
        module.__dict__["forward"] = forward
        handle._restore.append((module, old, forward))
    return handle


# --- selective activation checkpointing (PyTorch 2.4+) ----------------------------------------------------------

class _Region:
    """The decisions of one checkpointed region's forward, per op name in order, and how far its recompute got."""

    def __init__(self) -> None:
        self.decided: Dict[str, List[bool]] = {}
        self.replayed: Dict[str, int] = {}


def _mutates(op: Any) -> bool:
    """Does op write one of its arguments (an in-place or out= op)?"""
    try:
        return any(a.alias_info is not None and a.alias_info.is_write for a in op._schema.arguments)
    except AttributeError:  # an op without a schema
        return False


def _random(op: Any) -> bool:
    """Does op draw from the RNG (bernoulli_, native_dropout, randn)?"""
    import torch
    tag = getattr(getattr(torch, "Tag", None), "nondeterministic_seeded", None)
    return tag is not None and tag in getattr(op, "tags", ())


# Ops that only allocate (what an in-place op then writes, as dropout's bernoulli_ writes an empty_like on CPU).
ALLOCATIONS = frozenset(("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
                         "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full"))


class RecomputePolicy:
    """A selective activation checkpointing policy from recompute advice (checkpoint_policy).  Called as
    policy(ctx, op, *args, **kwargs) by create_selective_checkpoint_contexts; context_fn() makes the contexts of one
    region (checkpoint(..., context_fn=policy.context_fn)), which is right with several regions per step; reset()
    starts a step's counting again (it restarts by itself at the first forward op after a recompute)."""

    def __init__(self, advice: Advice) -> None:
        self.advice = advice
        self._keys = {(a.key, a.occurrence) for a in advice.ops}
        self._keys |= {(op_key(c[0]), c[1]) for a in advice.ops for c in a.chain}  # what their recomputes run
        self._lock = threading.Lock()
        self._counts: Dict[OpKey, int] = {}
        self._region = _Region()
        self._recomputed = False
        self.recomputed_ops = 0  # advised ops answered PREFER_RECOMPUTE in forwards so far
        self.forced: Dict[str, int] = {}  # other ops answered PREFER_RECOMPUTE (in-place, random, allocations)

    def reset(self) -> None:
        """Count the next forward's ops from 0."""
        with self._lock:
            self._counts = {}
            self._region = _Region()
            self._recomputed = False

    def _advised(self, name: str) -> bool:
        try:
            key = op_key(name)
        except HoffError:  # not an op mark's name (no such op is advised)
            return False
        hit = False
        for k in (key, _packet(key)) if key[2] is not None else (key,):
            n = self._counts.get(k, 0)
            self._counts[k] = n + 1
            hit = hit or (k, n) in self._keys
        return hit

    def decide(self, ctx: Any, op: Any, region: Optional[_Region] = None) -> Any:
        """PREFER_RECOMPUTE or MUST_SAVE for op in region (the policy's default region when None)."""
        from torch.utils.checkpoint import CheckpointPolicy
        name = str(op)
        with self._lock:
            if ctx.is_recompute:
                self._recomputed = True
                r = region or self._region
                i = r.replayed.get(name, 0)
                r.replayed[name] = i + 1
                got = r.decided.get(name, [])
                recompute = got[i] if i < len(got) else False
            else:
                if self._recomputed:  # a forward after a backward: the next step
                    self._counts = {}
                    self._region = _Region()
                    self._recomputed = False
                r = region or self._region
                recompute = self._advised(name)
                self.recomputed_ops += recompute
                if not recompute and (_mutates(op) or _random(op) or op_key(name)[1] in ALLOCATIONS):
                    recompute = True
                    self.forced[name] = self.forced.get(name, 0) + 1
                r.decided.setdefault(name, []).append(recompute)
        return CheckpointPolicy.PREFER_RECOMPUTE if recompute else CheckpointPolicy.MUST_SAVE

    def __call__(self, ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
        return self.decide(ctx, op)

    def context_fn(self) -> Tuple[Any, Any]:
        """create_selective_checkpoint_contexts for one region, its decisions kept apart from other regions'."""
        from torch.utils.checkpoint import create_selective_checkpoint_contexts
        region = _Region()

        def policy(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
            return self.decide(ctx, op, region)
        return create_selective_checkpoint_contexts(policy)


def checkpoint_policy(advice: AdviceSource) -> RecomputePolicy:
    """A policy for PyTorch 2.4+'s selective activation checkpointing that recomputes exactly the advised ops
    (PREFER_RECOMPUTE for each advised op and occurrence and the ops of its chain, counted over the forward ops the
    policy sees; MUST_SAVE for the others), with the same answer for each op when the region is recomputed:

        policy = hoff.recompute.checkpoint_policy("advice.json")
        out = torch.utils.checkpoint.checkpoint(model, x, use_reentrant=False, context_fn=policy.context_fn)

    The occurrences are the whole forward's: checkpoint the whole forward as one region.  SAC keeps every
    MUST_SAVE output (temporaries included) until the region's backward and recomputes at the region's first
    backward use.  Three kinds of op are recomputed though not advised (forced counts them), or the recompute
    would not make the forward's values: ops that write an argument (add_, relu_, bernoulli_: run again on the
    recomputed input; SAC refuses loudly, "Tensor cached during selective activation checkpoint has been
    mutated", when the input they write was saved instead), ops that draw from the RNG (the checkpoint restores
    the RNG state, so every one of them must run again in order) and ops that only allocate (empty_like, what
    dropout's bernoulli_ writes on CPU).  Passing the policy itself to create_selective_checkpoint_contexts works
    for one region per step; context_fn keeps each region's answers apart.
    HoffError (ENOTSUP) on PyTorch before 2.4; apply_recompute works on 1.13 and later."""
    adv = load_advice(advice)
    import torch
    import torch.utils.checkpoint as ckpt
    if not hasattr(ckpt, "create_selective_checkpoint_contexts") or not hasattr(ckpt, "CheckpointPolicy"):
        raise HoffError("hoff: checkpoint_policy needs PyTorch 2.4 or later (selective activation checkpointing, "
                        "torch.utils.checkpoint.create_selective_checkpoint_contexts); this is %s. "
                        "hoff.recompute.apply_recompute applies the advice on PyTorch 1.13 and later"
                        % torch.__version__, errno.ENOTSUP)
    return RecomputePolicy(adv)
