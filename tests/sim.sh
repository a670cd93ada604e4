#!/bin/sh
# sim.sh — python -m hoff --sim's fault path and integrity verdict: a block evicted behind PyTorch's back is
# paged in by the SIGSEGV handler on the thread that touches it, with its bytes; a touch of a released block
# (raw, or by an aten op) is counted in discard_touches and fails the run (exit 3); usage errors.
# Skips (77) without a python3 that has torch, or with a sanitized preload.  Runs in the build directory.
set -u

cd "${builddir:-.}" || exit 99
top=$(cd "${srcdir:-..}" && pwd)
. "$top/tests/sim_setup.sh"

fail=0
tmp=${TMPDIR:-/tmp}/hoff-sim-test.$$
trap 'rm -rf "$tmp".*' EXIT
trap 'exit 1' INT TERM

check() { # check FILE PATTERN WHAT
    if ! grep -q -- "$2" "$1"; then
        echo "FAIL: $3: no '$2' in:"
        cat "$1"
        fail=1
    fi
}
field() { # field JSON-FILE PYTHON-EXPR-ON-d
    "$py" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# 1. Evicted behind PyTorch's back, read raw on another thread: paged in from the fault handler.
"$py" -m hoff --sim --stats-json "$tmp.json" "$top/tests/sim_touch.py" evict >"$tmp.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { echo "FAIL: evict case exited $rc"; cat "$tmp.out"; fail=1; }
check "$tmp.out" "residency after evict: host" "evict case"
check "$tmp.out" "paged in on a thread: True residency: device" "evict case"
check "$tmp.out" "bytes intact: True" "evict case"
if [ -f "$tmp.json" ]; then
    got=$(field "$tmp.json" '(d["final"]["touch_faults"], d["preload"]["touches"], d["integrity"]["ok"])')
    [ "$got" = "(1, 1, True)" ] || { echo "FAIL: evict case: touch_faults, touches, ok = $got, want (1, 1, True)"; fail=1; }
else
    echo "FAIL: evict case wrote no $tmp.json"; fail=1
fi

# 2. Released, then read raw (a fault) or by an aten op (an access mark): detected, counted, exit 3.
for c in discard-raw discard-op; do
    rm -f "$tmp.json"
    "$py" -m hoff --sim --stats-json "$tmp.json" "$top/tests/sim_touch.py" $c >"$tmp.out" 2>&1
    rc=$?
    [ "$rc" -eq 3 ] || { echo "FAIL: $c exited $rc, want 3"; cat "$tmp.out"; fail=1; }
    check "$tmp.out" "after hoff released it" "$c"
    check "$tmp.out" "integrity failure: 1 touches of released blocks" "$c"
    if [ -f "$tmp.json" ]; then
        got=$(field "$tmp.json" '(d["final"]["discard_touches"], d["integrity"]["ok"])')
        [ "$got" = "(1, False)" ] || { echo "FAIL: $c: discard_touches, ok = $got, want (1, False)"; fail=1; }
    else
        echo "FAIL: $c wrote no $tmp.json"; fail=1
    fi
done

# 3. Usage errors: a bad budget names what is accepted; --budget without --sim.
"$py" -m hoff --sim --budget 150% "$top/tests/sim_touch.py" evict >"$tmp.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: --budget 150% exited $rc, want 2"; fail=1; }
check "$tmp.out" "a percentage must be in (0, 100\]" "--budget 150%"
"$py" -m hoff --sim --budget lots "$top/tests/sim_touch.py" evict >"$tmp.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: --budget lots exited $rc, want 2"; fail=1; }
check "$tmp.out" "expected a size (512M, 2G, bytes), a percentage" "--budget lots"
"$py" -m hoff --budget 1G "$top/tests/sim_touch.py" evict >"$tmp.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: --budget without --sim exited $rc, want 2"; fail=1; }
check "$tmp.out" "belong to --sim" "--budget without --sim"

WORLD_SIZE=2 RANK=1 "$py" -m hoff --sim --stats-json "$tmp.json" "$top/tests/sim_touch.py" evict >"$tmp.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || { echo "FAIL: --stats-json shared by 2 ranks exited $rc, want 2"; fail=1; }
check "$tmp.out" "ranks of this job would all write that one file; put %r" "--stats-json shared by ranks"

[ "$fail" -eq 0 ] && echo "PASS: sim.sh"
exit "$fail"
