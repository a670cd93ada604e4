# test_grads.py — gradients and the optimizer's step are not activations (hoff.grads): under python -m hoff --sim a
# model whose gradients are offload-sized keeps them (hoff_keep) and its optimizer's step in a region, no gradient
# is moved, the working-set floor is not the optimizer's and the run stays bitwise equal to the plain run;
# HOFF_OFFLOAD_GRADIENTS=1 brings the old behaviour back (the floor is the optimizer's).  Under hoff-record the
# trace flags the gradients' allocations kept and writes each op's phase.  And the op phases themselves.
# Threading: pytest's, one process (children for the launcher and the recorder).
import json
import sys

import pytest

from conftest import read_trace, run

# An MLP whose weights are 4 MiB each (so their gradients are offload candidates), AdamW (lazily made state,
# per-parameter temporaries on CPU), zero_grad() setting gradients to None each iteration (PyTorch >= 2.0's default;
# said explicitly for 1.13), a cross-entropy loss.  Prints the digest of every step's loss and gradients.
SCRIPT = r"""
import hashlib, json, sys, torch
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024),
                            torch.nn.GELU(), torch.nn.Linear(1024, 512))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(512, 1024)
y = torch.randint(0, 512, (512,))
accum = int(sys.argv[3]) if len(sys.argv) > 3 else 1  # micro-batches per optimizer step
user_steps = len(sys.argv) > 4 and sys.argv[4] == "user"  # the script marks its own steps (hoff.step())
digest = []
for i in range(int(sys.argv[2])):
    if user_steps:
        import hoff
        hoff.step()
    opt.zero_grad(set_to_none=True)
    for k in range(accum):  # gradient accumulation: the first backward makes .grad, the next add into it
        loss = torch.nn.functional.cross_entropy(model(x[k::accum]), y[k::accum])
        loss.backward()
    h = hashlib.sha256(loss.detach().numpy().tobytes())
    for p in model.parameters():
        h.update(p.grad.numpy().tobytes())
    digest.append(h.hexdigest())
    opt.step()
h = hashlib.sha256()
for p in model.parameters():
    h.update(p.detach().numpy().tobytes())
digest.append(h.hexdigest())
json.dump(digest, open(sys.argv[1], "w"))
"""


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    p = tmp_path_factory.mktemp("grads") / "mlp.py"
    p.write_text(SCRIPT)
    return str(p)


@pytest.fixture(scope="module")
def plain(script, tmp_path_factory):
    """plain(steps, accum): the digest of the plain run (no hoff), each shape run once for the module."""
    runs = {}
    d = tmp_path_factory.mktemp("plain")

    def get(steps=5, accum=1):
        if (steps, accum) not in runs:
            out = d / ("plain.%d.%d.json" % (steps, accum))
            r = run([sys.executable, script, str(out), str(steps), str(accum)])
            assert r.returncode == 0, r.stderr
            runs[(steps, accum)] = json.load(open(out))
        return runs[(steps, accum)]

    return get


def _sim(script, tmp_path, budget, steps=5, accum=1, marks="optimizer", **env):
    dig, stats = tmp_path / ("sim%s.json" % budget.strip("%")), tmp_path / "stats.json"
    r = run([sys.executable, "-m", "hoff", "--sim", "--budget", budget, "--stats-json", str(stats), script, str(dig),
             str(steps), str(accum), marks], **env)
    assert r.returncode == 0, r.stderr
    return json.load(open(dig)), json.load(open(stats)), r.stderr


def test_gradients_are_kept_and_the_floor_is_not_the_optimizers(libhoff, torch, script, plain, tmp_path):
    for budget in ("50%", "25%"):
        dig, st, err = _sim(script, tmp_path, budget)
        assert dig == plain(), "bitwise equality at %s" % budget
        f, floor = st["final"], st["floor"]
        assert f["bytes_evicted"] > 0, "nothing moved at %s: the test would pass vacuously" % budget
        # every gradient (3 of 4 MiB, 1 of 2 MiB per step) kept: first by hoff_keep in the warmup steps, then
        # allocated outside the budget in the replayed ones
        assert f["keep_marks"] >= 4 and f["kept_allocs"] >= 4, f
        assert f["kept_evicted"] == 0, "a gradient was moved before hoff knew it"
        assert f["keep_ignored"] == 0
        assert floor["phase"] != "optimizer", floor
        assert floor["phase"] in ("forward", "backward", "loss"), floor
        assert floor["bytes"] == f["plan_floor_bytes"] and floor["blocks"] == f["plan_floor_blocks"] > 0
        assert floor["advice"], floor
        # the activation peak the percentage is of does not count the gradients
        first = st["steps"][0]
        assert 0 < first["recorded_peak_bytes"] <= first["peak_resident_bytes"]
        assert st["integrity"]["ok"]


def _kept_and_moved(st):
    """Bytes moved, no gradient among them, at least the four gradients of a step kept, no optimizer floor."""
    f = st["final"]
    assert f["bytes_evicted"] > 0 and f["kept_evicted"] == 0
    assert f["keep_marks"] + f["kept_allocs"] >= 4, f
    assert st["floor"]["phase"] != "optimizer", st["floor"]


def test_gradient_accumulation(libhoff, torch, script, plain, tmp_path):
    dig, st, err = _sim(script, tmp_path, "50%", steps=4, accum=2)
    assert dig == plain(4, 2)
    _kept_and_moved(st)


def test_user_marked_steps(libhoff, torch, script, plain, tmp_path):
    """hoff.step() at the top of each iteration: the optimizer's step is inside the step, and still kept out."""
    dig, st, err = _sim(script, tmp_path, "50%", marks="user")
    assert dig == plain()
    _kept_and_moved(st)


def test_offload_gradients_brings_them_back(libhoff, torch, script, tmp_path):
    dig, st, err = _sim(script, tmp_path, "50%", HOFF_OFFLOAD_GRADIENTS="1")
    f, floor = st["final"], st["floor"]
    assert f["keep_marks"] == 0 and f["kept_allocs"] == 0 and f["keep_ignored"] > 0, f
    # the optimizer's step holds every gradient and its own temporaries: it sets the floor
    assert floor["phase"] == "optimizer", floor
    assert "optimizer" in floor["advice"]


def test_op_phases(libhoff, torch):
    from hoff import grads
    grads.install()
    assert grads.installed()
    assert grads.is_loss_op("aten.nll_loss_forward.default")
    assert grads.is_loss_op("aten._log_softmax_backward_data.default")
    assert not grads.is_loss_op("aten.mm.default")
    assert grads.op_phase("aten.mm.default") == "forward"
    assert grads.op_phase("aten.nll_loss_forward.default") == "loss"
    seen = []
    w = torch.randn(4, 4, requires_grad=True)

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            seen.append(grads.op_phase("aten.mm.default"))
            return g

    Probe.apply(w).sum().backward()
    assert seen == ["backward"]
    assert grads.op_phase("aten.mm.default") == "forward"  # backward() is over
    opt = torch.optim.SGD([w], lr=0.1)

    def closure():
        seen.append(grads.op_phase("aten.mm.default"))
        return None

    opt.step(closure)
    assert seen[-1] == "optimizer" and not grads.in_optimizer()


RECORD = r"""
import torch, hoff
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
s = hoff.OffloadSession()
x, y = torch.randn(256, 1024), torch.randint(0, 256, (256,))
for i in range(3):
    with s:
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"""


def test_hoff_record_flags_gradients_and_phases(hoff_record, torch, tmp_path):
    trace = tmp_path / "g.trace"
    r = run([hoff_record, "-o", str(trace), "--step", "1", "--", sys.executable, "-c", RECORD])
    assert r.returncode == 0, r.stderr
    lines = read_trace(str(trace))
    allocs = [ln for ln in lines if ln[0] == "a"]
    kept = [ln for ln in allocs if "k" in ln[6:]]
    # the first layer's weight gradient (4 MiB) and the second's (1 MiB) are offload-sized: kept
    assert len(kept) >= 2, allocs
    assert all(ln[3] == "1" for ln in kept)  # recorded as candidates, kept later in the step
    phases = {ln[-1] for ln in lines if ln[0] == "o" and ln[-1] in ("fwd", "bwd", "loss", "opt")}
    assert {"fwd", "bwd", "loss", "opt"} <= phases, phases
    # the optimizer's step ran in a region: its allocations (momentum buffers made lazily, none after the first
    # step; temporaries) are device-pool blocks, never candidates
    depth, in_region_pools = 0, []
    for ln in lines:
        if ln[0] == "rb":
            depth += 1
        elif ln[0] == "re":
            depth -= 1
        elif ln[0] == "a" and depth:
            in_region_pools.append(ln[3])
    assert all(p == "0" for p in in_region_pools), in_region_pools
