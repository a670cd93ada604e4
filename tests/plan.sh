#!/bin/sh
# plan.sh — the trace tool (hoff-plan): synth, info, show and simulate run and say what a user relies on, the
# budget holds and every stamp is intact; bad input fails clearly.  Runs in the build directory ($builddir or cwd).
set -u

cd "${builddir:-.}" || exit 99
fail=0
. "${srcdir:-.}/tests/clicheck.sh"
tmp=${TMPDIR:-/tmp}/hoff-plan-test.$$
trap 'rm -f "$tmp".*' EXIT INT TERM
. "${srcdir:-.}/tests/sim_memory.sh"

# A JSON number field's value (the first one, top level first in our output).
field() { # field FILE NAME
    sed -n "s/.*\"$2\":\\([0-9][0-9]*\\).*/\\1/p" "$1" | head -n 1
}

trace=$tmp.trace

# 1. synth and info.
./hoff-plan synth --layers 4 --hidden 512 --seq 2048 -o "$trace" >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan synth" "$tmp.out"
./hoff-plan info "$trace" >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan info" "$tmp.out"
for key in "events: " "blocks: " "retained at step end: " "offload peak without offload: " "step time: "; do
    check "$tmp.out" "$key" "hoff-plan info"
done
./hoff-plan info "$trace" --json >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan info --json" "$tmp.out"
check "$tmp.out" '"offload_peak_bytes":[1-9]' "hoff-plan info --json"
# The peak of all live bytes counts what the blocks hold, as the offload peak
# does: it can never be below it (every offload block is a live block).
for f in "$tmp.trace" "${srcdir:-.}"/tests/data/traces/*.trace.gz; do
    [ -f "$f" ] || continue
    ./hoff-plan info "$f" --json >"$tmp.out" 2>&1
    tp=$(field "$tmp.out" total_peak_bytes)
    op=$(field "$tmp.out" offload_peak_bytes)
    if [ -z "$tp" ] || [ -z "$op" ] || [ "$tp" -lt "$op" ]; then
        echo "FAIL: hoff-plan info $f: total_peak_bytes ${tp:-?} below offload_peak_bytes ${op:-?}"
        fail=1
    fi
done

# synth --model gpt: a bf16 step with flash attention (no scores saved), and its usage errors.
./hoff-plan synth --model gpt --layers 2 --hidden 512 --heads 8 --seq 4096 --dtype bf16 -o "$tmp.gpt" >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan synth --model gpt" "$tmp.out"
./hoff-plan info "$tmp.gpt" --json >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan info (gpt)" "$tmp.out"
# flash: the largest tensor is the logits (4096 x 8192 x 2 bytes = 64 MiB), not the 8 x 4096^2 scores
if grep -q "^a [0-9]* $((8 * 4096 * 4096 * 2)) " "$tmp.gpt"; then
    echo "FAIL: hoff-plan synth --model gpt with flash attention (seq 4096) saved attention scores"
    fail=1
fi
check "$tmp.gpt" "^a [0-9]* $((4096 * 8192 * 2)) 1 " "hoff-plan synth --model gpt: the logits"
for bad in "--dtype fp8" "--model llama" "--attention fast" "--heads 7" "--vocab 100 --model transformer" \
           "--dtype fp32 --elem-bytes 2"; do
    ./hoff-plan synth --model gpt $bad -o "$tmp.bad.trace" >"$tmp.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || { echo "FAIL: hoff-plan synth --model gpt $bad exited $rc, expected 2"; cat "$tmp.out"; fail=1; }
    [ ! -e "$tmp.bad.trace" ] || { echo "FAIL: hoff-plan synth $bad wrote a trace"; fail=1; }
done

# 2. show: the schedule and its summary.
./hoff-plan show "$trace" --budget 25% >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan show" "$tmp.out"
for key in "evict b" "prefetch b" "feasible: yes" "peak: " "plan time: "; do
    check "$tmp.out" "$key" "hoff-plan show"
done
./hoff-plan show "$trace" --budget 25% --json --actions-only >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan show --json" "$tmp.out"
check "$tmp.out" '"summary":{"feasible":true' "hoff-plan show --json"

# 2a. Where the working-set floor comes from, and kept blocks.  Two layers' forward and backward and the
# optimizer's step, op marks ending their op: activations b0 (6M) and b1 (10M); gradients b2 (20M) and b3 (12M),
# retained, read by the optimizer; its temporary b4 (4M).  As activations, the gradients and b4 set the floor
# in adam (36M, optimizer phase); kept (k), they are device memory and the floor is b0 and b1 in fwd.l1 (16M,
# forward phase).  Recorded with a budget of 12M, below both.
cat >"$tmp.kept" <<'EOF'
hoff-trace 1
budget 12582912
name 0 fwd.l0
name 1 fwd.l1
name 2 bwd.l1
name 3 bwd.l0
name 4 adam
a 0 6291456 1 0 0
w 0 0 10000
o 0 20000 fwd
a 1 10485760 1 0 30000
w 1 0 40000
r 0 0 50000
o 1 60000 fwd
r 1 0 70000
a 2 20971520 1 0 80000 k
w 2 0 90000
o 2 100000 bwd
f 1 0 110000
r 0 0 120000
a 3 12582912 1 0 130000 p k
w 3 0 140000
o 3 150000 bwd
f 0 0 160000
r 2 0 170000
r 3 0 180000
a 4 4194304 1 0 190000
w 4 0 200000
o 4 210000 opt
f 4 0 220000
end
EOF
sed -e 's/ p k$//' -e 's/ k$//' "$tmp.kept" >"$tmp.plain"
./hoff-plan info "$tmp.kept" >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan info (kept)" "$tmp.out"
check "$tmp.out" "^kept (not activations; device memory for the plan): 2 blocks, 32.0 MiB" \
    "info (kept): the kept blocks"
check "$tmp.out" "^working-set floor: 16.0 MiB at event 5 (2 blocks on the device).*recorded with is below it" \
    "info (kept): the floor"
check "$tmp.out" "^  where: op fwd.l1, forward phase (its mark, event 6," "info (kept): the floor's op and phase"
check "$tmp.out" "^  largest blocks: b1 10.0 MiB, b0 6.0 MiB$" "info (kept): the floor's blocks"
check "$tmp.out" "^  the floor is the blocks one op of the model uses" "info (kept): what the floor is"
./hoff-plan info "$tmp.plain" --json >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan info --json (not kept)" "$tmp.out"
check "$tmp.out" '"kept_blocks":0,"kept_bytes":0,' "info --json (not kept): kept"
check "$tmp.out" '"floor_bytes":37748736,"floor_ev":19,"floor_blocks":3,"floor_op":"adam","floor_op_ev":21,' \
    "info --json (not kept): the floor"
check "$tmp.out" '"floor_phase":"optimizer","floor_largest":\[{"block":2,"bytes":20971520},{"block":3,' \
    "info --json (not kept): the floor's phase and blocks"
check "$tmp.out" '"floor_advice":"the optimizer.s step: .*HOFF_OFFLOAD_GRADIENTS' "info --json (not kept): advice"
./hoff-plan show "$tmp.plain" --budget 20M >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan show (not kept)" "$tmp.out"
check "$tmp.out" "^  working-set floor: 36.0 MiB at event 19 (3 blocks on the device).*the budget is below it" \
    "show (not kept): the floor"
check "$tmp.out" "^    where: op adam, optimizer phase (its mark, event 21, .*the mark before: bwd.l0)" \
    "show (not kept): the floor's op and phase"
check "$tmp.out" "^    largest blocks: b2 20.0 MiB, b3 12.0 MiB, b4 4.0 MiB$" "show (not kept): the floor's blocks"
check "$tmp.out" "^    the floor is the optimizer's step: .*HOFF_OFFLOAD_GRADIENTS" "show (not kept): advice"
check "$tmp.out" " 21  op adam (optimizer) " "show (not kept): an op's phase"
./hoff-plan show "$tmp.kept" --budget 20M >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan show (kept)" "$tmp.out"
check "$tmp.out" " 8  alloc b2 20.0 MiB device kept retained " "show (kept): a kept block is device memory"
check "$tmp.out" "^  working-set floor: 16.0 MiB at event 5 (2 blocks on the device): no plan goes below it$" \
    "show (kept): the floor, the budget above it"
check "$tmp.out" "feasible: yes" "show (kept): feasible"
if grep -q "the floor is" "$tmp.out"; then
    echo "FAIL: show (kept): what lowers the floor, with the budget above it"
    fail=1
fi
./hoff-plan show "$tmp.kept" --budget 20M --json >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan show --json (kept)" "$tmp.out"
check "$tmp.out" '"ev":8,"kind":"alloc","block":2,"size":20971520,"bytes":20971520,"pool":"device",'\
'"pinned":false,"kept":true' "show --json (kept): a kept block is device memory"
check "$tmp.out" '"kind":"op","name":"adam","phase":"optimizer"' "show --json (kept): an op's phase"
check "$tmp.out" '"floor_bytes":16777216,"floor_ev":5,"floor_blocks":2,"floor_op":"fwd.l1","floor_op_ev":6,'\
'"floor_prev_op":"fwd.l0","floor_phase":"forward"' "show --json (kept): the floor"
# A simulated run replays the keeps and the phases (lib/trace/drive.c): the step it records, and the plan made
# from it, have the floor of the kept trace.
for f in kept plain; do
    sim_run ./hoff-plan simulate "$tmp.$f" --budget 40M --steps 2 --json >"$tmp.sim$f" 2>"$tmp.err"
    expect_rc $? 0 "hoff-plan simulate ($f)" "$tmp.err"
done
check "$tmp.simkept" '"floor_bytes":16777216,' "simulate (kept): the plan's floor"
check "$tmp.simplain" '"floor_bytes":37748736,' "simulate (not kept): the plan's floor"

# 2b. model --json on a committed trace: parses and is self-consistent.
mtrace=${srcdir:-.}/tests/data/traces/gpt.trace.gz
./hoff-plan model "$mtrace" --budget 25% --gpu-step 0.29 --json >"$tmp.model" 2>&1
expect_rc $? 0 "hoff-plan model --json" "$tmp.model"
if command -v python3 >/dev/null 2>&1; then
    if ! python3 - "$tmp.model" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
n, r, t = m["nev"], m["resident"], m["t_ns"]
assert n > 0 and len(t) == n and len(r) == n, "lengths: nev %d, t_ns %d, resident %d" % (n, len(t), len(r))
assert all(x <= y for x, y in zip(t, t[1:])) and t[-1] <= m["step_ns"], "t_ns not non-decreasing up to step_ns"
assert m["gaps"] and all(0 <= a < b <= n and s > 0 for a, b, s, _blk in m["gaps"]), "a gap out of range"
# The releases planned can only lower the no-offload peak (gpt's dead tails do).
assert 0 < max(r) <= m["nopeak_bytes"] == m["offload_peak_bytes"], "peaks: %d, %d" % (max(r), m["nopeak_bytes"])
assert 0 < m["budget_bytes"] < m["nopeak_bytes"] and m["latency_ns"] == 10000 and m["h2d_gbps"] == 50
EOF
    then
        echo "FAIL: hoff-plan model --json is not self-consistent:"
        head -c 2000 "$tmp.model"
        fail=1
    fi
fi
./hoff-plan model "$mtrace" >"$tmp.out" 2>&1
expect_rc $? 2 "hoff-plan model (no budget)" "$tmp.out"

# 3. simulate at 50% and 25%: the JSON fields, integrity, the budget.
for pct in 50 25; do
    out=$tmp.sim$pct
    sim_run ./hoff-plan simulate "$trace" --budget "$pct%" --json >"$out" 2>"$out.err"
    rc=$?
    cat "$out.err"
    expect_rc $rc 0 "hoff-plan simulate --budget $pct% --json" "$out"
    for key in budget_bytes peak_resident_bytes peak_device_bytes bytes_d2h bytes_h2d actions faults \
               stall_ns step_ns step_ns_no_offload plan_ns; do
        check "$out" "\"$key\":[0-9]" "simulate $pct% field $key"
    done
    check "$out" '"integrity_ok":true' "simulate $pct% integrity"
    check "$out" '"warmup":{' "simulate $pct% warmup"
    budget=$(field "$out" budget_bytes)
    peak=$(field "$out" peak_resident_bytes)
    if [ -z "$budget" ] || [ -z "$peak" ] || [ "$peak" -gt "$budget" ]; then
        echo "FAIL: simulate $pct%: peak_resident_bytes '$peak' > budget_bytes '$budget'"
        fail=1
    fi
    d2h=$(field "$out" bytes_d2h)
    if [ -z "$d2h" ] || [ "$d2h" -eq 0 ]; then
        echo "FAIL: simulate $pct%: nothing was offloaded (bytes_d2h '$d2h')"
        fail=1
    fi
done

# 3b. The tiers: a host cap of a quarter of the offloaded bytes and a spill
# directory; the host tier stays at or under its cap, the NVMe tier is used.
spill=$(mktemp -d "${TMPDIR:-/var/tmp}/hoff-plan-spill.XXXXXX") || exit 1
out=$tmp.tiers
sim_run ./hoff-plan simulate "$trace" --budget 25% --host-cap 32M --spill-dir "$spill" --json >"$out" 2>"$out.err"
rc=$?
cat "$out.err"
rmdir "$spill" 2>/dev/null
expect_rc $rc 0 "hoff-plan simulate --host-cap --spill-dir" "$out"
for key in peak_host_bytes peak_nvme_bytes bytes_spilled bytes_restored host_cap_bytes; do
    check "$out" "\"$key\":[0-9]" "simulate tiers field $key"
done
check "$out" '"integrity_ok":true' "simulate tiers integrity"
hpeak=$(field "$out" peak_host_bytes)
spilled=$(field "$out" bytes_spilled)
if [ -z "$hpeak" ] || [ "$hpeak" -gt $((32 * 1048576)) ]; then
    echo "FAIL: simulate tiers: peak_host_bytes '$hpeak' over the 32M cap"
    fail=1
fi
if [ -z "$spilled" ] || [ "$spilled" -eq 0 ]; then
    echo "FAIL: simulate tiers: nothing spilled"
    fail=1
fi

# 3c. A host cap as tight as the budget on a random training-shaped step:
# the plan's restores in flight fill the host tier to its cap while a use of
# another block on the NVMe tier needs room there.  The runtime waits for a
# restore to land and spills it again rather than fail the use (hoff_access
# returned -ENOSPC here when the tier thread had not finished reading the
# restores yet: a race, so this does not catch it every time); the cap
# holds, every stamp survives, and the prediction is the replay's stall.
rtrace=$tmp.rtrace
./hoff-plan synth --events 1491 --seed 3 -o "$rtrace" >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan synth --events" "$tmp.out"
sim_run ./hoff-plan simulate "$rtrace" --budget 100% --json >"$tmp.out" 2>&1
rpeak=$(field "$tmp.out" offload_peak_bytes)
spill=$(mktemp -d "${TMPDIR:-/var/tmp}/hoff-plan-spill.XXXXXX") || exit 1
out=$tmp.tight
sim_run ./hoff-plan simulate "$rtrace" --budget 10% --host-cap $((rpeak / 10)) --spill-dir "$spill" --json >"$out" 2>"$out.err"
rc=$?
rmdir "$spill" 2>/dev/null
expect_rc $rc 0 "hoff-plan simulate with a host cap of 10%" "$out.err"
check "$out" '"integrity_ok":true' "simulate tight cap integrity"
hpeak=$(field "$out" peak_host_bytes)
if [ -z "$hpeak" ] || [ "$hpeak" -gt $((rpeak / 10)) ]; then
    echo "FAIL: simulate tight cap: peak_host_bytes '$hpeak' over the cap $((rpeak / 10))"
    fail=1
fi
if [ "$(field "$out" stall_ns)" != "$(field "$out" plan_stall_ns)" ]; then
    echo "FAIL: simulate tight cap: predicted stall $(field "$out" plan_stall_ns) ns, replay $(field "$out" stall_ns) ns"
    fail=1
fi

# 4. The human report.
sim_run ./hoff-plan simulate "$trace" --budget 25% >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan simulate --budget 25%" "$tmp.out"
for key in "budget: " "peak resident offload bytes: " "within budget" "peak device bytes: " "evicted: " \
           "prefetched: " "actions: " "faults: " "exposed stall: " "step time: " "without offload" \
           "integrity: OK" "step 0 (warmup): "; do
    check "$tmp.out" "$key" "hoff-plan simulate report"
done

# 5. A malformed trace is a clear error (exit != 0), as is a missing one.
printf 'hoff-trace 1\nthis is not an event\n' >"$tmp.bad"
./hoff-plan info "$tmp.bad" >"$tmp.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
    echo "FAIL: hoff-plan info on a malformed trace exited 0"
    fail=1
fi
check "$tmp.out" "cannot read trace" "hoff-plan info (malformed)"
check "$tmp.out" ":[0-9]" "hoff-plan info (malformed: line and column)"
./hoff-plan simulate "$tmp.bad" --budget 50% >"$tmp.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
    echo "FAIL: hoff-plan simulate on a malformed trace exited 0"
    fail=1
fi
check "$tmp.out" "cannot read trace" "hoff-plan simulate (malformed)"
./hoff-plan info "$tmp.missing" >"$tmp.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
    echo "FAIL: hoff-plan info on a missing file exited 0"
    fail=1
fi

# 6. Usage errors: exit 2 with a message naming the problem.
./hoff-plan simulate "$trace" --budget bogus >"$tmp.out" 2>&1
expect_rc $? 2 "hoff-plan simulate --budget bogus" "$tmp.out"
check "$tmp.out" "budget" "hoff-plan simulate --budget bogus"
./hoff-plan simulate "$trace" >"$tmp.out" 2>&1
expect_rc $? 2 "hoff-plan simulate (no budget)" "$tmp.out"
./hoff-plan show "$trace" --budget 25% --planner nosuch >"$tmp.out" 2>&1
expect_rc $? 2 "hoff-plan show --planner nosuch" "$tmp.out"
check "$tmp.out" "greedy" "hoff-plan show --planner nosuch (lists the planners)"
./hoff-plan frobnicate >"$tmp.out" 2>&1
expect_rc $? 2 "hoff-plan frobnicate" "$tmp.out"
for sub in simulate show synth info model; do
    ./hoff-plan $sub --help >"$tmp.out" 2>&1
    expect_rc $? 0 "hoff-plan $sub --help" "$tmp.out"
    check "$tmp.out" "usage: hoff-plan $sub" "hoff-plan $sub --help"
done

exit $fail
