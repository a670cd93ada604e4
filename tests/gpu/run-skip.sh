#!/bin/sh
# run-skip.sh — tests/gpu/run.sh (the one GPU run) where it cannot run: it must end at once, exit 77 and leave a
# valid gpu.json saying why (no GPU the runtime can see: CUDA_VISIBLE_DEVICES is emptied, so this holds on a GPU
# machine too; no toolkit); refuse a bad HOFF_GPU_TIMEOUT and an OUT it cannot write; and on SIGTERM during the
# build, stop it and still write gpu.json; and build what the GPU machine will build (libhoff.so, test_cuda,
# probes), forced.  Reads $srcdir; writes only in its own temp dir.
set -u

srcdir=${srcdir:-.}
run=$srcdir/tests/gpu/run.sh
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hoff-run-skip.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
bad() { echo "FAIL: $*"; fail=1; }

py=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1; then py=$p; break; fi
done

# field FILE KEY [PART]: the value of KEY (in PART if given) of gpu.json, printed; fails on invalid JSON.
field() {
    if [ -n "$py" ]; then
        "$py" - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
if len(sys.argv) > 3:
    d = d[sys.argv[3]]
v = d.get(sys.argv[2])
print("" if v is None else v)
EOF
    else
        # No python: the top-level key's first occurrence (enough for "status", "reason", "skipped").
        sed -n "s/^  \"$2\": \"\\{0,1\\}\\([^\"]*\\)\"\\{0,1\\},\\{0,1\\}\$/\\1/p" "$1" | head -n 1
    fi
}

# check NAME EXPECTED_RC PATTERN: the last run's exit code, a valid gpu.json whose reason matches PATTERN (ERE).
check() {
    name=$1 want=$2 pat=$3
    [ "$rc" -eq "$want" ] || bad "$name: exit $rc, expected $want"
    if [ ! -s "$out/gpu.json" ]; then
        bad "$name: no gpu.json in $out"
        return
    fi
    if ! reason=$(field "$out/gpu.json" reason); then
        bad "$name: gpu.json is not valid JSON:"
        cat "$out/gpu.json"
        return
    fi
    echo "$name: exit $rc, reason: $reason"
    echo "$reason" | grep -qE -- "$pat" || bad "$name: the reason does not say '$pat'"
}

# 1. No GPU the CUDA runtime can see: a skip, quickly, with the reason in "skipped" too.
out=$tmp/nogpu
t0=$(date +%s)
OUT=$out CUDA_VISIBLE_DEVICES='' HOFF_GPU_FORCE_BUILD=0 "$run" > "$tmp/nogpu.log" 2>&1
rc=$?
t1=$(date +%s)
check "no GPU" 77 "GPU|no CUDA toolkit"
[ $((t1 - t0)) -le 60 ] || bad "no GPU: the skip took $((t1 - t0)) s (it must not build anything)"
[ "$(field "$out/gpu.json" status)" = skipped ] || bad "no GPU: status is not \"skipped\""
[ -n "$(field "$out/gpu.json" skipped)" ] || bad "no GPU: no \"skipped\" reason"
if [ -n "$py" ]; then
    for part in build suite probes train seams ddp; do
        [ "$(field "$out/gpu.json" status "$part")" = skipped ] || bad "no GPU: part $part is not skipped"
    done
fi

# 2. No toolkit (the build forced, so the toolkit is what stops it).
out=$tmp/nokit
OUT=$out CUDA_HOME=$tmp/no-such-cuda HOFF_GPU_FORCE_BUILD=1 "$run" > "$tmp/nokit.log" 2>&1
rc=$?
check "no toolkit" 77 "no CUDA toolkit at $tmp/no-such-cuda"

# 3. A bad time limit: refused, and gpu.json says so.
out=$tmp/badlimit
OUT=$out HOFF_GPU_TIMEOUT=abc "$run" > "$tmp/badlimit.log" 2>&1
rc=$?
check "HOFF_GPU_TIMEOUT=abc" 1 "HOFF_GPU_TIMEOUT=abc: expected a whole number of seconds"
[ "$(field "$out/gpu.json" status)" = failed ] || bad "HOFF_GPU_TIMEOUT=abc: status is not \"failed\""

# 4. OUT that cannot be a directory: a clear message, exit 1.
: > "$tmp/afile"
OUT=$tmp/afile/sub "$run" > "$tmp/badout.log" 2>&1
rc=$?
[ "$rc" -eq 1 ] || bad "OUT under a file: exit $rc, expected 1"
grep -q "is not a writable directory" "$tmp/badout.log" || bad "OUT under a file: no message saying so"

# 5. SIGTERM while it builds (forced, where the toolkit is): the build stops, gpu.json says why.
if [ -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda_runtime_api.h" ] && command -v gcc >/dev/null 2>&1; then
    out=$tmp/term
    OUT=$out HOFF_GPU_FORCE_BUILD=1 HOFF_GPU_DIRECT=1 HOFF_JOBS=1 "$run" > "$tmp/term.log" 2>&1 &
    pid=$!
    i=0
    while [ $i -lt 300 ] && ! grep -q 'direct build in' "$tmp/term.log" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    bdir=$(sed -n 's/^run.sh: direct build in \(.*\) (limit.*/\1/p' "$tmp/term.log")
    sleep 1
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    check "SIGTERM" 1 "killed by SIGTERM"
    if [ -n "$py" ]; then
        st=$(field "$out/gpu.json" status build)
        [ "$st" = failed ] || [ "$st" = ok ] || bad "SIGTERM: the build part is \"$st\""
        [ "$(field "$out/gpu.json" status train)" = skipped ] || bad "SIGTERM: train is not skipped"
    fi
    # Nothing of the stopped build is left running, and its work dir is gone (ps, not pgrep -f: that takes a
    # pattern, and this is a literal path).
    sleep 1
    # shellcheck disable=SC2009
    if [ -z "$bdir" ]; then
        bad "SIGTERM: run.sh never said where it builds"
    elif ps -eo args 2>/dev/null | grep -v grep | grep -qF "$bdir"; then
        bad "SIGTERM: processes of the stopped build ($bdir) are still running"
        ps -eo pid,args | grep -F "$bdir" | grep -v grep
    elif [ -e "$bdir" ]; then
        bad "SIGTERM: the work dir $bdir was left behind"
    fi
else
    echo "SIGTERM: not checked (no CUDA toolkit or gcc here)"
fi

# 6. The build the GPU machine will make (forced, direct, where the toolkit is) succeeds from this tree:
#    libhoff.so, test_cuda and the probes from Makefile.am's source lists, so a Makefile.am change that
#    breaks it fails here, not in the one GPU run.
if [ -f "${CUDA_HOME:-/usr/local/cuda}/include/cuda_runtime_api.h" ] && command -v gcc >/dev/null 2>&1 &&
    [ -n "$py" ]; then
    out=$tmp/build
    OUT=$out CUDA_VISIBLE_DEVICES='' HOFF_GPU_FORCE_BUILD=1 HOFF_GPU_DIRECT=1 "$run" > "$tmp/build.log" 2>&1
    rc=$?
    st=$(field "$out/gpu.json" status build)
    if [ "$st" = ok ]; then
        echo "forced build: ok (exit $rc)"
    else
        bad "forced build: the build part is \"$st\" (exit $rc)"
        tail -20 "$tmp/build.log"
        field "$out/gpu.json" log_tail build | tail -20
    fi
else
    echo "forced build: not checked (no CUDA toolkit, gcc or python3 here)"
fi

[ "$fail" -eq 0 ] && echo "PASS: run.sh skips, refuses and stops with a valid gpu.json, and builds"
exit "$fail"
