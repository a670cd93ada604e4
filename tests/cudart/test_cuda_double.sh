#!/bin/sh
# test_cuda_double.sh — runs the cuda backend's GPU suite (tests/gpu/test_cuda.c, unchanged) linked with the
# strict CUDA runtime double instead of libcudart, so it runs fully here (no skip): a double with 2 devices of
# 1 GiB each, once on device 0 and once on device 1 (HOFF_DEVICE).  Strict: any check of the double that fires
# aborts the run, except the one test_cuda makes on purpose (it queries an event it never recorded, which CUDA
# answers with success and the double calls a hard error: HOFFDBL_ALLOW=unrecorded:1).  Prints the double's
# counters and fails if the device-1 run created a context on device 0 (issue 15's "a context on GPU 0 from
# every background thread").
set -u

cd "${builddir:-.}" || exit 99
prog=./tests/cudart/test_cuda_double
tmp=${TMPDIR:-/tmp}/hoff-dbl-cuda.$$
trap 'rm -f "$tmp".*' EXIT INT TERM
fail=0

val() { # val KEY FILE
    sed -n "s/^$1 //p" "$2"
}

for dev in 0 1; do
    HOFFDBL_DEVICES=2 HOFFDBL_MEM=1073741824 HOFFDBL_ALLOW=unrecorded:1 HOFFDBL_REPORT="$tmp.report" \
        HOFF_DEVICE=$dev "$prog" >"$tmp.log" 2>&1
    rc=$?
    cat "$tmp.log"
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: test_cuda on device $dev of the double exited $rc (77 would be a skip: it must run)"
        fail=1
        continue
    fi
    if [ ! -s "$tmp.report" ]; then
        echo "FAIL: the double wrote no report (HOFFDBL_REPORT)"
        fail=1
        continue
    fi
    hard=$(val hard_errors "$tmp.report")
    if [ "$hard" != 1 ]; then
        echo "FAIL: device $dev: the double counted $hard hard errors; want exactly the one allowed" \
            "(test_cuda's query of a never-recorded event)"
        fail=1
    fi
    if [ "$dev" = 1 ] && [ "$(val contexts_created_0 "$tmp.report")" != 0 ]; then
        echo "FAIL: the backend serves device 1, yet a context was created on device 0 (a thread that" \
            "switched back to a device it never chose)"
        fail=1
    fi
    echo "ok: test_cuda on device $dev of the double: contexts created on device 0: $(val contexts_created_0 "$tmp.report")," \
        "device 1: $(val contexts_created_1 "$tmp.report"); cudaSetDevice switches to 0: $(val device_switches_0 "$tmp.report")," \
        "to 1: $(val device_switches_1 "$tmp.report")"
    rm -f "$tmp.report"
done
exit $fail
