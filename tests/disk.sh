#!/bin/sh
# disk.sh — a really full spill disk: HOFF_SPILL_DIR on a 16 MiB tmpfs, mounted here (root only; skips with 77 and
# the reason otherwise).  hoff-demo, hoff-plan simulate and the soak (tests/test_soak) must end in bounded time
# (timeout: a hang fails), keep every byte, and say what the disk said.  Runs in the build directory.
# HOFF_SOAK_RUNS etc. pass through to the soak (a longer one by hand).
set -u

cd "${builddir:-.}" || exit 99
srcdir=${srcdir:-.}
. "$srcdir/tests/sim_memory.sh"
mnt=$(mktemp -d "${TMPDIR:-/tmp}/hoff-disk.XXXXXX") || exit 99
out=$mnt.out
mounted=0
cleanup() {
    [ "$mounted" = 1 ] && umount "$mnt"
    rmdir "$mnt" 2>/dev/null
    rm -f "$out"
}
trap cleanup EXIT INT TERM

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: mounting a small tmpfs needs root"
    exit 77
fi
if ! mount -t tmpfs -o size=16m,mode=0700 tmpfs "$mnt" 2>"$out"; then
    echo "SKIP: cannot mount a tmpfs here: $(cat "$out")"
    exit 77
fi
mounted=1
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# run WHAT LIMIT CMD...: bounded; 124 is a hang
run() {
    what=$1 limit=$2
    shift 2
    timeout "$limit" "$@" >"$out" 2>&1
    rc=$?
    cat "$out"
    case $what in hoff-plan*) sim_skip "$rc" "$what" "$(cat "$out")" ;; esac
    [ "$rc" -ne 124 ] || bad "$what hung (killed after $limit s)"
    grep -q "integrity: OK" "$out" || [ "$what" = soak ] || bad "$what: no 'integrity: OK'"
    return 0
}

# 1. The demo: spills fill the disk; the process ends, every byte checked.
HOFF_SPILL_DIR=$mnt HOFF_HOST_CAP=64M run hoff-demo 60 ./hoff-demo --backend sim
grep -q "No space left on device" "$out" || bad "hoff-demo: the full disk is not named in the messages"
grep -q "spill to the NVMe tier failed (no error)" "$out" && bad "hoff-demo: a spill failure without its cause"

# 2. hoff-plan simulate on a recorded trace.
run "hoff-plan simulate" 120 ./hoff-plan simulate "$srcdir/tests/data/traces/gpt.trace.gz" --budget 25% \
    --host-cap 64M --spill-dir "$mnt" --steps 2
grep -q "No space left on device" "$out" || bad "hoff-plan simulate: the full disk is not named"

# 3. The soak with its spill file on the full disk (plus its injected faults).
HOFF_SOAK_DIR=$mnt HOFF_SOAK_RUNS=${HOFF_SOAK_RUNS:-2} run soak 120 ./tests/test_soak
grep -q "^Run Summary" "$out" || bad "soak: did not finish"
grep -q "FAILED" "$out" && bad "soak: failed"

exit $fail
