# test_recompute.py — hoff.recompute: load_advice's refusals of malformed advice, the op-name keys of both marks'
# spellings, apply_recompute's mapping of advised ops to leaf modules (occurrences, a module called twice, ops in a
# parent's forward reported, hooks kept, remove() exact), training bitwise equal with and without it (dropout and
# BatchNorm inside, recompute seen in backward), and checkpoint_policy under PyTorch 2.4+'s selective checkpointing
# (bitwise equal to the plain block; a clear refusal before 2.4).  CPU only, no libhoff.  Threading: single-threaded.
import errno
import json

import pytest

torch = pytest.importorskip("torch")

import hoff  # noqa: E402
from hoff.recompute import Advice, apply_recompute, checkpoint_policy, load_advice, op_key  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402


def advice(ops, chosen="combined"):
    return {"trace": "step.trace", "budget_bytes": 1 << 20, "peak_bytes": 2 << 20, "compute_ns": 1000,
            "h2d_gbps": 10.0, "d2h_gbps": 10.0, "bound_ns": 1000, "chosen": chosen,
            "recompute": [{"op": op, "occurrence": k, "interval": i, "event": 10 + i, "cost_ns": 5, "bytes": 4096}
                          for op, k, i in ops]}


class Block(torch.nn.Module):
    def __init__(self, drop=0.0):
        super().__init__()
        self.ln = torch.nn.LayerNorm(16)
        self.fc = torch.nn.Linear(16, 32)
        self.act = torch.nn.GELU()
        self.drop = torch.nn.Dropout(drop)
        self.out = torch.nn.Linear(32, 16)

    def forward(self, x):
        h = self.drop(self.act(self.fc(self.ln(x))))
        return x + torch.tanh(self.out(h))  # tanh: a functional call in a module with children


class Net(torch.nn.Module):
    def __init__(self, drop=0.0):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(drop), Block(drop)])
        self.bn = torch.nn.BatchNorm1d(16)
        self.act = torch.nn.GELU()

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        x = self.act(self.bn(x))
        return self.act(x)  # the same leaf module called twice in a forward


# The forward ops of Net, as the Python marks record them (saved-tensor hooks on: autograd runs no detach; dropout 0
# runs no op):
#  0 native_layer_norm  1 t  2 addmm  3 gelu (blocks.0.act)  4 t  5 addmm  6 tanh (blocks.0)  7 add
#  8 native_layer_norm  9 t 10 addmm 11 gelu (blocks.1.act) 12 t 13 addmm 14 tanh (blocks.1) 15 add
# then bn (its num_batches_tracked add_, native_batch_norm), gelu (act, call 0), gelu (act, call 1).
def forward_names(model, x):
    return [o.name for o in hoff.recompute._trace_forward(model, (x,), {}, True)]


class Count(TorchDispatchMode):
    """Counts the aten ops run under it, by name."""

    def __init__(self):
        super().__init__()
        self.n = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from hoff.opmarks import _rewrap_numbers, _rewrap_result
        self.n[str(func)] = self.n.get(str(func), 0) + 1
        return _rewrap_result(func, func(*_rewrap_numbers(func, args), **(kwargs or {})))


class _no_warning:
    """Any warning inside is an error."""

    def __enter__(self):
        import warnings
        self.w = warnings.catch_warnings()
        self.w.__enter__()
        warnings.simplefilter("error")

    def __exit__(self, *a):
        self.w.__exit__(*a)


@pytest.fixture
def gelus(monkeypatch):
    """Counts the calls of F.gelu (GELU's forward calls it; a checkpoint's recompute too, which the dispatch modes
    of PyTorch 2.x do not see)."""
    n = [0]
    gelu = torch.nn.functional.gelu

    def counted(*a, **k):
        n[0] += 1
        return gelu(*a, **k)
    monkeypatch.setattr(torch.nn.functional, "gelu", counted)
    return n


# --- load_advice ------------------------------------------------------------------------------------------------

def test_op_keys_of_both_spellings():
    assert op_key("aten.gelu.default") == ("aten", "gelu", "default")
    assert op_key("aten::gelu") == op_key("aten.gelu") == ("aten", "gelu", None)
    assert op_key("aten::add.Tensor") == op_key("aten.add.Tensor") == ("aten", "add", "Tensor")
    for bad in ("gelu", "compiled:ResNet.bwd", "aten.gelu.default.x", "", "aten::"):
        with pytest.raises(hoff.HoffError, match="not an op mark's name"):
            op_key(bad)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("chosen"), "has no 'chosen'"),
    (lambda d: d.update(chosen="all"), "'chosen' is 'all'; expected one of combined, offload_only, full_checkpoint"),
    (lambda d: d.pop("budget_bytes"), "has no 'budget_bytes'"),
    (lambda d: d.update(budget_bytes=-1), "'budget_bytes' is -1; expected an integer >= 0"),
    (lambda d: d.pop("recompute"), "has no 'recompute' list"),
    (lambda d: d.update(recompute={}), "'recompute' is a dict; expected a list of ops"),
    (lambda d: d["recompute"].append(3), r"recompute\[2\] is a int; expected an object"),
    (lambda d: d["recompute"][0].pop("op"), r"recompute\[0\] has no 'op'"),
    (lambda d: d["recompute"][0].update(op=7), r"recompute\[0\]: 'op' is 7"),
    (lambda d: d["recompute"][0].update(op="gelu"), r"recompute\[0\]: op 'gelu' is not an op mark's name"),
    (lambda d: d["recompute"][1].update(occurrence=True), r"recompute\[1\]: 'occurrence' is True"),
    (lambda d: d["recompute"][1].update(cost_ns=1.5), r"'cost_ns' is 1.5; expected an integer >= 0"),
    (lambda d: d["recompute"][1].pop("bytes"), r"recompute\[1\] has no 'bytes'"),
    (lambda d: d["recompute"][1].update(interval=3), r"interval 3 is not after the previous op's 3"),
    (lambda d: d["recompute"][1].update(op="aten.gelu.default", occurrence=0),
     r"aten.gelu.default occurrence 0 is already recompute\[0\]"),
    (lambda d: d.update(chosen="offload_only"), "'chosen' is offload_only but 'recompute' lists 2 ops"),
    (lambda d: d["recompute"][0].update(ops={}), r"recompute\[0\]: 'ops' is a dict; expected a list"),
    (lambda d: d["recompute"][0].update(ops=[{"op": 1}]), r"recompute\[0\]: ops\[0\] is \{'op': 1\}"),
    (lambda d: d["recompute"][0].update(ops=[{"op": "x", "occurrence": 0, "interval": 0}]),
     r"ops\[0\]: op 'x' is not an op mark's name"),
    (lambda d: d["recompute"][0].update(ops=[{"op": "aten.mul.Tensor", "interval": 0}]),
     r"recompute\[0\]: ops\[0\] has no 'occurrence'"),
])
def test_load_advice_refuses(mutate, message):
    d = advice([("aten.gelu.default", 0, 3), ("aten::gelu", 1, 12)])
    mutate(d)
    with pytest.raises(hoff.HoffError, match=message) as e:
        load_advice(d)
    assert e.value.errno == errno.EINVAL
    assert "hoff-plan advise TRACE --budget B --json" in str(e.value)


def test_load_advice_files(tmp_path):
    good = advice([("aten.gelu.default", 0, 3), ("aten::gelu", 1, 12)])
    p = tmp_path / "advice.json"
    p.write_text(json.dumps(good))
    a = load_advice(str(p))
    assert isinstance(a, Advice) and a.chosen == "combined" and a.budget_bytes == 1 << 20
    assert [(o.op, o.occurrence, o.interval, o.bytes) for o in a.ops] == [
        ("aten.gelu.default", 0, 3, 4096), ("aten::gelu", 1, 12, 4096)]
    assert load_advice(a) is a and load_advice(p).ops[1].key == ("aten", "gelu", None)
    # "ops": the ops a recompute runs, itself first (hoff-plan advise since it recomputes chains).
    good["recompute"][0]["ops"] = [{"op": "aten.gelu.default", "occurrence": 0, "interval": 3},
                                   {"op": "aten.addmm.default", "occurrence": 0, "interval": 2}]
    assert load_advice(good).ops[0].chain == [("aten.addmm.default", 0, 2)] and load_advice(good).ops[1].chain == []
    p.write_text("{not json")
    with pytest.raises(hoff.HoffError, match="is not JSON"):
        load_advice(p)
    p.write_text("[]")
    with pytest.raises(hoff.HoffError, match="holds a list, not an object"):
        load_advice(p)
    with pytest.raises(hoff.HoffError, match="cannot read .*nowhere.json") as e:
        load_advice(tmp_path / "nowhere.json")
    assert e.value.errno == errno.ENOENT
    assert load_advice(advice([], chosen="offload_only")).ops == []


# --- apply_recompute: the mapping -------------------------------------------------------------------------------

def test_mapping_forward_order():
    torch.manual_seed(0)
    names = forward_names(Net(), torch.randn(4, 16))
    assert names[:8] == ["aten.native_layer_norm.default", "aten.t.default", "aten.addmm.default",
                         "aten.gelu.default", "aten.t.default", "aten.addmm.default", "aten.tanh.default",
                         "aten.add.Tensor"]
    assert names[8:16] == names[:8] and "aten.detach.default" not in names
    gelus = [i for i, n in enumerate(names) if n == "aten.gelu.default"]
    assert gelus[:2] == [3, 11] and len(gelus) == 4
    # Under no_grad the same ops run (autograd saves nothing; the hooks' detach is not counted either way).
    with torch.no_grad():
        assert forward_names(Net(), torch.randn(4, 16)) == names


def at(names, op, k):
    """The index of the k-th op called op in names."""
    return [i for i, n in enumerate(names) if n == op][k]


def test_mapping_leaf(gelus):
    torch.manual_seed(0)
    model, x = Net(), torch.randn(4, 16)
    names = forward_names(model, x)
    n = len(names)
    adv = advice([("aten.tanh.default", 0, 6),                              # in Block's own forward: not a leaf
                  ("aten::gelu", 1, at(names, "aten.gelu.default", 1)),     # native spelling: blocks.1.act
                  ("aten.gelu.default", 3, at(names, "aten.gelu.default", 3)),  # act's second call only
                  ("aten.native_layer_norm.default", 5, n + 10),              # the forward runs two
                  ("aten::linear", 0, n + 11)])                              # never seen below autograd
    with _no_warning():
        h = apply_recompute(model, adv, x, scope="leaf")
    try:
        assert [(w.name, w.type, sorted(w.calls), [o.occurrence for o in w.ops]) for w in h.wrapped] == [
            ("blocks.1.act", "GELU", [0], [1]), ("act", "GELU", [1], [3])]
        why = {u.op.op: u.reason for u in h.unmapped}
        assert "runs in the forward of blocks.0 (Block), which has submodules" in why["aten.tanh.default"]
        assert why["aten.native_layer_norm.default"] == ("this forward ran 2 aten.native_layer_norm.default ops "
                                                         "(occurrence 5 is past them)")
        assert why["aten::linear"] == "this forward never ran aten::linear"
        assert h.offsets == [0, 0, 0] and h.forward_ops == n
        s = h.summary()
        assert "checkpointed act (GELU), calls 1: aten.gelu.default #3" in s and "not applied: aten::linear #0" in s
        assert h.as_dict()["unmapped"][0]["op"] == "aten.tanh.default"
        # The backward recomputes gelu in blocks.1.act and in act's second call: 2 more gelu forwards, not 3.
        gelus[0] = 0
        model(x).sum().backward()
        assert gelus[0] == 4 + 2
    finally:
        h.remove()
    gelus[0] = 0
    model(x).sum().backward()
    assert gelus[0] == 4


def test_mapping_savers(gelus):
    torch.manual_seed(0)
    model, x = Net(), torch.randn(4, 16)
    names = forward_names(model, x)
    g = [at(names, "aten.gelu.default", k) for k in range(4)]
    adv = advice([("aten.native_layer_norm.default", 0, 0),  # saved by itself and blocks.0.fc's addmm: blocks.0
                  ("aten.gelu.default", 0, g[0]),             # saved by blocks.0.out's addmm: blocks.0
                  ("aten.addmm.default", 1, 5),               # blocks.0.out's, whose output tanh does not save
                  ("aten.tanh.default", 0, 6),                # saves its own output: blocks.0 (a functional call)
                  ("aten.addmm.default", 2, 10),              # blocks.1.fc's, saved by blocks.1.act's gelu: blocks.1
                  ("aten.gelu.default", 2, g[2]),             # act's first call, saved by its second call
                  ("aten.gelu.default", 3, g[3])])            # act's second call: nothing saves the model's output
    with _no_warning():
        h = apply_recompute(model, adv, x)
    try:
        assert [(w.name, w.type, sorted(w.calls), [(o.op, o.occurrence) for o in w.ops]) for w in h.wrapped] == [
            ("blocks.0", "Block", [0], [("aten.native_layer_norm.default", 0), ("aten.gelu.default", 0),
                                        ("aten.tanh.default", 0)]),
            ("blocks.1", "Block", [0], [("aten.addmm.default", 2)])]
        why = {(u.op.op, u.op.occurrence): u.reason for u in h.unmapped}
        assert why[("aten.addmm.default", 1)] == why[("aten.gelu.default", 3)] == (
            "nothing in this forward saves what it makes for backward: recomputing it frees nothing")
        assert why[("aten.gelu.default", 2)] == ("what it makes is saved by aten.gelu.default in act: only the "
                                                 "model's whole forward holds both, and checkpointing that "
                                                 "recomputes it all")
        gelus[0] = 0
        model(x).sum().backward()
        assert gelus[0] == 4 + 2  # both blocks ran again in backward
    finally:
        h.remove()
    assert "forward" not in model.blocks[0].__dict__
    with pytest.raises(hoff.HoffError, match="scope 'savers' needs the mapping forward with gradients"):
        apply_recompute(model, adv, x, grad=False)
    with pytest.raises(hoff.HoffError, match="scope 'all'; expected one of savers, leaf"):
        apply_recompute(model, adv, x, scope="all")


def test_mapping_chain():
    torch.manual_seed(0)
    model, x = Net(drop=0.25), torch.randn(8, 16)
    names = forward_names(model, x)
    op, k, i = op_of(model, x, "blocks.0.drop")  # what the dropout's mul saves: held by blocks.0.drop alone
    gelu = {"op": "aten.gelu.default", "occurrence": 0, "interval": at(names, "aten.gelu.default", 0)}
    alone = advice([(op, k, i)])
    with_gelu = advice([(op, k, i)])
    with_gelu["recompute"][0]["ops"] = [{"op": op, "occurrence": k, "interval": i}, gelu]  # blocks.0.act's too
    missing = advice([(op, k, i)])
    missing["recompute"][0]["ops"] = [{"op": "aten.cos.default", "occurrence": 0, "interval": 1}]
    got = []
    for adv in (alone, with_gelu, missing):
        h = apply_recompute(model, adv, x)
        got.append(([w.name for w in h.wrapped], [u.reason for u in h.unmapped]))
        h.remove()
    assert got == [(["blocks.0.drop"], []), (["blocks.0"], []),
                   ([], ["its recompute runs aten.cos.default #0, which this forward did not run"])]


def test_intervals_that_disagree_warn():
    torch.manual_seed(0)
    model, x = Net(), torch.randn(4, 16)
    adv = advice([("aten.gelu.default", 0, 3), ("aten.gelu.default", 1, 30)])
    with pytest.warns(RuntimeWarning, match=r"offsets \[0, 19\]"):  # gelu #1 is op 11
        h = apply_recompute(model, adv, x)
    h.remove()
    # A step that ran 5 forward ops before the model's: one offset, no warning.
    with _no_warning():
        h = apply_recompute(model, advice([("aten.gelu.default", 0, 8), ("aten.gelu.default", 1, 16)]), x)
    assert sorted(set(h.offsets)) == [5]
    h.remove()


def test_hooks_kept_and_remove_exact():
    torch.manual_seed(0)
    model, x = Net(), torch.randn(4, 16)
    names = forward_names(model, x)
    fired = []
    act = model.blocks[1].act
    act.register_forward_hook(lambda m, a, o: fired.append("before"))
    own = model.act.forward  # an instance attribute of its own, which remove() must give back
    model.act.forward = own
    adv = advice([("aten.gelu.default", 1, at(names, "aten.gelu.default", 1)),
                  ("aten.gelu.default", 2, at(names, "aten.gelu.default", 2))])
    with _no_warning():  # the mapping forward under no_grad: the same ops, the same intervals
        h = apply_recompute(model, adv, x, grad=False, scope="leaf")
    assert [w.name for w in h.wrapped] == ["blocks.1.act", "act"]
    assert fired == ["before"]  # the mapping forward ran the model, hooks and all
    del fired[:]
    act.register_forward_hook(lambda m, a, o: fired.append("after"))
    assert act.__dict__["forward"].__wrapped__ == type(act).forward.__get__(act)
    assert model.act.__dict__["forward"].__wrapped__ is own
    model(x).sum().backward()
    assert fired == ["before", "after"]
    h.remove()
    h.remove()  # idempotent
    assert "forward" not in act.__dict__ and model.act.__dict__["forward"] is own
    h = apply_recompute(model, advice([("aten.gelu.default", 1, at(names, "aten.gelu.default", 1))]), x,
                        scope="leaf")
    act.forward = lambda y: y
    with pytest.raises(hoff.HoffError, match="replaced after apply_recompute wrapped it") as e:
        h.remove()
    assert e.value.errno == errno.EBUSY


def op_of(model, x, module):
    """(name, occurrence, interval) of the first forward op that module runs."""
    ops = hoff.recompute._trace_forward(model, (x,), {}, True)
    i = [k for k, o in enumerate(ops) if o.module == module][0]
    return ops[i].name, sum(1 for o in ops[:i] if o.name == ops[i].name), i


def test_mapping_forward_leaves_no_trace():
    torch.manual_seed(0)
    model, x = Net(drop=0.5), torch.randn(8, 16)
    rng = torch.get_rng_state()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    h = apply_recompute(model, advice([("aten.gelu.default", 0, 3)]), x)
    # The forward drew dropout masks and moved BatchNorm's statistics; both are as they were.
    assert torch.equal(torch.get_rng_state(), rng)
    for k, v in model.state_dict().items():
        assert torch.equal(v, state[k]), k
    assert model.bn.num_batches_tracked.item() == 0
    h.remove()


# --- training with and without: bitwise equal -------------------------------------------------------------------

def train(model, steps, seed):
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses, grads = [], []
    for _ in range(steps):
        x = torch.randn(8, 16, generator=gen)
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        losses.append(loss.detach().clone())
        grads.append([p.grad.clone() for p in model.parameters()])
        opt.step()
    return losses, grads, [p.detach().clone() for p in model.parameters()] + [b.clone() for b in model.buffers()]


@pytest.mark.parametrize("scope", ["leaf", "savers"])
def test_training_bitwise_equal(gelus, scope):
    torch.manual_seed(0)
    plain = Net(drop=0.25)
    torch.manual_seed(0)
    ours = Net(drop=0.25)
    ours.load_state_dict(plain.state_dict())
    x = torch.randn(8, 16)
    # blocks.0.fc's addmm (saved by blocks.0.act's gelu), blocks.0.drop's first op (its mask: the RNG's; saved by
    # the dropout's mul), blocks.1.fc's addmm and act's first gelu: those leaf modules, or (savers) blocks.0 (its fc,
    # its act, its drop) and blocks.1, act's first call being saved by its second, in the model's own forward.
    names = forward_names(ours, x)
    drop = op_of(ours, x, "blocks.0.drop")
    adv = advice([("aten.addmm.default", 0, at(names, "aten.addmm.default", 0)), drop,
                  ("aten.addmm.default", 2, at(names, "aten.addmm.default", 2)),
                  ("aten.gelu.default", 2, at(names, "aten.gelu.default", 2))])
    with _no_warning():
        h = apply_recompute(ours, adv, x, scope=scope)
    if scope == "leaf":
        assert [w.name for w in h.wrapped] == ["blocks.0.fc", "blocks.0.drop", "blocks.1.fc", "act"]
        assert not h.unmapped
    else:
        assert [(w.name, len(w.ops)) for w in h.wrapped] == [("blocks.0", 2), ("blocks.1", 1)]
        assert [u.op.op for u in h.unmapped] == ["aten.gelu.default"]
    torch.manual_seed(1)
    want = train(plain, 3, 2)
    torch.manual_seed(1)
    gelus[0] = 0
    got = train(ours, 3, 2)
    # Every step recomputed its wrapped calls in backward: act's first call (leaf), or both blocks with their gelu.
    assert gelus[0] == 3 * (4 + (1 if scope == "leaf" else 2))
    for a, b in zip(want[0] + sum(want[1], []) + want[2], got[0] + sum(got[1], []) + got[2]):
        assert torch.equal(a, b)
    h.remove()


# --- checkpoint_policy (selective activation checkpointing) --------------------------------------------------------

def sac_supported():
    import torch.utils.checkpoint as c
    return hasattr(c, "create_selective_checkpoint_contexts")


@pytest.mark.skipif(sac_supported(), reason="PyTorch 2.4+ has selective activation checkpointing")
def test_policy_refused_before_2_4():
    with pytest.raises(hoff.HoffError, match="needs PyTorch 2.4 or later.*apply_recompute .* 1.13") as e:
        checkpoint_policy(advice([("aten.gelu.default", 0, 3)]))
    assert e.value.errno == errno.ENOTSUP


@pytest.mark.skipif(not sac_supported(), reason="selective activation checkpointing needs PyTorch 2.4+")
@pytest.mark.parametrize("per_region", [False, True])
def test_policy_bitwise_equal(per_region):
    from functools import partial
    from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
    torch.manual_seed(0)
    block = Block(drop=0.25)
    x = torch.randn(8, 16, requires_grad=True)
    names = forward_names(block, x)
    # gelu #0 and tanh #0: recomputed; layer norm, addmm, dropout and the rest saved.
    adv = advice([("aten.gelu.default", 0, at(names, "aten.gelu.default", 0)),
                  ("aten::tanh", 0, at(names, "aten.tanh.default", 0))])
    if per_region:  # tanh's recompute also runs the addmm it reads (an advised chain): recomputed too
        adv["recompute"][1]["ops"] = [{"op": "aten.addmm.default", "occurrence": 1,
                                       "interval": at(names, "aten.addmm.default", 1)}]
    policy = checkpoint_policy(adv)
    ctx = policy.context_fn if per_region else partial(create_selective_checkpoint_contexts, policy)
    results = []
    for sac in (False, True, True):
        torch.manual_seed(3)
        block.zero_grad()
        x.grad = None
        with Count() as c:
            if sac:
                y = checkpoint(block, x, use_reentrant=False, context_fn=ctx)
            else:
                y = block(x)
            y.square().sum().backward()
        results.append((c.n, [y.detach()] + [x.grad] + [p.grad.clone() for p in block.parameters()]))
    plain, first, second = results
    for a, b, d in zip(plain[1], first[1], second[1]):
        assert torch.equal(a, b) and torch.equal(a, d)
    # The SAC runs recomputed gelu and tanh once more, and saved layer norm, addmm and dropout's mul (a second step
    # counted its ops from 0 again).
    for n in (first[0], second[0]):
        extra = {k: n.get(k, 0) - plain[0].get(k, 0) for k in ("aten.gelu.default", "aten.tanh.default",
                                                               "aten.native_layer_norm.default", "aten.addmm.default",
                                                               "aten.mul.Tensor")}
        assert extra == {"aten.gelu.default": 1, "aten.tanh.default": 1, "aten.native_layer_norm.default": 0,
                         "aten.addmm.default": 1 if per_region else 0, "aten.mul.Tensor": 0}, extra
    assert policy.recomputed_ops == (6 if per_region else 4)


@pytest.mark.skipif(not sac_supported(), reason="selective activation checkpointing needs PyTorch 2.4+")
def test_policy_in_place_ops():
    from torch.utils.checkpoint import checkpoint

    def f(x):
        y = torch.sin(x)
        y.add_(1.0)  # writes y: recomputed after sin, on sin's recomputed output
        return torch.cos(y)
    x = torch.randn(8, requires_grad=True)
    want = torch.autograd.grad(f(x).sum(), x)[0]
    policy = checkpoint_policy(advice([("aten.sin.default", 0, 0)]))
    got = torch.autograd.grad(checkpoint(f, x, use_reentrant=False, context_fn=policy.context_fn).sum(), x)[0]
    assert torch.equal(want, got) and policy.forced == {"aten.add_.Tensor": 1} and policy.recomputed_ops == 1
    # cos advised, sin saved: add_ would write sin's saved output a second time; SAC refuses instead.
    policy = checkpoint_policy(advice([("aten.cos.default", 0, 2)]))
    y = checkpoint(f, x, use_reentrant=False, context_fn=policy.context_fn).sum()
    with pytest.raises(RuntimeError, match="has been mutated"):
        torch.autograd.grad(y, x)
