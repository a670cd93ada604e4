#!/bin/sh
# sim_torch2.sh — tests/sim_train.sh on PyTorch 2.x, with packages from PyPI (python/requirements-torch2.txt, which
# ./quickstart test installs into build/venv-torch2): models nobody on the project wrote (a transformers GPT-2 from a
# small config, a torchvision ResNet-18; random init, no download; SIM_MODELS can name llama too, a transformers Llama) and
# the three bench/models at budgets none, 50% and 25%; checkpointing and save_on_cpu; DDP under torchrun with 2 and 4 ranks; torch.compile;
# FSDP2 under torchrun with 2 ranks at budgets none, 50% and 25% (SIM_TORCH2_FULL only).  The python
# is $TORCH2_PYTHON, else venv-torch2/bin/python in the build directory; skips (77) with the reason when it is not
# there or lacks torch >= 2, torchvision or transformers.  SIM_MODELS, SIM_FEATURES, SIM_DDP_RANKS, SIM_COMPILE and SIM_FSDP
# pick as in sim_train.sh; SIM_TORCH2_FULL=1 runs the whole set (below).  Runs in the build directory.
set -u

cd "${builddir:-.}" || exit 99
top=$(cd "${srcdir:-..}" && pwd)
t2=${TORCH2_PYTHON:-$(pwd)/venv-torch2/bin/python}
if [ ! -x "$t2" ]; then
    echo "SKIP: no PyTorch 2.x test environment at $t2: ./quickstart test makes it (pip install -r" \
        "python/requirements-torch2.txt into build/venv-torch2), or set TORCH2_PYTHON to a python with torch >= 2," \
        "torchvision and transformers"
    exit 77
fi
why=$("$t2" -c '
import importlib
miss = []
for m in ("torch", "torchvision", "transformers"):
    try:
        importlib.import_module(m)
    except Exception as e:
        miss.append("%s (%s)" % (m, e.__class__.__name__))
if miss:
    print("lacks " + ", ".join(miss))
else:
    import torch
    if int(torch.__version__.split(".")[0]) < 2:
        print("has torch " + torch.__version__ + ", not 2.x")
' 2>&1)
if [ -n "$why" ]; then
    echo "SKIP: $t2 $why (pip install -r $top/python/requirements-torch2.txt)"
    exit 77
fi
echo "PyTorch 2.x environment: $t2 ($("$t2" -c 'import torch, torchvision, transformers
print("torch", torch.__version__, "torchvision", torchvision.__version__, "transformers", transformers.__version__)'))"
# make check runs what issue 16 asks of PyTorch 2.x (the two outside models, torchrun, compile) in about three
# minutes; SIM_TORCH2_FULL=1 (./quickstart test sets it) adds the bench models, the checkpointing features and FSDP
# (about a minute more for FSDP on a quiet 2-core machine).
if [ "${SIM_TORCH2_FULL:-0}" = 1 ]; then
    models="gpt2 resnet gpt wide cnn" features="ckpt save_on_cpu" fsdp=1
else
    models="gpt2 resnet" features=skip fsdp=0
fi
PYTHON=$t2 SIM_MODELS=${SIM_MODELS:-$models} SIM_FEATURES=${SIM_FEATURES:-$features} SIM_FSDP=${SIM_FSDP:-$fsdp} \
    SIM_EXTRA=0 SIM_DDP=torchrun SIM_DDP_RANKS=${SIM_DDP_RANKS:-2 4} SIM_COMPILE=${SIM_COMPILE:-1} \
    exec sh "$top/tests/sim_train.sh"
