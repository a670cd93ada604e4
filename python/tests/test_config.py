# test_config.py — OffloadConfig: defaults, the options it maps to, and every invalid value rejected with a
# message that says what is accepted.  Threading: single-threaded.
import dataclasses

import pytest

import hoff
from hoff import OffloadConfig


def test_defaults_set_nothing():
    c = OffloadConfig()
    assert c.options() == {}
    assert c.access_marks is True


def test_options_map_to_hoff_names(tmp_path):
    c = OffloadConfig(max_resident_activation_mb=1024, max_offload_activation_mb=1.5, planner="greedy",
                      spill_dir=str(tmp_path), numa="0,2", access_marks=False)
    assert c.options() == {"budget": str(1 << 30), "host_cap": str(3 << 19), "planner": "greedy",
                           "spill_dir": str(tmp_path), "numa": "0,2"}
    assert OffloadConfig(numa=[1, 0]).options()["numa"] == "1,0"
    assert OffloadConfig(numa="Interleave").options()["numa"] == "interleave"
    assert OffloadConfig(max_resident_activation_mb=0).options()["budget"] == "0"


def test_frozen():
    c = OffloadConfig(max_resident_activation_mb=8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.max_resident_activation_mb = 16
    assert c == OffloadConfig(max_resident_activation_mb=8)
    assert hash(c) == hash(OffloadConfig(max_resident_activation_mb=8))


@pytest.mark.parametrize("field", ["max_resident_activation_mb", "max_offload_activation_mb"])
@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), "1G", True, 2 ** 31, None.__class__])
def test_sizes_rejected(field, value):
    with pytest.raises(ValueError) as e:
        OffloadConfig(**{field: value})
    msg = str(e.value)
    assert field in msg and "expected a number of MiB" in msg and "0 (no limit)" in msg


@pytest.mark.parametrize("value", ["", "no such", "x" * 16, 3, object()])
def test_planner_rejected(value):
    with pytest.raises(ValueError) as e:
        OffloadConfig(planner=value)
    assert "planner" in str(e.value) and "greedy" in str(e.value)


def test_unknown_planner_lists_planners(libhoff):
    with pytest.raises(ValueError) as e:
        OffloadConfig(planner="nosuch")
    assert "greedy" in str(e.value) and "nosuch" in str(e.value)


@pytest.mark.parametrize("value", ["", "nearby", "0,,1", "1,1", "1024", "-1", [], [0, 0], [True], 3.5, "0, 2"])
def test_numa_rejected(value):
    with pytest.raises(ValueError) as e:
        OffloadConfig(numa=value)
    assert "nearest" in str(e.value) and "interleave" in str(e.value)


def test_spill_dir(tmp_path):
    with pytest.raises(ValueError, match="not an existing directory"):
        OffloadConfig(spill_dir=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="empty string"):
        OffloadConfig(spill_dir="")
    with pytest.raises(ValueError, match="at most 255 bytes"):
        OffloadConfig(spill_dir="/" + "d" * 300)
    with pytest.raises(ValueError, match="directory path"):
        OffloadConfig(spill_dir=5)
    assert OffloadConfig(spill_dir=tmp_path).spill_dir == str(tmp_path)


def test_access_marks_must_be_bool():
    with pytest.raises(ValueError, match="True or False"):
        OffloadConfig(access_marks=1)


def test_session_checks_its_arguments():
    with pytest.raises(TypeError):
        hoff.OffloadSession({"max_resident_activation_mb": 1})
    with pytest.raises(ValueError, match="'auto', 'allocator' or 'record'"):
        hoff.OffloadSession(mode="cuda")
