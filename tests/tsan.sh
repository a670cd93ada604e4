#!/bin/sh
# tsan.sh — ThreadSanitizer over the code paths where the training thread and hoff's issuing thread share
# state through hoff-plan's recorder (timeline and export swap the backend's table and read the step from the
# issuer), over the multi-threaded integrity suite, over planning on the planning thread while steps run
# (test_planthread, hoff-demo) and over the CUDA runtime double (tests/cudart/, where built): any race report
# fails.  Run by ./quickstart test on a
# build configured with -fsanitize=thread (TSAN=1 in the environment); skips (77) elsewhere, since a plain or
# ASan build cannot see races.  Runs in the build directory; reads the traces from $srcdir.
set -u

srcdir=${srcdir:-.}
cd "${builddir:-.}" || exit 99
if [ "${HOFF_TSAN_BUILD:-0}" != 1 ]; then
    echo "SKIP: not a ThreadSanitizer build (./quickstart test configures one and sets HOFF_TSAN_BUILD=1)"
    exit 77
fi
tmp=${TMPDIR:-/tmp}/hoff-tsan-test.$$
trap 'rm -f "$tmp".*' EXIT INT TERM
fail=0
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"

run() { # run WHAT CMD...
    what=$1
    shift
    "$@" >"$tmp.out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] || grep -q "ThreadSanitizer" "$tmp.out"; then
        echo "FAIL: $what exited $rc:"
        cat "$tmp.out"
        fail=1
    else
        echo "ok: $what"
    fi
}

trace=$srcdir/tests/data/traces/gpt.trace.gz
run "hoff-plan timeline" ./hoff-plan timeline "$trace" --budget 50% -o "$tmp.svg"
run "hoff-plan export" ./hoff-plan export "$trace" --budget 50% --perfetto "$tmp.json"
run "test_integrity (threads)" ./tests/test_integrity
# The CUDA runtime double: its own suite, and test_cuda on it (the backend's threads against the stream
# workers).  Built only where configure found the CUDA headers.
if [ -x ./tests/cudart/test_double ]; then
    run "test_double (CUDA runtime double)" ./tests/cudart/test_double
    run "test_cuda on the CUDA runtime double" sh "$srcdir/tests/cudart/test_cuda_double.sh"
fi
# PyTorch's entry points in autograd's order on the double, two streams: the training thread, hoff's issuing
# and planning threads, and the double's stream workers together.
if [ -x ./tests/cudart/test_torch_order ]; then
    run "test_torch_order (two streams, on the double)" env -u HOFF_TSAN_BUILD HOFFDBL_DEVICES=2 \
        HOFFDBL_MEM=268435456 ./tests/cudart/test_torch_order --streams 2 --budget-pct 50 --layers 6 --steps 3
fi
run "test_planthread (planning thread)" env -u HOFF_TSAN_BUILD ./tests/test_planthread
run "hoff-demo (planning thread)" env -u HOFF_TSAN_BUILD ./hoff-demo --steps 8 --layers 16
exit $fail
