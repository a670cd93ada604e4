# sim_ddp.py — a DDP training script that knows nothing of hoff, for tests/sim_train.sh: run by torchrun with 2 CPU
# ranks (gloo); 4 steps of an MLP, each rank writing digests of every step's loss and gradients and of the final
# parameters to DIGEST.RANK.  Threading: gloo's own threads reduce the gradient buckets (hoff blocks under --sim).
"""usage: torchrun --standalone --nproc_per_node 2 [-m hoff --sim ...] sim_ddp.py DIGEST"""

import hashlib
import json
import os
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
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
