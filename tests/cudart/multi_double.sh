#!/bin/sh
# multi_double.sh — issue 20's acceptance on the strict CUDA runtime double with 8 devices
# (tests/cudart/test_multi_double):
#   - 8 ranks as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK, TORCHELASTIC_RUN_ID), one process each,
#     all at once: each rank's context is on its own device, makes no call on another device and creates no
#     context there (none on device 0 from ranks 1-7); on an 8-GPU, 2-socket node (a synthetic hwloc topology)
#     each rank's host tier is on its own socket's node; each spills under HOFF_SPILL_DIR/rank.K and publishes
#     a statistics segment that hoff-stat lists as one job of 8 ranks;
#   - two streams: with HOFF_FREE_FENCE=device a block freed while another stream reads it is never handed
#     out early (strict: any race aborts); with the stream fence the race checker finds the early reuse;
#   - a captured region's allocations all come from the device pool, and hoff makes no call CUDA forbids
#     during a capture;
#   - once the step's stream is named, a step's allocation on another stream (FSDP's, NCCL's) is device memory.
# Runs in the build directory ($builddir or cwd).
set -u

srcdir=${srcdir:-.}
case $srcdir in /*) ;; *) srcdir=$(pwd)/$srcdir ;; esac
cd "${builddir:-.}" || exit 99
prog=./tests/cudart/test_multi_double
stat=./hoff-stat
tmp=${TMPDIR:-/tmp}/hoff-multi-dbl.$$
job=multi-dbl-$$
pids=""
fail=0
cleanup() {
    rm -f "$tmp.hold"
    for p in $pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$tmp".*
}
trap cleanup EXIT
trap 'exit 1' INT TERM
bad() { echo "FAIL: $*"; fail=1; }
val() { sed -n "s/^$1 //p" "$2"; }
export HOFFDBL_DEVICES=8 HOFFDBL_MEM=1073741824

# --- 8 ranks ---------------------------------------------------------------------------------------------
mkdir -p "$tmp.spill" || exit 99
: >"$tmp.hold"
for k in 0 1 2 3 4 5 6 7; do
    RANK=$k WORLD_SIZE=8 LOCAL_RANK=$k LOCAL_WORLD_SIZE=8 TORCHELASTIC_RUN_ID=$job MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=29500 HOFF_SPILL_DIR=$tmp.spill HOFF_BUDGET=4M HOFF_LOG_LEVEL=error HOLD=$tmp.hold \
        HWLOC_XMLFILE=$srcdir/tests/data/topologies/eight-gpus.xml HWLOC_LIBXML_IMPORT=0 \
        HOFFDBL_REPORT=$tmp.report.$k "$prog" rank $k >"$tmp.log.$k" 2>&1 &
    pids="$pids $!"
done
# All 8 segments up (each rank writes its statistics before it waits on HOLD).
n=0
for i in $(seq 1 200); do
    n=$("$stat" --json 2>/dev/null | python3 -c '
import json, sys
d = json.loads(sys.stdin.read() or "{}")
print(sum(1 for p in d.get("processes", []) if p.get("job") == sys.argv[1]))' "$job")
    [ "$n" = 8 ] && break
    sleep 0.1
done
[ "$n" = 8 ] || bad "hoff-stat --json lists $n processes of job $job, want 8"
"$stat" >"$tmp.list" 2>&1 || bad "hoff-stat exited $?"
cat "$tmp.list"
"$stat" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
jobs = [j for j in d.get("jobs", []) if j["job"] == sys.argv[1]]
if len(jobs) != 1:
    sys.exit("want one job %s in --json jobs, got %r" % (sys.argv[1], d.get("jobs")))
j = jobs[0]
if j["world_size"] != 8 or sorted(j["ranks"]) != list(range(8)):
    sys.exit("job %s: world size %s, ranks %s; want 8 and 0..7" % (sys.argv[1], j["world_size"], j["ranks"]))
' "$job" || bad "hoff-stat --json does not show one job of 8 ranks"
rm -f "$tmp.hold"
for p in $pids; do
    wait "$p" || bad "a rank exited $? (log below)"
done
pids=""
for k in 0 1 2 3 4 5 6 7; do
    sed "s/^/rank $k: /" "$tmp.log.$k"
    grep -q "^FAIL" "$tmp.log.$k" && bad "rank $k: a check failed"
    r=$tmp.report.$k
    [ -s "$r" ] || { bad "rank $k: the double wrote no report"; continue; }
    [ "$(val hard_errors "$r")" = 0 ] || bad "rank $k: the double counted $(val hard_errors "$r") hard errors"
    [ "$(val contexts_created_$k "$r")" = 1 ] || bad "rank $k: $(val contexts_created_$k "$r") contexts on its device"
    for d in 0 1 2 3 4 5 6 7; do
        [ "$d" = "$k" ] && continue
        c=$(val contexts_created_$d "$r")
        calls=$(val device_calls_$d "$r")
        [ "$c" = 0 ] || bad "rank $k created $c context(s) on device $d"
        [ "$calls" = 0 ] || bad "rank $k made $calls call(s) on device $d"
    done
    [ -d "$tmp.spill/rank.$k" ] || bad "rank $k: no spill directory $tmp.spill/rank.$k"
done
echo "ok: 8 ranks, each on its own device only (calls on device 0 from ranks 1-7:" \
    "$(for k in 1 2 3 4 5 6 7; do val device_calls_0 "$tmp.report.$k"; done | paste -sd+ | bc))"

# --- two streams, graph capture -----------------------------------------------------------------------------
"$prog" streams device || bad "two streams with HOFF_FREE_FENCE=device"
HOFFDBL_STRICT=0 "$prog" streams stream 2>&1 || bad "two streams with the stream fence: the race checker must find the early reuse"
"$prog" capture || bad "graph capture"
"$prog" side || bad "a step's allocations on a stream other than the step's (FSDP's, NCCL's collective buffers)"
exit $fail
