#!/usr/bin/env bash
# pip_install.sh — `pip install ./python` builds hoff (issue 27): the dependency check's one message without a
# compiler and its headers; then, in a fresh virtual environment (no system site packages), `pip install ./python`;
# and `pip wheel ./python` installed into a second fresh one once every build temporary is gone.  In each:
# hoff.library_path() is the bundled library, hoff-plan --help runs, and `python -m hoff --sim --budget 50%`
# trains a small model (Debian's CPU torch, python3-torch, through PYTHONPATH: that part skips without it).
# Run by ./quickstart test, not make check (two builds of the library: about 3 minutes on 2 cores).
# Exit 77 (skip) when no virtual environment can be made or pip cannot get setuptools (offline).
# Env: srcdir (the source tree; default: this script's ..).  Threading: none.
set -euo pipefail

srcdir=${srcdir:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
srcdir=$(cd "$srcdir" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=$(command -v python3)
# Nothing from the caller's hoff set-up may reach the packages under test.
unset HOFF_LIBRARY HOFF_RECORD_LIBRARY HOFF_SIM_PRELOAD HOFF_PIP_NATIVE HOFF_PIP_CONFIGURE_FLAGS PYTHONPATH
work=$(mktemp -d "${TMPDIR:-/tmp}/hoff-pip-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/tmp"
export TMPDIR=$work/tmp # pip's and the build's temporaries: checked to be gone before the wheel is tested

ok() { printf 'ok: %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
skip() { printf 'SKIP: %s\n' "$*"; exit 77; }

"$py" -m venv "$work/v1" >"$work/venv.log" 2>&1 || skip "$py -m venv fails (python3-venv missing?): $(tail -n 1 "$work/venv.log")"
timeout 60 "$work/v1/bin/python" -m pip download -q --disable-pip-version-check --no-deps -d "$work/dl" \
    'setuptools>=61' >"$work/dl.log" 2>&1 || skip "pip cannot get setuptools (offline?): $(tail -n 1 "$work/dl.log")"

# --- 1. a missing build dependency: one message, at once, nothing installed --------------------------------------
mkdir "$work/bin" "$work/nopc"
for t in make pkg-config autoreconf autoconf aclocal automake autom4te libtoolize m4 perl git sh bash ldd readelf env; do
    p=$(command -v "$t" 2>/dev/null) && ln -s "$p" "$work/bin/$t"
done
out=$(PATH=$work/bin PKG_CONFIG_LIBDIR=$work/nopc "$py" "$srcdir/python/build_native.py" --check-deps 2>&1) &&
    fail "the dependency check passed without a compiler: $out"
[ "$(printf '%s\n' "$out" | grep -c .)" = 1 ] || fail "the dependency check said more than one line: $out"
for want in 'missing a C compiler' 'liburing headers' 'hwloc headers' 'zlib headers' \
    'apt-get install gcc liburing-dev libhwloc-dev zlib1g-dev' 'HOFF_PIP_NATIVE=0'; do
    case $out in *"$want"*) ;; *) fail "the dependency check does not say '$want': $out" ;; esac
done
ok "dependency check without cc and the headers: $out"
start=$(date +%s)
if PATH=$work/bin PKG_CONFIG_LIBDIR=$work/nopc "$work/v1/bin/python" -m pip install \
    --disable-pip-version-check "$srcdir/python" >"$work/nocc.log" 2>&1; then
    fail "pip install succeeded without a compiler"
fi
grep -q 'hoff: cannot build hoff.s C library: missing a C compiler' "$work/nocc.log" ||
    { cat "$work/nocc.log"; fail "pip install without a compiler does not end with the dependency message"; }
! "$work/v1/bin/python" -c 'import hoff' 2>/dev/null || fail "a failed pip install left an importable hoff"
ok "pip install without a compiler stops after $(($(date +%s) - start)) s with the message, nothing installed"

# --- the three checks, in a virtual environment VENV -----------------------------------------------------------------
torch_path=$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null || true)
cat >"$work/train.py" <<'EOF'
import torch
torch.manual_seed(0)
layers = []
for _ in range(8):
    layers += [torch.nn.Linear(1024, 1024), torch.nn.ReLU()]
model = torch.nn.Sequential(*layers)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(512, 1024)
for i in range(4):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print("trained: loss %.6f" % loss.item())
EOF
checks() { # checks VENV WHAT
    local v=$1 what=$2 lib native out t
    native=$("$v/bin/python" -c 'import hoff._native as n; print(n.DIR)')
    case $native in "$v"/*) ;; *) fail "$what: hoff is not the one installed in $v ($native)" ;; esac
    lib=$(cd "$work" && "$v/bin/python" -c 'import hoff; print(hoff.library_path())') || fail "$what: import hoff failed"
    [ "$lib" = "$native/libhoff.so.0" ] || fail "$what: hoff.library_path() is $lib, not the bundled $native/libhoff.so.0"
    ok "$what: hoff.library_path() = $lib (backends: $("$v/bin/python" -c 'import hoff; print(",".join(hoff.native_build()["backends"]))'))"
    # (outputs are captured before grep: grep -q at the end of a pipe would fail it under pipefail)
    out=$(readelf -d "$native/libhoff-sim.so")
    grep -q 'R.*PATH.*\[\$ORIGIN[]:]' <<<"$out" || fail "$what: libhoff-sim.so's rpath does not start at \$ORIGIN: $out"
    ! grep -q "$TMPDIR" <<<"$out" || fail "$what: libhoff-sim.so's rpath names a build directory: $out"
    out=$(ldd "$native/libhoff-sim.so")
    grep -q "libhoff.so.0 => $native/libhoff.so.0 " <<<"$out" ||
        fail "$what: ldd libhoff-sim.so does not find the bundled libhoff.so.0: $out"
    out=$(ldd "$native/libhoff.so.0" "$native/hoff-plan" "$native/libhoff-record.so")
    ! grep -q 'not found' <<<"$out" || fail "$what: a runtime library is missing: $out"
    ok "$what: libhoff-sim.so finds the bundled libhoff.so.0 by its \$ORIGIN rpath (ldd)"
    for t in hoff-plan hoff-stat hoff-record; do
        out=$("$v/bin/$t" --help 2>&1) || fail "$what: $t --help exits $?: $out"
        grep -q "^usage: $t" <<<"$out" || fail "$what: $t --help: $out"
    done
    ok "$what: hoff-plan --help, hoff-stat --help, hoff-record --help (console scripts in $v/bin)"
    if [ -z "$torch_path" ]; then
        ok "$what: python -m hoff --sim not run: $py has no torch (python3-torch)"
        return 0
    fi
    (cd "$work" && PYTHONPATH=$torch_path "$v/bin/python" -m hoff --sim --budget 50% --stats-json "$work/sim.json" \
        train.py) >"$work/sim.log" 2>&1 || { cat "$work/sim.log"; fail "$what: python -m hoff --sim --budget 50% train.py"; }
    grep -q '^trained: loss' "$work/sim.log" || fail "$what: the script did not finish under --sim"
    "$py" - "$work/sim.json" "$what" <<'EOF' || fail "$what: --sim's report"
import json, sys
d = json.load(open(sys.argv[1]))
phases = [s["phase"] for s in d["steps"]]
assert d["integrity"]["ok"] and "replay" in phases, d
print("ok: %s: python -m hoff --sim --budget 50%% train.py: steps %s, integrity ok, %d blocks under the preload"
      % (sys.argv[2], " ".join(phases), d["preload"]["blocks"]))
EOF
}

# --- 2. pip install ./python in a fresh virtual environment ------------------------------------------------------------
start=$(date +%s)
"$work/v1/bin/python" -m pip install -v --disable-pip-version-check "$srcdir/python" >"$work/install.log" 2>&1 ||
    { tail -n 60 "$work/install.log"; fail "pip install ./python"; }
grep -q 'hoff: built the ' "$work/install.log" || fail "the build did not say which backend it made"
ok "pip install ./python in a fresh venv: $(($(date +%s) - start)) s; $(grep -o 'hoff: built the .*' "$work/install.log")"
checks "$work/v1" "pip install"

# --- 3. pip wheel ./python, installed in a second fresh virtual environment with the build gone ------------------------
start=$(date +%s)
"$work/v1/bin/python" -m pip wheel -q --disable-pip-version-check "$srcdir/python" -w "$work/wheels" >"$work/wheel.log" 2>&1 ||
    { tail -n 60 "$work/wheel.log"; fail "pip wheel ./python"; }
whl=$(ls "$work/wheels"/hoff-*.whl)
case $whl in *-none-any.whl) fail "the wheel is not platform-specific: $whl" ;; esac
[ -z "$(ls -A "$work/tmp")" ] || fail "the build left temporaries: $(ls "$work/tmp")"
ok "pip wheel ./python: $(basename "$whl") in $(($(date +%s) - start)) s; no build temporaries left"
"$py" -m venv "$work/v2" >/dev/null
"$work/v2/bin/python" -m pip install -q --disable-pip-version-check "$whl"
checks "$work/v2" "wheel in a second venv"
