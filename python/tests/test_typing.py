# test_typing.py — the package as typed API: HoffError and LibraryNotFound from the public hoff.errors (and hoff),
# the same classes as the old private import paths; the PEP 561 marker py.typed in the package and in what pip
# packages; every function and class hoff exports annotated.  No libhoff needed.  Threading: single-threaded.
import inspect
import os

import hoff


def test_hoff_error_is_public():
    from hoff import HoffError, LibraryNotFound
    from hoff.errors import HoffError as E, LibraryNotFound as L
    from hoff._lib import LibraryNotFound as old_l
    from hoff._targets import HoffError as old_e

    assert HoffError is E is old_e and LibraryNotFound is L is old_l
    assert HoffError.__module__ == "hoff.errors"
    e = HoffError("hoff: no", 16)
    assert isinstance(e, RuntimeError) and e.errno == 16 and str(e) == "hoff: no"
    assert HoffError("x").errno == 0
    assert "HoffError" in hoff.__all__ and "LibraryNotFound" in hoff.__all__


def test_py_typed_is_shipped():
    pkg = os.path.dirname(os.path.abspath(hoff.__file__))
    assert os.path.isfile(os.path.join(pkg, "py.typed")), "no py.typed in %s" % pkg
    pyproject = os.path.join(os.path.dirname(pkg), "pyproject.toml")
    if os.path.isfile(pyproject):  # a source tree (an installed package has no pyproject.toml beside it)
        with open(pyproject) as f:
            data = [line for line in f if line.startswith("hoff = [")]
        assert data and '"py.typed"' in data[0], "pyproject.toml's package-data does not ship py.typed: %s" % data


def test_public_api_is_annotated():
    missing = []
    for name in hoff.__all__:
        obj = getattr(hoff, name)
        if inspect.ismodule(obj) or (inspect.isclass(obj) and issubclass(obj, BaseException)):
            continue
        fn = obj.__init__ if inspect.isclass(obj) else obj
        if "return" not in getattr(fn, "__annotations__", {}):
            missing.append(name)
    for name, obj in vars(hoff.swap.SwapManager).items():
        if inspect.isfunction(obj) and not name.startswith("_") and "return" not in obj.__annotations__:
            missing.append("swap.SwapManager." + name)
    assert not missing, "not annotated: %s" % ", ".join(missing)
