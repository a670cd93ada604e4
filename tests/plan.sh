#!/bin/sh
# plan.sh — the trace tool (hoff-plan): synth, info, show and simulate run and say what a user relies on, the
# budget holds and every stamp is intact; bad input fails clearly.  Runs in the build directory ($builddir or cwd).
set -u

cd "${builddir:-.}" || exit 99
fail=0
tmp=${TMPDIR:-/tmp}/hoff-plan-test.$$
trap 'rm -f "$tmp".*' EXIT INT TERM
. "${srcdir:-.}/tests/sim_memory.sh"

check() { # check FILE PATTERN WHAT
    if ! grep -qi -- "$2" "$1"; then
        echo "FAIL: $3: no '$2' in the output:"
        cat "$1"
        fail=1
    fi
}

expect_rc() { # expect_rc RC WANT WHAT OUTFILE
    if [ "$1" -ne "$2" ]; then
        echo "FAIL: $3 exited $1, expected $2"
        cat "$4"
        fail=1
    fi
}

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
