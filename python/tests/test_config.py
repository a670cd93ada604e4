# test_config.py — OffloadConfig: defaults, the options it maps to, and every invalid value rejected with a
# message that says what is accepted.  Threading: single-threaded.
import ctypes
import dataclasses

import pytest

import hoff
from hoff import OffloadConfig


def test_defaults_set_nothing():
    c = OffloadConfig()
    assert c.options() == {}
    assert c.access_marks is True


def test_options_map_to_hoff_names(tmp_path, libhoff):
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
@pytest.mark.parametrize("value", [float("nan"), float("inf"), "1G", True, None.__class__])
def test_sizes_rejected_by_type(field, value):
    with pytest.raises(ValueError) as e:
        OffloadConfig(**{field: value})
    msg = str(e.value)
    assert field in msg and "expected a number of MiB" in msg and "0 (no limit)" in msg


OPTION = {"max_resident_activation_mb": "budget", "max_offload_activation_mb": "host_cap"}


@pytest.mark.parametrize("field", ["max_resident_activation_mb", "max_offload_activation_mb"])
@pytest.mark.parametrize("value", [-1, 2 ** 31, -0.5])
def test_sizes_rejected_by_hoff(libhoff, field, value):
    """The range is hoff's (hoff_config_check): the message is the library's, for the bytes hoff would get."""
    with pytest.raises(ValueError) as e:
        OffloadConfig(**{field: value})
    msg = str(e.value)
    n = int(round(value * (1 << 20)))
    assert msg.startswith("%s: %r MiB is %d bytes: " % (field, value, n)), msg
    assert msg.endswith(hoff_message(libhoff, OPTION[field], str(n))), msg


def hoff_message(lib, option, text):
    err = ctypes.create_string_buffer(1024)
    assert lib.hoff_config_check(option.encode(), text.encode(), None, 0, err, len(err)) != 0
    return err.value.decode()


def test_sizes_within_hoff_range(libhoff):
    assert OffloadConfig(max_offload_activation_mb=1 << 30).options()["host_cap"] == str(1 << 50)
    assert OffloadConfig(max_resident_activation_mb=0.25).options()["budget"] == str(1 << 18)


@pytest.mark.parametrize("value", [3, object(), b"greedy"])
def test_planner_rejected_by_type(value):
    with pytest.raises(ValueError) as e:
        OffloadConfig(planner=value)
    assert "planner" in str(e.value) and "greedy" in str(e.value)


@pytest.mark.parametrize("value", ["", "no such", "x" * 16, "nosuch"])
def test_planner_rejected_by_hoff(libhoff, value):
    with pytest.raises(ValueError) as e:
        OffloadConfig(planner=value)
    assert str(e.value) == "planner: " + hoff_message(libhoff, "planner", value)
    assert "greedy" in str(e.value)


def test_planner_as_hoff_spells_it(libhoff):
    assert OffloadConfig(planner=" GREEDY ").planner == "greedy"


@pytest.mark.parametrize("value", ["", "nearby", "0,,1", "1,1", "1024", "-1", "0, 2", "inter\0leave"])
def test_numa_rejected_by_hoff(libhoff, value):
    with pytest.raises(ValueError) as e:
        OffloadConfig(numa=value)
    msg = str(e.value)
    if "\0" in value:
        assert "NUL" in msg
    else:
        assert msg == "numa: " + hoff_message(libhoff, "numa", value)
        assert "nearest" in msg and "interleave" in msg


@pytest.mark.parametrize("value", [[], [0, 0], [1024], [-1]])
def test_numa_list_rejected_by_hoff(libhoff, value):
    with pytest.raises(ValueError) as e:
        OffloadConfig(numa=value)
    text = ",".join(str(n) for n in value)
    assert str(e.value) == "numa: %r is %r: %s" % (value, text, hoff_message(libhoff, "numa", text))


@pytest.mark.parametrize("value", [[True], 3.5, ["0"], {0: 1}])
def test_numa_rejected_by_type(value):
    with pytest.raises(ValueError) as e:
        OffloadConfig(numa=value)
    assert "nearest" in str(e.value) and "interleave" in str(e.value)


def test_messages_name_the_fault(libhoff):
    """What the library says, which the package used to flatten into one generic message."""
    with pytest.raises(ValueError, match="node 1 is listed twice"):
        OffloadConfig(numa="0,1,1")
    with pytest.raises(ValueError, match="node 4096 is out of range"):
        OffloadConfig(numa=[0, 4096])


def test_without_libhoff_values_wait_for_hoff(monkeypatch):
    """Without libhoff the package has no rule of its own: the value is kept, for hoff_torch_configure to check."""
    from hoff import _lib
    monkeypatch.setattr(_lib, "available", lambda: False)
    c = OffloadConfig(numa="1,1", planner="nosuch", max_resident_activation_mb=2 ** 40)
    assert c.options() == {"numa": "1,1", "planner": "nosuch", "budget": str(1 << 60)}
    with pytest.raises(ValueError, match="expected a number of MiB"):
        OffloadConfig(max_resident_activation_mb=float("nan"))


def test_spill_dir(tmp_path, libhoff):
    with pytest.raises(ValueError, match="not an existing directory"):
        OffloadConfig(spill_dir=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="empty string"):
        OffloadConfig(spill_dir="")
    with pytest.raises(ValueError, match="too long .301 characters, the limit is 255"):
        OffloadConfig(spill_dir="/" + "d" * 300)
    with pytest.raises(ValueError, match="directory path"):
        OffloadConfig(spill_dir=5)
    assert OffloadConfig(spill_dir=tmp_path).spill_dir == str(tmp_path)
    assert OffloadConfig(spill_dir=" %s " % tmp_path).spill_dir == str(tmp_path)  # hoff trims blanks


def test_access_marks_must_be_bool():
    with pytest.raises(ValueError, match="True or False"):
        OffloadConfig(access_marks=1)


def test_session_checks_its_arguments():
    with pytest.raises(TypeError):
        hoff.OffloadSession({"max_resident_activation_mb": 1})
    with pytest.raises(ValueError, match="'auto', 'allocator' or 'record'"):
        hoff.OffloadSession(mode="cuda")
