# test_launcher.py — python -m hoff: it runs a script unchanged with its arguments and exit status, marks steps
# by the optimizer convention, by HOFF_STEP_MARK=MODULE:QUALNAME or by the script's own hoff.step(), and stops
# with a clear error without CUDA.  Runs the scripts under hoff-record (CPU recording mode) to see the marks.
# Threading: single-threaded; every case is a child process.
import json
import os
import sys
import textwrap

import subprocess

import pytest

from conftest import child_env, read_trace, run

TOY = textwrap.dedent(r"""
    import json, os, sys
    import torch, hoff
    assert sys.argv[1:] == ["--foo", "bar"], sys.argv
    import toylib
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(4):
        if os.environ.get("TOY_CALLS_STEP"):
            hoff.step()
        toylib.train_step(model, opt, torch.randn(512, 256))
    print(json.dumps(hoff.record_stats()))
    sys.exit(int(os.environ.get("TOY_EXIT", "0")))
""")

TOYLIB = textwrap.dedent(r"""
    def train_step(model, opt, x):
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
""")


@pytest.fixture
def toy(tmp_path):
    (tmp_path / "toy.py").write_text(TOY)
    (tmp_path / "toylib.py").write_text(TOYLIB)
    return tmp_path


def launch(hoff_record, toy, *opts, record=True, **env):
    trace = toy / "toy.trace"
    cmd = [sys.executable, "-m", "hoff"] + list(opts) + [str(toy / "toy.py"), "--foo", "bar"]
    if record:
        cmd = [hoff_record, "-o", str(trace), "--threshold", "256K", "--"] + cmd
    r = run(cmd, **env)
    stats = None
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            stats = json.loads(line)
    return r, stats, trace


def allocs(trace):
    return [ln for ln in read_trace(str(trace)) if ln[0] == "a"]


def test_help_and_usage():
    r = run([sys.executable, "-m", "hoff", "--help"])
    assert r.returncode == 0 and "HOFF_STEP_MARK" in r.stdout and "optimizer" in r.stdout
    r = run([sys.executable, "-m", "hoff"])
    assert r.returncode == 2 and "no script" in r.stderr
    r = run([sys.executable, "-m", "hoff", "--bogus", "x.py"])
    assert r.returncode == 2 and "unknown option" in r.stderr


def test_no_cuda_is_a_clear_error(torch, toy):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r, _, _ = launch(None, toy, record=False)
    assert r.returncode == 1
    assert "CUDA is not available" in r.stderr and "Traceback" not in r.stderr


def test_optimizer_convention(hoff_record, torch, toy):
    r, st, trace = launch(hoff_record, toy)
    assert r.returncode == 0, r.stderr
    assert "CPU recording mode" in r.stderr
    # four optimizer steps: the first opens step 0, each later one ends a step and opens the next
    assert st["steps_begun"] == 4 and st["steps_ended"] == 3
    assert "step 1 recorded" in r.stderr
    a = allocs(trace)
    assert len(a) >= 4  # the iteration's activations and gradients of >= 256 KiB


def test_step_mark_function(hoff_record, torch, toy):
    r, st, trace = launch(hoff_record, toy, HOFF_STEP_MARK="toylib:train_step")
    assert r.returncode == 0, r.stderr
    assert st["steps_begun"] == 4 and st["steps_ended"] == 3
    r2, st2, _ = launch(hoff_record, toy, "--step-mark", "toylib.train_step")
    assert r2.returncode == 0, r2.stderr
    assert st2["steps_begun"] == 4


def test_script_calls_hoff_step(hoff_record, torch, toy):
    r, st, trace = launch(hoff_record, toy, TOY_CALLS_STEP=1)
    assert r.returncode == 0, r.stderr
    # hoff.step() at the top of each iteration: the automatic convention stands aside
    assert st["steps_begun"] == 4 and st["steps_ended"] == 3
    a = allocs(trace)
    assert a and all(ln[3] == "1" for ln in a)


def test_no_marks_records_the_whole_run(hoff_record, torch, toy):
    r, st, trace = launch(hoff_record, toy, "--step-mark", "none")
    assert r.returncode == 0, r.stderr
    assert st["steps_begun"] == 0 and "whole run recorded" in r.stderr
    assert os.path.exists(trace)


def test_exit_status_and_bad_mark(hoff_record, torch, toy):
    r, _, _ = launch(hoff_record, toy, TOY_EXIT=3)
    assert r.returncode == 3
    r, _, _ = launch(hoff_record, toy, HOFF_STEP_MARK="nosuch_module_xyz:thing")
    assert r.returncode == 1 and "HOFF_STEP_MARK=nosuch_module_xyz:thing" in r.stderr


def test_module_form(hoff_record, torch, toy):
    (toy / "toymod.py").write_text(TOY)
    trace = toy / "mod.trace"
    r = run(["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", str(toy), hoff_record, "-o", str(trace),
             "--threshold", "256K", "--", sys.executable, "-m", "hoff", "-m", "toymod", "--foo", "bar"])
    assert r.returncode == 0, r.stderr
    st = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1])
    assert st["steps_begun"] == 4


def test_relative_tool_paths(hoff_record, torch, tmp_path):
    """TEST_HOFF_RECORD and TEST_HOFF_BUILDDIR relative to the directory pytest starts in: test_module_form, which
    runs hoff-record from another directory, still finds it (a child pytest started elsewhere)."""
    start = tmp_path / "start"
    start.mkdir()
    rel = os.path.relpath(hoff_record, start)
    assert not os.path.isabs(rel)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--basetemp", str(tmp_path / "child"), os.path.abspath(__file__) + "::test_module_form"],
                       cwd=str(start), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       env=child_env(TEST_HOFF_RECORD=rel, TEST_HOFF_BUILDDIR=os.path.dirname(rel),
                                     TEST_HOFF_REQUIRE=1, PYTHONDONTWRITEBYTECODE=1), check=False)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout
