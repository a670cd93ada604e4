# test_native_marks.py — hoff's op marks from the shim's RecordFunction callback (_shim/hoff_marks.cpp, hoff.opmarks
# NativeMarks): a step marks its backward ops (autograd's engine records each node as a FUNCTION-scope record that is
# no op, and the ops inside are the ones to mark), the optimizer's, and none of hoff's own (quiet) or of fake tensors
# (TorchDynamo's tracing); its boundaries reach a hoff-record trace that the window checker passes; HOFF_SHIM=0 falls
# back to the Python mode; and torch.compile's regions are one op each (hoff.compiled).
# Threading: pytest's; the marks' callback runs on every thread (autograd's CPU backward runs on the caller's).
import json
import os
import sys

import pytest

from conftest import PYDIR, REQUIRE, builddir, run
from test_opmarks import CHILD as OPMARKS_CHILD

import hoff
from hoff import opmarks


@pytest.fixture(scope="module")
def native(libhoff, torch):
    try:
        lib = opmarks.native_lib()
    except RuntimeError as e:  # HOFF_SHIM=1 and it cannot be built
        pytest.fail(str(e))
    if lib is None:
        why = opmarks.native_why()
        if REQUIRE and why != "HOFF_SHIM=0":
            pytest.fail("hoff's shim cannot be built here: %s" % why)
        pytest.skip("no native marks: %s" % why)
    return lib


def _step(torch, body, config=None):
    s = hoff.OffloadSession(config, mode="allocator")
    with s:
        body()
    return s


def test_backward_and_optimizer_ops_are_marked(native, torch):
    w = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(w.parameters(), lr=0.1)
    x = torch.randn(16, 64)
    seen = {}

    def body():
        y = w(x).relu().sum()
        seen["fwd"] = opmarks.running().counts()[0]
        y.backward()
        seen["bwd"] = opmarks.running().counts()[0]
        opt.step()

    s = _step(torch, body)
    m = s.last_ops
    assert getattr(m, "native", False), "the session's marks are the Python mode"
    assert seen["fwd"] >= 3  # linear, relu, sum
    assert seen["bwd"] - seen["fwd"] >= 3, seen  # the backward formulas' ops, not one per autograd node
    assert m.ops > seen["bwd"]  # the optimizer's
    assert m.skipped == 0 and len(m.threads) >= 1


def test_quiet_and_fake_tensors_are_not_marked(native, torch):
    from torch._subclasses.fake_tensor import FakeTensorMode
    x = torch.randn(8, 8)
    got = {}

    def body():
        m = opmarks.running()
        before = m.counts()
        with opmarks.quiet():
            x.detach().add(1)
        got["quiet"] = [a - b for a, b in zip(m.counts(), before)]
        before = m.counts()
        with FakeTensorMode():
            f = torch.empty(8, 8)
            (f @ f).sum()
        got["fake"] = [a - b for a, b in zip(m.counts(), before)]
        before = m.counts()
        x.add(1)
        got["real"] = [a - b for a, b in zip(m.counts(), before)]

    _step(torch, body)
    assert got["quiet"][0] == 0 and got["quiet"][2] == 0, got
    assert got["fake"][0] == 0 and got["fake"][2] >= 2, got  # skipped: no memory, no kernel
    assert got["real"][0] == 1, got


def test_accesses_follow_the_schema(native, torch):
    """Reads of every argument's block, writes of new blocks and of the arguments the schema writes (add_'s self,
    out=), none for a view's output (its argument's read covers it).  The arguments are 1 MiB: hoff's managed_min."""
    x, y = torch.zeros(1 << 18), torch.ones(1 << 18)
    z = torch.empty(1 << 18)
    got = {}

    def body():
        m = opmarks.running()

        def delta(name, fn):
            before = m.counts()
            fn()
            got[name] = [a - b for a, b in zip(m.counts(), before)][:2]
        delta("add_", lambda: x.add_(y))                    # read x, y; write x
        delta("add", lambda: x + y)                         # read x, y; write the new tensor
        delta("out", lambda: torch.add(x, y, out=z))        # read x, y, z; write z
        delta("view", lambda: x.view(-1))                   # read x
        delta("small", lambda: torch.ones(4).add_(1))       # below managed_min: boundaries only

    _step(torch, body)
    assert got == {"add_": [1, 3], "add": [1, 3], "out": [1, 4], "view": [1, 1], "small": [2, 0]}, got


def test_ops_of_other_threads_are_not_marked(native, torch):
    """A thread running ops of its own during the step (a DataLoader's pin-memory thread) gets no marks: its op
    boundaries would close the step's windows while the step's kernels run.  (With a global callback they did:
    on PyTorch 2.x's intra-op threads too, and GPT-2 at 50% touched discarded blocks.)"""
    import threading
    import time
    stop, ran = threading.Event(), [0]

    def busy():
        a = torch.ones(8)
        while not stop.is_set():
            a.add_(1)
            ran[0] += 1
            time.sleep(0)

    t = threading.Thread(target=busy)
    t.start()
    try:
        time.sleep(0.05)
        s = _step(torch, lambda: [torch.ones(4).add(1) for _ in range(50)])
    finally:
        stop.set()
        t.join()
    assert ran[0] > 0
    assert s.last_ops.ops == 100, s.last_ops.ops  # ones and add, 50 times: the step's thread's own
    assert len(s.last_ops.threads) == 1


def test_marks_stop_with_the_step(native, torch):
    s = _step(torch, lambda: torch.randn(4).add(1))
    n = s.last_ops.ops
    torch.randn(4).add(1)  # outside any step: nothing marks
    assert opmarks.running() is None
    assert s.last_ops.counts()[0] == n


def test_shim_off_uses_the_python_mode(libhoff, torch):
    r = run([sys.executable, "-c", "import torch, hoff\n"
             "s = hoff.OffloadSession(mode='allocator')\n"
             "with s:\n    torch.randn(4).add(1)\n"
             "print(type(s.last_ops).__name__, getattr(s.last_ops, 'native', False), s.last_ops.ops)\n"],
            HOFF_SHIM="0")
    assert r.returncode == 0, r.stderr
    kind, nat, ops = r.stdout.split()
    assert kind == "OpMarks" and nat == "False" and int(ops) >= 2, r.stdout
    assert "op marks run in Python" not in r.stderr  # HOFF_SHIM=0 asked for it: no warning


# test_opmarks.py's two-block training step, saying which marks its session used
CHILD = OPMARKS_CHILD + (
    "\nimport json\n"
    "print(json.dumps({'native': getattr(sess.last_ops, 'native', False), 'ops': sess.last_ops.ops}))\n")


@pytest.mark.parametrize("shim", ["auto", "0"])
def test_recorded_windows_hold(hoff_record, native, torch, tmp_path, shim):
    """The trace a step marks natively (and, for comparison, in Python) passes tests/window_check.py at 50% and
    25%: every block's accesses lie inside the windows the plan keeps."""
    checker = os.path.join(PYDIR, "..", "tests", "window_check.py")
    if not os.path.exists(checker):
        pytest.skip("tests/window_check.py is not in this tree (an installed package)")
    trace = tmp_path / "t.trace.gz"
    r = run([hoff_record, "-q", "-o", str(trace), "--", sys.executable, "-c", CHILD, "1"], HOFF_SHIM=shim)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["native"] == (shim == "auto"), got
    plan = os.path.join(builddir(), "hoff-plan")
    for pct in (50, 25):
        import subprocess
        p = subprocess.run([plan, "show", str(trace), "--budget", "%d%%" % pct, "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=300, check=False)
        assert p.returncode == 0, p.stderr
        d = json.loads(p.stdout)
        ops = [e for e in d["events"] if e["kind"] == "op"]
        assert len(ops) > 50, len(ops)
        shown = tmp_path / ("show-%d.json" % pct)
        shown.write_text(p.stdout)
        c = subprocess.run([sys.executable, checker, str(shown)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=300, check=False)
        assert c.returncode == 0, "%d%%: %s" % (pct, c.stdout)
        assert d["summary"]["evictions"] > 0 and d["summary"]["bytes_d2h"] > 0, d["summary"]  # not vacuous
