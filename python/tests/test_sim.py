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
