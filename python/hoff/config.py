# config.py — OffloadConfig: the RFC's configuration as a frozen dataclass, checked field by field the way
# hoff-config(7) checks the options it maps to.  Threading: immutable values; safe anywhere.
"""OffloadConfig.

Every field defaults to ``None``, which leaves the option as hoff already has
it (its ``HOFF_*`` variable or its default).  A field that is set maps to one
hoff option:

=============================  ===============  =====================================
field                          hoff option      accepted
=============================  ===============  =====================================
max_resident_activation_mb     budget           a number of MiB, 0 (no limit) to 2**30
max_offload_activation_mb      host_cap         a number of MiB, 0 (no limit) to 2**30
planner                        planner          a planner name hoff has ("timed", "greedy")
spill_dir                      spill_dir        an existing directory, at most 255 bytes
numa                           numa             "nearest", "interleave", "0,2" or [0, 2]
access_marks                   (Python)         True or False (default True)
op_marks                       (Python)         True or False (default True)
=============================  ===============  =====================================
"""

import dataclasses
import math
import numbers
import os
import re

MiB = 1 << 20
MAX_MB = 1 << 30  # 1024 TiB, hoff's largest size
NUMA_NODES = 1024
_PLANNER_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,14}$")


def _mb(name, option, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError("%s (hoff option %s): expected a number of MiB, 0 (no limit) to %d, got %r"
                         % (name, option, MAX_MB, value))
    v = float(value)
    if not math.isfinite(v) or v < 0 or v > MAX_MB:
        raise ValueError("%s (hoff option %s): expected a number of MiB, 0 (no limit) to %d, got %r"
                         % (name, option, MAX_MB, value))
    return value


def _planner(value):
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("planner: expected the name of one of hoff's planners (a str such as 'greedy'; "
                         "hoff's planners run in C, so a Python planner object cannot be used), got %r"
                         % (value,))
    v = value.strip()
    if not _PLANNER_RE.match(v):
        raise ValueError("planner: expected a planner name of 1 to 15 letters, digits, '_' or '-' "
                         "such as 'greedy', got %r" % (value,))
    # The library knows which planners exist; ask it when it is there.
    from . import _lib
    if _lib.available():
        import ctypes
        err = ctypes.create_string_buffer(512)
        rc = _lib.load().hoff_torch_config_check(b"planner", v.encode(), err, len(err))
        if rc != 0:
            raise ValueError("planner: %s" % err.value.decode(errors="replace"))
    return v


def _spill_dir(value):
    if value is None:
        return None
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise ValueError("spill_dir: expected a directory path (str or os.PathLike), got %r" % (value,))
    v = os.fsdecode(os.fspath(value))
    if not v:
        raise ValueError("spill_dir: expected a directory path, got an empty string (use None for no NVMe tier)")
    if len(os.fsencode(v)) > 255:
        raise ValueError("spill_dir: expected a path of at most 255 bytes, got %d bytes" % len(os.fsencode(v)))
    if not os.path.isdir(v):
        raise ValueError("spill_dir: %r is not an existing directory" % v)
    return v


def _numa(value):
    if value is None:
        return None
    expect = ("numa: expected 'nearest', 'interleave', or NUMA node numbers from 0 to %d without "
              "repeats ('0,2' or [0, 2]), got %r" % (NUMA_NODES - 1, value))
    if isinstance(value, str):
        v = value.strip()
        if v.lower() in ("nearest", "interleave"):
            return v.lower()
        items = v.split(",")
        if not all(re.fullmatch(r"[0-9]+", i) for i in items):
            raise ValueError(expect)
        nodes = [int(i) for i in items]
    elif isinstance(value, (list, tuple)):
        if not value or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
            raise ValueError(expect)
        nodes = list(value)
    else:
        raise ValueError(expect)
    if any(n < 0 or n >= NUMA_NODES for n in nodes) or len(set(nodes)) != len(nodes):
        raise ValueError(expect)
    return ",".join(str(n) for n in nodes) if not isinstance(value, str) else value.strip()


@dataclasses.dataclass(frozen=True)
class OffloadConfig:
    """What an OffloadSession (or hoff.install) asks of hoff.

    max_resident_activation_mb: the device budget for activations (offload
        candidates) in MiB; 0 means no limit.  hoff option ``budget``.
    max_offload_activation_mb: the most host memory evicted activations may
        take, in MiB; 0 means no limit.  hoff option ``host_cap``.
    planner: the name of the planner hoff uses (``"timed"``, the default,
        or ``"greedy"``).
    spill_dir: the NVMe tier's directory (must exist); None: no NVMe tier.
    numa: host-tier placement: ``"nearest"``, ``"interleave"`` or nodes.
    access_marks: mark exact accesses of saved activations through
        ``torch.autograd.graph.saved_tensors_hooks`` (pack: last forward use,
        unpack: first backward use).
    op_marks: mark an op boundary after every aten op, with the accesses of
        the op's tensors before it (a TorchDispatchMode, hoff.opmarks), so use
        windows close as soon as the kernels that use a block are enqueued.
        False: only hoff.mark/hoff.mark_op boundaries (windows then last until
        the block's free, as long as accesses are marked).
    """

    max_resident_activation_mb: float = None
    max_offload_activation_mb: float = None
    planner: str = None
    spill_dir: str = None
    numa: str = None
    access_marks: bool = True
    op_marks: bool = True

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "max_resident_activation_mb",
             _mb("max_resident_activation_mb", "budget", self.max_resident_activation_mb))
        set_(self, "max_offload_activation_mb",
             _mb("max_offload_activation_mb", "host_cap", self.max_offload_activation_mb))
        set_(self, "planner", _planner(self.planner))
        set_(self, "spill_dir", _spill_dir(self.spill_dir))
        set_(self, "numa", _numa(self.numa))
        if not isinstance(self.access_marks, bool):
            raise ValueError("access_marks: expected True or False, got %r" % (self.access_marks,))
        if not isinstance(self.op_marks, bool):
            raise ValueError("op_marks: expected True or False, got %r" % (self.op_marks,))

    def options(self):
        """The hoff options this config sets, as {name: value text} (hoff_config_set's forms)."""
        out = {}
        if self.max_resident_activation_mb is not None:
            out["budget"] = str(int(round(self.max_resident_activation_mb * MiB)))
        if self.max_offload_activation_mb is not None:
            out["host_cap"] = str(int(round(self.max_offload_activation_mb * MiB)))
        if self.planner is not None:
            out["planner"] = self.planner
        if self.spill_dir is not None:
            out["spill_dir"] = self.spill_dir
        if self.numa is not None:
            out["numa"] = self.numa
        return out
