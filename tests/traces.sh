#!/bin/sh
# traces.sh — every committed real trace (tests/data/traces/*.trace.gz, recorded with hoff-record from PyTorch
# training steps on CPU), and three synthetic ones (hoff-plan synth), replays through hoff-plan simulate at budgets of none, 100, 50, 25 and 10% of its
# offload peak: integrity OK, no use-window violation, every planned action fired or skipped; a budget at or
# above the working-set floor is feasible and kept, one below it is declared infeasible and moves no more bytes
# than the floor itself; and each plan (both planners), re-counted op by op by tests/window_check.py (written
# from the window rules, not from the planner's code), never moves a block inside a use window and keeps a
# feasible budget.  Runs in the build directory; reads the traces from $srcdir.
set -u

srcdir=${srcdir:-.}
cd "${builddir:-.}" || exit 99
dir=$srcdir/tests/data/traces
. "$srcdir/tests/sim_memory.sh"
fail=0
n=0
tmp=${TMPDIR:-/tmp}/hoff-traces-test.$$
trap 'rm -f "$tmp".*' EXIT INT TERM

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: no python3 for the op-by-op recount"
    exit 77
fi

# A top-level JSON field's value (its first occurrence: the top level comes
# before the per-step objects).
field() { # field FILE NAME
    grep -o "\"$2\":[a-z0-9]*" "$1" | head -n 1 | sed 's/.*://'
}

# simulate TRACE BUDGET OUT: hoff-plan simulate --json, checked.  0 or 1.
simulate() {
    if ! sim_run ./hoff-plan simulate "$1" --budget "$2" --steps 2 --json >"$3" 2>"$tmp.err"; then
        echo "FAIL: $name: hoff-plan simulate --budget $2 failed:"
        cat "$tmp.err" "$3"
        return 1
    fi
    for key in floor_bytes plan_feasible window_violations integrity_ok peak_resident_bytes bytes_d2h; do
        if [ -z "$(field "$3" $key)" ]; then
            echo "FAIL: $name at $2: no $key in the report"
            return 1
        fi
    done
    if [ "$(field "$3" integrity_ok)" != true ] || [ "$(field "$3" window_violations)" != 0 ]; then
        echo "FAIL: $name at $2: integrity or use windows broken:"
        cat "$3"
        return 1
    fi
    actions=$(field "$3" actions)
    fired=$(field "$3" actions_fired)
    skipped=$(field "$3" actions_skipped)
    if [ $((fired + skipped)) -ne "$actions" ]; then
        echo "FAIL: $name at $2: actions_fired $fired + actions_skipped $skipped != actions $actions"
        return 1
    fi
    return 0
}

# Synthetic steps too: a transformer (flash attention, access marks), one
# that saves its attention probabilities, and a random training-shaped one.
synth=""
if ./hoff-plan synth --layers 4 --hidden 1024 --seq 2048 -o "$tmp.flash.trace" >"$tmp.err" 2>&1 &&
    ./hoff-plan synth --layers 4 --hidden 512 --seq 512 --batch 4 -o "$tmp.probs.trace" >>"$tmp.err" 2>&1 &&
    ./hoff-plan synth --events 1200 --seed 5 -o "$tmp.random.trace" >>"$tmp.err" 2>&1; then
    synth="$tmp.flash.trace $tmp.probs.trace $tmp.random.trace"
else
    echo "FAIL: hoff-plan synth:"
    cat "$tmp.err"
    fail=1
fi

for trace in "$dir"/*.trace.gz $synth; do
    [ -e "$trace" ] || continue
    n=$((n + 1))
    name=$(basename "$trace")
    # The floor, at the floor's own budget: what every infeasible budget must not exceed in traffic.
    simulate "$trace" 0 "$tmp.none" || { fail=1; continue; }
    floor=$(field "$tmp.none" floor_bytes)
    simulate "$trace" "$floor" "$tmp.floor" || { fail=1; continue; }
    floor_d2h=$(field "$tmp.floor" bytes_d2h)
    if [ "$(field "$tmp.floor" plan_feasible)" != true ] || [ "$(field "$tmp.floor" within_budget)" != true ]; then
        echo "FAIL: $name: a budget of exactly the floor ($floor) is not feasible and kept"
        fail=1
    fi
    for pct in 100 50 25 10; do
        simulate "$trace" "$pct%" "$tmp.json" || { fail=1; continue; }
        budget=$(field "$tmp.json" budget_bytes)
        peak=$(field "$tmp.json" peak_resident_bytes)
        feasible=$(field "$tmp.json" plan_feasible)
        d2h=$(field "$tmp.json" bytes_d2h)
        if [ "$budget" -ge "$floor" ]; then
            if [ "$feasible" != true ] || [ "$peak" -gt "$budget" ]; then
                echo "FAIL: $name at $pct%: budget $budget >= floor $floor but plan_feasible $feasible, peak $peak"
                fail=1
            fi
        else
            if [ "$feasible" != false ] || [ "$d2h" -gt "$floor_d2h" ] || [ "$peak" -gt "$floor" ]; then
                echo "FAIL: $name at $pct%: budget $budget < floor $floor: plan_feasible $feasible (want false)," \
                    "moved $d2h (the floor moves $floor_d2h), peak $peak"
                fail=1
            fi
        fi
        for planner in timed greedy; do
            if ! ./hoff-plan show "$trace" --budget "$pct%" --planner $planner --json >"$tmp.show" 2>"$tmp.err"; then
                echo "FAIL: $name at $pct%: hoff-plan show --planner $planner failed:"
                cat "$tmp.err"
                fail=1
                continue
            fi
            if ! out=$(python3 "$srcdir/tests/window_check.py" "$tmp.show"); then
                echo "$name at $pct% ($planner): $out"
                fail=1
                continue
            fi
            echo "$name at $pct% ($planner): $out"
        done
        echo "ok: $name at $pct%: budget $budget, floor $floor, feasible $feasible, peak $peak, moved $d2h"
    done
done
if [ "$n" -lt 6 ]; then
    echo "FAIL: $n trace(s) (from $dir and synth), expected at least 6"
    fail=1
fi
exit $fail
