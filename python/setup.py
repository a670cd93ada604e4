# setup.py — pip's build of the hoff package: the metadata is pyproject.toml's; this adds hoff's own C build
# (build_native.py) into hoff/_native/, the console scripts of its tools and a platform wheel tag, unless
# HOFF_PIP_NATIVE=0 (the pure-Python package).  Threading: none (one build process).
import atexit
import os
import shutil
import sys
import tempfile

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import build_native  # noqa: E402  (beside this file, not part of the package)


def _fail(e):
    sys.stderr.write("\nhoff: %s\n\n" % e)
    sys.exit(1)


try:
    NATIVE = build_native.wanted()
    # At once, before setuptools does anything: the sources and every build dependency, in one message.
    TOP = build_native.find_source(HERE) if NATIVE else None
    if NATIVE:
        build_native.check_deps(TOP)
except build_native.NativeBuildError as e:
    _fail(e)


class BuildPy(build_py):
    """The Python files, then the native bundle in BUILD_LIB/hoff/_native/."""

    def run(self):
        if NATIVE and getattr(self, "editable_mode", False):
            _fail("pip install -e cannot carry hoff's native build (an editable install maps the source tree, "
                  "where the bundle is not): use 'pip install ./python', or 'HOFF_PIP_NATIVE=0 pip install -e "
                  "./python' with HOFF_LIBRARY set to a built libhoff.so")
        super().run()
        if not NATIVE:
            build_native.say("HOFF_PIP_NATIVE=0: the Python package alone (no libhoff.so bundled; it needs one "
                             "from 'make install' or HOFF_LIBRARY)")
            return
        try:
            build_native.build(TOP, os.path.join(self.build_lib, "hoff", "_native"))
        except build_native.NativeBuildError as e:
            _fail(e)


class NativeDistribution(Distribution):
    """Binaries inside: a platform wheel (installed in platlib), not py3-none-any."""

    def has_ext_modules(self):
        return NATIVE


cmdclass = {"build_py": BuildPy}
try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        bdist_wheel = None
if bdist_wheel is not None:
    class BdistWheel(bdist_wheel):
        """py3-none-PLATFORM: the bundle is C with no Python ABI, so any Python 3 of the platform runs it."""

        def get_tag(self):
            python, abi, plat = super().get_tag()
            return ("py3", "none", plat) if NATIVE else (python, abi, plat)

    cmdclass["bdist_wheel"] = BdistWheel

# setuptools' own build directory and egg-info in a temporary one: nothing is left in python/, and no earlier build's
# files (an older bundle) can reach a wheel.
_base = tempfile.mkdtemp(prefix="hoff-pip-setuptools-")
atexit.register(shutil.rmtree, _base, True)

scripts = ["%s = hoff._native:%s" % (t, t.replace("-", "_")) for t in build_native.TOOLS] if NATIVE else []
setup(
    distclass=NativeDistribution,
    cmdclass=cmdclass,
    entry_points={"console_scripts": scripts},
    options={"build": {"build_base": _base}, "egg_info": {"egg_base": _base}},
)
