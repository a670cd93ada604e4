# test_install.py — hoff.install(): a clear error without CUDA, with a PyTorch too old for pluggable allocators,
# and when it comes too late; the library search's error; the installed path (with a stand-in PyTorch).
# Threading: single-threaded; what changes process-wide state runs in a child process.
import json
import sys

import pytest

import hoff
from conftest import run


def test_no_cuda(torch):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(RuntimeError) as e:
        hoff.install()
    msg = str(e.value)
    assert "CUDA is not available" in msg and "hoff-record" in msg
    assert not hoff.is_installed()


def test_old_pytorch(torch, monkeypatch, libhoff):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delattr(torch.cuda.memory, "CUDAPluggableAllocator", raising=False)
    with pytest.raises(RuntimeError, match=r"PyTorch >= 2\.0"):
        hoff.install()
    assert not hoff.is_installed()


def test_too_late(torch, monkeypatch, libhoff):
    class Fake:
        def __init__(self, path, alloc, free):
            self.args = (path, alloc, free)

    def change(_):
        raise RuntimeError("Can't swap an already initialized allocator")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda.memory, "CUDAPluggableAllocator", Fake, raising=False)
    monkeypatch.setattr(torch.cuda.memory, "change_current_allocator", change, raising=False)
    with pytest.raises(RuntimeError) as e:
        hoff.install()
    msg = str(e.value)
    assert "too late" in msg and "already initialised" in msg and "python -m hoff" in msg
    assert not hoff.is_installed()


INSTALL_OK = r"""
import json, torch, hoff
calls = []
class Fake:
    def __init__(self, path, alloc, free):
        calls.append((path, alloc, free))
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.cuda.memory.CUDAPluggableAllocator = Fake
torch.cuda.memory.change_current_allocator = lambda a: calls.append("changed")
path = hoff.install(hoff.OffloadConfig(max_resident_activation_mb=256))
again = hoff.install()
print(json.dumps({"path": path, "again": again, "calls": calls, "installed": hoff.is_installed(),
                  "budget": hoff.memory_stats(0)["budget_bytes"]}))
"""


def test_install_with_a_stand_in_pytorch(libhoff, torch):
    # the plain C entry points; test_seams_runtime.py tests the shim
    r = run([sys.executable, "-c", INSTALL_OK], HOFF_SHIM="0")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["installed"] and out["path"] == out["again"] == hoff.library_path()
    assert out["calls"] == [[hoff.library_path(), "hoff_torch_alloc", "hoff_torch_free"], "changed"]
    assert out["budget"] == 256 << 20


def test_library_not_found(tmp_path):
    r = run([sys.executable, "-c", "import hoff; hoff.library_path()"], HOFF_LIBRARY=str(tmp_path / "nope.so"))
    assert r.returncode != 0
    assert "HOFF_LIBRARY=" in r.stderr and "cannot be used" in r.stderr


def test_search_lists_where_it_looked(monkeypatch, tmp_path):
    from hoff import _lib
    monkeypatch.delenv("HOFF_LIBRARY", raising=False)
    monkeypatch.setattr(_lib._native, "library", lambda: None)  # as installed with HOFF_PIP_NATIVE=0
    monkeypatch.setattr(_lib, "_pkg_config_libdir", lambda: (None, "pkg-config knows no 'hoff'"))
    monkeypatch.setattr(_lib, "_prefix_dirs", lambda: [str(tmp_path / "prefix" / "lib")])
    monkeypatch.setattr(_lib, "_system_dirs", lambda: [str(tmp_path / "usr" / "lib")])
    monkeypatch.setattr(_lib.ctypes.util, "find_library", lambda name: None)
    with pytest.raises(_lib.LibraryNotFound) as e:
        _lib._find()
    msg = str(e.value)
    for part in ("HOFF_LIBRARY (not set)", "bundled library", "pkg-config", str(tmp_path / "prefix" / "lib"),
                 str(tmp_path / "usr" / "lib"), "dynamic linker", "make install"):
        assert part in msg
