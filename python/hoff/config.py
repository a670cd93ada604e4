# config.py — OffloadConfig: the RFC's configuration as a frozen dataclass; each field is checked by hoff's own option
# table (hoff_config_check), so a bad value gets the library's message.  Threading: immutable values; safe anywhere.
"""OffloadConfig.

Every field defaults to ``None``, which leaves the option as hoff already has
it (its ``HOFF_*`` variable or its default).  A field that is set maps to one
hoff option:

=============================  ===================  =====================================
field                          hoff option          accepted
=============================  ===================  =====================================
max_resident_activation_mb     budget               a number of MiB, 0 (no limit) or more
max_offload_activation_mb      host_cap             a number of MiB, 0 (no limit) or more
planner                        planner              a planner name hoff has ("timed", "greedy")
spill_dir                      spill_dir            an existing directory
numa                           numa                 "nearest", "interleave", "0,2" or [0, 2]
offload_gradients              offload_gradients    True or False
access_marks                   (Python)             True or False (default True)
op_marks                       (Python)             True or False (default True)
=============================  ===================  =====================================

Python checks only what is Python's: the type of a field and its conversion
to the option's text (MiB to bytes, a list of nodes to "0,2").  The value
itself is checked by libhoff (``hoff_config_check``, hoff-config(7)): its
range, the planners it has, the NUMA node list; the error says what hoff
accepts, in hoff's words.  Where libhoff cannot be loaded, a config is still
made and its values are checked when they are applied
(``hoff_torch_configure``, which gives the same message).
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import numbers
import os
from typing import Dict, Optional, Sequence, Union

MiB = 1 << 20


def _check(field, option, text, what=None):
    """The option's text as hoff stores it (hoff_config_check), or ValueError with hoff's message.

    field: the OffloadConfig field, to name in the message; what: how the field's value became text, if it did
    ("4 MiB is 4194304 bytes").  Without libhoff, text is returned as it is (see the module's doc)."""
    from . import _lib
    raw = os.fsencode(text)
    if b"\0" in raw:
        raise ValueError("%s: %r holds a NUL character, which no hoff option accepts" % (field, text))
    if not _lib.available():
        return text
    out = ctypes.create_string_buffer(1024)
    err = ctypes.create_string_buffer(1024)
    rc = _lib.load().hoff_config_check(option.encode(), raw, out, len(out), err, len(err))
    if rc != 0:
        msg = err.value.decode(errors="replace") or _lib.last_error()
        raise ValueError("%s: %s%s" % (field, what + ": " if what else "", msg))
    return os.fsdecode(out.value)


def _mb_bytes(value):
    """A number of MiB as the byte count hoff gets."""
    return int(round(value * MiB))


def _mb(name, option, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError("%s (hoff option %s): expected a number of MiB, 0 (no limit) or more, got %r"
                         % (name, option, value))
    n = _mb_bytes(value)
    _check(name, option, str(n), "%r MiB is %d bytes" % (value, n))
    return value


def _planner(value):
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("planner: expected the name of one of hoff's planners (a str such as 'greedy'; "
                         "hoff's planners run in C, so a Python planner object cannot be used), got %r"
                         % (value,))
    return _check("planner", "planner", value)


def _spill_dir(value):
    if value is None:
        return None
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise ValueError("spill_dir: expected a directory path (str or os.PathLike), got %r" % (value,))
    v = os.fsdecode(os.fspath(value))
    if not v:
        raise ValueError("spill_dir: expected a directory path, got an empty string (use None for no NVMe tier)")
    v = _check("spill_dir", "spill_dir", v)
    if not os.path.isdir(v):
        raise ValueError("spill_dir: %r is not an existing directory" % v)
    return v


def _numa(value):
    if value is None:
        return None
    forms = "'nearest', 'interleave', or NUMA node numbers as '0,2' or [0, 2]"
    if isinstance(value, (list, tuple)):
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
            raise ValueError("numa: a list must hold NUMA node numbers (int); expected %s, got %r" % (forms, value))
        text = ",".join(str(n) for n in value)
        return _check("numa", "numa", text, "%r is %r" % (value, text))
    if not isinstance(value, str):
        raise ValueError("numa: expected %s, got %r" % (forms, value))
    return _check("numa", "numa", value)


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
    offload_gradients: True makes parameters' gradients and the optimizer
        step's blocks offload candidates again (hoff option
        ``offload_gradients``; hoff.grads): they then count against the
        budget, can set the working-set floor, and moving them costs link
        time.  None (the default) leaves HOFF_OFFLOAD_GRADIENTS, off.
    """

    max_resident_activation_mb: Optional[float] = None
    max_offload_activation_mb: Optional[float] = None
    planner: Optional[str] = None
    spill_dir: Optional[str] = None
    numa: Optional[Union[str, Sequence[int]]] = None  # a list of nodes is kept as its text, "0,2"
    access_marks: bool = True
    op_marks: bool = True
    offload_gradients: Optional[bool] = None

    def __post_init__(self) -> None:
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
        if self.offload_gradients is not None and not isinstance(self.offload_gradients, bool):
            raise ValueError("offload_gradients (hoff option offload_gradients): expected True, False or None "
                             "(the environment's HOFF_OFFLOAD_GRADIENTS), got %r" % (self.offload_gradients,))

    def options(self) -> Dict[str, str]:
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
            out["numa"] = str(self.numa)  # the text __post_init__ made of it
        if self.offload_gradients is not None:
            out["offload_gradients"] = "1" if self.offload_gradients else "0"
        return out
