# test_session.py — OffloadSession's life cycle on hoff's allocator context (the sim backend without a GPU):
# warmup, plan, replay, and the exception path (transfers settled, step dropped, exception propagated).
# Threading: single-threaded; each test uses its own device number, so its own process-wide context.
import itertools
import warnings

import pytest

import hoff

MiB = 1 << 20
_devices = itertools.count(10)
RES_IN_FLIGHT = {1, 3, 5, 7}  # evicting, prefetching, spilling, restoring


@pytest.fixture
def dev(libhoff):
    # The context is made in the test: it plans at the recorded step's end (plan_thread 0), so that the plan
    # counts below hold right after the step.  Set on the device, not in the environment, which PyTorch's entry
    # points read once per process (an earlier test's context, on device 0, may have read it already).
    import ctypes
    d = next(_devices)
    err = ctypes.create_string_buffer(512)
    assert libhoff.hoff_torch_configure(d, b"plan_thread", b"0", err, len(err)) == 0, err.value
    return d


class Step:
    """A synthetic layer-by-layer step: forward allocates and writes n blocks,
    backward reads them in reverse and frees them (what PyTorch does through
    hoff_torch_alloc/free)."""

    def __init__(self, lib, dev, n=4, size=2 * MiB):
        self.lib, self.dev, self.n, self.size = lib, dev, n, size
        self.live = []

    def __call__(self, session, fail_in_backward=None):
        t = session.targets[0]
        blocks = []
        for i in range(self.n):
            hoff.mark_op("L%d.fwd" % i)
            p = self.lib.hoff_torch_alloc(self.size, self.dev, None)
            assert p, hoff._lib.last_error()
            blocks.append(p)
            self.live.append(p)
            assert t.access(p, True) == p
        for i in reversed(range(self.n)):
            hoff.mark_op("L%d.bwd" % i)
            if fail_in_backward == i:
                raise ZeroDivisionError("a failure in layer %d's backward" % i)
            assert t.access(blocks[i], False) == blocks[i]
            self.lib.hoff_torch_free(blocks[i], self.size, self.dev, None)
            self.live.remove(blocks[i])

    def free_leftovers(self):
        for p in self.live:
            self.lib.hoff_torch_free(p, self.size, self.dev, None)
        self.live = []


def session(dev, mb=4, planner=None):
    return hoff.OffloadSession(hoff.OffloadConfig(max_resident_activation_mb=mb, planner=planner), mode="allocator",
                               device=dev)


def test_warmup_then_replay(libhoff, dev):
    s = session(dev)
    step = Step(libhoff, dev)
    assert s.phase == "idle"
    with s:
        assert s.phase == "warmup" and s.in_step
        step(s)
    st = hoff.memory_stats(dev)
    assert st["source"] == "allocator" and st["backend"] in ("sim", "cuda")
    assert st["plans"] == 1 and st["steps"] == 1 and st["plan_actions"] > 0
    assert st["budget_bytes"] == 4 * MiB
    assert st["budget_evictions"] > 0  # the warmup kept 4 MiB by evicting online
    for i in range(2):
        with s:
            assert s.phase == "replay"
            step(s)
    st = hoff.memory_stats(dev)
    assert s.steps == 3 and s.aborted == 0
    assert st["steps"] == 3 and st["divergent_steps"] == 0 and st["replans"] == 0
    assert st["actions_fired"] == 2 * st["plan_actions"] and st["actions_skipped"] == 0
    assert st["peak_resident_bytes"] <= 4 * MiB


def test_exception_in_replay(libhoff, dev):
    # greedy prefetches at the use, so layer 0's backward still has planned
    # actions when layer 1's fails (timed may have issued them all earlier)
    s = session(dev, planner="greedy")
    step = Step(libhoff, dev)
    with s:
        step(s)
    with s:
        step(s)
    before = hoff.memory_stats(dev)
    with pytest.raises(ZeroDivisionError, match="layer 1's backward"):
        with s:
            step(s, fail_in_backward=1)
    after = hoff.memory_stats(dev)
    assert s.aborted == 1 and s.steps == 2 and not s.in_step
    # the step is over: nothing in flight, the rest of the plan counted as skipped
    ctx = s.targets[0].ctx
    for p in step.live:
        assert libhoff.hoff_residency(ctx, p) not in RES_IN_FLIGHT
    assert after["actions_skipped"] > before["actions_skipped"]
    assert (after["actions_fired"] + after["actions_skipped"]
            == before["actions_fired"] + before["actions_skipped"] + after["plan_actions"])
    assert after["steps"] == before["steps"]  # an abandoned step is not a completed one
    step.free_leftovers()  # the framework frees what the failed step left (outside any step)
    # the plan stays: the next step replays it
    with s:
        assert s.phase == "replay"
        step(s)
    st = hoff.memory_stats(dev)
    assert st["divergent_steps"] == 0 and st["plans"] == 1


def test_exception_in_warmup_records_again(libhoff, dev):
    s = session(dev)
    step = Step(libhoff, dev)
    with pytest.raises(ZeroDivisionError):
        with s:
            assert s.phase == "warmup"
            step(s, fail_in_backward=2)
    step.free_leftovers()
    assert hoff.memory_stats(dev)["plans"] == 0
    with s:
        assert s.phase == "warmup"  # the dropped recording is made again
        step(s)
    assert hoff.memory_stats(dev)["plans"] == 1
    with s:
        assert s.phase == "replay"
        step(s)


def test_sessions_do_not_nest(libhoff, dev):
    a, b = session(dev), session(dev)
    with a:
        with pytest.raises(RuntimeError, match="do not nest"):
            with b:
                pass
        assert a.in_step
    assert a.steps == 1


def test_budget_change_between_steps(libhoff, dev):
    step = Step(libhoff, dev)
    s = session(dev, mb=4)
    with s:
        step(s)
    s2 = session(dev, mb=6)  # a live budget change: the next step records and plans again
    with s2:
        assert s2.phase == "warmup"
        step(s2)
    st = hoff.memory_stats(dev)
    assert st["budget_bytes"] == 6 * MiB and st["plans"] == 2


def test_option_fixed_once_the_context_exists(libhoff, dev, tmp_path):
    s = session(dev)
    with s:
        pass
    bad = hoff.OffloadSession(hoff.OffloadConfig(spill_dir=str(tmp_path)), mode="allocator", device=dev)
    with pytest.raises(hoff.HoffError, match="cannot change once"):
        with bad:
            pass


def test_auto_session_without_targets_warns(monkeypatch):
    import hoff.session as hs
    monkeypatch.setattr(hs, "_warned_empty", False)
    s = hoff.OffloadSession()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with s:
            pass
    assert any("marks nothing" in str(x.message) for x in w)
    assert s.steps == 1


def test_memory_stats_without_allocator_or_recorder():
    with pytest.raises(RuntimeError, match="not PyTorch's allocator"):
        hoff.memory_stats(63)
