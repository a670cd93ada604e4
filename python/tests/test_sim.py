# test_sim.py — the --sim launcher's option handling (hoff._sim): budgets, per-rank statistics names, and the usage
# errors of python -m hoff --sim.  The training runs themselves are tests/sim.sh and tests/sim_train.sh (make check).
# Threading: pytest's, one process (children for the launcher).
import os
import sys

import pytest

from conftest import run

from hoff import _sim


def test_parse_budget(libhoff):
    assert _sim.parse_budget("50%") == ("pct", 0.5)
    assert _sim.parse_budget("none") == ("none", None)
    assert _sim.parse_budget("512M") == ("bytes", "512M")
    for bad in ("0%", "150%", "x%", "lots", ""):
        with pytest.raises(ValueError):
            _sim.parse_budget(bad)


def test_stats_names(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    assert _sim.expand_path("s.%r.%%.json") == "s.3.%.json"
    assert _sim.expand_path("s.%p") == "s.%d" % os.getpid()
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="put %r"):
        _sim.check_stats_path("stats.json")
    _sim.check_stats_path("stats.%r.json")
    _sim.check_stats_path("-")
    monkeypatch.setenv("WORLD_SIZE", "1")
    _sim.check_stats_path("stats.json")


def test_usage_errors(libhoff):
    r = run([sys.executable, "-m", "hoff", "--budget", "1G", "x.py"])
    assert r.returncode == 2 and "belong to --sim" in r.stderr
    r = run([sys.executable, "-m", "hoff", "--sim", "--budget", "200%", "x.py"])
    assert r.returncode == 2 and "(0, 100]" in r.stderr
    r = run([sys.executable, "-m", "hoff", "--sim", "--stats-json"])
    assert r.returncode == 2 and "needs a value" in r.stderr


def test_save_on_cpu_next_to_a_session_warns_once_each(libhoff, torch):
    import warnings
    import hoff
    from hoff import hooks
    hooks._warned.clear()
    w = torch.nn.Linear(256, 256)
    s = hoff.OffloadSession(mode="allocator")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        for _ in range(2):
            with s:
                with torch.autograd.graph.save_on_cpu():
                    w(torch.randn(8, 256)).sum().backward()
        for _ in range(2):
            with torch.autograd.graph.save_on_cpu():
                with s:
                    w(torch.randn(8, 256)).sum().backward()
    msgs = [str(x.message) for x in got if "saved_tensors_hooks" in str(x.message)]
    assert len(msgs) == 2, msgs
    assert "access marks are off" in msgs[0] and "those are off" in msgs[1]
