#!/bin/sh
# traces.sh — every committed real trace (tests/data/traces/*.trace.gz, recorded with hoff-record from PyTorch
# training steps on CPU) replays through hoff-plan simulate at a 25% budget: peak within the budget, integrity OK,
# every planned action fired or skipped.  Runs in the build directory; reads the traces from $srcdir.
set -u

srcdir=${srcdir:-.}
cd "${builddir:-.}" || exit 99
dir=$srcdir/tests/data/traces
fail=0
n=0
tmp=${TMPDIR:-/tmp}/hoff-traces-test.$$
trap 'rm -f "$tmp".*' EXIT INT TERM

# A top-level JSON number field's value (its first occurrence: the top level
# comes before the per-step objects).
field() { # field FILE NAME
    grep -o "\"$2\":[0-9]*" "$1" | head -n 1 | sed 's/.*://'
}

for trace in "$dir"/*.trace.gz; do
    [ -e "$trace" ] || continue
    n=$((n + 1))
    name=$(basename "$trace")
    if ! ./hoff-plan simulate "$trace" --budget 25% --json >"$tmp.json" 2>"$tmp.err"; then
        echo "FAIL: $name: hoff-plan simulate --budget 25% failed:"
        cat "$tmp.err" "$tmp.json"
        fail=1
        continue
    fi
    budget=$(field "$tmp.json" budget_bytes)
    peak=$(field "$tmp.json" peak_resident_bytes)
    actions=$(field "$tmp.json" actions)
    fired=$(field "$tmp.json" actions_fired)
    skipped=$(field "$tmp.json" actions_skipped)
    ok=1
    if [ -z "$budget" ] || [ -z "$peak" ] || [ "$peak" -gt "$budget" ]; then
        echo "FAIL: $name: peak_resident_bytes '$peak' is over budget_bytes '$budget'"
        ok=0
    fi
    if ! grep -q '"integrity_ok":true' "$tmp.json"; then
        echo "FAIL: $name: integrity is not OK"
        ok=0
    fi
    if [ -z "$actions" ] || [ -z "$fired" ] || [ -z "$skipped" ] || [ $((fired + skipped)) -ne "$actions" ]; then
        echo "FAIL: $name: actions_fired '$fired' + actions_skipped '$skipped' != actions '$actions'"
        ok=0
    fi
    if [ "$ok" = 1 ]; then
        echo "ok: $name: budget $budget, peak $peak, actions $actions (fired $fired, skipped $skipped)"
    else
        cat "$tmp.err" "$tmp.json"
        fail=1
    fi
done
if [ "$n" -lt 3 ]; then
    echo "FAIL: $n trace(s) in $dir, expected at least 3"
    fail=1
fi
exit $fail
