# test_skip.py — skip_offload: decorator and context manager, nesting, the region marks it makes (allocations
# inside are pinned in the recorded trace), and regions closed on an exception.  Threading: single-threaded.
import itertools

import pytest

import hoff
from conftest import read_trace

MiB = 1 << 20
_devices = itertools.count(30)


def test_nesting_and_forms(libhoff, tmp_path):
    dev = next(_devices)
    s = hoff.OffloadSession(hoff.OffloadConfig(max_resident_activation_mb=64), mode="allocator", device=dev)
    depths = []

    @hoff.skip_offload
    def inner():
        """inner's doc"""
        depths.append(hoff.region_depth())
        return libhoff.hoff_torch_alloc(2 * MiB, dev, None)

    assert inner.__name__ == "inner" and inner.__doc__ == "inner's doc"
    blocks = []
    with s:
        blocks.append(libhoff.hoff_torch_alloc(2 * MiB, dev, None))       # 0: not pinned
        with hoff.skip_offload():
            depths.append(hoff.region_depth())
            blocks.append(libhoff.hoff_torch_alloc(2 * MiB, dev, None))   # 1: pinned
            blocks.append(inner())                                        # 2: pinned, nested
            depths.append(hoff.region_depth())
        depths.append(hoff.region_depth())
        blocks.append(libhoff.hoff_torch_alloc(2 * MiB, dev, None))       # 3: not pinned
        with hoff.skip_offload(name="opaque"):
            blocks.append(libhoff.hoff_torch_alloc(2 * MiB, dev, None))   # 4: pinned
        for p in blocks:
            libhoff.hoff_torch_free(p, 2 * MiB, dev, None)
    assert depths == [1, 2, 1, 0]
    path = tmp_path / "step.trace"
    assert libhoff.hoff_trace_save(s.targets[0].ctx, str(path).encode()) == 0
    lines = read_trace(str(path))
    names = {ln[1]: ln[2] if len(ln) > 2 else "" for ln in lines if ln[0] == "name"}
    events = [ln for ln in lines if ln[0] in ("a", "rb", "re", "o")]
    kinds = [e[0] if e[0] != "o" else "o:" + names[e[1]] for e in events]
    assert kinds == ["a", "rb", "a", "rb", "o:test_nesting_and_forms.<locals>.inner", "a", "re", "re", "a",
                     "rb", "o:opaque", "a", "re"]
    pinned = [e[-1] == "p" for e in events if e[0] == "a"]
    assert pinned == [False, True, True, False, True]


def test_exception_closes_regions(libhoff):
    dev = next(_devices)
    s = hoff.OffloadSession(mode="allocator", device=dev)
    with s:
        with pytest.raises(KeyError):
            with hoff.skip_offload():
                with hoff.skip_offload():
                    assert hoff.region_depth() == 2
                    raise KeyError("x")
        assert hoff.region_depth() == 0
    assert s.steps == 1  # the step could end: no region was left open


def test_decorator_factory_and_misuse():
    @hoff.skip_offload()
    def f(x):
        return x + hoff.region_depth()

    @hoff.skip_offload(name="g")
    def g():
        return f(1)

    assert f(1) == 2 and g() == 3 and hoff.region_depth() == 0
    with pytest.raises(TypeError, match="context manager"):
        hoff.skip_offload(5)
