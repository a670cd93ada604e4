#!/usr/bin/env python3
# ddp_step.py — the one-shot GPU check's DDP part (issue 20): a 1-GPU DDP job (torch.distributed, nccl, world size 1,
# the environment torchrun would set) on hoff's allocator, a few steps under an OffloadSession with a budget, the
# same steps under PyTorch's default allocator in a second process, and the two compared bit for bit; hoff's
# statistics must carry rank 0 of a world of 1 and the job id.  Exit 0 ok, 1 failed, 77 skipped (no CUDA in this
# torch, no GPU, or no nccl), 2 bad usage.  Writes --out JSON on every exit.
# Threading: one main thread per process (the child runs one configuration).
"""1-GPU DDP step on hoff vs the default allocator.

    ddp_step.py --out ddp.json [--hoff-library PATH] [--steps N]
"""

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.normpath(os.path.join(HERE, "..", "..", "python"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child(alloc, steps, out):
    """Run `steps` DDP steps with `alloc` ("hoff" or "default"); write {"hash", "losses", "hoff"} to out."""
    res = {"alloc": alloc}
    hoff = None
    if alloc == "hoff":
        sys.path.insert(0, PYDIR)
        import hoff  # noqa: F811  (before torch touches CUDA)
        cfg = hoff.OffloadConfig(max_resident_activation_mb=64)
        res["hoff_library"] = hoff.install(cfg)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.cuda.set_device(0)
    torch.manual_seed(7)
    dev = torch.device("cuda", 0)
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                                      torch.nn.Linear(4096, 1024)) for _ in range(4)]).to(dev)
    ddp = DDP(model, device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    g = torch.Generator(device="cpu").manual_seed(11)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    losses = []
    session = hoff.OffloadSession(cfg) if hoff else None
    for _ in range(steps):
        x = torch.randn(64, 512, 1024, generator=g).to(dev)
        if session:
            with session:
                loss = ddp(x).float().pow(2).mean()
                loss.backward()
        else:
            loss = ddp(x).float().pow(2).mean()
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    torch.cuda.synchronize()
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().float().cpu().numpy().tobytes())
    res["hash"] = h.hexdigest()
    res["losses"] = losses
    if hoff:
        st = hoff.memory_stats()
        res["hoff"] = {k: st.get(k) for k in ("rank", "world_size", "local_rank", "device", "steps", "evictions",
                                              "prefetches", "capture_allocs", "alloc_failures")}
    dist.destroy_process_group()
    with open(out, "w") as f:
        json.dump(res, f)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--hoff-library")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--child", choices=("hoff", "default"))
    p.add_argument("--child-out")
    a = p.parse_args()
    if a.steps < 1:
        p.error("--steps: at least 1")
    if a.child:
        child(a.child, a.steps, a.child_out)
        return 0
    report = {"status": "running"}

    def finish(status, reason, rc):
        report.update(status=status, reason=reason)
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
        print("ddp_step: %s%s" % (status, ": " + reason if reason else ""))
        return rc

    try:
        import torch
        import torch.distributed as dist
    except Exception as e:  # noqa: BLE001
        return finish("skipped", "no torch: %s" % e, 77)
    report["torch"] = torch.__version__
    if not torch.cuda.is_available():
        return finish("skipped", "torch %s has no usable CUDA device" % torch.__version__, 77)
    if not dist.is_nccl_available():
        return finish("skipped", "torch %s was built without nccl" % torch.__version__, 77)
    runs = {}
    for alloc in ("default", "hoff"):
        env = dict(os.environ, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), TORCHELASTIC_RUN_ID="hoff-gpu-ddp")
        if a.hoff_library:
            env["HOFF_LIBRARY"] = a.hoff_library
        out = a.out + "." + alloc
        r = subprocess.run([sys.executable, __file__, "--out", a.out, "--steps", str(a.steps), "--child", alloc,
                            "--child-out", out], env=env, capture_output=True, text=True, timeout=300)
        if r.returncode != 0 or not os.path.exists(out):
            report[alloc] = {"exit": r.returncode, "stderr_tail": r.stderr[-3000:]}
            return finish("failed", "the %s run exited %d" % (alloc, r.returncode), 1)
        with open(out) as f:
            runs[alloc] = json.load(f)
        report[alloc] = runs[alloc]
    d, h = runs["default"], runs["hoff"]
    if d["hash"] != h["hash"] or d["losses"] != h["losses"]:
        return finish("failed", "hoff's DDP step differs from the default allocator's (parameters or losses)", 1)
    st = h.get("hoff") or {}
    if st.get("rank") != 0 or st.get("world_size") != 1 or st.get("device") != 0:
        return finish("failed", "hoff's statistics do not say rank 0 of 1 on device 0: %r" % st, 1)
    return finish("ok", "", 0)


if __name__ == "__main__":
    sys.exit(main())
