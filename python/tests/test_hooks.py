# test_hooks.py — exact access marks (saved_tensors_hooks): views, transposes, slices and exact duplicates of one
# storage report one block, other storages other blocks; checked in-process against the storage base address
# (the allocator's block identity) and under hoff-record against the recorder's blocks and trace.
# Threading: single-threaded (the child process runs autograd's CPU backward on its own thread).
import json
import sys

from conftest import read_trace, run

import hoff


class AddrTarget:
    """A target whose blocks are storage base addresses, as hoff's allocator's are."""

    kind = "fake"

    def __init__(self):
        self.marks = []

    def access(self, ptr, write):
        self.marks.append((ptr, write))
        return ptr


def test_storage_base_is_the_block(torch):
    h = torch.randn(64, 32, requires_grad=True) * 2  # a non-leaf: its own storage
    base = hoff.storage_ptr(h)
    cases = {
        "view": lambda: (h.view(32, 64) * h.view(32, 64)).sum(),  # an exact duplicate, saved twice
        "transpose": lambda: h.t().sin().sum(),
        "slice": lambda: h[8:].sin().sum(),
        "mm": lambda: torch.mm(h.t(), h).sum(),                  # two views of one storage
    }
    assert h[8:].data_ptr() != base  # a view's own pointer is inside the block, not its start
    for name, fn in cases.items():
        t = AddrTarget()
        with hoff.AccessHooks([t], log=True) as hooks:
            y = fn()
        y.backward(retain_graph=True)
        packs = [b for k, b in hooks.log if k == "pack"]
        unpacks = [b for k, b in hooks.log if k == "unpack"]
        assert packs and set(packs) == {base}, name
        assert sorted(unpacks) == sorted(packs), name
        assert all(w == 0 for _, w in t.marks), name  # both marks are reads
    other = h.clone()
    t = AddrTarget()
    with hoff.AccessHooks([t], log=True) as hooks:
        y = other.sin().sum()
    assert [b for k, b in hooks.log if k == "pack"] == [hoff.storage_ptr(other)] != [base]


CHILD = r"""
import json, sys, torch, hoff
out = {"recording": hoff.recording()}
s = hoff.OffloadSession(hoff.OffloadConfig(op_marks=False), mode="record")  # pack/unpack marks only
s.log_accesses = True
with s:
    a = torch.randn(256, 256, requires_grad=True)   # 256 KiB, allocated in the recorded step
    h = a * 2
    H = hoff._record.block_of(hoff.storage_ptr(h))
    out["H"] = H
    out["slice_ptr_differs"] = h[16:].data_ptr() != hoff.storage_ptr(h)
    y = (h.view(128, 512) * h.view(128, 512)).sum()    # exact duplicate, via a view
    y = y + h.t().sin().sum()                           # transpose
    y = y + h[16:].cos().sum()                          # slice (offset view)
    y = y + torch.mm(h.t(), h).sum()                    # two transposed/plain views
    c = h.clone()
    C = hoff._record.block_of(hoff.storage_ptr(c))
    out["C"] = C
    y = y + c.exp().sum()                               # exp saves its result: a third block
    y.backward()
    out["trace_id_H"] = hoff._record.lookup().hoff_record_trace_id(hoff.storage_ptr(h))
out["log"] = s.last_hooks.log
print(json.dumps(out))
"""


def test_hooks_under_hoff_record(hoff_record, torch, tmp_path):
    trace = tmp_path / "hooks.trace"
    r = run([hoff_record, "-q", "-o", str(trace), "--step", "0", "--threshold", "64K", "--",
             sys.executable, "-c", CHILD])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["recording"] and out["slice_ptr_differs"]
    H, C = out["H"], out["C"]
    assert H and C and H != C
    log = out["log"]
    on_h = [k for k, b in log if b == H]
    # mul saves both operands (2), sin 1, cos 1, mm 2: six packs of h's block, and six unpacks
    assert on_h.count("pack") == 6 and on_h.count("unpack") == 6
    blocks = {b for _, b in log if b is not None}
    assert C not in blocks  # clone is saved by nobody; exp saves its result
    assert len(blocks - {H}) == 1  # exp's result
    # the trace: h's block has 12 read marks, all reads
    lines = read_trace(str(trace))
    hid = str(out["trace_id_H"])
    reads = [ln for ln in lines if ln[0] == "r" and ln[1] == hid]
    writes = [ln for ln in lines if ln[0] == "w" and ln[1] == hid]
    assert len(reads) == 12 and not writes


def test_inplace_after_save_raises_as_autograd_does(torch):
    """An in-place change of a saved tensor makes autograd raise; under the hooks (which turn autograd's own
    version check off) it must raise too, never give wrong gradients."""
    def run(hooked):
        x = torch.randn(16, 16, requires_grad=True)
        h = x * 2
        y = h.sin()      # sin saves h
        h.add_(1)        # ...which is then changed in place
        if hooked:
            with hoff.AccessHooks([AddrTarget()]):
                pass
        return y.sum()

    plain = run(False)
    try:
        plain.backward()
        assert False, "autograd itself did not raise"
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
    x = torch.randn(16, 16, requires_grad=True)
    with hoff.AccessHooks([AddrTarget()]):
        h = x * 2
        y = h.sin()
        h.add_(1)
    try:
        y.sum().backward()
        assert False, "the hooks hid an in-place modification of a saved tensor"
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
        assert "hoff" in str(e)
