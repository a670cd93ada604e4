#!/bin/sh
# sim_recompute.sh — hoff-plan advise's recompute advice applied to a model nobody on the project wrote (issue 29):
# tests/sim_zoo.py's transformers GPT-2 (SIM_RECOMPUTE_MODEL=llama: the Llama) on PyTorch 2.x.  (a) records a step
# under `python -m hoff --sim --budget 40%` (HOFF_TRACE; HOFF_SHIM=0: the Python marks, whose aten ops a dispatch
# mode sees too); (b) asks `hoff-plan advise` at that budget, on a link (1 GB/s) and a step (20 ms of compute) where
# offloading alone stalls, and requires recompute chosen; (c) trains 3 steps with the advice applied (sim_zoo.py
# --recompute: hoff.recompute.apply_recompute, scope "savers") under --sim at the advice's budget in bytes, and
# without hoff with and without the advice: every loss, gradient and final parameter bitwise equal, bytes evicted
# and prefetched (tests/sim_check.py and the final statistics), the advised ops mapped at one interval offset;
# (d) re-records that step with the advice applied and requires `hoff-plan advise` to predict, for offloading alone
# at the same budget, link and step, a lower stall or a lower working-set floor than on the first trace, and a
# lower activation peak.  At 40% GPT-2's advised step still needs offloading (its peak falls from 64 to 30 MiB, the
# budget is 25.6 MiB); at 50% it fits, and hoff would move nothing.  SIM_RECOMPUTE_BUDGET and SIM_RECOMPUTE_LINK
# (hoff-plan advise options) change the budget and the link.  The python is $TORCH2_PYTHON, else
# venv-torch2/bin/python in the build directory; skips (77) without it (or without transformers), without the sim
# preload, or with a sanitized one.  Runs in the build directory.
set -u

cd "${builddir:-.}" || exit 99
top=$(cd "${srcdir:-..}" && pwd)
t2=${TORCH2_PYTHON:-$(pwd)/venv-torch2/bin/python}
if [ ! -x "$t2" ] || ! "$t2" -c 'import torch, transformers
assert int(torch.__version__.split(".")[0]) >= 2' >/dev/null 2>&1; then
    echo "SKIP: no PyTorch 2.x with transformers at $t2 (./quickstart test makes build/venv-torch2; or set" \
        "TORCH2_PYTHON)"
    exit 77
fi
export PYTHON="$t2"
. "$top/tests/sim_setup.sh"
py=$t2
plan=./hoff-plan
if ! "$plan" advise --help >/dev/null 2>&1; then
    echo "FAIL: $plan has no 'advise' command"
    exit 1
fi

model=${SIM_RECOMPUTE_MODEL:-gpt2}
link=${SIM_RECOMPUTE_LINK:---bandwidth 1 --gpu-step 20} # offloading alone stalls there
pct=${SIM_RECOMPUTE_BUDGET:-40%}
zoo="$top/tests/sim_zoo.py"
tmp=${TMPDIR:-/tmp}/hoff-sim-recompute.$$
mkdir -p "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
fail=0
run() { # run LABEL CMD...: CMD's output in $tmp/LABEL.out; says so and returns 1 when it fails
    label=$1
    shift
    "$@" >"$tmp/$label.out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: $label: exit $rc from $*:"
        tail -20 "$tmp/$label.out"
        return 1
    fi
}
field() { # field FILE EXPR: the value of a Python expression over the JSON object d in FILE
    "$py" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# (a) the step, recorded (HOFF_TRACE holds the last step recorded: with 3 steps a whole one, whichever).
run record env HOFF_SHIM=0 HOFF_TRACE="$tmp/first.trace" "$py" -m hoff --sim --budget "$pct" "$zoo" "$model" none \
    --steps 3 || exit 1
[ -s "$tmp/first.trace" ] || { echo "FAIL: HOFF_TRACE wrote no trace at $tmp/first.trace"; exit 1; }
# (b) the advice.
# shellcheck disable=SC2086
run advise "$plan" advise "$tmp/first.trace" --budget "$pct" $link --json || exit 1
cp "$tmp/advise.out" "$tmp/advice.json"
chosen=$(field "$tmp/advice.json" 'd["chosen"], len(d["recompute"]), d["offload_only"]["stall_ns"] > 0')
echo "$model: advice at $pct ($link): (chosen, ops to recompute, offloading alone stalls) = $chosen"
case $chosen in
"('combined', 0, "* | "('offload_only'"* | "('full_checkpoint'"* | *False\))
    echo "FAIL: $model: expected offloading alone to stall and the combined advice to recompute ops: $chosen"
    exit 1
    ;;
esac
budget=$(field "$tmp/advice.json" 'd["budget_bytes"]')

# (c) training with the advice, under --sim at its budget and without hoff; and the plain run.
run plain "$py" "$zoo" "$model" "$tmp/plain.dg" --steps 3 || exit 1
run advised-plain "$py" "$zoo" "$model" "$tmp/advised-plain.dg" --steps 3 --recompute "$tmp/advice.json" || fail=1
run advised-sim env HOFF_SHIM=0 HOFF_TRACE="$tmp/advised.trace" "$py" -m hoff --sim --budget "$budget" \
    --stats-json "$tmp/stats.json" "$zoo" "$model" "$tmp/advised-sim.dg" --steps 3 --recompute "$tmp/advice.json" ||
    exit 1
grep '^hoff recompute:\|^  checkpointed\|^  not applied' "$tmp/advised-sim.out"
summary=$(sed -n 's/^recompute: //p' "$tmp/advised-sim.out")
[ -n "$summary" ] || { echo "FAIL: sim_zoo.py --recompute printed no summary"; exit 1; }
echo "$summary" >"$tmp/summary.json"
got=$(field "$tmp/summary.json" 'len(d["wrapped"]) > 0 and len(d["offsets"]) == 1')
[ "$got" = True ] || {
    echo "FAIL: $model: the advice mapped to no leaf module, or at several interval offsets: $summary"
    fail=1
}
if [ -f "$tmp/advised-plain.dg" ] && ! cmp -s "$tmp/plain.dg" "$tmp/advised-plain.dg"; then
    echo "FAIL: $model: training with the advice applied (no hoff) is not bitwise the plain training"
    fail=1
fi
"$py" "$top/tests/sim_check.py" "$model-recompute" "$tmp/plain.dg" "$tmp/advised-sim.dg" "$tmp/stats.json" "$budget" ||
    fail=1
moved=$(field "$tmp/stats.json" 'd["final"]["evictions"] > 0 and d["final"]["prefetches"] > 0')
[ "$moved" = True ] || {
    echo "FAIL: $model: hoff moved no bytes with the advice applied (evictions, prefetches)"
    fail=1
}

# (d) the advised step's trace against the first, offloading alone at the same budget, link and step.
[ -s "$tmp/advised.trace" ] || { echo "FAIL: no trace of the advised step"; exit 1; }
# shellcheck disable=SC2086
run before "$plan" advise "$tmp/first.trace" --budget "$budget" $link --json || exit 1
# shellcheck disable=SC2086
run after "$plan" advise "$tmp/advised.trace" --budget "$budget" $link --json || exit 1
"$py" - "$tmp/before.out" "$tmp/after.out" "$model" <<'EOF' || fail=1
import json
import sys
a, b = (json.load(open(f))["offload_only"] for f in sys.argv[1:3])
print("%s: offloading alone at %s, before -> after the advice: stall %.2f -> %.2f ms, floor %.1f -> %.1f MiB, "
      "activation peak %.1f -> %.1f MiB, %.1f -> %.1f MiB out"
      % (sys.argv[3], json.load(open(sys.argv[1]))["budget_bytes"], a["stall_ns"] / 1e6, b["stall_ns"] / 1e6,
         a["floor_bytes"] / 2**20, b["floor_bytes"] / 2**20, a["peak_bytes"] / 2**20, b["peak_bytes"] / 2**20,
         a["bytes_d2h"] / 2**20, b["bytes_d2h"] / 2**20))
fails = []
if not (b["stall_ns"] < a["stall_ns"] or b["floor_bytes"] < a["floor_bytes"]):
    fails.append("neither the stall nor the floor is lower")
if not b["peak_bytes"] < a["peak_bytes"]:
    fails.append("the activation peak is not lower")
if fails:
    print("FAIL: the advised step: " + "; ".join(fails))
    sys.exit(1)
EOF
exit $fail
