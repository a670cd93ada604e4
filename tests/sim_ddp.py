# sim_ddp.py — a DDP or FSDP training script that knows nothing of hoff, for tests/sim_train.sh: run by torchrun
# with CPU ranks (gloo); 4 steps of an MLP, each rank writing digests of every step's loss and gradients and of the
# final parameters to DIGEST.RANK.  --fsdp wraps the model in FSDP2 (fully_shard, each block and the root: parameters
# sharded between the ranks, all-gathered before a block's forward and backward, gradients reduce-scattered) instead
# of DDP; the digests are then of each rank's shards, as FSDP holds them.  Under `python -m hoff --sim` the FSDP run
# also records, for each all-gather and reduce-scatter, whether its buffers are offload candidates (blocks of the sim
# context) and writes the counts under "collectives" (the plain run writes zeros).  With SIM_DDP_HOFF_STAT=PROGRAM
# and SIM_DDP_HOFF_STAT_OUT=FILE (set by the test for the run under --sim), rank 0 runs `PROGRAM --json` (hoff-stat)
# while every rank is still alive and writes its output and the job's id to FILE: the job as hoff-stat sees it from
# outside.
# Threading: gloo's own threads reduce the gradient buckets (hoff blocks under --sim).
"""usage: torchrun --standalone --nproc_per_node 2 [-m hoff --sim ...] sim_ddp.py [--fsdp] DIGEST"""

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
        if t is not None and hasattr(t, "to_local"):  # FSDP2's DTensor: this rank's shard
            t = t.to_local()
        h.update(b"none" if t is None else t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


class Collectives:
    """Under --sim, for each kind of FSDP buffer: [offload candidates, buffers of at least managed_min, all]; a
    candidate is a block of the sim context (the preload routes nothing else to hoff).  Kinds: the flat all-gather
    output and input (a view into the output), the unsharded parameters FSDP copies out of it (what a block's
    forward reads), and the reduce-scatter input and output."""

    KINDS = ("all_gather_output", "all_gather_input", "unsharded_params", "reduce_scatter_input",
             "reduce_scatter_output")

    def __init__(self, net):
        self.counts = {k: [0, 0, 0] for k in self.KINDS}
        if os.environ.get("HOFF_SIM_LAUNCHED") != "1":
            return
        from hoff import _lib, _targets

        lib, target = _lib.load(), _targets.AllocatorTarget(0)
        self.block = lambda p: lib.hoff_block_size(target.ctx, p)
        self.min = target.min_block_bytes()  # hoff's managed_min, as the package's op marks use it
        ag, rs = dist.all_gather_into_tensor, dist.reduce_scatter_tensor

        def all_gather(output_tensor, input_tensor, *a, **k):
            self.see("all_gather_output", output_tensor)
            self.see("all_gather_input", input_tensor)
            return ag(output_tensor, input_tensor, *a, **k)

        def reduce_scatter(output, input, *a, **k):
            self.see("reduce_scatter_input", input)
            self.see("reduce_scatter_output", output)
            return rs(output, input, *a, **k)

        dist.all_gather_into_tensor, dist.reduce_scatter_tensor = all_gather, reduce_scatter
        def unsharded(mod, args):
            for p in mod.parameters():
                self.see("unsharded_params", p)

        for m in net.modules():  # FSDP all-gathered the block's parameters before its layers run
            if isinstance(m, torch.nn.Linear):
                m.register_forward_pre_hook(unsharded)

    def see(self, kind, t):
        st = t.untyped_storage()
        c = self.counts[kind]
        c[0] += self.block(st.data_ptr()) > 0
        c[1] += st.nbytes() >= self.min
        c[2] += 1


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(),
                                                    torch.nn.Linear(1024, 512)) for _ in range(3)])
    fsdp = sys.argv[1] == "--fsdp"
    if fsdp:
        from torch.distributed.fsdp import fully_shard

        for block in net:
            fully_shard(block)
        model = fully_shard(net)
        seen = Collectives(net)
    else:
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
    if fsdp:
        digest["collectives"] = seen.counts
    with open("%s.%d" % (sys.argv[-1], rank), "w") as f:
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
