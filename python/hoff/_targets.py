# _targets.py — where marks go: hoff's allocator context of a device (libhoff.so) and/or the recorder of
# hoff-record (CPU recording mode).  Threading: a target may be called from any thread (the C side locks);
# the installed flag and the set of devices with a context are guarded by _lock.
"""Mark targets.

Every mark the package makes (step begin/end/abort, op, region begin/end,
access) goes to each target of the session:

* ``AllocatorTarget``: the process-wide hoff context of a CUDA device, the
  one ``hoff_torch_alloc`` allocates from (``hoff_torch_context``).  Without a
  GPU that context runs on hoff's simulated device: the session logic works
  the same, but PyTorch's CPU tensors do not come from it.
* ``RecordTarget``: ``libhoff-record.so`` under ``hoff-record``: the CPU
  allocations PyTorch makes are its blocks, so views, transposes and
  duplicates of one storage map to one block exactly as on a GPU.
"""

import ctypes
import json
import threading
from typing import Set

from . import _lib, _record
from .errors import HoffError  # its home is hoff.errors; hoff._targets.HoffError stays for older imports

PLAN_STATES = {0: "idle", 1: "warmup", 2: "replay", 3: "fallback"}
# enum hoff_phase (include/hoff.h): what set_phase takes
PHASES = {"none": 0, "forward": 1, "backward": 2, "loss": 3, "optimizer": 4}

_lock = threading.Lock()
_installed = False
_sim_cls = None   # python -m hoff --sim: the target class of the sim context (hoff._sim.SimTarget)
_devices: Set[int] = set()  # devices whose hoff context this process has used


def set_installed():
    global _installed
    with _lock:
        _installed = True


def installed():
    return _installed


def set_sim(cls):
    """python -m hoff --sim armed the sim context: sessions mark it through cls."""
    global _sim_cls
    with _lock:
        _sim_cls = cls


def sim_active():
    return _sim_cls is not None


def devices_used():
    with _lock:
        return set(_devices)


def _current_stream(device):
    """The current CUDA stream of device as a pointer, or None (no CUDA or not initialised yet)."""
    try:
        import torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.current_stream(device).cuda_stream or None
    except Exception:  # a torch without CUDA, or a device that is gone
        pass
    return None


def default_device():
    try:
        import torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.current_device()
    except Exception:
        pass
    return 0


class _ConfigHead(ctypes.Structure):
    """The leading fields of struct hoff_config (include/hoff.h), up to managed_min_bytes."""
    _fields_ = [("version", ctypes.c_uint32), ("size", ctypes.c_uint32), ("backend", ctypes.c_int),
                ("device", ctypes.c_int), ("budget_bytes", ctypes.c_uint64), ("host_cap_bytes", ctypes.c_uint64),
                ("managed_min_bytes", ctypes.c_uint64)]


def _env_config():
    """A struct hoff_config as hoff_config_from_env reads it (a ctypes buffer), or None when the
    environment has an error (hoff reports that itself when it makes the context)."""
    lib = _lib.load()
    buf = ctypes.create_string_buffer(8192)
    lib.hoff_config_init(buf)
    head = _ConfigHead.from_buffer(buf)
    if head.size > len(buf) or head.size < ctypes.sizeof(_ConfigHead):
        return None
    err = ctypes.create_string_buffer(512)
    if lib.hoff_config_from_env(buf, err, len(err)) != 0:
        return None
    return buf


def _env_managed_min():
    """managed_min as hoff_config_from_env reads it (0 when the environment has an error)."""
    buf = _env_config()
    return 0 if buf is None else int(_ConfigHead.from_buffer(buf).managed_min_bytes)


def env_option(name):
    """The value of hoff option name (hoff-config(7)) as the environment sets it, as hoff prints it;
    None when the environment has an error."""
    buf = _env_config()
    if buf is None:
        return None
    out = ctypes.create_string_buffer(512)
    if _lib.load().hoff_config_get(buf, name.encode(), out, len(out)) < 0:
        return None
    return out.value.decode()


class AllocatorTarget:
    kind = "allocator"

    def __init__(self, device=None):
        self.device = default_device() if device is None else int(device)
        self._ctx = None
        self._min = None

    def __repr__(self):
        return "AllocatorTarget(device=%d)" % self.device

    @property
    def ctx(self):
        if self._ctx is None:
            lib = _lib.load()
            c = lib.hoff_torch_context(self.device)
            if not c:
                raise HoffError("hoff: cannot create the context of device %d: %s"
                                % (self.device, _lib.last_error()))
            with _lock:
                _devices.add(self.device)
            self._ctx = c
        return self._ctx

    def _call(self, name, *args):
        rc = getattr(_lib.load(), name)(self.ctx, *args)
        if rc < 0:
            raise HoffError("hoff: %s (device %d): %s" % (name, self.device, _lib.last_error()), -rc)
        return rc

    def configure(self, options):
        """Apply {option: value} to this device (now and for its context to come)."""
        lib = _lib.load()
        err = ctypes.create_string_buffer(1024)
        for name, value in options.items():
            rc = lib.hoff_torch_configure(self.device, name.encode(), str(value).encode(), err, len(err))
            if rc == 0:
                continue
            msg = err.value.decode(errors="replace") or _lib.last_error()
            if rc == -16:  # EBUSY: fixed once the context exists
                raise HoffError("hoff: %s" % msg, 16)
            raise ValueError("hoff: %s" % msg)

    def step_begin(self):
        self._name_step_stream()
        self._call("hoff_step_begin")

    def _name_step_stream(self):
        """On a CUDA context, the current stream is the step's (hoff_step_stream): allocations on other
        streams inside the step, such as FSDP's and NCCL's collective buffers, stay device memory."""
        lib = _lib.load()
        name = lib.hoff_backend_name(self.ctx)
        if name != b"cuda":
            return
        import torch

        self._call("hoff_step_stream", ctypes.c_void_p(torch.cuda.current_stream(self.device).cuda_stream))

    def step_end(self):
        self._call("hoff_step_end")

    def step_abort(self):
        self._call("hoff_step_abort")

    def mark_op(self, name):
        self._call("hoff_mark_op", name.encode() if name else None)

    def region_begin(self):
        self._call("hoff_region_begin")

    def region_end(self):
        self._call("hoff_region_end")

    def min_block_bytes(self):
        """The smallest offload candidate: hoff's managed_min as the environment sets it
        (HOFF_MANAGED_MIN; 0, every storage, if the environment cannot be read)."""
        if self._min is None:
            self._min = _env_managed_min()
        return self._min

    def access(self, ptr, write):
        """Mark an access of the block at ptr; returns ptr (hoff's block id is
        its address) or None when ptr is not a live hoff block."""
        rc = _lib.load().hoff_access(self.ctx, ptr, 1 if write else 0, _current_stream(self.device))
        return ptr if rc >= 0 else None

    def keep(self, ptr):
        """The block at ptr is not an activation (hoff_keep): True when it is a live hoff block."""
        return _lib.load().hoff_keep(self.ctx, ptr) >= 0

    def set_phase(self, phase):
        """The phase (a key of PHASES) of the op marks to come."""
        self._call("hoff_set_phase", PHASES[phase])

    def _json(self, name, size):
        """The object a snprintf-style hoff_*_json(ctx, buf, len) call writes, as a dict."""
        fn = getattr(_lib.load(), name)
        buf = ctypes.create_string_buffer(size)
        n = fn(self.ctx, buf, len(buf))
        if n < 0:
            raise HoffError("hoff: %s: %s" % (name, _lib.strerror(n)), -n)
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            fn(self.ctx, buf, len(buf))
        return json.loads(buf.value.decode())

    def floor(self):
        """Where the plan's working-set floor comes from (hoff_floor_json): bytes, blocks, op, phase, advice."""
        return self._json("hoff_floor_json", 2048)

    def stats(self):
        lib = _lib.load()
        d = self._json("hoff_stats_json", 16384)
        d.setdefault("source", "allocator")
        d.setdefault("device", self.device)
        backend = lib.hoff_backend_name(self.ctx)
        d.setdefault("backend", backend.decode() if backend else "none")
        return d

    def phase(self):
        return PLAN_STATES.get(int(self.stats().get("plan_state", 0)), "idle")


class RecordTarget:
    kind = "record"

    def __init__(self, rec=None):
        self.rec = rec if rec is not None else _record.lookup()
        if self.rec is None:
            raise RuntimeError("hoff: CPU recording mode needs the process to run under hoff-record "
                               "(hoff-record -o TRACE -- python3 script.py ...)")

    def __repr__(self):
        return "RecordTarget()"

    def configure(self, options):
        pass  # the recorder's settings come from hoff-record's options

    def step_begin(self):
        self.rec.hoff_record_step_begin()

    def step_end(self):
        self.rec.hoff_record_step_end()

    def step_abort(self):
        self.rec.hoff_record_step_abort()

    def mark_op(self, name):
        self.rec.hoff_record_mark_op(name.encode() if name else None)

    def region_begin(self):
        self.rec.hoff_record_region_begin()

    def region_end(self):
        self.rec.hoff_record_region_end()

    def min_block_bytes(self):
        """The recorder's threshold: smaller allocations are no blocks of its trace."""
        try:
            return int(_record.stats().get("threshold_bytes", 0))
        except (ValueError, TypeError):
            return 0

    def access(self, ptr, write):
        """Mark an access; returns the recorder's serial of the block, or None."""
        r = self.rec.hoff_record_access(ptr, 1 if write else 0)
        return r if r > 0 else None

    def keep(self, ptr):
        """The block at ptr is not an activation: its allocation is flagged kept in the recording."""
        return self.rec.hoff_record_keep(ptr) >= 0

    def set_phase(self, phase):
        self.rec.hoff_record_set_phase(PHASES[phase])

    def floor(self):
        return {}  # the recorder does not plan: hoff-plan show says where a recorded trace's floor is

    def stats(self):
        return _record.stats()

    def phase(self):
        return None  # the recorder does not plan


def resolve(mode="auto", device=None):
    """The targets of a session.  mode: "auto" (the allocator if hoff.install()
    ran, the recorder if under hoff-record), "allocator" or "record"."""
    if _sim_cls is not None and mode in ("auto", "allocator"):
        return [_sim_cls(0)]  # the sim context of python -m hoff --sim (one process-wide context)
    if mode == "allocator":
        return [AllocatorTarget(device)]
    if mode == "record":
        return [RecordTarget()]
    if mode != "auto":
        raise ValueError("mode: expected 'auto', 'allocator' or 'record', got %r" % (mode,))
    targets = []
    if installed():
        targets.append(AllocatorTarget(device))
    rec = _record.lookup()
    if rec is not None:
        targets.append(RecordTarget(rec))
    return targets
