#!/bin/sh
# sim_train.sh — real CPU training on hoff's whole pipeline: models for 4 steps, plain and under `python -m hoff --sim`
# at budgets none, 50% and 25% of the first step's peak; tests/sim_check.py holds each run to bitwise equality with
# the plain run, the budget in feasible replay steps, bytes moved, no window violation and no touch of a released
# block.  The models: the three bench/models/ (small shapes), and with a PyTorch that has them, tests/sim_zoo.py's
# models nobody on the project wrote (a transformers GPT-2 and Llama, a torchvision ResNet-18).  Then
# tests/sim_features.py (checkpointing, reentrant and not, and save_on_cpu) at 50%, the cnn with 2 intra-op threads
# and with spills to the NVMe tier, DDP on CPU ranks at 50%, FSDP2 on 2 CPU ranks at none, 50% and 25%, and
# torch.compile (per block and whole) under --sim.
# Picks, by variable:
#   SIM_MODELS   (gpt wide cnn; also gpt2 llama resnet, or none)
#   SIM_FEATURES (ckpt-reentrant ckpt save_on_cpu, or skip)
#   SIM_EXTRA    (1: the cnn with 2 threads and with NVMe spills; 0: not)
#   SIM_DDP      (1: 2 ranks started here with torchrun's environment; torchrun: by torchrun --standalone, with
#                 SIM_DDP_RANKS ranks, default "2 4"; 0: no DDP)
#   SIM_FSDP     (0; 1: FSDP2, fully_shard, under torchrun --standalone with 2 ranks, PyTorch 2.x)
#   SIM_COMPILE  (0; 1: bench's gpt compiled per block and the ResNet compiled whole, PyTorch 2.x)
#   SIM_GRADS    (1: the cnn with HOFF_OFFLOAD_GRADIENTS=1, whose floor sim_check.py must refuse; 0: not)
#   SIM_FLOORS   (a file: sim_check.py appends a JSON row per checked run with its floor, for bench/floors.py)
# Skips (77) without a python3 that has torch ($PYTHON first), or with a sanitized preload.  Runs in the build
# directory.
set -u

cd "${builddir:-.}" || exit 99
top=$(cd "${srcdir:-..}" && pwd)
. "$top/tests/sim_setup.sh"

fail=0
tmp=${TMPDIR:-/tmp}/hoff-sim-train.$$
trap 'rm -rf "$tmp".*' EXIT
trap 'exit 1' INT TERM

m="$top/bench/models"
for model in ${SIM_MODELS:-gpt wide cnn}; do
    case $model in
    gpt) cmd="$m/gpt.py --seq 256 --d-model 128 --layers 6 --heads 4 --vocab 1024" ;;
    wide) cmd="$m/wide.py --seq 384 --d-model 128 --heads 8 --vocab 512" ;;
    cnn) cmd="$m/cnn.py --batch 4 --size 128 --width 32 --classes 100" ;;
    gpt2 | llama | resnet) cmd="$top/tests/sim_zoo.py $model" ;;
    none) continue ;;
    *) echo "FAIL: unknown model $model (gpt, wide, cnn, gpt2, llama, resnet, none)"; fail=1; continue ;;
    esac
    case $model in gpt2 | llama | resnet) dg= ;; *) dg=--digest ;; esac # sim_zoo.py takes DIGEST as an argument
    # shellcheck disable=SC2086
    if ! "$py" $cmd --steps 4 $dg "$tmp.$model.plain" >"$tmp.out" 2>&1; then
        echo "FAIL: $model: the plain run failed:"; cat "$tmp.out"; fail=1; continue
    fi
    for b in none 50% 25%; do
        rm -f "$tmp.sim" "$tmp.json"
        # shellcheck disable=SC2086
        "$py" -m hoff --sim --budget "$b" --stats-json "$tmp.json" $cmd --steps 4 $dg "$tmp.sim" \
            >"$tmp.out" 2>&1
        rc=$?
        if { [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; } || [ ! -f "$tmp.json" ] || [ ! -f "$tmp.sim" ]; then
            echo "FAIL: $model at budget $b: exit $rc:"; cat "$tmp.out"; fail=1; continue
        fi
        if [ "$rc" -eq 3 ]; then # the launcher's integrity verdict; the check below says what went wrong
            echo "FAIL: $model at budget $b: exit 3: $(grep 'integrity failure' "$tmp.out")"
            fail=1
        fi
        "$py" "$top/tests/sim_check.py" "$model" "$tmp.$model.plain" "$tmp.sim" "$tmp.json" "$b" || fail=1
    done
done
# PyTorch features next to hoff, in a script that knows nothing of hoff (the launcher's optimizer steps mark
# steps): activation checkpointing, reentrant and not, and save_on_cpu, at 50%.
for f in ${SIM_FEATURES:-ckpt-reentrant ckpt save_on_cpu}; do
    [ "$f" = skip ] && continue
    if ! "$py" "$top/tests/sim_features.py" "$f" "$tmp.$f.plain" >"$tmp.out" 2>&1; then
        echo "FAIL: $f: the plain run failed:"; cat "$tmp.out"; fail=1; continue
    fi
    rm -f "$tmp.sim" "$tmp.json"
    "$py" -m hoff --sim --budget 50% --stats-json "$tmp.json" "$top/tests/sim_features.py" "$f" "$tmp.sim" \
        >"$tmp.out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] || [ ! -f "$tmp.json" ] || [ ! -f "$tmp.sim" ]; then
        echo "FAIL: $f under --sim: exit $rc:"; cat "$tmp.out"; fail=1; continue
    fi
    "$py" "$top/tests/sim_check.py" "$f" "$tmp.$f.plain" "$tmp.sim" "$tmp.json" 50% || fail=1
done
# The cnn again: with 2 intra-op threads (OpenMP; its own plain run, since the thread count changes the sums), and
# at 25% with a 2 MiB host cap, so that evicted blocks spill to the NVMe tier's file and are restored (its gradients
# are kept on the device, so only its activations, at most 8 MiB at once, are ever on the host).
if [ "${SIM_EXTRA:-1}" = 1 ]; then
    cmd="$m/cnn.py --batch 4 --size 128 --width 32 --classes 100 --steps 4"
    # shellcheck disable=SC2086
    if OMP_NUM_THREADS=2 "$py" $cmd --digest "$tmp.omp.plain" >"$tmp.out" 2>&1 &&
        OMP_NUM_THREADS=2 "$py" -m hoff --sim --budget 50% --stats-json "$tmp.json" $cmd --digest "$tmp.sim" \
            >"$tmp.out" 2>&1; then
        "$py" "$top/tests/sim_check.py" cnn-2-threads "$tmp.omp.plain" "$tmp.sim" "$tmp.json" 50% || fail=1
    else
        echo "FAIL: cnn with 2 threads:"; cat "$tmp.out"; fail=1
    fi
    mkdir -p "$tmp.spill"
    # shellcheck disable=SC2086
    if [ -f "$tmp.cnn.plain" ] && HOFF_HOST_CAP=2M HOFF_SPILL_DIR="$tmp.spill" "$py" -m hoff --sim --budget 25% \
            --stats-json "$tmp.json" $cmd --digest "$tmp.sim" >"$tmp.out" 2>&1; then
        "$py" "$top/tests/sim_check.py" cnn-nvme "$tmp.cnn.plain" "$tmp.sim" "$tmp.json" 25% || fail=1
        got=$("$py" -c 'import json, sys; f = json.load(open(sys.argv[1]))["final"]
print(f["spills"] > 0 and f["restores"] > 0 and f["peak_host_bytes"] <= f["host_cap_bytes"], f["spills"], f["restores"])' \
            "$tmp.json")
        case $got in
        True*) echo "cnn-nvme: spills, restores: ${got#True }" ;;
        *) echo "FAIL: cnn at a 2 MiB host cap: spilled/restored/under the cap = $got"; fail=1 ;;
        esac
    elif [ -f "$tmp.cnn.plain" ]; then
        echo "FAIL: cnn with a host cap:"; cat "$tmp.out"; fail=1
    fi
fi

# The check of gradients can fail: with HOFF_OFFLOAD_GRADIENTS=1 the cnn's gradients and the optimizer's temporaries
# are offload candidates again, and its working-set floor is set in the optimizer's step, which sim_check.py refuses
# (every run above passed that check, and none moved a gradient: kept_evicted 0).
if [ "${SIM_GRADS:-1}" = 1 ] && [ -f "$tmp.cnn.plain" ]; then
    # shellcheck disable=SC2086
    HOFF_OFFLOAD_GRADIENTS=1 "$py" -m hoff --sim --budget 50% --stats-json "$tmp.json" \
        $m/cnn.py --batch 4 --size 128 --width 32 --classes 100 --steps 4 --digest "$tmp.sim" >"$tmp.out" 2>&1
    if "$py" "$top/tests/sim_check.py" cnn-offload-gradients "$tmp.cnn.plain" "$tmp.sim" "$tmp.json" 50% \
            >"$tmp.chk" 2>&1 || ! grep -q "set in the optimizer's step" "$tmp.chk"; then
        echo "FAIL: with HOFF_OFFLOAD_GRADIENTS=1 the cnn's floor should be the optimizer's step:"; cat "$tmp.chk"
        fail=1
    else
        echo "cnn-offload-gradients: the check fails as it should: $(grep -o "the working-set floor.*" "$tmp.chk")"
    fi
fi

# DDP on CPU ranks (gloo) at 50%: each rank its own context and its own statistics file (%r), bitwise equal to the
# plain DDP run rank by rank.  SIM_DDP=1: 2 ranks get torchrun's environment from here (Debian's torchrun, torch 1.13
# under Python 3.11, fails before it starts a worker: 'NoneType' object has no attribute 'get' in its redirects
# map).  SIM_DDP=torchrun: torchrun --standalone --nproc-per-node N (PyTorch 2.x) for each N in SIM_DDP_RANKS.
ddp_check() { # ddp_check LABEL N PLAIN-PREFIX SIM-PREFIX STATS-PREFIX [BUDGET]: every rank (run at BUDGET, 50% by
    # default), and N distinct statistics files
    r=0
    files=
    while [ "$r" -lt "$2" ]; do
        "$py" "$top/tests/sim_check.py" "$1-rank$r" "$3.$r" "$4.$r" "$5.$r.json" "${6:-50%}" || fail=1
        files="$files $5.$r.json"
        r=$((r + 1))
    done
    # shellcheck disable=SC2086
    got=$("$py" -c 'import json, sys; print(sorted(json.load(open(f))["rank"] for f in sys.argv[1:]))' $files)
    want=$("$py" -c 'import sys; print(list(range(int(sys.argv[1]))))' "$2")
    [ "$got" = "$want" ] || { echo "FAIL: $1: statistics files are of ranks $got, want $want"; fail=1; }
    # hoff-stat, from outside, saw the ranks as one job (sim_ddp.py ran it from rank 0 with every rank alive).
    "$py" -c '
import json, sys
d = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
jobs = [j for j in d["hoff_stat"].get("jobs", []) if j["job"] == d["job"]]
assert len(jobs) == 1, "hoff-stat lists no job %r (jobs: %r)" % (d["job"], d["hoff_stat"].get("jobs"))
j = jobs[0]
assert j["world_size"] == n and sorted(j["ranks"]) == list(range(n)) and len(set(j["pids"])) == n, j
print("%s: hoff-stat lists job %s with ranks %s" % (sys.argv[3], j["job"], sorted(j["ranks"])))
' "$5.hoffstat.json" "$2" "$1" || { echo "FAIL: $1: hoff-stat does not show the $2 ranks as one job"; fail=1; }
}
# torchrun N ARGS...: torchrun --standalone with N CPU ranks (PyTorch 2.x).  It sets OMP_NUM_THREADS=1 for its
# workers (and says so); the ranks and the rendezvous each get a port of their own.
torchrun() { n_=$1; shift; timeout 300 "$py" -m torch.distributed.run --standalone --nproc-per-node "$n_" "$@"; }
gloo=1
"$py" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null || gloo=0
ddp=${SIM_DDP:-1}
if [ "$ddp" != 0 ] && [ "$gloo" = 0 ]; then
    echo "(DDP skipped: this torch has no gloo)"
    ddp=0
fi
case $ddp in
0) [ "${SIM_DDP:-1}" = 0 ] && echo "(DDP skipped: SIM_DDP=0)" ;;
1)
    ranks() { # ranks OUT-PREFIX COMMAND...: run COMMAND as ranks 0 and 1; 0 if both exit 0
        out=$1
        shift
        port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        pids=
        for r in 0 1; do
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=$r LOCAL_RANK=$r "$@" >"$out.$r.out" 2>&1 &
            pids="$pids $!"
        done
        ok=0
        for p in $pids; do wait "$p" || ok=1; done
        return $ok
    }
    if ! ranks "$tmp.ddpp" timeout 300 "$py" "$top/tests/sim_ddp.py" "$tmp.ddp.plain"; then
        echo "FAIL: plain DDP run:"; cat "$tmp.ddpp".*.out; fail=1
    elif ! ranks "$tmp.ddps" env SIM_DDP_HOFF_STAT="$(pwd)/hoff-stat" SIM_DDP_HOFF_STAT_OUT="$tmp.ddp.hoffstat.json" \
            timeout 300 "$py" -m hoff --sim --budget 50% --stats-json "$tmp.ddp.%r.json" \
            "$top/tests/sim_ddp.py" "$tmp.ddp.sim"; then
        echo "FAIL: DDP under --sim:"; cat "$tmp.ddps".*.out; fail=1
    else
        ddp_check ddp 2 "$tmp.ddp.plain" "$tmp.ddp.sim" "$tmp.ddp"
    fi
    ;;
torchrun)
    for n in ${SIM_DDP_RANKS:-2 4}; do
        if ! torchrun "$n" "$top/tests/sim_ddp.py" "$tmp.tr$n.plain" >"$tmp.out" 2>&1; then
            echo "FAIL: plain DDP under torchrun, $n ranks:"; cat "$tmp.out"; fail=1
        elif ! SIM_DDP_HOFF_STAT="$(pwd)/hoff-stat" SIM_DDP_HOFF_STAT_OUT="$tmp.tr$n.hoffstat.json" \
                torchrun "$n" -m hoff --sim --budget 50% --stats-json "$tmp.tr$n.%r.json" "$top/tests/sim_ddp.py" \
                "$tmp.tr$n.sim" >"$tmp.out" 2>&1; then
            echo "FAIL: DDP under torchrun and --sim, $n ranks:"; cat "$tmp.out"; fail=1
        else
            ddp_check "torchrun-$n" "$n" "$tmp.tr$n.plain" "$tmp.tr$n.sim" "$tmp.tr$n"
        fi
    done
    ;;
*) echo "FAIL: SIM_DDP=$ddp: expected 0, 1 or torchrun"; fail=1 ;;
esac

# FSDP2 (fully_shard on each block and the root) on 2 CPU ranks under torchrun, at budgets none, 50% and 25%: every
# rank's losses, gradient shards and final parameter shards bitwise equal to the same rank without hoff, bytes
# moved at 50% and 25%, per-rank statistics files, the job in hoff-stat.  Then what --sim made of FSDP's collective
# buffers (tests/sim_ddp.py's "collectives": offload candidates / buffers of at least 1 MiB / all, over the 4
# iterations, the first of which runs before the first step): on CPU there are no streams, so every one of them made
# inside a step is an offload candidate under --sim, where on CUDA the flat all-gather output and the
# reduce-scatter output are made on FSDP's own streams and stay device memory (hoff(7), MULTI-GPU).
if [ "${SIM_FSDP:-0}" = 1 ]; then
    if [ "$gloo" = 0 ]; then
        echo "(FSDP skipped: this torch has no gloo)"
    elif ! "$py" -c 'from torch.distributed.fsdp import fully_shard' 2>/dev/null; then
        echo "(FSDP skipped: this torch has no torch.distributed.fsdp.fully_shard, FSDP2)"
    elif ! torchrun 2 "$top/tests/sim_ddp.py" --fsdp "$tmp.fsdp.plain" >"$tmp.out" 2>&1; then
        echo "FAIL: plain FSDP under torchrun, 2 ranks:"; cat "$tmp.out"; fail=1
    else
        for b in none 50% 25%; do
            rm -f "$tmp.fsdp.sim".* "$tmp.fsdp".*.json
            if ! SIM_DDP_HOFF_STAT="$(pwd)/hoff-stat" SIM_DDP_HOFF_STAT_OUT="$tmp.fsdp.hoffstat.json" \
                    torchrun 2 -m hoff --sim --budget "$b" --stats-json "$tmp.fsdp.%r.json" \
                    "$top/tests/sim_ddp.py" --fsdp "$tmp.fsdp.sim" >"$tmp.out" 2>&1; then
                echo "FAIL: FSDP under torchrun and --sim at budget $b, 2 ranks:"; cat "$tmp.out"; fail=1
                continue
            fi
            ddp_check "fsdp" 2 "$tmp.fsdp.plain" "$tmp.fsdp.sim" "$tmp.fsdp" "$b"
            "$py" -c '
import json, sys
for r in (0, 1):
    c = json.load(open("%s.%d" % (sys.argv[1], r)))["collectives"]
    print("fsdp-rank%d budget %s: FSDP buffers that were offload candidates (of >= 1 MiB, of all): %s" % (r, sys.argv[2],
          ", ".join("%s %d (%d, %d)" % (k, v[0], v[1], v[2]) for k, v in sorted(c.items()))))
' "$tmp.fsdp.sim" "$b" || fail=1
        done
    fi
fi

# torch.compile (inductor, on CPU) under --sim: with the shim's native op marks, compiled code stays compiled inside
# hoff's steps, and each call of a compiled region is one op to hoff (hoff.compiled).  Two runs, each at 50% against
# the same compiled model run plainly, bitwise (sim_check.py, which also wants bytes moved):
#   - bench's gpt compiled per block (as torchtitan compiles): every block call ran compiled code (autograd says
#     CompiledFunction), had its backward, and the blocks' saved activations move between them;
#   - the ResNet compiled whole: it runs compiled too, and hoff says once that the region is one op to it.
# The inductor's cache is this test's own.
if [ "${SIM_COMPILE:-0}" = 1 ]; then
    mkdir -p "$tmp.inductor"
    export TORCHINDUCTOR_CACHE_DIR="$tmp.inductor"
    gpt="$m/gpt.py --seq 256 --d-model 128 --layers 6 --heads 4 --vocab 1024 --steps 4 --compile blocks"
    # shellcheck disable=SC2086
    if ! "$py" $gpt --digest "$tmp.cb.plain" >"$tmp.out" 2>&1; then
        echo "FAIL: the plain per-block compiled run failed:"; cat "$tmp.out"; fail=1
    elif ! "$py" -m hoff --sim --budget 50% --stats-json "$tmp.cb.json" $gpt --digest "$tmp.cb.sim" >"$tmp.out" 2>&1
    then
        echo "FAIL: the per-block compiled run under --sim failed:"; cat "$tmp.out"; fail=1
    else
        "$py" "$top/tests/sim_check.py" gpt-compiled-blocks "$tmp.cb.plain" "$tmp.cb.sim" "$tmp.cb.json" 50% || fail=1
        "$py" - "$tmp.cb.json" Block 6 <<'EOF_PY' || { cat "$tmp.out"; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
name, per_step = sys.argv[2], int(sys.argv[3])
r = d["compiled_regions"].get(name)
fails = []
if d["marks"]["impl"] != "native":
    fails.append("the op marks ran in Python: %s" % d["marks"].get("python_because"))
if not r:
    fails.append("no compiled region %s in %s" % (name, sorted(d["compiled_regions"])))
else:
    steps = len(d["steps"])
    if r["forward_calls"] < per_step * (steps - 1):
        fails.append("%d forward calls of %s in %d steps, want at least %d" % (r["forward_calls"], name, steps,
                                                                               per_step * (steps - 1)))
    if r["compiled_calls"] != r["forward_calls"]:
        fails.append("%d of %d calls of %s ran compiled code" % (r["compiled_calls"], r["forward_calls"], name))
    if r["backward_calls"] != r["forward_calls"]:
        fails.append("%d backward regions for %d forward calls" % (r["backward_calls"], r["forward_calls"]))
if fails:
    print("FAIL: compiled regions:", "; ".join(fails))
    sys.exit(1)
print("compiled regions: %s" % json.dumps(d["compiled_regions"]))
EOF_PY
    fi
    if ! "$py" "$top/tests/sim_zoo.py" resnet "$tmp.compile.plain" --compile >"$tmp.out" 2>&1; then
        echo "FAIL: the plain compiled run failed:"; cat "$tmp.out"; fail=1
    elif ! "$py" -m hoff --sim --budget 50% --stats-json "$tmp.json" "$top/tests/sim_zoo.py" resnet "$tmp.sim" \
            --compile >"$tmp.out" 2>&1; then
        echo "FAIL: the compiled run under --sim failed:"; cat "$tmp.out"; fail=1
    else
        "$py" "$top/tests/sim_check.py" resnet-compiled "$tmp.compile.plain" "$tmp.sim" "$tmp.json" 50% || fail=1
        n=$(grep -c "is one op to hoff: nothing inside it moves" "$tmp.out")
        eager=$(grep -c 'compiled code runs eagerly' "$tmp.out")
        calls=$("$py" -c 'import json, sys; r = json.load(open(sys.argv[1]))["compiled_regions"]
print(sum(v["compiled_calls"] for v in r.values()))' "$tmp.json")
        if [ "$n" != 1 ] || [ "$eager" != 0 ] || [ "$calls" -lt 3 ]; then
            echo "FAIL: the ResNet compiled whole under --sim: $n explanations (want 1), $eager eager warnings (want 0),"
            echo "  $calls calls that ran compiled code (want at least 3, one per step after the first):"
            cat "$tmp.out"
            fail=1
        fi
    fi
fi
[ "$fail" -eq 0 ] && echo "PASS: sim_train.sh"
exit "$fail"
