# hoff/_native — the native build bundled by `pip install ./python` (python/build_native.py): where its files
# are (libhoff.so.0, libhoff-sim.so, libhoff-record.so, hoff-plan, hoff-stat, hoff-record, build.json), what it
# needs at run time and why it does not load, and the console scripts that run its tools.
# Threading: the functions read files only (info() caches under a lock); the console scripts exec.
"""The bundle of a pip-built hoff.

Empty in the source tree and in a package installed with
``HOFF_PIP_NATIVE=0``: then :func:`library` is None and the loader
(hoff._lib) searches the install prefix.
"""

import json
import os
import re
import sys
import threading

DIR = os.path.dirname(os.path.abspath(__file__))
LIBRARY = "libhoff.so.0"

_lock = threading.Lock()
_info = None


def path(name):
    """The bundled file NAME, or None when it is not bundled."""
    p = os.path.join(DIR, name)
    return p if os.path.exists(p) else None


def library():
    """The bundled libhoff.so.0, or None."""
    return path(LIBRARY)


def info():
    """The build's manifest (backends, features, configure flags, runtime libraries); {} when not bundled."""
    global _info
    with _lock:
        if _info is None:
            try:
                with open(os.path.join(DIR, "build.json")) as f:
                    _info = json.load(f)
            except (OSError, ValueError):
                _info = {}
        return dict(_info)


def runtime_text():
    """'libz.so.1 (zlib1g), ...': what the bundle needs at run time."""
    return ", ".join("%s (%s)" % (d["soname"], d["package"]) for d in info().get("runtime", ())) or "nothing listed"


def load_error_text(path_, err):
    """The message for a bundled library that does not load: the missing library and its package, if named."""
    text = str(err)
    m = re.search(r"([\w.+-]+\.so[\w.]*): cannot open shared object file", text)
    hint = ""
    if m:
        so = m.group(1)
        pkg = next((d["package"] for d in info().get("runtime", ()) if d["soname"] == so), None)
        hint = "%s is not installed%s. " % (so, (": install " + pkg) if pkg else "")
    return ("hoff: the bundled %s cannot be loaded (%s). %sThe pip-built hoff needs at run time: %s "
            "(Debian 12 package names). Or set HOFF_LIBRARY to another libhoff.so."
            % (path_, text, hint, runtime_text()))


def _run(tool):
    exe = path(tool)
    if exe is None:
        sys.stderr.write("%s: this hoff package has no bundled %s (it was installed with HOFF_PIP_NATIVE=0); "
                         "reinstall it without, or use the %s of 'make install'\n" % (tool, tool, tool))
        sys.exit(127)
    if tool == "hoff-record":
        rec = path("libhoff-record.so")
        if rec:
            os.environ.setdefault("HOFF_RECORD_LIBRARY", rec)  # hoff-record(1): the preload to use
    os.execv(exe, [tool] + sys.argv[1:])


def hoff_plan():
    _run("hoff-plan")


def hoff_stat():
    _run("hoff-stat")


def hoff_record():
    _run("hoff-record")
