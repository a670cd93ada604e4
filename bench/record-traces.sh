#!/bin/sh
# record-traces.sh — record the committed real traces (tests/data/traces/*.trace.gz): one training step of each
# model in bench/models/ on CPU, under hoff-record, with PyTorch (Debian's python3-torch is enough).
# Usage: bench/record-traces.sh [BUILDDIR] [MODEL...]   (BUILDDIR default ./build; models: gpt wide cnn)
# Env: PYTHON (default /usr/bin/python3), OUTDIR (default tests/data/traces in the source tree).
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
[ $# -gt 0 ] && shift
python=${PYTHON:-/usr/bin/python3}
outdir=${OUTDIR:-$top/tests/data/traces}
models=${*:-gpt wide cnn}

if [ ! -x "$build/hoff-record" ] || [ ! -x "$build/hoff-plan" ]; then
    echo "record-traces.sh: no hoff-record or hoff-plan in $build: build hoff there first (./quickstart demo, or configure && make)" >&2
    exit 1
fi
if ! "$python" -c 'import torch' 2>/dev/null; then
    echo "record-traces.sh: $python cannot import torch (on Debian: apt-get install python3-torch)" >&2
    exit 1
fi
mkdir -p "$outdir"
for m in $models; do
    script=$top/bench/models/$m.py
    [ -f "$script" ] || { echo "record-traces.sh: no model $script" >&2; exit 1; }
    out=$outdir/$m.trace.gz
    echo "== $m -> $out"
    # The second step (HOFF_RECORD_STEP=1, the default) is recorded: the first
    # creates the optimizer's state and warms the allocator's caches.
    PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH} "$build/hoff-record" -o "$out" -- "$python" "$script"
    "$build/hoff-plan" info "$out"
done
