# build_native.py — pip's native build of hoff: checks the build dependencies, runs hoff's own Autotools build
# of the C sources around python/ in a temporary copy and bundles libhoff.so.0, libhoff-sim.so, libhoff-record.so
# and the tools in the package (hoff/_native/) with an rpath of $ORIGIN (then the CUDA toolkit's lib directory).
# Used by setup.py (not installed); `python3 build_native.py --check-deps` runs only the dependency check.  Threading: none (one build process).
"""The native part of ``pip install ./python`` (python/README.md, "Installing").

``HOFF_PIP_NATIVE=0`` leaves it out (a pure-Python package that needs a
libhoff.so from ``make install`` or ``HOFF_LIBRARY``).
``HOFF_PIP_CONFIGURE_FLAGS`` is added to configure's arguments
(``--without-cuda``; ``--without-liburing`` and its kin also drop that
dependency from the check).
"""

import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile

# What configure.ac needs, as (what, Debian package).  liburing, hwloc and zlib are optional to configure; the
# pip build asks for them (--with-X) so that every pip-built hoff has the NVMe tier, NUMA placement and .gz
# traces; HOFF_PIP_CONFIGURE_FLAGS=--without-X drops one.
PKG_DEPS = (  # (configure option, pkg-config module, what, Debian package, header)
    ("liburing", "liburing >= 2.0", "liburing headers", "liburing-dev", "liburing.h"),
    ("hwloc", "hwloc >= 2.0", "hwloc headers", "libhwloc-dev", "hwloc.h"),
    ("zlib", "zlib >= 1.2", "zlib headers", "zlib1g-dev", "zlib.h"),
)
AUTOTOOLS = (("autoreconf", "autoconf"), ("autoconf", "autoconf"), ("aclocal", "automake"),
             ("automake", "automake"), ("libtoolize", "libtool"))
# The libraries the bundle links, by soname prefix: what a machine that runs the wheel needs (Debian 12 names).
RUNTIME_PACKAGES = (
    ("libz.so.", "zlib1g"),
    ("liburing.so.", "liburing2"),
    ("libhwloc.so.", "libhwloc15"),
    ("libcudart.so.", "the CUDA runtime: a CUDA toolkit's libcudart, in the build's toolkit directory (the "
                      "rpath) or on the dynamic linker's path"),
)
GLIBC = ("libc.so.", "libm.so.", "libdl.so.", "libpthread.so.", "librt.so.", "ld-linux")
TARGETS = ("libhoff.la", "libhoff-sim.la", "libhoff-record.la", "hoff-plan", "hoff-stat", "hoff-record")
LIBS = ("libhoff.so.0", "libhoff-sim.so", "libhoff-record.so")
TOOLS = ("hoff-plan", "hoff-stat", "hoff-record")
MANIFEST = "build.json"


class NativeBuildError(RuntimeError):
    """The native build cannot be made: the message says why and what to do."""


def say(msg):
    print("hoff: " + msg, flush=True)


def wanted():
    """False when HOFF_PIP_NATIVE=0 (the pure-Python package); NativeBuildError for a value it does not know."""
    v = os.environ.get("HOFF_PIP_NATIVE", "1").strip()
    if v in ("", "1"):
        return True
    if v == "0":
        return False
    raise NativeBuildError("HOFF_PIP_NATIVE=%s: expected 1 (build hoff's C library into the package, the "
                           "default) or 0 (the Python package alone)" % v)


def find_source(here):
    """The hoff source tree around python/ (HERE's parent), or NativeBuildError saying what to do."""
    top = os.path.dirname(os.path.abspath(here))
    ac = os.path.join(top, "configure.ac")
    try:
        with open(ac, encoding="utf-8", errors="replace") as f:
            ok = "AC_INIT([hoff]" in f.read()
    except OSError:
        ok = False
    if not ok:
        raise NativeBuildError(
            "cannot build hoff's C library: %s is not hoff's source tree (no configure.ac of hoff there; pip "
            "was given a copy of python/ without the C sources around it).  Run 'pip install ./python' in a "
            "hoff checkout or release tarball, or set HOFF_PIP_NATIVE=0 for the Python package alone (it then "
            "needs a libhoff.so from 'make install', or HOFF_LIBRARY)." % top)
    return top


def configure_flags():
    return shlex.split(os.environ.get("HOFF_PIP_CONFIGURE_FLAGS", ""))


def _run_ok(argv, **kw):
    try:
        return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60,
                              check=False, **kw).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def missing_deps(top, flags=None, path=None):
    """[(what, Debian package)] that the build lacks (empty when it can run)."""
    flags = configure_flags() if flags is None else flags
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    which = lambda exe: shutil.which(exe, path=env.get("PATH", os.defpath))  # noqa: E731
    missing = []
    cc = shlex.split(env.get("CC", "") or "cc")
    tmp = tempfile.mkdtemp(prefix="hoff-depcheck-")
    try:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as f:
            f.write("#include <stdio.h>\nint main(void) { return puts(\"\") < 0; }\n")
        if not which(cc[0]):
            cc = None
            missing.append(("a C compiler (cc)", "gcc"))
        elif not _run_ok(cc + ["-o", os.path.join(tmp, "t"), src], env=env):
            missing.append(("a working C compiler with the C library's headers (%s cannot build a program)"
                            % " ".join(cc), "gcc libc6-dev"))
            cc = None
        if not which("make"):
            missing.append(("make", "make"))
        if not os.path.exists(os.path.join(top, "configure")):  # a checkout: configure is made by autoreconf
            seen = set()
            for exe, pkg in AUTOTOOLS:
                if not which(exe) and pkg not in seen:
                    seen.add(pkg)
                    missing.append(("%s (configure is not in a checkout: autoreconf makes it)" % exe, pkg))
        pkgconf = which("pkg-config")
        if not pkgconf:
            missing.append(("pkg-config", "pkg-config"))
        for opt, module, what, pkg, header in PKG_DEPS:
            if "--without-" + opt in flags or "--with-%s=no" % opt in flags:
                continue
            if pkgconf:
                ok = _run_ok([pkgconf, "--exists", module], env=env)
            elif cc:
                with open(src, "w") as f:
                    f.write("#include <%s>\n" % header)
                ok = _run_ok(cc + ["-E", "-o", os.devnull, src], env=env)
            else:
                ok = False
            if not ok:
                missing.append(("%s (pkg-config: %s)" % (what, module), pkg))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return missing


def deps_message(missing):
    pkgs = []
    for _, pkg in missing:
        for p in pkg.split():
            if p not in pkgs:
                pkgs.append(p)
    return ("cannot build hoff's C library: missing %s.  On Debian or Ubuntu: "
            "sudo apt-get install %s  (or set HOFF_PIP_NATIVE=0 for the Python package alone, with a libhoff.so "
            "from 'make install' or HOFF_LIBRARY)" % ("; ".join(w for w, _ in missing), " ".join(pkgs)))


def check_deps(top, path=None):
    """NativeBuildError with one message naming every missing piece and its Debian package."""
    missing = missing_deps(top, path=path)
    if missing:
        raise NativeBuildError(deps_message(missing))


# --- the copy, the build ------------------------------------------------------------------------------------

_GENERATED = {"config.status", "config.log", "config.h", "Makefile", "libtool", "stamp-h1", "hoff.pc"}


def copy_sources(top, dst):
    """The files of the tree (git ls-files in a checkout, else all but build*/ but build-aux/, and in-place build
    output)."""
    files = None
    if os.path.exists(os.path.join(top, ".git")) and shutil.which("git"):
        r = subprocess.run(["git", "-C", top, "ls-files", "-z"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           check=False)
        if r.returncode == 0:
            files = [p for p in r.stdout.decode("utf-8", "surrogateescape").split("\0") if p]
    if files is None:
        files = []
        for d, dirs, names in os.walk(top):
            rel = os.path.relpath(d, top)
            # build*/ are build directories (./build of quickstart and the like), except build-aux/: the
            # auxiliary scripts (AC_CONFIG_AUX_DIR) that a release tarball's configure needs.
            dirs[:] = [x for x in dirs if not (rel == "." and ((x.startswith("build") and x != "build-aux")
                                                               or x == ".git"))
                       and x not in (".libs", ".deps", "__pycache__", "autom4te.cache")
                       and not x.endswith(".egg-info") and not (rel == "python" and x == "build")]
            for n in names:
                if rel == "." and n in _GENERATED or n.endswith((".o", ".lo", ".la")):
                    continue
                files.append(os.path.normpath(os.path.join(rel, n)))
    for rel in files:
        s = os.path.join(top, rel)
        if not os.path.lexists(s) or os.path.isdir(s):
            continue  # deleted in the work tree, or a submodule
        d = os.path.join(dst, rel)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        shutil.copy2(s, d, follow_symlinks=False)


def _step(argv, log, cwd, what):
    with open(log, "ab") as f:
        f.write(("\n$ %s\n" % " ".join(shlex.quote(a) for a in argv)).encode())
        f.flush()
        rc = subprocess.run(argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, check=False).returncode
    if rc != 0:
        with open(log, "rb") as f:
            tail = f.read().decode(errors="replace").splitlines()[-40:]
        raise NativeBuildError("%s failed (exit %d); the end of its output:\n  %s" % (what, rc, "\n  ".join(tail)))


def _jobs():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# --- ELF: the dynamic section ---------------------------------------------------------------------------------

DT_NULL, DT_NEEDED, DT_STRTAB, DT_RPATH, DT_RUNPATH = 0, 1, 5, 15, 29


def _elf_dynamic(data):
    """(entries [(file offset, tag, value)], strtab file offset, fmt) of an ELF file's bytes, or None."""
    if data[:4] != b"\x7fELF":
        return None
    is64, end = data[4] == 2, "<" if data[5] == 1 else ">"
    if is64:
        phoff, = struct.unpack_from(end + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 0x36)
        ph, dyn = end + "IIQQQQQQ", end + "qQ"
    else:
        phoff, = struct.unpack_from(end + "I", data, 0x1c)
        phentsize, phnum = struct.unpack_from(end + "HH", data, 0x2a)
        ph, dyn = end + "IIIIIIII", end + "iI"
    loads, dynamic = [], None
    for i in range(phnum):
        f = struct.unpack_from(ph, data, phoff + i * phentsize)
        if is64:
            p_type, p_offset, p_vaddr, p_filesz = f[0], f[2], f[3], f[5]
        else:
            p_type, p_offset, p_vaddr, p_filesz = f[0], f[1], f[2], f[4]
        if p_type == 1:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == 2:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return None
    size = struct.calcsize(dyn)
    entries = []
    for off in range(dynamic[0], dynamic[0] + dynamic[1], size):
        tag, val = struct.unpack_from(dyn, data, off)
        if tag == DT_NULL:
            break
        entries.append((off, tag, val))
    strtab = None
    for _, tag, val in entries:
        if tag == DT_STRTAB:
            for vaddr, offset, filesz in loads:
                if vaddr <= val < vaddr + filesz:
                    strtab = val - vaddr + offset
    if strtab is None:
        return None
    return entries, strtab, dyn


def _cstr(data, off):
    return data[off:data.index(b"\0", off)].decode("utf-8", "surrogateescape")


def elf_needed_runpath(path):
    """([NEEDED sonames], RUNPATH or RPATH or None) of an ELF file; (None, None) for another file."""
    with open(path, "rb") as f:
        data = f.read()
    d = _elf_dynamic(data)
    if d is None:
        return None, None
    entries, strtab, _ = d
    needed = [_cstr(data, strtab + v) for _, t, v in entries if t == DT_NEEDED]
    rp = [_cstr(data, strtab + v) for _, t, v in entries if t in (DT_RUNPATH, DT_RPATH)]
    return needed, (rp[0] if rp else None)


def runpath_from_origin(path):
    """Make the file's RUNPATH (or RPATH) start at its $ORIGIN component.  The link put $ORIGIN (and, with the cuda
    backend, the CUDA toolkit's library directory) after the build tree's directories that libtool adds for an
    uninstalled library: the entry is pointed at that tail of its own string (no string is rewritten, so
    strings the linker merged stay intact).  Returns the new RUNPATH."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    d = _elf_dynamic(bytes(data))
    if d is None:
        return None
    entries, strtab, fmt = d
    new = None
    for off, tag, val in entries:
        if tag not in (DT_RUNPATH, DT_RPATH):
            continue
        s = _cstr(bytes(data), strtab + val)
        parts = s.split(":")
        if "$ORIGIN" not in parts:
            raise NativeBuildError("%s: its rpath %r has no $ORIGIN" % (path, s))
        cut = len(":".join(parts[:parts.index("$ORIGIN")] + [""])) if parts[0] != "$ORIGIN" else 0
        struct.pack_into(fmt, data, off, tag, val + cut)
        new = s[cut:]
    with open(path, "wb") as f:
        f.write(data)
    return new


def runtime_needs(dest):
    """[{"soname", "package"}] of the libraries outside glibc and the bundle that the bundled files link."""
    out, seen = [], set(LIBS)
    for name in sorted(os.listdir(dest)):
        needed, _ = elf_needed_runpath(os.path.join(dest, name))
        for so in needed or ():
            if so in seen or so.startswith(GLIBC):
                continue
            seen.add(so)
            pkg = next((p for prefix, p in RUNTIME_PACKAGES if so.startswith(prefix)), "(no package known)")
            out.append({"soname": so, "package": pkg})
    return out


# --- the build --------------------------------------------------------------------------------------------------

def _config_h(path):
    defs = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            p = line.split()
            if len(p) >= 3 and p[0] == "#define":
                defs[p[1]] = p[2]
    return defs


def _verify(dest, tmp):
    """The bundle loads and resolves on this machine without the build tree, or NativeBuildError."""
    for name in LIBS + TOOLS:
        needed, rp = elf_needed_runpath(os.path.join(dest, name))
        if rp is not None and (not rp.startswith("$ORIGIN") or tmp in rp):
            raise NativeBuildError("%s keeps the rpath %r (only $ORIGIN and the CUDA toolkit's directory may "
                                   "be bundled)" % (name, rp))
    if shutil.which("ldd"):
        for name in LIBS + ("hoff-plan", "hoff-stat"):
            r = subprocess.run(["ldd", os.path.join(dest, name)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               check=False)
            text = r.stdout.decode(errors="replace")
            if "not found" in text:
                raise NativeBuildError("ldd %s: a library is not found:\n%s" % (name, text))
            if name == "libhoff-sim.so" and os.path.join(dest, "libhoff.so.0") not in text:
                raise NativeBuildError("ldd libhoff-sim.so: libhoff.so.0 does not resolve to the bundled one:\n"
                                       + text)
    probe = ("import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); lib.hoff_torch_alloc; "
             "lib.hoff_backend_name")
    r = subprocess.run([sys.executable, "-c", probe, os.path.join(dest, "libhoff.so.0")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, check=False)
    if r.returncode != 0:
        raise NativeBuildError("the built libhoff.so.0 does not load: " + r.stdout.decode(errors="replace"))
    r = subprocess.run([os.path.join(dest, "hoff-plan"), "--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, check=False)
    if r.returncode != 0:
        raise NativeBuildError("the built hoff-plan --help fails: " + r.stdout.decode(errors="replace"))


def build(top, dest):
    """Build hoff in a temporary copy of TOP and put the bundle in DEST (created); returns the manifest."""
    check_deps(top)
    flags = configure_flags()
    tmp = tempfile.mkdtemp(prefix="hoff-pip-build-")
    try:
        src, bld, log = os.path.join(tmp, "src"), os.path.join(tmp, "build"), os.path.join(tmp, "build.log")
        say("building hoff's C library from %s (in %s)" % (top, tmp))
        copy_sources(top, src)
        if not os.path.exists(os.path.join(src, "configure")):
            os.makedirs(os.path.join(src, "m4"), exist_ok=True)
            say("autoreconf -fi")
            _step(["autoreconf", "-fi"], log, src, "autoreconf -fi")
        os.makedirs(bld)
        argv = [os.path.join(src, "configure"), "--with-liburing", "--with-hwloc", "--with-zlib"] + flags
        say("configure " + " ".join(shlex.quote(a) for a in argv[1:]))
        _step(argv, log, bld, "configure")
        defs = _config_h(os.path.join(bld, "config.h"))
        cuda = defs.get("HAVE_CUDA") == "1"
        cudalib = None
        with open(os.path.join(bld, "Makefile"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if cuda and line.startswith("CUDA_LDFLAGS = -L"):
                    cudalib = line.split("-L", 1)[1].split()[0]
        # $ORIGIN: through make (\$$ -> \$) and the shell (\$ -> $) to the linker, after libtool's own rpaths
        # (runpath_from_origin cuts those).  The CUDA toolkit's library directory follows it: configure's
        # -Wl,-rpath for libcudart does not survive libtool's convenience library, so a toolkit that is not on
        # the dynamic linker's path would leave libhoff.so.0 without its libcudart.
        ldflags = os.environ.get("LDFLAGS", "") + " -Wl,-rpath,\\$$ORIGIN"
        if cudalib:
            ldflags += " -Wl,-rpath," + cudalib
        ldflags = ldflags.strip()
        say("make -j%d %s" % (_jobs(), " ".join(TARGETS)))
        _step(["make", "-j%d" % _jobs(), "LDFLAGS=" + ldflags] + list(TARGETS), log, bld, "make")
        os.makedirs(dest, exist_ok=True)
        for name in LIBS:
            shutil.copy(os.path.realpath(os.path.join(bld, ".libs", name)), os.path.join(dest, name))
        for name in TOOLS:
            s = os.path.join(bld, name)
            with open(s, "rb") as f:
                head = f.read(4)
            if head[:2] == b"#!" and os.path.exists(os.path.join(bld, ".libs", name)):
                s = os.path.join(bld, ".libs", name)  # a libtool wrapper: the real program is in .libs
            shutil.copy(s, os.path.join(dest, name))
        rpath = None
        for name in LIBS + TOOLS:
            p = os.path.join(dest, name)
            rpath = runpath_from_origin(p) or rpath
            os.chmod(p, 0o755)
        _verify(dest, tmp)
        cudadir = os.path.dirname(cudalib) if cudalib else None
        manifest = {
            "version": defs.get("PACKAGE_VERSION", "").strip('"'),
            "backends": ["cuda", "sim"] if cuda else ["sim"],
            "cuda_toolkit": cudadir,
            "features": {"liburing": "HAVE_LIBURING" in defs, "hwloc": "HAVE_HWLOC" in defs,
                         "zlib": "HAVE_ZLIB" in defs},
            "configure_flags": argv[1:],
            "rpath": rpath,
            "runtime": runtime_needs(dest),
        }
        with open(os.path.join(dest, MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.write("\n")
        if cuda:
            say("built the cuda backend (CUDA toolkit %s) and the sim backend" % cudadir)
        else:
            say("built the sim backend only: no CUDA toolkit was found (configure looks in $CUDA_HOME, "
                "/usr/local/cuda, /opt/cuda, /usr); for a GPU, install one and reinstall")
        say("bundled in the package: %s; it needs at run time: %s" % (
            ", ".join(LIBS + TOOLS), ", ".join("%s (%s)" % (d["soname"], d["package"]) for d in manifest["runtime"])))
        return manifest
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    if argv[1:] != ["--check-deps"]:
        print("usage: python3 build_native.py --check-deps   (the build itself runs from setup.py)", file=sys.stderr)
        return 2
    try:
        check_deps(find_source(os.path.dirname(os.path.abspath(__file__))))
    except NativeBuildError as e:
        print("hoff: " + str(e), file=sys.stderr)
        return 1
    say("the build dependencies are present")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
