# test_native.py — the pip build's pieces that need no build: the loader takes the bundle (hoff/_native) after
# HOFF_LIBRARY and before the install prefix, its messages, the console scripts, and build_native's ELF
# rpath edit and dependency message.  The build itself: tests/pip_install.sh.  Threading: pytest's, one process.
import os
import shutil
import subprocess
import sys

import pytest

from conftest import PYDIR, builddir

from hoff import _lib, _native

sys.path.insert(0, PYDIR)
import build_native  # noqa: E402  (python/build_native.py: setup.py's helper, not in the package)


@pytest.fixture
def bundle(tmp_path, monkeypatch, libhoff):
    """A fake bundle directory holding a copy of the library under test as libhoff.so.0."""
    real = os.path.realpath(_lib.path())
    shutil.copy(real, tmp_path / "libhoff.so.0")
    monkeypatch.setattr(_native, "DIR", str(tmp_path))
    monkeypatch.setattr(_native, "_info", None)
    return tmp_path, real


def test_bundle_before_the_prefix(bundle, monkeypatch):
    d, _ = bundle
    monkeypatch.delenv("HOFF_LIBRARY", raising=False)
    monkeypatch.setattr(_lib, "_pkg_config_libdir", lambda: pytest.fail("the prefix was searched"))
    lib, path = _lib._find()
    assert path == str(d / "libhoff.so.0") and hasattr(lib, "hoff_torch_alloc")


def test_hoff_library_overrides_the_bundle(bundle, monkeypatch):
    _, real = bundle
    monkeypatch.setenv("HOFF_LIBRARY", real)
    assert _lib._find()[1] == real


def test_a_bundle_that_does_not_load_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "libhoff.so.0").write_bytes(b"not a library")
    (tmp_path / "build.json").write_text('{"runtime": [{"soname": "liburing.so.2", "package": "liburing2"}]}')
    monkeypatch.setattr(_native, "DIR", str(tmp_path))
    monkeypatch.setattr(_native, "_info", None)
    monkeypatch.delenv("HOFF_LIBRARY", raising=False)
    monkeypatch.setattr(_lib, "_pkg_config_libdir", lambda: pytest.fail("fell through to the prefix"))
    with pytest.raises(_lib.LibraryNotFound) as e:
        _lib._find()
    msg = str(e.value)
    assert "bundled" in msg and "liburing.so.2 (liburing2)" in msg and "HOFF_LIBRARY" in msg


def test_the_missing_runtime_library_is_named(tmp_path, monkeypatch):
    (tmp_path / "build.json").write_text('{"runtime": [{"soname": "libz.so.1", "package": "zlib1g"}, '
                                         '{"soname": "liburing.so.2", "package": "liburing2"}]}')
    monkeypatch.setattr(_native, "DIR", str(tmp_path))
    monkeypatch.setattr(_native, "_info", None)
    msg = _native.load_error_text("/x/libhoff.so.0", OSError(
        "liburing.so.2: cannot open shared object file: No such file or directory"))
    assert "liburing.so.2 is not installed: install liburing2" in msg
    assert "libz.so.1 (zlib1g), liburing.so.2 (liburing2)" in msg


def test_no_bundle_no_candidate(monkeypatch, tmp_path):
    monkeypatch.setattr(_native, "DIR", str(tmp_path))
    monkeypatch.setattr(_native, "_info", None)
    assert _native.library() is None and _native.info() == {}


def _script(tmp_path, body):
    code = ("import sys; sys.path.insert(0, %r); from hoff import _native; _native.DIR = %r; %s"
            % (os.path.dirname(os.path.dirname(os.path.abspath(_native.__file__))), str(tmp_path), body))
    env = dict(os.environ)
    env.pop("HOFF_RECORD_LIBRARY", None)
    return subprocess.run([sys.executable, "-c", code, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, env=env, timeout=60)


def test_console_script_without_a_bundle(tmp_path):
    r = _script(tmp_path, "_native.hoff_plan()")
    assert r.returncode == 127 and "HOFF_PIP_NATIVE=0" in r.stderr


def test_hoff_record_gets_the_bundled_preload(tmp_path):
    rec = tmp_path / "hoff-record"
    rec.write_text('#!/bin/sh\necho "lib=$HOFF_RECORD_LIBRARY args=$*"\n')
    rec.chmod(0o755)
    (tmp_path / "libhoff-record.so").write_bytes(b"")
    r = _script(tmp_path, "_native.hoff_record()")
    assert r.returncode == 0 and r.stdout.strip() == "lib=%s args=--help" % (tmp_path / "libhoff-record.so")


def test_elf_needed_and_runpath(libhoff):
    sim = os.path.join(builddir(), ".libs", "libhoff-sim.so")
    if not os.path.exists(sim):
        pytest.skip("no %s" % sim)
    needed, rp = build_native.elf_needed_runpath(sim)
    assert "libhoff.so.0" in needed and rp  # the build tree's: libtool's directory
    assert build_native.elf_needed_runpath(__file__) == (None, None)


def test_runpath_starts_at_origin(tmp_path):
    cc = shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler")
    src = tmp_path / "t.c"
    src.write_text("int t(void) { return 1; }\n")
    for rpath, want in (("/tmp/build/.libs:/usr/local/lib:$ORIGIN", "$ORIGIN"),
                        ("/tmp/build/.libs:$ORIGIN:/usr/local/cuda/lib64", "$ORIGIN:/usr/local/cuda/lib64"),
                        ("$ORIGIN", "$ORIGIN")):
        so = tmp_path / "libt.so"
        subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(src), "-Wl,--enable-new-dtags",
                        "-Wl,-rpath," + rpath], check=True)
        assert build_native.elf_needed_runpath(str(so))[1] == rpath
        assert build_native.runpath_from_origin(str(so)) == want
        assert build_native.elf_needed_runpath(str(so))[1] == want
    bad = tmp_path / "libu.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(bad), str(src), "-Wl,-rpath,/tmp/build/.libs"], check=True)
    with pytest.raises(build_native.NativeBuildError):
        build_native.runpath_from_origin(str(bad))


def test_dependency_message_is_one_line():
    msg = build_native.deps_message([("a C compiler (cc)", "gcc"), ("zlib headers (pkg-config: zlib >= 1.2)",
                                                                     "zlib1g-dev"), ("x", "gcc libc6-dev")])
    assert "\n" not in msg and "apt-get install gcc zlib1g-dev libc6-dev " in msg and "HOFF_PIP_NATIVE=0" in msg
