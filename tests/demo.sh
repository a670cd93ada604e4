#!/bin/sh
# demo.sh — smoke test of the demo (hoff-demo) and the benchmarks bench/alloc and bench/nvme (--smoke: one
# small size; fio only where installed): they run, exit 0, and print what a user relies on.  Runs in the build directory ($builddir or cwd).
set -u

cd "${builddir:-.}" || exit 99
fail=0
. "${srcdir:-.}/tests/clicheck.sh"
out=${TMPDIR:-/tmp}/hoff-demo-test.$$
trap 'rm -f "$out" "$out.json" "$out.bench"' EXIT INT TERM

small="--layers 4 --hidden 512 --seq 2048 --steps 3"

# 1. The human report (--mode plan, the default): step 0 is the warmup, the
#    plan is printed after it, later steps replay it.  Sections 1 to 4 plan on
#    the training thread, so that step 1 replays on every run; 2b shows the
#    default, the planning thread.
export HOFF_PLAN_THREAD=0
./hoff-demo $small >"$out" 2>&1
rc=$?
cat "$out"
if [ "$rc" -ne 0 ]; then
    echo "FAIL: hoff-demo $small exited $rc"
    fail=1
fi
for key in "mode plan" "backend: " "budget: " "activation peak without offload: " \
           "peak resident offload bytes: .*(within budget)" "evicted: " "prefetched: " \
           "faults: " "stall: " "late prefetches: " "integrity: OK (" \
           "^step 0 (warmup): " "^plan: timed, [0-9]* actions, feasible" \
           "^step 1 (replay): " "^step 2 (replay): " "actions fired [0-9]* skipped " \
           "peak resident [0-9]" "divergent steps: 0" "^actions: [0-9]* fired, " \
           "^planning: on the training thread (HOFF_PLAN_THREAD=0); steps run under the online policy while planning: 0"; do
    check "$out" "$key" "hoff-demo report"
done

# 1b. --mode manual (the pre-pipeline hand prefetches) runs the pipeline too.
./hoff-demo $small --mode manual >"$out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "FAIL: hoff-demo $small --mode manual exited $rc"
    cat "$out"
    fail=1
fi
for key in "mode manual" "^step 0 (warmup): " "^plan: timed, " "^step 2 (replay): " \
           "peak resident offload bytes: .*(within budget)" "integrity: OK ("; do
    check "$out" "$key" "hoff-demo --mode manual"
done

# 2. The JSON report, with an explicit size budget.
./hoff-demo $small --budget 16M --json >"$out.json" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "FAIL: hoff-demo --json exited $rc"
    cat "$out.json"
    fail=1
fi
for key in '"backend":' '"mode":"plan"' '"budget_bytes":16777216' '"peak_resident_bytes":' \
           '"within_budget":true' '"integrity":{"ok":true' '"stats":{' \
           '"step":0,"state":"warmup","planning":false,"planned":true' '"step":1,"state":"replay"' \
           '"actions_fired":' '"step_peak_resident_bytes":' '"plan":{"planner":"timed"' \
           '"divergent_steps":0'; do
    check "$out.json" "$key" "hoff-demo --json"
done

# 2b. The planning thread (the default): the recording's step end hands the plan over and returns; the steps
#     until it is ready run online (reported as planning), then replay; the training thread waits 0 for it in
#     every step.  A step delay gives the planner time to finish within the run.
HOFF_PLAN_THREAD=1 ./hoff-demo $small --steps 12 --step-delay 50 --budget 16M --json >"$out.json" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "FAIL: HOFF_PLAN_THREAD=1 hoff-demo --json exited $rc"
    cat "$out.json"
    fail=1
fi
for key in '"step":0,"state":"warmup","planning":false,"planned":false' '"state":"replay","planning":false,"planned":true' \
           '"thread":true,' '"wait_ns":0,' '"pending":false' '"within_budget":true' '"integrity":{"ok":true' \
           '"divergent_steps":0'; do
    check "$out.json" "$key" "HOFF_PLAN_THREAD=1 hoff-demo --json"
done
if grep -q '"plan_wait_ns":[1-9]' "$out.json"; then
    echo "FAIL: HOFF_PLAN_THREAD=1 hoff-demo --json: a step waited for planning:"
    cat "$out.json"
    fail=1
fi
# the steps reported as planning are the plan's lag
python3 - "$out.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
online = sum(1 for r in d["step_reports"] if r["planning"])
first = next(i for i, r in enumerate(d["step_reports"]) if r["state"] == "replay")
if online != d["plan"]["lag_steps"] or first != online + 1 or d["stats"]["plan_wait_ns"] != 0:
    print("FAIL: hoff-demo --json: %d steps planning, first replay at step %d, lag_steps %d, wait %d"
          % (online, first, d["plan"]["lag_steps"], d["stats"]["plan_wait_ns"]))
    sys.exit(1)
PY

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
./hoff-demo --mode bogus >"$out" 2>&1
rc=$?
if [ "$rc" -ne 2 ]; then
    echo "FAIL: hoff-demo --mode bogus exited $rc, expected 2"
    cat "$out"
    fail=1
fi
check "$out" "mode" "hoff-demo --mode bogus"

# 4. A corrupted byte is caught: FAILED and exit 1.
./hoff-demo $small --corrupt >"$out" 2>&1
rc=$?
if [ "$rc" -ne 1 ]; then
    echo "FAIL: hoff-demo --corrupt exited $rc, expected 1"
    cat "$out"
    fail=1
fi
check "$out" "integrity: FAILED (step 2, layer 2, block qkv" "hoff-demo --corrupt"

# 4b. Production shapes: nine rows (three GPT shapes, three budgets), the plan never slower than the no-offload
#     step by more than greedy's, no plan under a lower bound (the issue's, and the peak's, which is at least as
#     high), and the plot script turns them into an SVG that parses.
./bench/shapes --json >"$out.bench" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "FAIL: bench/shapes --json exited $rc"
    cat "$out.bench"
    fail=1
fi
python3 - "$out.bench" "${srcdir:-.}/bench/shapes_svg.py" <<'PY' || fail=1
import json, subprocess, sys, xml.dom.minidom
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = [r["shape"] for r in rows if not (r["compute_ns"] <= r["timed_step_ns"] <= r["greedy_step_ns"]
                                       and r["bound_ns"] <= r["peak_bound_ns"] <= r["timed_step_ns"]
                                       and r["lp_bound_ns"] is None)]
if len(rows) != 9 or bad:
    print("FAIL: bench/shapes --json: %d rows (want 9), out of order: %s" % (len(rows), bad))
    sys.exit(1)
svg = subprocess.run([sys.executable, sys.argv[2]], input=open(sys.argv[1]).read(), capture_output=True, text=True)
if svg.returncode != 0:
    print("FAIL: bench/shapes_svg.py exited %d: %s" % (svg.returncode, svg.stderr))
    sys.exit(1)
xml.dom.minidom.parseString(svg.stdout)
PY

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

# 6. The NVMe benchmark: a small run through the tier, every block checked, and fio beside it where there is
#    one; a full run without fio refuses, naming what is missing (speed is measured by hand, never here).
./bench/nvme --smoke --json --dir . >"$out.bench" 2>&1
rc=$?
cat "$out.bench"
if [ "$rc" -ne 0 ]; then
    echo "FAIL: bench/nvme --smoke --json exited $rc"
    fail=1
fi
for key in '"bench":"nvme"' '"hoff_write_gbps":[0-9]' '"hoff_read_gbps":[0-9]' '"integrity":"OK"' \
           '"write_ratio_vs_fio":' '"read_ratio_vs_fio":' '"fio":{"run":'; do
    check "$out.bench" "$key" "bench/nvme --smoke --json"
done
if command -v fio >/dev/null 2>&1; then
    check "$out.bench" '"fio_write_gbps":[0-9]' "bench/nvme --smoke --json with fio"
else
    check "$out.bench" '"fio":{"run":false,"why":"fio not found"}' "bench/nvme --smoke --json without fio"
fi
./bench/nvme --fio ./no-such-fio --dir . >"$out.bench" 2>&1
rc=$?
if [ "$rc" -ne 1 ]; then
    echo "FAIL: bench/nvme --fio ./no-such-fio exited $rc, expected 1"
    cat "$out.bench"
    fail=1
fi
check "$out.bench" "fio not found or not runnable (./no-such-fio); install it" "bench/nvme without fio"
if ls -d hoff-nvme-bench.* >/dev/null 2>&1; then
    echo "FAIL: bench/nvme left its directory behind"
    fail=1
fi

exit $fail
