#!/bin/sh
# torch_order.sh — tests/cudart/test_torch_order (PyTorch's entry points in autograd's order on the strict CUDA
# runtime double) with every planner and budget, one and two streams, and once on device 1: each run must
# compute what plain host memory computes, and the double must see no race, no stale launch error and no
# context on a device hoff does not serve.  Runs in the build directory ($builddir or cwd).
set -u

cd "${builddir:-.}" || exit 99
prog=./tests/cudart/test_torch_order
fail=0
runs=0
run() {
    runs=$((runs + 1))
    if ! HOFFDBL_DEVICES=2 HOFFDBL_MEM=268435456 "$prog" "$@"; then
        echo "FAIL: test_torch_order $*"
        fail=1
    fi
}
for planner in greedy timed; do
    for pct in 0 50 25; do
        for streams in 1 2; do
            run --planner "$planner" --budget-pct "$pct" --streams "$streams"
        done
    done
done
run --planner timed --budget-pct 50 --streams 2 --device 1
echo "$runs runs, $([ $fail = 0 ] && echo all passed || echo some failed)"
exit $fail
