#!/bin/sh
# synth_gpt.sh — hoff-plan synth --model gpt against a real step: bench/models/gpt.py recorded on CPU with
# hoff-record at a small shape, and the synthetic step of the same shape (fp32, materialised attention); per
# kind of tensor (the sizes the shape gives: h-wide activations, qkv, MLP, scores, masks, logits, weight
# gradients) the bytes allocated, the blocks alive at the step's end, and the offload peak must agree within
# 10%.  Skips without a python3 that has torch or without the preload.  Runs in the build directory.
set -u

srcdir=${srcdir:-.}
case $srcdir in /*) ;; *) srcdir=$(pwd)/$srcdir ;; esac
cd "${builddir:-.}" || exit 99
[ -f .libs/libhoff-record.so ] || { echo "SKIP: .libs/libhoff-record.so was not built"; exit 77; }
if command -v readelf >/dev/null 2>&1 && readelf -d .libs/libhoff-record.so | grep -q 'lib[a-z]*san'; then
    echo "SKIP: the preload is linked against a sanitizer runtime"
    exit 77
fi
PYTHON=${PYTHON:-/usr/bin/python3}
. "$srcdir/tests/torch_python.sh"

tmp=${TMPDIR:-/tmp}/hoff-synth-gpt.$$
trap 'rm -f "$tmp".*' EXIT INT TERM
fail=0
# The shape: d_model 256, 2 layers, 4 heads, sequence 512, batch 1, vocab 1024; every tensor of 256 KiB or more
# (the mask, s*s bytes, is the smallest kind) is recorded and is an offload candidate in the synthetic step.
shape="--layers 2 --heads 4 --seq 512 --batch 1"
# One BLAS thread: a threaded OpenBLAS (Debian's libblas.so.3 alternative once python3-scipy is installed, as on a
# fresh machine) mallocs a scratch buffer per thread in every GEMM, which hoff-record sees as 75 more 512 KiB blocks
# of the step; the synthetic step models PyTorch's tensors, not a BLAS library's scratch.
OPENBLAS_NUM_THREADS=1 PYTHONPATH=$srcdir/python${PYTHONPATH:+:$PYTHONPATH} ./hoff-record -q -t 256K -o "$tmp.real" -- \
    "$py" "$srcdir/bench/models/gpt.py" --d-model 256 --vocab 1024 $shape >"$tmp.out" 2>&1 ||
    { echo "FAIL: hoff-record of bench/models/gpt.py failed:"; cat "$tmp.out"; exit 1; }
./hoff-plan synth --model gpt --hidden 256 --vocab 1024 $shape --dtype fp32 --attention math --managed-min 256K \
    -o "$tmp.synth" >"$tmp.out" 2>&1 ||
    { echo "FAIL: hoff-plan synth --model gpt failed:"; cat "$tmp.out"; exit 1; }
./hoff-plan info --json "$tmp.real" >"$tmp.real.json" && ./hoff-plan info --json "$tmp.synth" >"$tmp.synth.json" ||
    { echo "FAIL: hoff-plan info"; exit 1; }
python3 - "$tmp.real" "$tmp.synth" "$tmp.real.json" "$tmp.synth.json" <<'PY' || fail=1
import json, sys

T, h, e, heads, s, vocab, L = 512, 256, 4, 4, 512, 1024, 2
kinds = {  # size in bytes -> the tensors of that size at this shape
    T * h * e: "h-wide activations and their gradients, dW_pos",
    T * 3 * h * e: "qkv and its gradient",
    T * 4 * h * e: "MLP fc/GELU and gradients; logits and log-softmax (T*vocab)",
    heads * s * s * e: "attention scores, softmax and their gradients",
    s * s: "causal masks (bool); dW_proj",
    3 * h * h * e: "dW_qkv",
    4 * h * h * e: "dW_fc, dW_out, dW_head, dW_tok",
}

def managed(path):
    """Per size: bytes allocated in the managed pool; and the bytes of blocks never freed."""
    alloc, live = {}, {}
    for line in open(path):
        f = line.split()
        if f and f[0] == "a" and f[3] == "1":
            alloc[int(f[2])] = alloc.get(int(f[2]), 0) + int(f[2])
            live[f[1]] = int(f[2])
        elif f and f[0] == "f":
            live.pop(f[1], None)
    return alloc, sum(live.values())

ra, rlive = managed(sys.argv[1])
sa, slive = managed(sys.argv[2])
rj, sj = json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
bad = 0

def cmp(what, r, v):
    global bad
    ok = abs(v - r) <= 0.10 * max(r, 1)
    print("%-72s real %10d  synth %10d  %s" % (what, r, v, "ok" if ok else "DIFFERS by more than 10%"))
    bad += not ok

for size in sorted(set(ra) | set(sa)):
    cmp("%d B: %s" % (size, kinds.get(size, "(no kind at this shape)")), ra.get(size, 0), sa.get(size, 0))
cmp("all managed bytes allocated", sum(ra.values()), sum(sa.values()))
cmp("bytes alive at the step's end (weight gradients, the logits)", rlive, slive)
cmp("offload peak (block bytes)", rj["offload_peak_bytes"], sj["offload_peak_bytes"])
sys.exit(1 if bad else 0)
PY
[ "$fail" -eq 0 ] || echo "FAIL: the synthetic GPT step differs from the recorded one (above)"
exit $fail
