#!/bin/sh
# messages.sh — the tools' messages on bad input and unholdable runs: each refusal names what was wrong (the flag
# or variable, the value, the accepted range or the OS's reason) and exits non-zero; nothing runs on silently.
# Runs in the build directory ($builddir or cwd).
set -u

cd "${builddir:-.}" || exit 99
fail=0
. "${srcdir:-.}/tests/clicheck.sh"
tmp=${TMPDIR:-/tmp}/hoff-msgs-test.$$
trap 'rm -rf "$tmp".*' EXIT INT TERM

absent() { # absent FILE PATTERN WHAT
    if grep -qi -- "$2" "$1"; then
        echo "FAIL: $3: '$2' in the output:"
        cat "$1"
        fail=1
    fi
}

trace=$tmp.trace
./hoff-plan synth --layers 2 --hidden 512 --seq 1024 -o "$trace" >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan synth" "$tmp.out"

# 1. synth -o into a directory that does not exist: the OS's reason, not an option error.
./hoff-plan synth -o /nonexistent-hoff-dir/x.trace >"$tmp.out" 2>&1
expect_rc $? 1 "hoff-plan synth -o /nonexistent-hoff-dir/x.trace" "$tmp.out"
check "$tmp.out" "/nonexistent-hoff-dir/x.trace" "synth -o missing dir (names the file)"
check "$tmp.out" "No such file or directory" "synth -o missing dir (the OS's reason)"
absent "$tmp.out" "option" "synth -o missing dir"

# 2. show: the per-event resident column counts block bytes (size classes, the 2 MiB managed grain) as the summary
# does.  Sizes that are not multiples of 2 MiB make the two differ when one counts requested bytes.
./hoff-plan synth --layers 2 --hidden 1000 --seq 1000 -o "$tmp.odd" >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan synth (odd sizes)" "$tmp.out"
./hoff-plan show "$tmp.odd" --budget 40% --json >"$tmp.out" 2>&1
expect_rc $? 0 "hoff-plan show --json" "$tmp.out"
maxres=$(tr '{' '\n' <"$tmp.out" | sed -n 's/.*"resident_bytes":\([0-9]*\).*/\1/p' | sort -n | tail -n 1)
peak=$(sed -n 's/.*"summary":{[^}]*"peak_bytes":\([0-9]*\).*/\1/p' "$tmp.out")
if [ -z "$maxres" ] || [ "$maxres" != "$peak" ]; then
    echo "FAIL: hoff-plan show: the largest per-event resident_bytes ($maxres) is not the summary's peak ($peak)"
    fail=1
fi

# 3. Memory before a simulation.  The sim backs every block with real memory: a run that cannot fit is refused
# up front, saying what it needs and what the machine has.  Each run is under a virtual-memory limit, so that a
# regression fails here instead of eating the machine (unless the build cannot start under one: ASan).
limited() { # limited CMD...: run under ulimit -v 8 GiB when the build starts under it
    if (ulimit -v 8388608 && ./hoff-plan --help) >/dev/null 2>&1; then
        (ulimit -v 8388608 && exec "$@")
    else
        "$@"
    fi
}
out_flags() { # out_flags SUB BASE: the output flags SUB (simulate, timeline, export) needs, into BASE.*
    case $1 in
    simulate) extra= ;;
    timeline) extra="-o $2.svg" ;;
    export) extra="--perfetto $2.json" ;;
    esac
}
printf 'hoff-trace 1\na 0 70368744177664 1 0 1000\nf 0 0 2000\nend\n' >"$tmp.huge"  # one 64 TiB block
for sub in simulate timeline export; do
    out_flags $sub "$tmp.huge"
    limited ./hoff-plan $sub "$tmp.huge" --budget 50% $extra >"$tmp.out" 2>&1
    expect_rc $? 3 "hoff-plan $sub (a 64 TiB block)" "$tmp.out"
    check "$tmp.out" "needs about .* of memory and the machine has .* available" "hoff-plan $sub (a 64 TiB block)"
    check "$tmp.out" "no-memory-check" "hoff-plan $sub (a 64 TiB block: the override)"
done

# The refusal has its own exit status (3), apart from the failures' 1, so that a test on a loaded machine skips
# instead of failing (tests/sim_memory.sh: exit 77, hoff-plan's message in the log).  HOFF_PLAN_MEM_AVAILABLE
# stands for the machine's available memory: a small trace refused under 1M, run with --no-memory-check.
for sub in simulate timeline export; do
    out_flags $sub "$tmp.small"
    HOFF_PLAN_MEM_AVAILABLE=1M ./hoff-plan $sub "$trace" --budget 50% --steps 2 $extra >"$tmp.out" 2>&1
    expect_rc $? 3 "HOFF_PLAN_MEM_AVAILABLE=1M hoff-plan $sub" "$tmp.out"
    check "$tmp.out" "machine has 1.0 MiB available (HOFF_PLAN_MEM_AVAILABLE).*refusing" \
        "HOFF_PLAN_MEM_AVAILABLE=1M hoff-plan $sub"
    HOFF_PLAN_MEM_AVAILABLE=1M ./hoff-plan $sub "$trace" --budget 50% --steps 2 $extra --no-memory-check \
        >"$tmp.out" 2>&1
    expect_rc $? 0 "HOFF_PLAN_MEM_AVAILABLE=1M hoff-plan $sub --no-memory-check" "$tmp.out"
done
HOFF_PLAN_MEM_AVAILABLE=lots ./hoff-plan simulate "$trace" --budget 50% >"$tmp.out" 2>&1
expect_rc $? 2 "HOFF_PLAN_MEM_AVAILABLE=lots hoff-plan simulate" "$tmp.out"
check "$tmp.out" "HOFF_PLAN_MEM_AVAILABLE: expected a size.*got 'lots'" "HOFF_PLAN_MEM_AVAILABLE=lots"
# sim_run: a refusal skips the test (77) and says why on the test's own output (fd 8); another status passes.
(. "${srcdir:-.}/tests/sim_memory.sh"
 HOFF_PLAN_MEM_AVAILABLE=1M sim_run ./hoff-plan simulate "$trace" --budget 50% >/dev/null 2>&1
 echo "not skipped") >"$tmp.log" 2>&1
expect_rc $? 77 "sim_run on a refused simulation" "$tmp.log"
check "$tmp.log" "^SKIP: ./hoff-plan simulate .* exited 3: .*refused for memory" "sim_run on a refused simulation"
check "$tmp.log" "needs about .* of memory and the machine has" "sim_run on a refused simulation (the message)"
absent "$tmp.log" "not skipped" "sim_run on a refused simulation"
(. "${srcdir:-.}/tests/sim_memory.sh"
 sim_run ./hoff-plan simulate "$trace" --budget bogus >"$tmp.out" 2>&1) >"$tmp.log" 2>&1
expect_rc $? 2 "sim_run on a usage error" "$tmp.log"
check "$tmp.out" "budget" "sim_run on a usage error (its message where the caller sent it)"

# 4. 100,000 retained 4 KiB offload blocks: each holds a 2 MiB managed grain (195 GiB).  The sim device is sized
# from block bytes, so the message is about memory and the grain, not "raise HOFF_SIM_DEVICE" (which hoff-plan
# does not even read).
awk 'BEGIN { print "hoff-trace 1"; for (i = 0; i < 100000; i++) printf "a %d 4096 1 0 %d\n", i, 100 * (i + 1);
             print "end" }' >"$tmp.small"
limited ./hoff-plan simulate "$tmp.small" --budget 50% >"$tmp.out" 2>&1
rc=$?
absent "$tmp.out" "HOFF_SIM_DEVICE" "hoff-plan simulate (100,000 retained small blocks)"
if [ "$rc" -ne 0 ]; then
    check "$tmp.out" "2 MiB grain" "hoff-plan simulate (100,000 retained small blocks: the cause)"
fi

# 5. Values that would wrap the virtual clock: each refused with its flag or variable, the value and the range
# (exit 2), never a run that prints "18446744073.71 s" or "0 ns".
refuse() { # refuse WHAT PATTERN CMD...: exit 2 and the pattern in the message
    what=$1 pat=$2
    shift 2
    "$@" >"$tmp.out" 2>&1
    expect_rc $? 2 "$what" "$tmp.out"
    check "$tmp.out" "$pat" "$what"
    absent "$tmp.out" "18446744073" "$what"
}
for sub in simulate model; do
    refuse "$sub --compute-scale 1e-300" "--compute-scale.*1e-06 to 1e+06.*1e-300" \
        ./hoff-plan $sub "$trace" --budget 50% --compute-scale 1e-300
    refuse "$sub --compute-scale 1e300" "--compute-scale.*1e-06 to 1e+06.*1e300" \
        ./hoff-plan $sub "$trace" --budget 50% --compute-scale 1e300
    refuse "$sub --gpu-step 1e-9" "--gpu-step.*1e-06 to 1e+09.*1e-9" \
        ./hoff-plan $sub "$trace" --budget 50% --gpu-step 1e-9
    refuse "$sub --gpu-step 1e300" "--gpu-step.*1e-06 to 1e+09.*1e300" \
        ./hoff-plan $sub "$trace" --budget 50% --gpu-step 1e300
    refuse "$sub --bandwidth 1e-300" "--bandwidth.*0.001 to 100000.*1e-300" \
        ./hoff-plan $sub "$trace" --budget 50% --bandwidth 1e-300
done
refuse "show --bandwidth 1e-300" "--bandwidth.*0.001 to 100000" ./hoff-plan show "$trace" --budget 50% --bandwidth 1e-300
refuse "timeline --compute-scale 1e-300" "--compute-scale" \
    ./hoff-plan timeline "$trace" --budget 50% --compute-scale 1e-300 -o "$tmp.svg"
refuse "synth --tflops 1e-300" "--tflops.*0.001 to 1e+06" ./hoff-plan synth --tflops 1e-300 -o "$tmp.t2"
refuse "hoff-demo --tflops 1e-300" "--tflops.*0.001 to 1e+06" ./hoff-demo --layers 1 --steps 2 --tflops 1e-300
refuse "hoff-demo --budget %" "--budget" ./hoff-demo --layers 1 --steps 2 --budget %
refuse "hoff-demo --budget 0%" "--budget" ./hoff-demo --layers 1 --steps 2 --budget 0%
HOFF_SIM_H2D_GBPS=1e-300 refuse "HOFF_SIM_H2D_GBPS=1e-300" "HOFF_SIM_H2D_GBPS.*1e-300.*0.001" \
    ./hoff-demo --layers 1 --steps 2
# A step the scale would stretch past the 10^15 ns hoff models, even with the scale in range.
printf 'hoff-trace 1\na 0 4194304 1 0 1000\nf 0 0 999999999999999\nend\n' >"$tmp.long"
refuse "simulate --compute-scale 1e-3 on a 11.6-day step" "--compute-scale.*11.6 days" \
    ./hoff-plan simulate "$tmp.long" --budget 50% --compute-scale 1e-3

# Trace times that cannot be on a step's clock: a LINE:COL error like the reader's others.
printf 'hoff-trace 1\na 0 4194304 1 0 18446744073709551000\nf 0 0 18446744073709551001\nend\n' >"$tmp.wrap"
./hoff-plan simulate "$tmp.wrap" --budget 50% >"$tmp.out" 2>&1
expect_rc $? 1 "simulate (times near 2^64)" "$tmp.out"
check "$tmp.out" "2:17: .*cpu time.*18446744073709551000" "simulate (times near 2^64: LINE:COL)"
absent "$tmp.out" "0 ns" "simulate (times near 2^64)"
printf 'hoff-trace 1\nstep_ns 18446744073709551000\nend\n' >"$tmp.wrap"
./hoff-plan info "$tmp.wrap" >"$tmp.out" 2>&1
expect_rc $? 1 "info (step_ns near 2^64)" "$tmp.out"
check "$tmp.out" "2:9: .*step time" "info (step_ns near 2^64: LINE:COL)"

exit $fail
