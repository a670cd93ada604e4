# conftest.py — where the tests find hoff's pieces: the package (installed, or ../ in a source tree), libhoff.so
# (HOFF_LIBRARY) and hoff-record (TEST_HOFF_RECORD, or TEST_HOFF_BUILDDIR/hoff-record).  Threading: pytest's, one process.
"""Fixtures shared by the tests.

Environment:
  HOFF_LIBRARY      libhoff.so (else the package's own search)
  TEST_HOFF_RECORD   the hoff-record launcher (else TEST_HOFF_BUILDDIR/hoff-record)
  TEST_HOFF_BUILDDIR a build directory (default: ../../build from here)
  TEST_HOFF_REQUIRE=1 a missing piece fails the tests that need it instead of skipping them

A relative path in them is taken from the directory pytest starts in, and handed to the tests absolute: some
run their commands from another directory.
"""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)

try:
    import hoff  # installed with pip install ./python (or found on sys.path)
except ImportError:
    sys.path.insert(0, PYDIR)
    import hoff
# Children must import the same package: the source tree's, when that is the one in use.
EXTRA_PATH = PYDIR if os.path.dirname(os.path.dirname(os.path.abspath(hoff.__file__))) == PYDIR else None

REQUIRE = os.environ.get("TEST_HOFF_REQUIRE", "") not in ("", "0")


def missing(why):
    if REQUIRE:
        pytest.fail(why + " (TEST_HOFF_REQUIRE is set)")
    pytest.skip(why)


def builddir():
    return os.path.abspath(os.environ.get("TEST_HOFF_BUILDDIR") or os.path.join(PYDIR, "..", "build"))


@pytest.fixture(scope="session")
def libhoff():
    from hoff import _lib
    try:
        _lib.load()
    except _lib.LibraryNotFound as e:
        missing("libhoff.so not found (set HOFF_LIBRARY): %s" % e)
    return _lib.load()


@pytest.fixture(scope="session")
def hoff_record():
    path = os.path.abspath(os.environ.get("TEST_HOFF_RECORD") or os.path.join(builddir(), "hoff-record"))
    if not os.access(path, os.X_OK):
        missing("hoff-record not found at %s (set TEST_HOFF_RECORD or TEST_HOFF_BUILDDIR)" % path)
    lib = os.path.join(os.path.dirname(path), ".libs", "libhoff-record.so")
    if os.path.exists(lib):
        r = subprocess.run(["readelf", "-d", lib], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
        if any(s in r.stdout for s in (b"libasan", b"libubsan", b"libtsan")):
            pytest.skip("libhoff-record.so is linked against a sanitizer runtime: it cannot be LD_PRELOADed")
    return path


@pytest.fixture(scope="session")
def torch():
    try:
        import torch as t
    except ImportError:
        missing("PyTorch is not importable by %s" % sys.executable)
    return t


def child_env(**extra):
    """The environment of a child Python that must import this hoff package."""
    env = dict(os.environ)
    if EXTRA_PATH:
        env["PYTHONPATH"] = EXTRA_PATH + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for k in ("HOFF_RECORD_OUTPUT", "HOFF_RECORD_STEP", "HOFF_RECORD_THRESHOLD", "HOFF_STEP_MARK"):
        env.pop(k, None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(args, timeout=300, **env):
    """Run a command; returns CompletedProcess with text stdout/stderr."""
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                          env=child_env(**env), check=False)


def read_trace(path):
    """The event lines of a hoff trace (plain or gzip) as lists of fields."""
    import gzip
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        lines = [ln.rstrip("\n").split(" ") for ln in f]
    assert lines[0] == ["hoff-trace", "1"]
    return lines
