#!/bin/sh
# probes_double.sh — tests/gpu/probes (the GPU run's raw runtime probes) linked with the CUDA runtime double:
# prints what the double answers to each probe, so a GPU run's probes.json can be set beside it, and fails if
# a probe does not run on the double.  Runs in the build directory ($builddir or cwd).
set -u

cd "${builddir:-.}" || exit 99
out=${TMPDIR:-/tmp}/hoff-probes-dbl.$$
mkdir -p "$out" || exit 99
trap 'rm -rf "$out"' EXIT INT TERM
HOFFDBL_DEVICES=1 HOFFDBL_MEM=1073741824 OUT="$out" ./tests/cudart/probes_double
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "FAIL: the probes exited $rc on the double (they must all run there)"
    exit 1
fi
[ -s "$out/probes.json" ] || { echo "FAIL: no probes.json"; exit 1; }
echo "ok: the double's answers: $(tr -d '\n' < "$out/probes.json")"
