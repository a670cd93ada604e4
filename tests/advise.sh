#!/bin/sh
# advise.sh — hoff-plan advise end to end: on a synthetic step where the link cannot carry the budget, the advice
# recomputes, is never worse than offload only or full checkpointing and sits above its bound; the advised step's
# trace (advise -o) replays on the sim with real moves, intact bytes, the predicted stall and exactly the predicted
# recompute time; bad input fails clearly.  Runs in the build directory ($builddir or cwd).
set -u

cd "${builddir:-.}" || exit 99
fail=0
. "${srcdir:-.}/tests/clicheck.sh"
tmp=${TMPDIR:-/tmp}/hoff-advise-test.$$
trap 'rm -f "$tmp".*' EXIT INT TERM
py=$(command -v python3) || {
    echo "SKIP: no python3 to read the JSON"
    exit 77
}

# 1. A 2-layer step whose elementwise ops are memory-bound and whose reads are marked.
./hoff-plan synth --layers 2 --hidden 1024 --seq 4096 --tflops 100 --hbm-gbps 2000 --input-reads \
    -o "$tmp.trace" >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan synth --hbm-gbps --input-reads" "$tmp.out"
./hoff-plan advise "$tmp.trace" --budget 35% --json -o "$tmp.rc.trace" >"$tmp.json" 2>"$tmp.err"
expect_rc $? 0 "hoff-plan advise --json -o" "$tmp.err"
./hoff-plan advise "$tmp.trace" --budget 35% >"$tmp.txt" 2>&1
expect_rc $? 0 "hoff-plan advise" "$tmp.txt"
for key in "offload only" "full checkpoint" "combined" "lower bound" "advice: recompute these forward ops"; do
    check "$tmp.txt" "$key" "advise's text"
done

# 2. The advice's figures against each other.
"$py" - "$tmp.json" >"$tmp.out" 2>&1 <<'EOF' || {
import json, sys
a = json.load(open(sys.argv[1]))
o, f, c = a["offload_only"], a["full_checkpoint"], a["combined"]
assert a["chosen"] == "combined", a["chosen"]
assert a["recompute"], "no op recomputed where the link cannot carry the budget"
assert c["units"] == len(a["recompute"])
assert c["feasible"] and o["feasible"]
assert c["step_ns"] < o["step_ns"], (c, o)          # strictly better than offload only here
assert f is not None and c["step_ns"] <= f["step_ns"], (c, f)
assert a["bound_ns"] <= c["step_ns"] and a["bound_ns"] >= a["compute_ns"], a
assert c["recompute_ns"] == sum(r["cost_ns"] for r in a["recompute"])
assert c["peak_bytes"] < a["peak_bytes"]
for r in a["recompute"]:
    assert r["op"] and r["bytes"] > 0 and r["occurrence"] >= 0 and r["cost_ns"] > 0, r
print(a["budget_bytes"], c["stall_ns"], c["recompute_ns"])
EOF
    echo "FAIL: the advice's figures:"
    cat "$tmp.out" "$tmp.json"
    fail=1
}
read -r budget stall recompute <"$tmp.out" || budget=
case $budget in '' | *[!0-9]*)
    echo "FAIL: no budget from the advice; the replay is not checked"
    exit 1
    ;;
esac

# 3. The advised step replays on the sim: bytes moved and intact, no window violated, the predicted stall, and
# the recomputes' time exactly (against a replay of the step as recorded).
./hoff-plan simulate "$tmp.rc.trace" --budget "$budget" --json >"$tmp.sim" 2>"$tmp.err"
expect_rc $? 0 "hoff-plan simulate of the advised step" "$tmp.err"
./hoff-plan simulate "$tmp.trace" --budget 100% --json >"$tmp.sim0" 2>"$tmp.err"
expect_rc $? 0 "hoff-plan simulate of the step as recorded" "$tmp.err"
"$py" - "$tmp.sim" "$tmp.sim0" "$stall" "$recompute" >"$tmp.out" 2>&1 <<'EOF' || {
import json, sys
s, s0 = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
stall, recompute = int(sys.argv[3]), int(sys.argv[4])
last = s["per_step"][-1]
assert s["integrity_ok"] and s["window_violations"] == 0 and s["feasible"], s
assert last["evictions"] > 0 and last["prefetches"] > 0 and last["bytes_d2h"] > 0, last  # moves happened
assert s["compute_ns"] - s0["compute_ns"] == recompute, (s["compute_ns"], s0["compute_ns"], recompute)
# predict.c and a sim replay differ by tens of microseconds on this small step, recompute or not (the step as
# recorded: 2.267 ms replayed, 2.242 ms predicted), so the tolerance is 5% or 50 us
assert abs(last["stall_ns"] - stall) <= max(stall // 20, 50000), (last["stall_ns"], stall)
EOF
    echo "FAIL: the advised step's replay:"
    cat "$tmp.out"
    fail=1
}

# 4. Bad input.
./hoff-plan advise "$tmp.trace" >"$tmp.out" 2>&1
expect_rc $? 2 "advise without --budget" "$tmp.out"
check "$tmp.out" "budget" "advise without --budget"
printf 'hoff-trace 1\na 0 4194304 1 0 0\nf 0 0 10\nend\n' >"$tmp.nomarks"
./hoff-plan advise "$tmp.nomarks" --budget 50% >"$tmp.out" 2>&1
expect_rc $? 2 "advise on a trace without op marks" "$tmp.out"
check "$tmp.out" "no op marks" "advise on a trace without op marks"
./hoff-plan advise "$tmp.trace" --budget 35% -o /nonexistent-dir/x.trace >"$tmp.out" 2>&1
expect_rc $? 1 "advise -o into a missing directory" "$tmp.out"
check "$tmp.out" "nonexistent-dir" "advise -o into a missing directory"
./hoff-plan synth --hbm-gbps -1 -o "$tmp.x" >"$tmp.out" 2>&1
expect_rc $? 2 "synth --hbm-gbps -1" "$tmp.out"
check "$tmp.out" "hbm-gbps" "synth --hbm-gbps -1"
./hoff-plan synth --model gpt --input-reads -o "$tmp.x" >"$tmp.out" 2>&1
expect_rc $? 2 "synth --model gpt --input-reads" "$tmp.out"
check "$tmp.out" "transformer model" "synth --model gpt --input-reads"

[ $fail -eq 0 ] && echo "PASS: advise.sh"
exit $fail
