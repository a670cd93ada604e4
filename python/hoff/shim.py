# shim.py — building and loading hoff's C++ shim (_shim/hoff_shim.cpp and _shim/hoff_marks.cpp) against the PyTorch of this process, at
# first use, into a per-user cache.  Threading: load() is process-wide, under a lock; the build is guarded across
# processes (the ranks of one job start together) by a lock file in the cache directory.
"""hoff's native piece for PyTorch (the "shim").

PyTorch's ``CUDAPluggableAllocator`` takes two C functions from Python; its
other hooks (empty cache, memory fraction, ``record_stream``, CUDA graph
pools) are C++ methods, and only a thrown C++ ``c10::OutOfMemoryError``
becomes ``torch.cuda.OutOfMemoryError``.  ``_shim/hoff_shim.cpp`` does those
things and nothing else (the shim's CUDA half, built when PyTorch has CUDA
and the CUDA runtime headers are found).  ``_shim/hoff_marks.cpp`` is hoff's
op marks as a ``RecordFunction`` callback (hoff.opmarks), which needs only
PyTorch's C++ headers (Debian's python3-torch has them in libtorch-dev).
It is compiled against the PyTorch that runs, the first time
``hoff.install()`` or a step's marks need it (a pip install has no PyTorch in its
isolated build environment, and PyTorch's C++ ABI changes between releases),
with the C++ compiler of the machine (``$CXX``, else ``c++``/``g++``; C++20,
as PyTorch's own headers need from 2.15: GCC 10 or later), and
kept in ``$HOFF_SHIM_CACHE`` (default ``$XDG_CACHE_HOME/hoff/shim``, else
``~/.cache/hoff/shim``), one build per PyTorch and shim source.

``HOFF_SHIM``: ``auto`` (default: build it; without it, hoff's Python-level
answers and op marks stand in and one warning says what is lost), ``0``
(never: the same answers, and no warning), ``1`` (required: hoff.install()
and a step's marks fail when it cannot be built or loaded).
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_shim", "hoff_shim.cpp")
MARKS_SOURCE = os.path.join(os.path.dirname(SOURCE), "hoff_marks.cpp")
HOOKS = ("init", "empty_cache", "memory_fraction", "record_stream", "graph_pool_begin", "graph_pool_end",
         "graph_pool_release")
BUILD_TIMEOUT = 600

_lock = threading.Lock()
_state = {"lib": None, "path": None}


class ShimError(RuntimeError):
    """The shim cannot be built or loaded; the message says why and what to install."""


def mode():
    """HOFF_SHIM as one of "auto", "off", "required" (ValueError for anything else)."""
    v = os.environ.get("HOFF_SHIM", "auto").strip().lower()
    if v in ("", "auto"):
        return "auto"
    if v in ("0", "off", "no", "false"):
        return "off"
    if v in ("1", "on", "yes", "true", "required"):
        return "required"
    raise ValueError("HOFF_SHIM=%r: expected auto, 0 (never build the shim) or 1 (require it)"
                     % os.environ.get("HOFF_SHIM"))


def cache_dir():
    d = os.environ.get("HOFF_SHIM_CACHE")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hoff", "shim")


def _compiler():
    for c in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if c and shutil.which(c.split()[0]):
            return c
    return None


def _cuda_include(torch):
    """A directory with cuda_runtime_api.h: the nvidia-cuda-runtime wheel's that PyTorch's CUDA wheels depend on
    (the CUDA release PyTorch was built with), else the CUDA toolkit's ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda)."""
    cands = []
    try:  # the wheels PyTorch's CUDA builds install: nvidia/cuda_runtime/include (CUDA 12), nvidia/cu13/include
        import nvidia
        for root in getattr(nvidia, "__path__", ()):
            for sub in sorted(os.listdir(root)):
                cands.append(os.path.join(root, sub, "include"))
    except (ImportError, OSError):
        pass
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            cands.append(os.path.join(os.environ[env], "include"))
    cands += ["/usr/local/cuda/include", "/usr/include"]
    for d in cands:
        if os.path.isfile(os.path.join(d, "cuda_runtime_api.h")):
            return d
    return None


def cuda_half(torch):
    """None when the shim's CUDA half (the allocator's hooks, hoff_shim.cpp) can be built against this PyTorch,
    else the reason it cannot (a CPU-only PyTorch, no CUDA runtime headers): the marks are built without it."""
    root = os.path.dirname(os.path.abspath(torch.__file__))
    inc = os.path.join(root, "include")
    if not os.path.isfile(os.path.join(inc, "torch", "csrc", "cuda", "CUDAPluggableAllocator.h")):
        return ("this PyTorch (%s) has no CUDAPluggableAllocator headers under %s (a CPU-only build, or one older "
                "than 2.0)" % (torch.__version__, inc))
    if not os.path.exists(os.path.join(root, "lib", "libtorch_cuda.so")):
        return "this PyTorch (%s) has no libtorch_cuda.so (a CPU-only build)" % torch.__version__
    if not _cuda_include(torch):
        return ("no CUDA runtime headers (cuda_runtime_api.h) in $CUDA_HOME/include, the nvidia-cuda-runtime "
                "wheel or /usr/local/cuda/include")
    return None


def build_command(torch, out):
    """The compiler command line that builds the shim into out, or raise ShimError saying what is missing.
    The op marks (hoff_marks.cpp) need PyTorch's C++ headers only; the allocator's hooks (hoff_shim.cpp) are
    added when cuda_half(torch) allows."""
    cxx = _compiler()
    if not cxx:
        raise ShimError("no C++ compiler (set CXX, or install one: Debian's g++)")
    root = os.path.dirname(os.path.abspath(torch.__file__))
    inc = os.path.join(root, "include")
    if not os.path.isfile(os.path.join(inc, "ATen", "record_function.h")):
        raise ShimError("this PyTorch (%s) ships no C++ headers under %s (Debian's python3-torch has them in "
                        "libtorch-dev)" % (torch.__version__, inc))
    libdir = os.path.join(root, "lib")
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    # C++20: the headers of PyTorch 2.15 need it (std::bit_width, std::strong_ordering); 1.13, 2.4 and 2.9 build
    # with it too.  CUDAPluggableAllocator lives in libtorch_cuda (2.5 and later) or libtorch_python (2.4 and
    # before); with --no-undefined a hook this PyTorch lacks fails the build here, not the process at its first
    # allocation.
    sources, defs, incs = [MARKS_SOURCE], [], []
    libs = ["-lc10", "-ltorch_cpu"]
    if cuda_half(torch) is None:
        sources.insert(0, SOURCE)
        defs.append("-DHOFF_SHIM_CUDA=1")
        incs.append("-I" + _cuda_include(torch))
        libs += ["-lc10_cuda", "-ltorch_cuda"]
        if os.path.exists(os.path.join(libdir, "libtorch_python.so")):
            libs.append("-ltorch_python")
    return cxx.split() + [
        "-O2", "-DNDEBUG", "-std=c++20", "-shared", "-fPIC", "-fvisibility=hidden",
        "-D_GLIBCXX_USE_CXX11_ABI=%d" % abi] + defs + [
        "-I" + inc, "-I" + os.path.join(inc, "torch", "csrc", "api", "include")] + incs + sources + [
        "-L" + libdir] + libs + ["-Wl,--no-undefined", "-Wl,-rpath," + libdir, "-o", out]


def _key(torch):
    h = hashlib.sha256()
    for src in (SOURCE, MARKS_SOURCE):
        with open(src, "rb") as f:
            h.update(f.read())
    for part in (torch.__version__, os.path.abspath(torch.__file__), _compiler() or "", sys.version,
                 cuda_half(torch) is None):
        h.update(b"\0" + str(part).encode())
    return "torch-%s-%s" % (torch.__version__.replace("+", "_"), h.hexdigest()[:16])


def build(torch):
    """The path of the shim built for this PyTorch (built now if the cache has none); ShimError otherwise."""
    d = os.path.join(cache_dir(), _key(torch))
    out = os.path.join(d, "hoff_shim.so")
    if os.path.isfile(out):
        return out
    try:
        os.makedirs(d, exist_ok=True)
    except OSError as e:
        raise ShimError("cannot create the shim's cache directory %s: %s (set HOFF_SHIM_CACHE)" % (d, e)) from e
    import fcntl
    with open(os.path.join(d, ".lock"), "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)  # another rank may be building it: wait for it
        if os.path.isfile(out):
            return out
        fd, tmp = tempfile.mkstemp(prefix=".hoff_shim.", suffix=".so", dir=d)
        os.close(fd)
        try:
            cmd = build_command(torch, tmp)
            sys.stderr.write("hoff: building its PyTorch shim for torch %s (once per PyTorch version) in %s\n"
                             % (torch.__version__, d))
            try:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT,
                                   check=False)
            except (OSError, subprocess.SubprocessError) as e:
                raise ShimError("the compiler did not run (%s): %s" % (" ".join(cmd[:1]), e)) from e
            if r.returncode != 0:
                text = r.stdout.decode(errors="replace").strip().splitlines()
                raise ShimError("the build failed (exit %d): %s\n  command: %s" % (
                    r.returncode, "\n  ".join(text[-12:]), " ".join(cmd)))
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):  # a failed build leaves nothing behind
                os.unlink(tmp)
    return out


def load(torch, libhoff_path):
    """The loaded shim, bound to libhoff at libhoff_path (ctypes.CDLL); ShimError when it cannot be.  Its marks
    are bound to libhoff's contexts and, when the process runs under hoff-record, to the recorder; its allocator
    hooks, when it has them (has_allocator), to libhoff."""
    with _lock:
        if _state["lib"] is not None:
            return _state["lib"]
        path = build(torch)
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise ShimError("cannot load the shim %s: %s (remove it to rebuild)" % (path, e)) from e
        err = ctypes.create_string_buffer(1024)
        lib.hoff_marks_bind.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.hoff_marks_start.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_void_p),
                                         ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p,
                                         ctypes.c_size_t]
        lib.hoff_marks_stop.restype = None
        lib.hoff_marks_phase_state.argtypes = [ctypes.c_int, ctypes.c_int]
        lib.hoff_marks_phase_state.restype = None
        lib.hoff_marks_quiet.argtypes = [ctypes.c_int]
        lib.hoff_marks_opaque.argtypes = [ctypes.c_int]
        lib.hoff_marks_access.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        lib.hoff_marks_boundary.argtypes = [ctypes.c_char_p]
        lib.hoff_marks_counts.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_int]
        lib.hoff_marks_counts.restype = None
        if lib.hoff_marks_bind(libhoff_path.encode() if libhoff_path else None, err, len(err)) != 0:
            raise ShimError("the shim's marks cannot use %s: %s" % (libhoff_path, err.value.decode(errors="replace")))
        if has_allocator(lib) and libhoff_path:  # (without libhoff, hoff_shim_alloc refuses until it is bound)
            lib.hoff_shim_bind.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
            lib.hoff_shim_attach.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            lib.hoff_shim_counts.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_int]
            lib.hoff_shim_counts.restype = None
            lib.hoff_shim_selftest.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_double, ctypes.c_void_p,
                                               ctypes.c_uint64, ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p),
                                               ctypes.c_char_p, ctypes.c_size_t]
            if lib.hoff_shim_bind(libhoff_path.encode(), err, len(err)) != 0:
                raise ShimError("the shim cannot use %s: %s" % (libhoff_path, err.value.decode(errors="replace")))
        _state["lib"], _state["path"] = lib, path
        return lib


def has_allocator(lib):
    """Does the loaded shim have its CUDA half (the allocator's alloc/free and hooks)?"""
    return hasattr(lib, "hoff_shim_alloc")


def attach(lib):
    """Register every hook on PyTorch's current allocator (made from the shim's alloc/free)."""
    err = ctypes.create_string_buffer(1024)
    if lib.hoff_shim_attach(err, len(err)) != 0:
        raise ShimError("the shim cannot register its hooks: %s" % err.value.decode(errors="replace"))


def loaded():
    """The loaded shim (ctypes.CDLL), or None."""
    return _state["lib"]


def path():
    return _state["path"]


def hook_counts():
    """{hook: calls} of the loaded shim's hooks, or {} without one."""
    lib = _state["lib"]
    if lib is None or not has_allocator(lib):
        return {}
    arr = (ctypes.c_uint64 * len(HOOKS))()
    lib.hoff_shim_counts(arr, len(HOOKS))
    return dict(zip(HOOKS, (int(x) for x in arr)))
