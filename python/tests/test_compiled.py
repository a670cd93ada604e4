# test_compiled.py — torch.compile under hoff (hoff.compiled): what torch.compile returns keeps its type, each call
# in a step is one op to hoff forward and backward (the aten ops inside keep their access marks, not boundaries),
# a region holding most of the step's saved bytes is explained once, and with the Python marks (HOFF_SHIM=0) --sim
# says that compiled code runs eagerly.  AOTAutograd's aot_eager backend stands in for Inductor (the same autograd
# node, CompiledFunction, without a C++ compile); tests/sim_train.sh runs Inductor per block and whole.
# Threading: pytest's; CPU backward runs on the caller's thread.
import sys

import pytest

from conftest import run

import hoff
from hoff import compiled, opmarks


@pytest.fixture(scope="module")
def tc(libhoff, torch):
    if not hasattr(torch, "compile"):
        pytest.skip("PyTorch %s has no torch.compile" % torch.__version__)
    if opmarks.native_lib() is None:
        pytest.skip("no native marks: %s" % opmarks.native_why())
    compiled.install(torch)
    return torch


def _block(torch):
    class Blk(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(32, 64)
            self.b = torch.nn.Linear(64, 32)

        def forward(self, x):
            return x + self.b(torch.nn.functional.gelu(self.a(x)) * 2)
    return Blk()


def test_compile_keeps_types(tc):
    torch = tc
    m = _block(torch)
    om = torch.compile(m, backend="aot_eager")
    assert isinstance(om, torch._dynamo.eval_frame.OptimizedModule)
    assert om._orig_mod is m and set(om.state_dict()) == {"_orig_mod." + k for k in m.state_dict()}
    assert getattr(om.forward, "_hoff_region", None) == "Blk"

    @torch.compile(backend="aot_eager")
    def f(x):
        return x.sin() * 2
    assert f._hoff_region == "f"
    m2 = _block(torch)
    m2.compile(backend="aot_eager")  # nn.Module.compile calls torch.compile(self._call_impl)
    assert getattr(m2._compiled_call_impl, "_hoff_region", None) == "Blk"
    x = torch.randn(4, 32)
    assert torch.equal(om(x), m(x)) and torch.equal(f(x), x.sin() * 2)  # outside a step: a plain call


def test_a_region_is_one_op_forward_and_backward(tc):
    torch = tc
    torch.manual_seed(0)
    blocks = [_block(torch) for _ in range(3)]
    runs = [torch.compile(b, backend="aot_eager") for b in blocks]
    x = torch.randn(8, 32, requires_grad=True)
    before = compiled.figures().get("Blk", {"forward_calls": 0, "backward_calls": 0, "compiled_calls": 0,
                                            "aten_ops": 0})
    s = hoff.OffloadSession(mode="allocator")
    counts = {}
    for step in range(2):
        with s:
            h = x
            for r in runs:
                h = r(h)
            counts["fwd"] = opmarks.running().counts()
            h.sum().backward()
    m = s.last_ops
    r = compiled.figures()["Blk"]
    got = {k: r[k] - before[k] for k in ("forward_calls", "backward_calls", "compiled_calls", "aten_ops")}
    assert got["forward_calls"] == 6 and got["backward_calls"] == 6 and got["compiled_calls"] == 6, got
    # forward: one boundary per region (compiled:Blk.fwd), the aten ops aot_eager runs inside have none of their own
    assert counts["fwd"][0] == 3, counts
    assert counts["fwd"][4] >= 3 * 4, counts  # linear, gelu, mul, linear, add... ran inside, marked as accesses only
    # backward: the sum's backward op, then one boundary per region (compiled:Blk.bwd), the leaf's grad accumulation
    assert m.ops - counts["fwd"][0] <= 3 + 3, m.ops
    assert m.compiled_ops > counts["fwd"][4]


def test_whole_model_is_explained_once(tc, capfd):
    torch = tc
    net = torch.nn.Sequential(*[_block(torch) for _ in range(4)])
    run_ = torch.compile(net, backend="aot_eager")
    x = torch.randn(256, 32)
    compiled._explained.discard("Sequential")
    s = hoff.OffloadSession(mode="allocator")
    for _ in range(2):
        with s:
            run_(x).sum().backward()
    err = capfd.readouterr().err
    assert err.count("the compiled region Sequential saves") == 1, err
    assert "is one op to hoff" in err and "Compile per block" in err


def test_per_block_regions_are_not_explained(tc, capfd):
    torch = tc
    runs = [torch.compile(_block(torch), backend="aot_eager") for _ in range(4)]
    x = torch.randn(256, 32, requires_grad=True)
    compiled._explained.discard("Blk")
    with hoff.OffloadSession(mode="allocator"):
        h = x
        for r in runs:
            h = r(h)
        h.sum().backward()
    assert "the compiled region" not in capfd.readouterr().err


def test_compiled_code_hoff_did_not_wrap_is_counted_and_said(tc):
    """torch._dynamo.optimize bypasses torch.compile: the compiled frames it runs in a step are counted (the shim
    sees TorchDynamo's "Torch-Compiled Region" record with no hoff region open) and said once."""
    torch = tc
    import warnings
    f = torch._dynamo.optimize("aot_eager")(lambda x: (x.sin() * 2).relu())
    x = torch.randn(8, requires_grad=True)
    f(x)  # compiled outside the step
    opmarks._warned_unwrapped.clear()
    s = hoff.OffloadSession(mode="allocator")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with s:
            f(x).sum().backward()
    if not hasattr(torch.compiler, "is_compiling") or s.last_ops.unwrapped_compiled == 0:
        assert torch.__version__ < "2.3", "no Torch-Compiled Region record seen on PyTorch %s" % torch.__version__
        pytest.skip("PyTorch %s records no Torch-Compiled Region" % torch.__version__)
    assert s.last_ops.unwrapped_compiled == 1
    assert sum("not made through torch.compile after hoff was installed" in str(w.message) for w in got) == 1
    with s:  # a wrapped region is not counted
        torch.compile(lambda x: x.cos() + 1, backend="aot_eager")(x).sum().backward()
    assert s.last_ops.unwrapped_compiled == 0


def test_python_marks_say_compiled_code_runs_eagerly(tc, tmp_path):
    script = tmp_path / "c.py"
    script.write_text("import torch\n"
                      "lin = torch.nn.Linear(8, 8)\n"
                      "f = torch.compile(lambda x: lin(x).relu(), backend='eager')\n"
                      "opt = torch.optim.SGD(lin.parameters(), lr=0.1)\n"
                      "for _ in range(2):\n"
                      "    f(torch.randn(4, 8)).sum().backward()\n"
                      "    opt.step()\n")
    r = run([sys.executable, "-m", "hoff", "--sim", str(script)], HOFF_SHIM="0")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("compiled code runs eagerly") == 1, r.stderr
    assert "HOFF_SHIM=0" in r.stderr
