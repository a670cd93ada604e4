# swap.py — the seeds' manual swap (HyperParallel's SwapManager) on hoff's blocks: named groups of the storages
# saved for backward, offloaded and loaded by hand or by layer-to-layer module hooks (hoff_group(3) underneath); a
# group that keeps storages it cannot move for a reason the caller can fix (allocated outside a step) says so once
# per use (KeptWarning).
# Threading: a manager's groups are guarded by its lock; pack runs on the forward thread, unpack on autograd's
# backward thread(s); the C calls lock on the C side.
"""Manual swap: ``hoff.swap.SwapManager``.

The names and the behaviour follow HyperParallel's ``SwapManager`` so that
its users switch with few changes::

    from hoff.swap import SwapManager
    mgr = SwapManager()
    for i in range(len(model.layers) - 1):
        mgr.set_forward_prefetch_layer(model.layers[i], model.layers[i + 1])

or by hand::

    with mgr.group("layer3"):          # collects what layer 3 saves for backward
        y = layer3(x)
    mgr.launch_offload("layer3")       # when layer 4's forward starts
    mgr.wait_offload("layer3")
    ...
    mgr.launch_load("layer3")          # when layer 4's backward starts
    mgr.wait_load("layer3")            # when layer 3's backward starts; empties the group

The unit of copy is the **storage**, which is one hoff block: exact
duplicates, views, reshapes, transposes and narrows of one storage are one
member, copied once.  Nothing is copied into a staging buffer and no tensor
is re-pointed (``set_``): a managed block keeps its address while it is
away, so after the load every tensor still has its own shape, stride, offset
and dtype over the same storage, and every alias still aliases.  The seed's
``group_swap`` packing becomes co-location: blocks that lie next to each
other in one mapping move with one call (``group_swap=False``: one call per
block).

A storage that is not a hoff offload block (a parameter, a small or CPU
tensor, one allocated in a ``skip_offload`` region or outside a training
step) stays where it is and is counted as ``kept`` (``kept_storages`` and
``kept_bytes`` in ``stats``); a backward use of a block still away pages it
in (``demand_loads``): a missing load costs time, never bytes.

hoff makes a storage an offload block only when it is allocated inside a
step (``hoff.OffloadSession``, ``hoff.step()``, ``python -m hoff``'s
optimizer-step convention), outside ``skip_offload`` regions, and of at
least ``managed_min`` bytes; its address cannot change afterwards, so a
storage allocated outside a step can never join a group.  A group that keeps
such a storage, or that has nothing to move while it keeps a storage of at
least ``managed_min`` bytes that is no hoff block of its device (a CPU
tensor, memory of another allocator), says so once per use (from its
``collecting`` state to its ``wait_load`` or ``release_group_storage``) at
the end of ``group(name)``: a ``hoff.swap.KeptWarning`` (a
``RuntimeWarning``) naming the group, how many storages and bytes it keeps
on the device, and why, cause by cause.  Parameters, small tensors and
``skip_offload`` regions' storages are never offload candidates: they are
named in a warning but make none; storages kept on purpose by
``protect_alias_tensors`` are never warned about (``kept_protected`` counts
their saved tensors).

One manager per device (``SwapManager(device=n)``; the default is the
current CUDA device, or 0).  Without a GPU hoff's context runs on its
simulated device, and tensors built over its blocks (tests do) swap as on a
GPU.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import errno
import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Dict, Iterator, Optional

from . import _lib, _targets
from .errors import HoffError
from .opmarks import quiet, storage_of

if TYPE_CHECKING:
    import torch

HOFF_EBUDGET = 10001
HOFF_EHOSTCAP = 10002
GROUP_ONE_BY_ONE = 1     # enum hoff_group_flags
WAIT_STREAM = 0          # enum hoff_group_wait_flags
RES_DEVICE = 0           # enum hoff_residency

# A group's life: collecting -> offloading -> offloaded -> loading -> collecting (wait_load empties it).
COLLECTING, OFFLOADING, OFFLOADED, LOADING = "collecting", "offloading", "offloaded", "loading"

# Why a storage saved inside group(name) was kept on the device: hoff_group_add refused it, and the cause, in the
# order the warning lists them.  Only OUTSIDE makes a group warn when it moves other storages (see _warn_kept).
OUTSIDE, SMALL, PARAMETER, REGION, FOREIGN, OTHER_GROUP, REFUSED = (
    "outside", "small", "parameter", "region", "foreign", "other_group", "refused")
_WHY = {
    OUTSIDE: "allocated outside a training step; hoff offloads only storages allocated inside a step "
             "(hoff.OffloadSession, hoff.step(), python -m hoff's optimizer-step convention, "
             "hoff_step_begin..hoff_step_end) and on the step's stream: allocate them inside one",
    SMALL: "smaller than managed_min (%(min)d bytes, HOFF_MANAGED_MIN), so no offload candidates",
    PARAMETER: "parameters (nn.Parameter, leaves that require grad, or views of them): model state, "
               "allocated outside the step",
    REGION: "allocated inside a skip_offload region: never offloaded, as asked",
    FOREIGN: "not hoff blocks of device %(device)d (CPU tensors, another device's, or memory allocated before "
             "hoff became PyTorch's allocator: hoff.install(), python -m hoff)",
    OTHER_GROUP: "members of another group; a storage moves with one group (%(detail)s)",
    REFUSED: "refused by hoff_group_add (%(detail)s)",
}


class KeptWarning(RuntimeWarning):
    """A swap group keeps on the device storages that were saved inside group(name) and cannot move
    (hoff.swap's module documentation says when it is given).  Filter it to silence it:
    ``warnings.filterwarnings("ignore", category=hoff.swap.KeptWarning)``."""


class _GroupInfo(ctypes.Structure):
    """struct hoff_group_info (include/hoff.h)."""
    _fields_ = [("version", ctypes.c_uint32), ("size", ctypes.c_uint32)] + [
        (n, ctypes.c_uint64) for n in (
            "blocks", "bytes", "on_device", "on_host", "in_flight", "launched", "adds", "duplicates",
            "evicted_blocks", "evicted_bytes", "prefetched_blocks", "prefetched_bytes", "calls", "step")]


class _Group:
    """One named group: the C group and what Python counts about it."""

    def __init__(self, name, handle):
        self.name = name
        self.handle = handle
        self.state = COLLECTING
        self.protected = set()   # storages kept on the device (protect_alias_tensors)
        self.is_last_group = False
        self.saved = 0           # saved tensors packed inside group(name)
        self.kept = 0            # ...that are no offload block of this device (or protected)
        self.kept_protected = 0  # ...of those, the ones whose storage was protected (protect_alias_tensors)
        self.kept_storages = 0   # distinct storages kept (protected ones aside), each once per use of the group
        self.kept_bytes = 0      # ...their bytes (the storages' nbytes)
        self.demand_loads = 0    # backward uses of a block that was still away
        self.new_use()

    def new_use(self):
        """The group collects again (created, or emptied by wait_load / release_group_storage): what it keeps
        is counted and warned about afresh."""
        self.use_kept = {}       # storage address -> (nbytes, cause, hoff_group_add's message) in this use
        self.warned = False      # the KeptWarning of this use was given


def _is_parameter(t):
    """Is t a parameter (an nn.Parameter, or a leaf that requires grad), or a view of one (what Linear saves
    is its weight's transpose)?"""
    import torch
    b = t
    while b._base is not None:
        b = b._base
    return isinstance(b, torch.nn.Parameter) or (b.is_leaf and b.requires_grad)


def _storages(n):
    return "%d storage%s" % (n, "" if n == 1 else "s")


def _bytes(n):
    if n < 1 << 20:
        return "%d bytes, %.1f KiB" % (n, n / 1024.0)
    return "%d bytes, %.1f MiB" % (n, n / float(1 << 20))


def _tensors(x, out):
    import torch
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple, set)):
        for y in x:
            _tensors(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _tensors(y, out)
    return out


class SwapManager:
    """Named swap groups of one device's hoff context (a singleton per device, like the seed's)."""

    _instances: Dict[int, SwapManager] = {}
    _cls_lock = threading.Lock()

    def __new__(cls, device: Optional[int] = None, group_swap: bool = True) -> SwapManager:
        key = _targets.default_device() if device is None else int(device)
        with cls._cls_lock:
            inst = cls._instances.get(key)
            if inst is None:
                inst = super().__new__(cls)
                inst._init(key, group_swap)
                cls._instances[key] = inst
        return inst

    def __init__(self, device: Optional[int] = None, group_swap: bool = True) -> None:
        pass  # set up once, in __new__

    def _init(self, device, group_swap):
        self.device = device
        self.group_swap = bool(group_swap)
        self._groups = {}
        self._lock = threading.RLock()
        self._current = contextvars.ContextVar("hoff_swap_group", default="")
        self._pairs = set()
        self._layers = weakref.WeakKeyDictionary()  # module -> its group name
        self._layer_count = 0
        self._ctx = None
        self._min = None  # managed_min, read once (_managed_min)

    # --- plumbing --------------------------------------------------------------------------------------------

    @property
    def ctx(self) -> int:
        if self._ctx is None:
            c = _lib.load().hoff_torch_context(self.device)
            if not c:
                raise HoffError("hoff.swap: cannot create the context of device %d: %s"
                                % (self.device, _lib.last_error()))
            self._ctx = c
        return self._ctx

    def _stream(self):
        return _targets._current_stream(self.device)

    def _check(self, rc, what, name):
        if rc < 0:
            raise HoffError("hoff.swap: %s of group '%s': %s" % (what, name, _lib.last_error()), -rc)
        return rc

    def _get(self, name, what):
        g = self._groups.get(name)
        if g is None:
            known = ", ".join("'%s'" % n for n in sorted(self._groups)) or "none"
            raise HoffError("hoff.swap: %s: no group named '%s' (groups of device %d: %s); a group exists once "
                            "group('%s') was entered or ensure_group('%s') called"
                            % (what, name, self.device, known, name, name), errno.ENOENT)
        return g

    def ensure_group(self, name: str) -> None:
        """Create the group name if it does not exist yet; returns nothing (the seed's)."""
        self._ensure(name)

    def _ensure(self, name):
        if not isinstance(name, str) or not name:
            raise ValueError("hoff.swap: a group name is a non-empty str, got %r" % (name,))
        with self._lock:
            g = self._groups.get(name)
            if g is None:
                h = ctypes.c_void_p()
                flags = 0 if self.group_swap else GROUP_ONE_BY_ONE
                rc = _lib.load().hoff_group_create(self.ctx, name.encode(), flags, ctypes.byref(h))
                if rc < 0:
                    raise ValueError("hoff.swap: cannot create group '%s': %s" % (name, _lib.last_error()))
                g = self._groups[name] = _Group(name, h.value)
            return g

    def _info(self, g):
        info = _GroupInfo()
        self._check(_lib.load().hoff_group_info(g.handle, ctypes.byref(info)), "info", g.name)
        return info

    # --- collecting ------------------------------------------------------------------------------------------

    def _pack(self, g, t):
        lib = _lib.load()
        ptr, nbytes = storage_of(t)
        with quiet():  # a detached alias of the same storage: no grad_fn, no reference cycle
            d = t.detach()
        v = t._version
        with self._lock:
            g.saved += 1
            if ptr is None or ptr in g.protected:
                g.kept += 1
                g.kept_protected += ptr is not None
                return (d, None, g, v)
            if g.state != COLLECTING:
                raise HoffError("hoff.swap: group '%s' is %s: it collects saved tensors only before "
                                "launch_offload (and again after wait_load)" % (g.name, g.state), errno.EBUSY)
            rc = lib.hoff_group_add(g.handle, ptr)
            if rc == -errno.ESTALE:
                raise HoffError("hoff.swap: group '%s' is used across two steps: %s; call wait_load, "
                                "release_group_storage or abort_group when its step is done"
                                % (g.name, _lib.last_error()), errno.ESTALE)
            if rc < 0:  # not an offload block of this device, or another group's: it stays where it is
                g.kept += 1
                if ptr not in g.use_kept:
                    msg = _lib.last_error()  # before any other hoff call
                    g.use_kept[ptr] = (nbytes, self._why_kept(t, nbytes, rc, msg), msg)
                    g.kept_storages += 1
                    g.kept_bytes += nbytes
                return (d, None, g, v)
        lib.hoff_access(self.ctx, ptr, 0, self._stream())  # the pack is a use of the block
        return (d, ptr, g, v)

    def _why_kept(self, t, nbytes, rc, msg):
        """Why hoff_group_add refused t's storage (rc, and its message msg): one of the causes of _WHY.
        A device-pool block was allocated outside a step, below managed_min, or (inside a step) on another
        stream than the step's; the C call does not say which, the size and the tensor do."""
        if rc == -errno.EINVAL:
            return FOREIGN
        if rc == -errno.EBUSY:
            return OTHER_GROUP
        if rc != -errno.EPERM:
            return REFUSED
        if "region" in msg:
            return REGION
        if _is_parameter(t):
            return PARAMETER
        if nbytes < self._managed_min():
            return SMALL
        return OUTSIDE

    def _managed_min(self):
        if self._min is None:
            self._min = _targets._env_managed_min()
        return self._min

    def _warn_kept(self, g):
        """At the end of group(name): warn once per use of the group when it keeps a storage allocated outside
        a step (it would have moved had it been made inside one), or has nothing to move while it keeps a
        storage of at least managed_min bytes that is no hoff block of this device, or one hoff_group_add
        refused for another reason (the group is silently useless).  Parameters, small storages, skip_offload
        regions' and other groups' members are never offload candidates of this group by design: they are
        named when there is a warning, and make none.  Protected storages (the caller's own request) are not
        counted here at all."""
        with self._lock:
            if g.warned or not g.use_kept:
                return
            kept = list(g.use_kept.values())
            members = self._info(g).blocks
            if not any(c == OUTSIDE for _, c, _ in kept) and (members or not any(
                    c == REFUSED or (c == FOREIGN and n >= self._managed_min()) for n, c, _ in kept)):
                return
            g.warned = True
            msg = self._kept_message(g, members)
        # the frames above: group()'s generator, contextlib's __exit__, then the caller's with statement
        warnings.warn(msg, KeptWarning, stacklevel=4)

    def _kept_message(self, g, members):
        by = {}
        for nbytes, cause, detail in g.use_kept.values():
            n, b, d = by.get(cause, (0, 0, detail))
            by[cause] = (n + 1, b + nbytes, d)
        total = sum(b for _, b, _ in by.values())
        parts = []
        for cause in (OUTSIDE, SMALL, PARAMETER, REGION, FOREIGN, OTHER_GROUP, REFUSED):
            if cause in by:
                n, b, detail = by[cause]
                why = _WHY[cause] % {"min": self._managed_min(), "device": self.device, "detail": detail}
                parts.append("%s (%s): %s." % (_storages(n), _bytes(b), why))
        return ("hoff.swap: group '%s' keeps %s (%s) on device %d that it cannot offload, %s. %s Said once per "
                "use of the group; stats('%s') counts them in kept_storages and kept_bytes."
                % (g.name, _storages(len(g.use_kept)), _bytes(total), self.device,
                   "and has nothing to move" if not members else
                   "beside the %s it moves" % _storages(members),
                   " ".join(parts), g.name))

    def _unpack(self, packed):
        d, ptr, g, v = packed
        if d._version != v:
            # Autograd checks a saved tensor's version only without saved_tensors_hooks; with them it is ours
            # to check (the seed's "In-place modification happened").
            raise HoffError("hoff.swap: a tensor of shape %s saved for backward in group '%s' was modified in "
                            "place after it was saved (version %d, now %d): its gradient would be wrong; "
                            "clone it before the in-place op, or do the op out of place"
                            % (tuple(d.shape), g.name, v, d._version), errno.EINVAL)
        if ptr is not None:
            lib = _lib.load()
            if lib.hoff_residency(self.ctx, ptr) not in (RES_DEVICE, -errno.EINVAL):
                with self._lock:
                    g.demand_loads += 1
            lib.hoff_access(self.ctx, ptr, 0, self._stream())  # back first, whatever state it is in
        return d

    @contextlib.contextmanager
    def group(self, name: str) -> Iterator[None]:
        """Collect the storages saved for backward inside the block into group name."""
        import torch
        g = self._ensure(name)
        if g.state != COLLECTING:
            raise HoffError("hoff.swap: group('%s'): the group is %s: its last use was never loaded "
                            "(wait_load) or released (a group used across two steps?); call wait_load, "
                            "release_group_storage or abort_group first" % (name, g.state), errno.EBUSY)
        token = self._current.set(name)
        try:
            with torch.autograd.graph.saved_tensors_hooks(lambda t: self._pack(g, t), self._unpack):
                yield
            self._warn_kept(g)  # at a normal end only: an exception says enough
        finally:
            self._current.reset(token)

    group_context = group  # the seed's name

    def add_tensors(self, name: str, tensors: Any) -> int:
        """Add the storages of tensors (a tensor or nested lists/tuples/dicts) to group name by hand.
        Returns how many storages were new members."""
        g = self._ensure(name)
        n = 0
        for t in _tensors(tensors, []):
            ptr, _ = storage_of(t)
            if ptr is None:
                raise HoffError("hoff.swap: add_tensors('%s'): a %s tensor has no storage (sparse, meta or a "
                                "wrapper subclass); only tensors with a storage can be swapped"
                                % (name, t.layout if t.layout != __import__("torch").strided else t.device),
                                errno.EINVAL)
            with self._lock:
                rc = self._check(_lib.load().hoff_group_add(g.handle, ptr), "add_tensors", name)
            n += rc == 0
        return n

    def protect_alias_tensors(self, name: str, tensors: Any) -> None:
        """Keep the storages of tensors (e.g. a layer's output, read by the next layer) on the device: they
        leave group name and are not collected into it again in this cycle."""
        g = self._get(name, "protect_alias_tensors")
        for t in _tensors(tensors, []):
            ptr, _ = storage_of(t)
            if ptr is None:
                raise HoffError("hoff.swap: protect_alias_tensors('%s'): a tensor with no storage (sparse, "
                                "meta or a wrapper subclass) cannot alias a swapped storage" % name, errno.EINVAL)
            self._protect(g, ptr)

    def _protect(self, g, ptr):
        with self._lock:
            g.protected.add(ptr)
            rc = _lib.load().hoff_group_remove(g.handle, ptr)
            if rc < 0 and rc not in (-errno.ENOENT, -errno.EINVAL):
                self._check(rc, "protect_alias_tensors", g.name)

    # --- moving ----------------------------------------------------------------------------------------------

    def launch_offload(self, name: str, copy_stream: Any = None) -> None:
        """Queue the eviction of every storage of group name (after the work queued on the current stream;
        copy_stream is accepted for the seed's signature: hoff copies on its own stream)."""
        g = self._get(name, "launch_offload")
        with self._lock:
            if g.state != COLLECTING:
                raise HoffError("hoff.swap: launch_offload('%s'): the group is %s, not collecting"
                                % (name, g.state), errno.EBUSY)
            self._launched(g, _lib.load().hoff_group_evict(g.handle, self._stream()), OFFLOADING, "launch_offload")

    def _launched(self, g, rc, state, what):
        """After a launch: the group is in state unless the call moved nothing (refused whole); a block
        that could not move after others did leaves the launch to wait for, and the error is raised."""
        if rc == 0 or self._info(g).launched:
            g.state = state
        self._check(rc, what, g.name)

    def wait_offload(self, name: str) -> None:
        """Work queued on the current stream afterwards waits for group name's offload."""
        g = self._get(name, "wait_offload")
        with self._lock:
            if g.state != OFFLOADING:
                raise HoffError("hoff.swap: group '%s' wait_offload() called before launch_offload() (the group "
                                "is %s)" % (name, g.state), errno.EINVAL)
            self._check(_lib.load().hoff_group_wait(g.handle, self._stream(), WAIT_STREAM), "wait_offload", name)
            g.state = OFFLOADED

    def launch_load(self, name: str, copy_stream: Any = None) -> None:
        """Queue the load of every storage of group name that is away.  Raises HoffError (errno
        HOFF_EBUDGET) when the budget cannot hold the whole group: nothing is moved then."""
        g = self._get(name, "launch_load")
        with self._lock:
            if g.state == OFFLOADING:
                raise HoffError("hoff.swap: launch_load('%s'): its offload was launched and not waited for "
                                "(wait_offload first)" % name, errno.EBUSY)
            if g.state == LOADING:
                raise HoffError("hoff.swap: launch_load('%s'): a load is launched already" % name, errno.EBUSY)
            self._launched(g, _lib.load().hoff_group_prefetch(g.handle, self._stream()), LOADING, "launch_load")

    def wait_load(self, name: str) -> None:
        """Work queued on the current stream afterwards waits for group name's load; the group is then
        empty, ready to collect the next step's storages (the seed's)."""
        g = self._get(name, "wait_load")
        lib = _lib.load()
        with self._lock:
            if g.state != LOADING:
                raise HoffError("hoff.swap: group '%s' wait_load() called before launch_load() (the group is %s)"
                                % (name, g.state), errno.EINVAL)
            self._check(lib.hoff_group_wait(g.handle, self._stream(), WAIT_STREAM), "wait_load", name)
            self._clear(g)

    def _clear(self, g):
        """The cycle is over: the members leave the group where they are, bytes and all (one whose load
        failed stays on the host and is paged in at its use), and it collects again."""
        self._check(_lib.load().hoff_group_clear(g.handle), "clear", g.name)
        g.state = COLLECTING
        g.protected.clear()
        g.new_use()

    def release_group_storage(self, name: str) -> None:
        """The group's storages are dead: drop the host copies of those still away and empty the group."""
        g = self._get(name, "release_group_storage")
        with self._lock:
            rc = _lib.load().hoff_group_release(g.handle)
            g.state = COLLECTING
            g.protected.clear()
            g.new_use()
            self._check(rc, "release_group_storage", name)

    def abort_group(self, name: str) -> bool:
        """Wait for the group's transfers (every byte ends in one valid place; a storage left on the host is
        paged in at its use) and remove the group.  An unknown name is a no-op (abort is the failure path);
        returns whether the group existed."""
        with self._lock:
            g = self._groups.pop(name, None)
            if g is None:
                return False
            lib = _lib.load()
            rc = lib.hoff_group_abort(g.handle)
            lib.hoff_group_destroy(g.handle)
            self._check(rc, "abort_group", name)
            return True

    # --- the seed's bookkeeping ------------------------------------------------------------------------------

    def stats(self, name: str) -> Dict[str, Any]:
        """Counters of group name: storages, saved tensors, bytes copied each way, duplicates folded, what was
        kept on the device (kept: saved tensors, kept_protected of them protected; kept_storages and
        kept_bytes: the other storages kept, each counted once per use of the group)."""
        g = self._get(name, "stats")
        info = self._info(g)
        with self._lock:
            return {
                "state": g.state, "storages": int(info.adds), "members": int(info.blocks),
                "saved_tensors": g.saved, "duplicates": int(info.duplicates), "kept": g.kept,
                "kept_protected": g.kept_protected, "kept_storages": g.kept_storages, "kept_bytes": g.kept_bytes,
                "d2h_copies": int(info.evicted_blocks), "d2h_bytes": int(info.evicted_bytes),
                "h2d_copies": int(info.prefetched_blocks), "h2d_bytes": int(info.prefetched_bytes),
                "calls": int(info.calls), "demand_loads": g.demand_loads,
                "on_device": int(info.on_device), "on_host": int(info.on_host), "in_flight": int(info.in_flight),
            }

    def get_current_group_name(self) -> str:
        return self._current.get()

    def set_current_group_name(self, name: str) -> None:
        self._current.set(name)

    def active_group_count(self) -> int:
        return len(self._groups)

    def is_last_group(self, name: Optional[str] = None) -> bool:
        g = self._groups.get(self.get_current_group_name() if name is None else name)
        return bool(g and g.is_last_group)

    # --- layer to layer --------------------------------------------------------------------------------------

    def layer_group_name(self, module: torch.nn.Module) -> str:
        """The group a layer's saved storages go to (given by set_forward_prefetch_layer)."""
        return self._layer(module)

    def _layer(self, module):
        with self._lock:
            name = self._layers.get(module)
            if name is None:
                name = "%s.%d" % (type(module).__name__, self._layer_count)
                self._layer_count += 1
                self._layers[module] = name
                self._install(module, name)
            return name

    def _install(self, module, name):
        """The layer's forward collects into its group; its output stays on the device (the next layer reads
        it); when its backward starts, its group is loaded (waiting if it must) and emptied."""
        stack = []

        def pre(mod, args):
            cm = self.group(name)
            cm.__enter__()
            stack.append(cm)

        def post(mod, args, out):
            cm = stack.pop()
            cm.__exit__(None, None, None)
            g = self._groups[name]
            for t in _tensors(out, []):
                ptr, _ = storage_of(t)
                if ptr is not None:
                    self._protect(g, ptr)
            self._on_backward(out, lambda: self._backward_start(name))

        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)

    @staticmethod
    def _on_backward(out, fn):
        """Call fn once when the first gradient of out is computed: the layer's backward starts."""
        fired = []

        def hook(grad):
            if not fired:
                fired.append(1)
                fn()
            return grad

        for t in _tensors(out, []):
            if t.requires_grad:
                t.register_hook(hook)

    def _backward_start(self, name):
        g = self._groups.get(name)
        if g is None:
            return
        if g.state == OFFLOADING:
            self.wait_offload(name)
        if g.state == OFFLOADED:
            self.launch_load(name)  # late: the pair's hook did not run
        if g.state == LOADING:
            self.wait_load(name)
        else:
            with self._lock:
                self._clear(g)  # never offloaded: the members leave it, nothing moves

    def set_forward_prefetch_layer(self, first_layer: torch.nn.Module, second_layer: torch.nn.Module) -> None:
        """Offload first_layer's group when second_layer's forward starts (waited for when it ends), and load
        it when second_layer's backward starts.  Idempotent: a pair set twice is set once.

        Usage::

            for i in range(len(model.layers) - 1):
                mgr.set_forward_prefetch_layer(model.layers[i], model.layers[i + 1])
        """
        key = (id(first_layer), id(second_layer))
        with self._lock:
            if key in self._pairs:
                return
            self._pairs.add(key)
            first = self._layer(first_layer)
            self._layer(second_layer)
            self._groups.get(first) or self._ensure(first)

        def pre(mod, args):
            g = self._groups.get(first)
            if g is not None and g.state == COLLECTING and self._info(g).blocks:
                self.launch_offload(first)

        def post(mod, args, out):
            g = self._groups.get(first)
            if g is not None and g.state == OFFLOADING:
                self.wait_offload(first)
            self._on_backward(out, lambda: self._prefetch(first))

        second_layer.register_forward_pre_hook(pre)
        second_layer.register_forward_hook(post)

    def _prefetch(self, name):
        g = self._groups.get(name)
        if g is None:
            return
        if g.state == OFFLOADING:
            self.wait_offload(name)
        if g.state == OFFLOADED:
            self.launch_load(name)
