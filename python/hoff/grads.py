# grads.py — what is not an activation: parameters' gradients (hoff_keep, whatever made them) and everything an
# optimizer's step allocates (a skip_offload region around every step of every torch.optim optimizer) stay on the
# device and out of hoff's budget; and the phase of each aten op (forward, backward, loss, optimizer) that the
# op marks record, so that a floor says where it comes from.
# Threading: install() and the optimizer hooks run on the training thread; the gradient hooks run on autograd's
# threads.  _lock guards the module's state; the backward depth is process-wide (the thread that called
# backward() waits inside it while autograd's threads run the ops).
"""Gradients and the optimizer's step are not activations.

The budget is about activations.  Since PyTorch 2.0 ``zero_grad()`` sets
gradients to ``None``, so every gradient is allocated again in backward,
inside the step, and the optimizer's step allocates temporaries the size of
the model (multi-tensor kernels on CUDA, per parameter on CPU).  Left as
offload candidates they would set the working-set floor (the optimizer's
last op holds every gradient) and spend link bandwidth on blocks the next op
reads.  :func:`install` keeps them out:

* **gradients**: a hook on every parameter an optimizer is built over marks
  the gradient's storage with ``hoff_keep`` as soon as autograd accumulates
  it (``register_post_accumulate_grad_hook`` on PyTorch 2.1 and later; on
  older ones a gradient hook, which sees the gradient autograd is about to
  accumulate), and every optimizer step marks the ``.grad`` of all its
  parameters again first, which covers the forms no hook sees: DDP's bucket
  views, FSDP2's sharded gradients (a DTensor's local shard), gradients
  assigned by hand.  A kept block is brought back if it was away, pinned and
  taken out of the budget; the recorded step flags it, so later steps
  allocate it from the device pool.
* **the optimizer's step**: a region (``skip_offload``) from its start to its
  end, so its lazily made state and its temporaries go to the device pool.

The option ``offload_gradients`` (``HOFF_OFFLOAD_GRADIENTS=1``,
``OffloadConfig(offload_gradients=True)``) turns both off: gradients and the
optimizer's blocks are candidates again, count against the budget, may set
the floor, and moving them costs link time in backward and in the step.

The phase of each op: ``optimizer`` inside an optimizer's step, ``loss`` for
the loss functions' own ops (the cross-entropy, its log-softmax and their
backward ops), ``backward`` inside ``torch.autograd.backward``/``grad``,
``forward`` otherwise.
"""

import functools
import os
import threading
from typing import Any, Dict, List

_lock = threading.RLock()
_installed = False
_opt_depth = 0          # optimizer steps open (nested: an optimizer calling another)
_opt_regions: List[Any] = []       # the targets a region was opened on for the outermost open step
_backward_depth = 0     # torch.autograd.backward/grad calls open
_step_targets = None    # the targets of the open session step (hooks on autograd's threads use them)
_offload_override = None  # OffloadConfig(offload_gradients=...) of the open session, None: the environment's

# aten op names (without the overload) that belong to the loss: the loss functions and the log-softmax a
# cross-entropy is made of, and their backward ops.
LOSS_WORDS = ("nll_loss", "cross_entropy", "log_softmax", "mse_loss", "l1_loss", "smooth_l1_loss",
              "huber_loss", "binary_cross_entropy", "kl_div", "soft_margin_loss", "multi_margin_loss",
              "multilabel_margin_loss", "ctc_loss", "poisson_nll_loss", "cosine_embedding_loss",
              "margin_ranking_loss", "hinge_embedding_loss", "triplet_margin_loss")
_loss_cache: Dict[str, bool] = {}


def is_loss_op(name):
    """Is the aten op called name ("aten.nll_loss_forward.default") one of a loss function's own?"""
    r = _loss_cache.get(name)
    if r is None:
        base = name.split(".")[1] if name.startswith("aten.") and name.count(".") >= 1 else name
        r = _loss_cache[name] = any(w in base for w in LOSS_WORDS)
    return r


_phase_listener = None  # called with (optimizer depth, backward depth) when either changes (the shim's marks)


def set_phase_listener(fn):
    """fn(optimizer_depth, backward_depth) is told the state op_phase reads, now and at every change (None: stop)."""
    global _phase_listener
    with _lock:
        _phase_listener = fn
        if fn is not None:
            fn(_opt_depth, _backward_depth)


def _tell():
    """The state changed (the lock is held)."""
    fn = _phase_listener
    if fn is not None:
        fn(_opt_depth, _backward_depth)


def op_phase(name):
    """The phase of the aten op called name, now: "optimizer", "loss", "backward" or "forward"."""
    if _opt_depth:
        return "optimizer"
    if is_loss_op(name):
        return "loss"
    return "backward" if _backward_depth else "forward"


def in_optimizer():
    return _opt_depth > 0


# --- targets ------------------------------------------------------------------------------------

def set_step_targets(targets, offload=None):
    """A session step opened on targets (None: closed); offload: its config's offload_gradients."""
    global _step_targets, _offload_override
    with _lock:
        _step_targets = list(targets) if targets is not None else None
        _offload_override = offload


def _targets_now():
    t = _step_targets
    if t is not None:
        return t
    from . import session
    return session._current_targets()


_offload_env = None  # HOFF_OFFLOAD_GRADIENTS as read once (the environment does not change under a running job)


def offload_gradients():
    """Is the option offload_gradients on (the open session's config, else the environment)?"""
    global _offload_env
    if _offload_override is not None:
        return bool(_offload_override)
    if _offload_env is None:
        from . import _lib, _targets
        if _lib.available():  # hoff's own parser, so that the forms hoff accepts are the ones honoured here
            _offload_env = _targets.env_option("offload_gradients") not in (None, "0")
        else:  # CPU recording mode without libhoff (hoff-record only): hoff's boolean words
            v = os.environ.get("HOFF_OFFLOAD_GRADIENTS", "").strip().lower()
            _offload_env = v in ("1", "yes", "true", "on")
    return _offload_env


# --- gradients ------------------------------------------------------------------------------------

def _local(t):
    """The plain tensor holding t's bytes: a DTensor's local shard (FSDP2), else t."""
    loc = getattr(t, "_local_tensor", None)
    return loc if loc is not None else t


def keep_tensor(t, targets=None):
    """hoff_keep the storage of tensor t on every target (a gradient); returns how many kept it.
    With offload_gradients on, hoff_keep does nothing (and counts keep_ignored); the recorder, which has no
    options, is not asked."""
    from .opmarks import storage_of
    if t is None:
        return 0
    ptr, _ = storage_of(_local(t))
    if ptr is None:
        return 0
    n = 0
    for tg in (targets if targets is not None else _targets_now()):
        keep = getattr(tg, "keep", None)
        if keep is None or (tg.kind == "record" and offload_gradients()):
            continue
        if keep(ptr):
            n += 1
    return n


def _after_accumulate(p):
    keep_tensor(p.grad)


def _before_accumulate(grad):
    keep_tensor(grad)  # the gradient autograd accumulates: when p.grad is None it becomes p.grad
    return None


def watch(params):
    """Put the gradient hook on each parameter (once per parameter: it carries the mark _hoff_watched)."""
    with _lock:
        for p in params:
            if getattr(p, "_hoff_watched", False) or not getattr(p, "requires_grad", False):
                continue
            try:
                if hasattr(p, "register_post_accumulate_grad_hook"):  # PyTorch >= 2.1
                    p.register_post_accumulate_grad_hook(_after_accumulate)
                else:
                    p.register_hook(_before_accumulate)
            except RuntimeError:  # not a leaf (a view), or a subclass that refuses hooks: the step covers it
                pass
            try:
                p._hoff_watched = True
            except AttributeError:  # a tensor that takes no attributes: hooked again at the next step, harmless
                pass


def _params(opt):
    for g in getattr(opt, "param_groups", ()):
        for p in g.get("params", ()):
            yield p


# --- the optimizer's step -------------------------------------------------------------------------

def optimizer_begin(opt):
    """An optimizer's step begins: keep every gradient of its parameters; open the region."""
    global _opt_depth, _opt_regions
    with _lock:
        _opt_depth += 1
        _tell()
        if _opt_depth > 1:
            return
        _opt_regions = []
    targets = _targets_now()
    params = list(_params(opt))
    watch(params)
    for p in params:
        g = getattr(p, "grad", None)
        if g is not None:
            keep_tensor(g, targets)
    if offload_gradients():
        return
    opened = []
    for tg in targets:
        try:
            tg.region_begin()
            opened.append(tg)
        except Exception:  # a target that cannot: its allocations stay candidates, as before
            pass
    with _lock:
        _opt_regions = opened


def optimizer_end(opt=None):
    """An optimizer's step ended (or raised): close the region of the outermost step."""
    global _opt_depth, _opt_regions
    with _lock:
        if _opt_depth == 0:
            return
        _opt_depth -= 1
        _tell()
        if _opt_depth:
            return
        regions, _opt_regions = _opt_regions, []
    for tg in regions:
        try:
            tg.region_end()
        except Exception:  # the step was abandoned meanwhile (hoff_step_abort closed it)
            pass


def close_optimizer():
    """End an optimizer step still open (a step boundary inside it, or one that raised on PyTorch 2.x,
    whose post hooks do not run then): step marks call this before hoff_step_end."""
    global _opt_depth
    with _lock:
        if _opt_depth == 0:
            return
        _opt_depth = 1
    optimizer_end()


def _wrap_step(fn):
    if getattr(fn, "_hoff_grads", False):
        return fn

    @functools.wraps(fn)
    def step(self, *args, **kwargs):
        optimizer_begin(self)
        try:
            return fn(self, *args, **kwargs)
        finally:
            optimizer_end(self)

    step._hoff_grads = True
    return step


def _wrap_class(cls):
    """PyTorch 1.x: wrap cls.step where cls defines it (no global optimizer hooks there)."""
    fn = cls.__dict__.get("step")
    if fn is not None and callable(fn):
        setattr(cls, "step", _wrap_step(fn))


def _all_subclasses(cls):
    out, todo = [], [cls]
    while todo:
        c = todo.pop()
        for s in c.__subclasses__():
            if s not in out:
                out.append(s)
                todo.append(s)
    return out


# --- backward ----------------------------------------------------------------------------------------

def _count_backward(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        global _backward_depth
        with _lock:
            _backward_depth += 1
            _tell()
        try:
            return fn(*args, **kwargs)
        finally:
            with _lock:
                _backward_depth -= 1
                _tell()

    call._hoff_grads = True
    return call


def install():
    """Install the hooks (once; a no-op without torch).  Returns True when installed."""
    global _installed
    with _lock:
        if _installed:
            return True
        try:
            import torch
            import torch.autograd
            import torch.optim
            import torch.optim.optimizer as oo
        except ImportError:
            return False
        Optimizer = torch.optim.Optimizer
        orig_init = Optimizer.__init__

        @functools.wraps(orig_init)
        def init(self, *args, **kwargs):
            orig_init(self, *args, **kwargs)
            if not hasattr(oo, "register_optimizer_step_pre_hook"):
                _wrap_class(type(self))  # a class defined after install()
            try:
                watch(list(_params(self)))
            except Exception:  # an optimizer with unusual param_groups: its steps still keep its gradients
                pass

        Optimizer.__init__ = init
        if hasattr(oo, "register_optimizer_step_pre_hook"):  # PyTorch >= 2.0: every optimizer's step
            oo.register_optimizer_step_pre_hook(lambda opt, args, kwargs: optimizer_begin(opt))
            oo.register_optimizer_step_post_hook(lambda opt, args, kwargs: optimizer_end(opt))
        else:
            for cls in _all_subclasses(Optimizer):
                _wrap_class(cls)
        if not getattr(torch.autograd.backward, "_hoff_grads", False):
            torch.autograd.backward = _count_backward(torch.autograd.backward)
        if not getattr(torch.autograd.grad, "_hoff_grads", False):
            torch.autograd.grad = _count_backward(torch.autograd.grad)
        _installed = True
        return True


def installed():
    return _installed
