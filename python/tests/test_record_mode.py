# test_record_mode.py — CPU recording mode: OffloadSession, skip_offload and hoff.mark drive hoff-record's
# recorder the way they drive hoff's allocator; a step that fails while it is recorded is replaced by the next.
# Threading: single-threaded; every case is a child process under hoff-record.
import json
import sys

from conftest import read_trace, run

CHILD = r"""
import json, torch, hoff
out = {"phases": []}
s = hoff.OffloadSession(hoff.OffloadConfig(op_marks=False))  # auto: the recorder; only the user's op marks
out["targets"] = [t.kind for t in s.targets]
w = torch.randn(512, 512, requires_grad=True)
for i in range(4):
    try:
        with s:
            out["phases"].append(s.phase)
            x = torch.randn(512, 512)                       # 1 MiB
            h = hoff.mark(x @ w, "L0")                      # op marks L0.fwd / L0.bwd
            with hoff.skip_offload(name="opaque"):
                with hoff.skip_offload():
                    p = h.relu()                            # pinned
                q = p * 2                                   # pinned (outer region)
            loss = q.sum()
            if i == 1:
                raise RuntimeError("step 1 fails")
            loss.backward()
    except RuntimeError as e:
        out["error"] = str(e)
out["steps"], out["aborted"] = s.steps, s.aborted
out["stats"] = hoff.record_stats()
print(json.dumps(out))
"""


def test_session_regions_and_abort_under_hoff_record(hoff_record, torch, tmp_path):
    trace = tmp_path / "rec.trace.gz"
    r = run([hoff_record, "-o", str(trace), "--step", "1", "--", sys.executable, "-c", CHILD])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["targets"] == ["record"]
    assert out["error"] == "step 1 fails" and out["steps"] == 3 and out["aborted"] == 1
    assert out["phases"] == ["warmup", "replay", "replay", "replay"]
    # step 1 failed while it was recorded: the recorder took step 2 instead
    assert "aborted while being recorded; recording step 2 instead" in r.stderr
    assert "step 2 recorded" in r.stderr
    st = out["stats"]
    assert st["written"] == 1 and st["steps_begun"] == 4 and st["steps_ended"] == 4
    lines = read_trace(str(trace))
    names = {ln[1]: ln[2] for ln in lines if ln[0] == "name"}
    ev = [ln for ln in lines if ln[0] in ("a", "rb", "re", "o", "r", "f")]
    ops = [names[e[1]] for e in ev if e[0] == "o"]
    assert ops == ["L0.fwd", "opaque", "L0.bwd"]
    shape = [e[0] + ("p" if e[0] == "a" and e[-1] == "p" else "") for e in ev if e[0] in ("a", "rb", "re")]
    # x, x@w, then rb rb relu(pinned) re, q (pinned) re, and backward's allocations after
    assert shape[:8] == ["a", "a", "rb", "rb", "ap", "re", "ap", "re"]
    assert all(s in ("a", "ap") for s in shape[8:]) and "ap" not in shape[8:]
