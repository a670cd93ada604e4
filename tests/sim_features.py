# sim_features.py — a training script that knows nothing of hoff, for tests/sim_train.sh: 4 steps of a 4-block
# MLP under a PyTorch feature next to hoff (activation checkpointing, reentrant or not; save_on_cpu), writing
# digests of every step's loss and gradients and of the final parameters.  Threading: single-threaded.
"""usage: sim_features.py none|ckpt-reentrant|ckpt|save_on_cpu DIGEST_FILE"""

import hashlib
import json
import sys

import torch
from torch.utils.checkpoint import checkpoint


def sha(ts):
    h = hashlib.sha256()
    for t in ts:
        h.update(b"none" if t is None else t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    feature, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(),
                                                     torch.nn.Linear(1024, 512)) for _ in range(4))
    opt = torch.optim.Adam(blocks.parameters(), lr=1e-3)
    digest = {"loss": [], "grads": []}
    for _ in range(4):
        x = torch.randn(512, 512)  # 1 MiB; each block's hidden activations are 2 MiB
        opt.zero_grad(set_to_none=True)
        ctx = torch.autograd.graph.save_on_cpu() if feature == "save_on_cpu" else None
        if ctx is not None:
            ctx.__enter__()
        for b in blocks:
            if feature == "ckpt-reentrant":
                x = checkpoint(b, x, use_reentrant=True) if x.requires_grad else checkpoint(b, x.requires_grad_())
            elif feature == "ckpt":
                x = checkpoint(b, x, use_reentrant=False)
            else:
                x = b(x)
        loss = x.square().mean()
        if ctx is not None:
            ctx.__exit__(None, None, None)
        loss.backward()
        digest["loss"].append(sha([loss]))
        digest["grads"].append(sha([p.grad for p in blocks.parameters()]))
        opt.step()
    digest["params"] = sha(list(blocks.parameters()))
    with open(out, "w") as f:
        json.dump(digest, f)


if __name__ == "__main__":
    main()
