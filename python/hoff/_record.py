# _record.py — CPU recording mode: the hoff_record_* marks of libhoff-record.so when this process runs under
# hoff-record (LD_PRELOAD).  Threading: the preload locks itself; lookup() caches under a lock.
"""The recorder's marks.

Under ``hoff-record`` the preloaded ``libhoff-record.so`` is part of the
process, so its ``hoff_record_*`` functions are found in the global symbol
table (``ctypes.CDLL(None)``).  Nothing here loads a library: without the
preload, :func:`lookup` returns ``None``.
"""

import ctypes
import json
import threading

_lock = threading.Lock()
_rec = None
_looked = False

_c = ctypes
_PROTOS = {
    "hoff_record_active": (_c.c_int, []),
    "hoff_record_step_begin": (_c.c_int, []),
    "hoff_record_step_end": (_c.c_int, []),
    "hoff_record_step_abort": (_c.c_int, []),
    "hoff_record_mark_op": (_c.c_int, [_c.c_char_p]),
    "hoff_record_region_begin": (_c.c_int, []),
    "hoff_record_region_end": (_c.c_int, []),
    "hoff_record_access": (_c.c_int64, [_c.c_void_p, _c.c_int]),
    "hoff_record_block_of": (_c.c_int64, [_c.c_void_p]),
    "hoff_record_trace_id": (_c.c_int64, [_c.c_void_p]),
    "hoff_record_stats_json": (_c.c_int, [_c.c_char_p, _c.c_size_t]),
    "hoff_record_set_phase": (_c.c_int, [_c.c_int]),
    "hoff_record_keep": (_c.c_int, [_c.c_void_p]),
}


def lookup():
    """The preload's functions (a ctypes.CDLL of the process), or None when not
    running under hoff-record (or the recorder is off: HOFF_RECORD_OUTPUT unset)."""
    global _rec, _looked
    if _looked:
        return _rec
    with _lock:
        if not _looked:
            rec = None
            try:
                proc = ctypes.CDLL(None)
                for name, (res, args) in _PROTOS.items():
                    f = getattr(proc, name)
                    f.restype = res
                    f.argtypes = args
                if proc.hoff_record_active():
                    rec = proc
            except (OSError, AttributeError):
                rec = None
            _rec = rec
            _looked = True
    return _rec


def active():
    """True when this process is being recorded by hoff-record."""
    return lookup() is not None


def stats():
    """The recorder's state as a dict (see hoff-record(1)); {} when not recording."""
    rec = lookup()
    if rec is None:
        return {}
    buf = ctypes.create_string_buffer(1024)
    n = rec.hoff_record_stats_json(buf, len(buf))
    if n >= len(buf):
        buf = ctypes.create_string_buffer(n + 1)
        rec.hoff_record_stats_json(buf, len(buf))
    return json.loads(buf.value.decode())


def block_of(ptr):
    """The recorder's serial of the block starting at ptr, or None."""
    rec = lookup()
    if rec is None or not ptr:
        return None
    r = rec.hoff_record_block_of(ptr)
    return r if r > 0 else None
