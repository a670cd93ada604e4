#!/bin/sh
# demo.sh — smoke test of the demo (hoff-demo) and the allocation benchmark (bench/alloc):
# both run, exit 0, and print what a user relies on.  Runs in the build directory ($builddir or cwd).
set -u

cd "${builddir:-.}" || exit 99
fail=0
out=${TMPDIR:-/tmp}/hoff-demo-test.$$
trap 'rm -f "$out" "$out.json" "$out.bench"' EXIT INT TERM

check() { # check FILE PATTERN WHAT
    if ! grep -qi -- "$2" "$1"; then
        echo "FAIL: $3: no '$2' in the output:"
        cat "$1"
        fail=1
    fi
}

small="--layers 4 --hidden 512 --seq 2048 --steps 2"

# 1. The human report.
./hoff-demo $small >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -ne 0 ]; then
    echo "FAIL: hoff-demo $small exited $rc"
    fail=1
fi
for key in "backend: " "budget: " "activation peak without offload: " \
           "peak resident offload bytes: " "evicted: " "prefetched: " "faults: " \
           "stall: " "late prefetches: " "integrity: OK (" "step 0: " "step 1: "; do
    check "$out" "$key" "hoff-demo report"
done

# 2. The JSON report, with an explicit size budget.
./hoff-demo $small --budget 16M --json >"$out.json" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "FAIL: hoff-demo --json exited $rc"
    cat "$out.json"
    fail=1
fi
for key in '"backend":' '"budget_bytes":16777216' '"peak_resident_bytes":' \
           '"within_budget":true' '"integrity":{"ok":true' '"stats":{'; do
    check "$out.json" "$key" "hoff-demo --json"
done

# 3. Bad values are usage errors (exit 2) that say what is wrong.
./hoff-demo --budget bogus >"$out" 2>&1
rc=$?
if [ "$rc" -ne 2 ]; then
    echo "FAIL: hoff-demo --budget bogus exited $rc, expected 2"
    cat "$out"
    fail=1
fi
check "$out" "udget" "hoff-demo --budget bogus"
HOFF_BUDGET=bogus ./hoff-demo $small >"$out" 2>&1
rc=$?
if [ "$rc" -ne 2 ]; then
    echo "FAIL: HOFF_BUDGET=bogus hoff-demo exited $rc, expected 2"
    cat "$out"
    fail=1
fi
check "$out" "UDGET" "HOFF_BUDGET=bogus hoff-demo"

# 4. A corrupted byte is caught: FAILED and exit 1.
./hoff-demo $small --corrupt >"$out" 2>&1
rc=$?
if [ "$rc" -ne 1 ]; then
    echo "FAIL: hoff-demo --corrupt exited $rc, expected 1"
    cat "$out"
    fail=1
fi
check "$out" "integrity: FAILED (step 1, layer 2, block qkv" "hoff-demo --corrupt"

# 5. The benchmark runs and reports both medians.
./bench/alloc --json --quick >"$out.bench" 2>&1
rc=$?
cat "$out.bench"
if [ "$rc" -ne 0 ]; then
    echo "FAIL: bench/alloc --json --quick exited $rc"
    fail=1
fi
for key in '"hoff_pair_ns_median":' '"glibc_pair_ns_median":' '"ratio":' '"size_mix":'; do
    check "$out.bench" "$key" "bench/alloc --json"
done

exit $fail
