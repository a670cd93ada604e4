# sim_ddp.py — a DDP training script that knows nothing of hoff, for tests/sim_train.sh: run by torchrun with 2 CPU
# ranks (gloo); 4 steps of an MLP, each rank writing digests of every step's loss and gradients and of the final
# parameters to DIGEST.RANK.  With SIM_DDP_HOFF_STAT=PROGRAM and SIM_DDP_HOFF_STAT_OUT=FILE (set by the test for the
# run under --sim), rank 0 runs `PROGRAM --json` (hoff-stat) while every rank is still alive and writes its output
# and the job's id to FILE: the job as hoff-stat sees it from outside.
# Threading: gloo's own threads reduce the gradient buckets (hoff blocks under --sim).
"""usage: torchrun --standalone --nproc_per_node 2 [-m hoff --sim ...] sim_ddp.py DIGEST"""

import hashlib
import json
import os
import subprocess
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def sha(ts):
    h = hashlib.sha256()
    for t in ts:
        h.update(b"none" if t is None else t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(),
                                                    torch.nn.Linear(1024, 512)) for _ in range(3)])
    model = DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1 + rank)
    digest = {"loss": [], "grads": []}
    for _ in range(4):
        x = torch.randn(512, 512, generator=gen)
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        digest["loss"].append(sha([loss]))
        digest["grads"].append(sha([p.grad for p in model.parameters()]))
        opt.step()
    digest["params"] = sha(list(model.parameters()))
    with open("%s.%d" % (sys.argv[1], rank), "w") as f:
        json.dump(digest, f)
    stat = os.environ.get("SIM_DDP_HOFF_STAT")
    if stat:
        dist.barrier()  # every rank has run its steps and is still alive
        if rank == 0:
            out = subprocess.run([stat, "--json"], check=True, stdout=subprocess.PIPE, universal_newlines=True).stdout
            job = os.environ.get("TORCHELASTIC_RUN_ID", "none")
            if job == "none":  # hoff's rule (lib/core/rank.c): torchrun's default id names no job
                job = "%s:%s" % (os.environ.get("MASTER_ADDR", ""), os.environ.get("MASTER_PORT", ""))
            with open(os.environ["SIM_DDP_HOFF_STAT_OUT"], "w") as f:
                json.dump({"job": job, "hoff_stat": json.loads(out)}, f)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
