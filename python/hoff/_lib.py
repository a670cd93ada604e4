# _lib.py — finding and loading libhoff.so, and the ctypes prototypes of the C API the package uses.
# Threading: load() may be called from any thread; the first call loads the library under a lock.
"""Loading libhoff.so.

Search order (the first that loads wins):

1. ``HOFF_LIBRARY``: a path to ``libhoff.so``.  When set it is the only
   candidate: a bad path is an error, never silently skipped.
2. The bundled library of a pip-built package, ``hoff/_native/libhoff.so.0``
   (``pip install ./python`` builds it; not there with ``HOFF_PIP_NATIVE=0``).
   When it is there it is the only candidate: one that does not load (a
   runtime library missing) is an error naming the missing library and its
   package, so the bundle's libhoff-sim.so never meets another libhoff.
3. The install prefix: ``pkg-config --variable=libdir hoff``, then the
   ``lib``/``lib64`` directories of this interpreter's prefix (a virtual
   environment's and its base), and the ``lib`` directory the package was
   installed under (``PREFIX/lib/pythonX.Y/site-packages/hoff`` gives
   ``PREFIX/lib``).
4. The usual system directories: ``/usr/local/lib``, ``/usr/local/lib64``,
   ``/usr/lib/<multiarch>``, ``/usr/lib64``, ``/usr/lib``.
5. The dynamic linker's cache (``ctypes.util.find_library("hoff")``).
"""

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import sys
import sysconfig
import threading

from . import _native
from .errors import LibraryNotFound  # its home is hoff.errors; hoff._lib.LibraryNotFound stays for older imports

NAMES = ("libhoff.so", "libhoff.so.0")


_lock = threading.Lock()
_lib = None
_path = None


def _pkg_config_libdir():
    exe = shutil.which("pkg-config")
    if not exe:
        return None, "pkg-config not found"
    try:
        r = subprocess.run([exe, "--variable=libdir", "hoff"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        return None, "pkg-config failed: %s" % e
    d = r.stdout.decode(errors="replace").strip()
    if r.returncode != 0 or not d:
        return None, "pkg-config knows no 'hoff' (hoff.pc not on PKG_CONFIG_PATH)"
    return d, None


def _prefix_dirs():
    dirs = []
    for prefix in (sys.prefix, getattr(sys, "base_prefix", sys.prefix), sys.exec_prefix):
        for sub in ("lib", "lib64"):
            dirs.append(os.path.join(prefix, sub))
    # PREFIX/lib/pythonX.Y/{site,dist}-packages/hoff/_lib.py -> PREFIX/lib
    here = os.path.dirname(os.path.abspath(__file__))
    dirs.append(os.path.normpath(os.path.join(here, "..", "..", "..")))
    return dirs


def _system_dirs():
    dirs = ["/usr/local/lib", "/usr/local/lib64"]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs.append(os.path.join("/usr/lib", multiarch))
    dirs += ["/usr/lib64", "/usr/lib"]
    return dirs


def _try(path, tried):
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        tried.append("%s (%s)" % (path, e))
        return None
    if not hasattr(lib, "hoff_torch_alloc"):
        tried.append("%s (loads, but has no hoff_torch_alloc: an older hoff)" % path)
        return None
    return lib


def _find():
    """(CDLL, path) or raise LibraryNotFound."""
    tried = []
    env = os.environ.get("HOFF_LIBRARY")
    if env:
        lib = _try(env, tried)
        if lib is None:
            raise LibraryNotFound(
                "hoff: HOFF_LIBRARY=%s cannot be used: %s; point it at the libhoff.so "
                "that 'make install' installed (PREFIX/lib/libhoff.so) or at "
                "BUILDDIR/.libs/libhoff.so" % (env, tried[-1]))
        return lib, env
    tried.append("HOFF_LIBRARY (not set)")
    bundled = _native.library()
    if bundled:
        try:
            lib = ctypes.CDLL(bundled)
        except OSError as e:
            raise LibraryNotFound(_native.load_error_text(bundled, e))
        if not hasattr(lib, "hoff_torch_alloc"):
            raise LibraryNotFound("hoff: the bundled %s has no hoff_torch_alloc; reinstall hoff" % bundled)
        return lib, bundled
    tried.append("the package's bundled library (%s: none; pip install ./python builds one unless "
                 "HOFF_PIP_NATIVE=0)" % os.path.join(_native.DIR, _native.LIBRARY))
    libdir, why = _pkg_config_libdir()
    dirs = []
    if libdir:
        dirs.append(libdir)
    else:
        tried.append("pkg-config (%s)" % why)
    seen = set()
    for d in dirs + _prefix_dirs() + _system_dirs():
        d = os.path.normpath(d)
        if d in seen:
            continue
        seen.add(d)
        found = False
        for name in NAMES:
            path = os.path.join(d, name)
            if os.path.exists(path):
                found = True
                lib = _try(path, tried)
                if lib is not None:
                    return lib, path
        if not found:
            tried.append("%s (no libhoff.so)" % d)
    name = ctypes.util.find_library("hoff")
    if name:
        lib = _try(name, tried)
        if lib is not None:
            return lib, name
    else:
        tried.append("the dynamic linker's cache (no libhoff)")
    raise LibraryNotFound(
        "hoff: cannot find libhoff.so.  Looked in:\n  " + "\n  ".join(tried) +
        "\nReinstall the package with its library ('pip install ./python' in the hoff source tree, "
        "without HOFF_PIP_NATIVE=0), or build and install hoff ('./configure && make && make install', then "
        "'ldconfig'), or set HOFF_LIBRARY=/path/to/libhoff.so (in a build tree: "
        "BUILDDIR/.libs/libhoff.so).")


_c = ctypes
_PROTOS = {
    # name: (restype, argtypes)
    "hoff_last_error": (_c.c_char_p, []),
    "hoff_strerror": (_c.c_char_p, [_c.c_int]),
    "hoff_backend_name": (_c.c_char_p, [_c.c_void_p]),
    "hoff_step_begin": (_c.c_int, [_c.c_void_p]),
    "hoff_step_end": (_c.c_int, [_c.c_void_p]),
    "hoff_step_abort": (_c.c_int, [_c.c_void_p]),
    "hoff_step_stream": (_c.c_int, [_c.c_void_p, _c.c_void_p]),
    "hoff_mark_op": (_c.c_int, [_c.c_void_p, _c.c_char_p]),
    "hoff_region_begin": (_c.c_int, [_c.c_void_p]),
    "hoff_region_end": (_c.c_int, [_c.c_void_p]),
    "hoff_access": (_c.c_int, [_c.c_void_p, _c.c_void_p, _c.c_int, _c.c_void_p]),
    "hoff_sync": (_c.c_int, [_c.c_void_p]),
    "hoff_keep": (_c.c_int, [_c.c_void_p, _c.c_void_p]),
    "hoff_set_phase": (_c.c_int, [_c.c_void_p, _c.c_int]),
    "hoff_floor_json": (_c.c_int, [_c.c_void_p, _c.c_char_p, _c.c_size_t]),
    "hoff_config_get": (_c.c_int, [_c.c_void_p, _c.c_char_p, _c.c_char_p, _c.c_size_t]),
    "hoff_residency": (_c.c_int, [_c.c_void_p, _c.c_void_p]),
    "hoff_block_size": (_c.c_size_t, [_c.c_void_p, _c.c_void_p]),
    "hoff_stats_json": (_c.c_int, [_c.c_void_p, _c.c_char_p, _c.c_size_t]),
    "hoff_trace_save": (_c.c_int, [_c.c_void_p, _c.c_char_p]),
    "hoff_torch_alloc": (_c.c_void_p, [_c.c_ssize_t, _c.c_int, _c.c_void_p]),
    "hoff_torch_free": (None, [_c.c_void_p, _c.c_ssize_t, _c.c_int, _c.c_void_p]),
    "hoff_torch_init": (None, [_c.c_int]),
    "hoff_torch_empty_cache": (None, []),
    "hoff_torch_set_memory_fraction": (None, [_c.c_double, _c.c_int]),
    "hoff_torch_record_stream": (None, [_c.c_void_p, _c.c_void_p]),
    "hoff_torch_context": (_c.c_void_p, [_c.c_int]),
    "hoff_torch_memory_stats_json": (_c.c_int, [_c.c_int, _c.c_char_p, _c.c_size_t]),
    "hoff_torch_reset_accumulated": (_c.c_int, [_c.c_int]),
    "hoff_torch_reset_peaks": (_c.c_int, [_c.c_int]),
    "hoff_torch_oom_text": (_c.c_int, [_c.c_int, _c.c_size_t, _c.c_char_p, _c.c_size_t]),
    "hoff_torch_configure": (_c.c_int, [_c.c_int, _c.c_char_p, _c.c_char_p, _c.c_char_p, _c.c_size_t]),
    "hoff_config_init": (None, [_c.c_void_p]),
    "hoff_config_from_env": (_c.c_int, [_c.c_void_p, _c.c_char_p, _c.c_size_t]),
    "hoff_torch_config_check": (_c.c_int, [_c.c_char_p, _c.c_char_p, _c.c_char_p, _c.c_size_t]),
    "hoff_config_check": (_c.c_int, [_c.c_char_p, _c.c_char_p, _c.c_char_p, _c.c_size_t, _c.c_char_p,
                                     _c.c_size_t]),
    # manual swap groups (hoff.swap; hoff_group(3))
    "hoff_group_create": (_c.c_int, [_c.c_void_p, _c.c_char_p, _c.c_uint, _c.POINTER(_c.c_void_p)]),
    "hoff_group_destroy": (_c.c_int, [_c.c_void_p]),
    "hoff_group_add": (_c.c_int, [_c.c_void_p, _c.c_void_p]),
    "hoff_group_remove": (_c.c_int, [_c.c_void_p, _c.c_void_p]),
    "hoff_group_evict": (_c.c_int, [_c.c_void_p, _c.c_void_p]),
    "hoff_group_prefetch": (_c.c_int, [_c.c_void_p, _c.c_void_p]),
    "hoff_group_wait": (_c.c_int, [_c.c_void_p, _c.c_void_p, _c.c_uint]),
    "hoff_group_release": (_c.c_int, [_c.c_void_p]),
    "hoff_group_clear": (_c.c_int, [_c.c_void_p]),
    "hoff_group_abort": (_c.c_int, [_c.c_void_p]),
    "hoff_group_info": (_c.c_int, [_c.c_void_p, _c.c_void_p]),
    "hoff_sim_compute": (_c.c_int, [_c.c_void_p, _c.c_void_p, _c.c_uint64]),
    "hoff_sim_wallclock": (_c.c_int, [_c.c_void_p, _c.c_int]),
}


def load():
    """The loaded libhoff (a ctypes.CDLL with prototypes set); raises LibraryNotFound."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            lib, path = _find()
            missing = []
            for name, (res, args) in _PROTOS.items():
                try:
                    f = getattr(lib, name)
                except AttributeError:
                    missing.append(name)
                    continue
                f.restype = res
                f.argtypes = args
            if missing:
                raise LibraryNotFound("hoff: %s lacks %s: it is older than this Python package; "
                                      "rebuild and reinstall hoff" % (path, ", ".join(missing)))
            _path = path
            _lib = lib
    return _lib


def path():
    """The path (or linker name) libhoff was loaded from."""
    load()
    return _path


def available():
    """True if libhoff.so can be loaded."""
    try:
        load()
        return True
    except LibraryNotFound:
        return False


def last_error():
    msg = load().hoff_last_error()
    return msg.decode(errors="replace") if msg else ""


def strerror(rc):
    msg = load().hoff_strerror(rc)
    return msg.decode(errors="replace") if msg else "error %d" % rc
