# _sim.py — `python -m hoff --sim`: CPU PyTorch on hoff's whole pipeline over the sim backend (libhoff-sim.so
# preloaded: large CPU storages are managed blocks, faults on them paged in), with per-step figures and the JSON
# report.  Threading: steps are marked from one thread at a time (the session's); the figures list has a lock.
"""The sim launcher mode (hoff(7), "What-if and verification on CPU").

The launcher re-executes the interpreter with ``libhoff-sim.so`` in
``LD_PRELOAD`` (an allocator can only be interposed from the start), then
arms it on the sim context of device 0 before the script runs.  Every
session target is then a :class:`SimTarget`: the allocator target of that
context, which records, for every step, its phase and figures; the sim's
virtual clock advances by the CPU time between op marks (hoff_sim_wallclock,
whoever marks: the Python mode or the shim's native marks).
"""

import ctypes
import json
import os
import sys
import threading

from . import _lib, _targets, compiled, opmarks

CHILD_ENV = "HOFF_SIM_LAUNCHED"
PRELOAD = "libhoff-sim.so"

_lock = threading.Lock()
_state = None  # the _State of an armed process


class SimError(RuntimeError):
    """--sim cannot run: the message says why and what to do."""


def parse_budget(text):
    """('pct', fraction) for 'N%', ('bytes', text) for a size hoff accepts; ValueError otherwise."""
    t = (text or "").strip()
    if t.endswith("%"):
        try:
            f = float(t[:-1])
        except ValueError:
            f = -1.0
        if not 0 < f <= 100:
            raise ValueError("--budget %s: a percentage must be in (0, 100]%%, e.g. 50%%" % text)
        return ("pct", f / 100.0)
    if t.lower() == "none":
        return ("none", None)
    err = ctypes.create_string_buffer(512)
    if _lib.load().hoff_torch_config_check(b"budget", t.encode(), err, len(err)) != 0:
        raise ValueError("--budget %s: %s; expected a size (512M, 2G, bytes), a percentage of the first "
                         "step's peak (50%%) or none" % (text, err.value.decode(errors="replace")))
    return ("bytes", t)


def ranks():
    """The world size torchrun (or another launcher of ranks) set, 1 without one."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def check_stats_path(path):
    """A --stats-json name that ranks would share is an error (ValueError) saying how to name one per rank."""
    if path and path != "-" and ranks() > 1 and "%r" not in path and "%p" not in path:
        raise ValueError("--stats-json %s: the %d ranks of this job would all write that one file; put %%r "
                         "(the rank) or %%p (the process id) in its name, e.g. stats.%%r.json" % (path, ranks()))


def expand_path(path):
    """%r -> the rank (RANK, 0 without one), %p -> the process id, %% -> %."""
    out, i = [], 0
    while i < len(path):
        c = path[i]
        if c == "%" and i + 1 < len(path) and path[i + 1] in "rp%":
            n = path[i + 1]
            out.append(os.environ.get("RANK", "0") if n == "r" else str(os.getpid()) if n == "p" else "%")
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def preload_path():
    """libhoff-sim.so beside the libhoff.so the package loads (a build tree's .libs, PREFIX/lib/hoff, or the
    pip-built package's hoff/_native, whose libhoff-sim.so finds its libhoff.so.0 there by its $ORIGIN rpath)."""
    env = os.environ.get("HOFF_SIM_PRELOAD")
    if env:
        if not os.path.exists(env):
            raise SimError("HOFF_SIM_PRELOAD=%s: no such file" % env)
        return env
    d = os.path.dirname(os.path.abspath(_lib.path()))
    tried = []
    for cand in (os.path.join(d, PRELOAD), os.path.join(d, "hoff", PRELOAD)):
        if os.path.exists(cand):
            return cand
        tried.append(cand)
    raise SimError("cannot find %s (looked at %s); build hoff ('make'), or set HOFF_SIM_PRELOAD to its path"
                   % (PRELOAD, ", ".join(tried)))


def reexec(argv):
    """Run this launcher again with the preload in place (does not return on success)."""
    env = dict(os.environ)
    pre = preload_path()
    env["LD_PRELOAD"] = pre + ((" " + env["LD_PRELOAD"]) if env.get("LD_PRELOAD") else "")
    env["HOFF_LIBRARY"] = os.path.abspath(_lib.path())  # the library the preload links: one context
    env[CHILD_ENV] = "1"
    env.setdefault("HOFF_BACKEND", "sim")
    env.setdefault("HOFF_SIM_PROTECT", "protect")
    # A verification run replays from the step after the recorded one, every time: plan at the recorded
    # step's end (the planning thread would let a short run end before its plan is used).
    env.setdefault("HOFF_PLAN_THREAD", "0")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "hoff"] + list(argv), env)


def launched():
    return os.environ.get(CHILD_ENV) == "1"


class _State:
    def __init__(self, budget):
        self.budget = budget      # ('none'|'bytes'|'pct', value)
        self.steps = []           # per-step figures
        self.open = None          # the figures of the step in progress
        self.before = None        # the stats at its begin
        self.pct_set = False
        self.compile_calls = 0    # torch.compile calls of the script (their code runs eagerly in hoff's steps)


# Counters reported per step as the difference over the step.
_DELTAS = ("bytes_evicted", "bytes_prefetched", "evictions", "prefetches", "discards", "faults",
           "bytes_faulted", "touch_faults", "discard_touches", "window_violations", "stall_ns",
           "budget_overruns", "actions_fired", "actions_skipped", "transfer_errors", "crc_errors")


def _preload():
    try:
        proc = ctypes.CDLL(None)
        arm = proc.hoff_simload_arm
    except (OSError, AttributeError):
        return None
    arm.argtypes = [ctypes.c_void_p]
    arm.restype = ctypes.c_int
    proc.hoff_simload_stats_json.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    proc.hoff_simload_stats_json.restype = ctypes.c_int
    return proc


def arm(budget_text):
    """In the re-executed process: configure the sim context, arm the preload, route sessions to SimTarget."""
    global _state
    budget = parse_budget(budget_text) if budget_text else ("none", None)
    proc = _preload()
    if proc is None:
        raise SimError("%s is not preloaded in this process (run 'python -m hoff --sim ...', which sets "
                       "LD_PRELOAD)" % PRELOAD)
    tg = _targets.AllocatorTarget(0)
    if budget[0] == "bytes":
        tg.configure({"budget": budget[1]})
    lib = _lib.load()
    backend = lib.hoff_backend_name(tg.ctx)
    if not backend or backend.decode() != "sim":
        raise SimError("the context runs on the %s backend; --sim needs HOFF_BACKEND=sim"
                       % (backend.decode() if backend else "no"))
    if lib.hoff_sim_wallclock(tg.ctx, 1) != 0:  # every op mark, Python's or the shim's, advances the clock
        raise SimError("cannot run the sim's clock on the CPU's: %s" % _lib.last_error())
    if proc.hoff_simload_arm(tg.ctx) != 0:
        raise SimError("cannot arm %s (see above)" % PRELOAD)
    with _lock:
        _state = _State(budget)
    _targets.set_sim(SimTarget)
    _watch_compile()
    return tg


COMPILE_WARNING = ("torch.compile under --sim: hoff's op marks run in Python here (%s), and TorchDynamo does not "
                   "run compiled frames under them: inside hoff's steps the compiled code runs eagerly; code outside "
                   "the steps, such as the first iteration before the first optimizer step, runs compiled (counted "
                   "in the report's degradations.torch_compile_calls)")


def _watch_compile():
    """Make each call of what torch.compile returns a hoff region (hoff.compiled); count the torch.compile calls
    and, when the op marks run in Python (no shim), say once that compiled code runs eagerly in the steps."""
    try:
        import torch
    except ImportError:
        return
    compiled.install(torch)
    orig = getattr(torch, "compile", None)
    if orig is None or getattr(orig, "_hoff_sim", False):
        return

    import functools

    @functools.wraps(orig)
    def compile_(*args, **kwargs):
        with _lock:
            _state.compile_calls += 1
            first = _state.compile_calls == 1
        if first and opmarks.native_lib() is None:
            sys.stderr.write("hoff: warning: %s\n" % (COMPILE_WARNING % opmarks.native_why()))
        return orig(*args, **kwargs)

    compile_._hoff_sim = True
    torch.compile = compile_


class SimTarget(_targets.AllocatorTarget):
    """The allocator target of the sim context, with the virtual clock and per-step figures."""

    def step_begin(self):
        super().step_begin()
        st = _state
        s = self.stats()
        with _lock:
            st.before = s
            st.open = {"step": len(st.steps), "phase": _targets.PLAN_STATES.get(int(s.get("plan_state", 0)))}

    def _close(self, how):
        st = _state
        s = self.stats()
        with _lock:
            rec, st.open = st.open, None
            if rec is None:
                return
            b = st.before or {}
            rec["end"] = how
            rec["budget_bytes"] = int(s.get("budget_bytes", 0))
            rec["peak_resident_bytes"] = int(s.get("step_peak_resident_bytes", 0))
            rec["plan_feasible"] = int(s.get("plan_feasible", 0))
            rec["plan_floor_bytes"] = int(s.get("plan_floor_bytes", 0))
            rec["plan_floor_phase"] = int(s.get("plan_floor_phase", 0))
            rec["recorded_peak_bytes"] = int(s.get("recorded_peak_bytes", 0))
            for k in _DELTAS:
                rec[k] = int(s.get(k, 0)) - int(b.get(k, 0))
            rec["wall_ns"] = int(s.get("last_step_ns", 0))
            marks = opmarks.last_marks()  # this step's (the session ends its marks before its targets' step)
            if marks is not None:
                rec["op_marks"] = int(marks.ops)
                rec["access_marks"] = int(marks.accesses)
                rec["compiled_region_aten_ops"] = int(getattr(marks, "compiled_ops", 0))
                rec["unwrapped_compiled_frames"] = int(getattr(marks, "unwrapped_compiled", 0))
            st.steps.append(rec)
            set_pct = st.budget[0] == "pct" and not st.pct_set and how == "end"
            if set_pct:
                st.pct_set = True
                # The activations' peak: the recorded step's, without the blocks it learnt were gradients
                # (hoff.grads keeps them; the warmup counted them until then); else the step's resident peak.
                peak = rec["recorded_peak_bytes"] or rec["peak_resident_bytes"]
        if set_pct:
            # A percentage of the first step's peak; the next step records and plans again under it.
            want = max(int(peak * st.budget[1]), 1)
            self.configure({"budget": str(want)})

    def step_end(self):
        super().step_end()
        self._close("end")

    def step_abort(self):
        super().step_abort()
        self._close("abort")


def _marks_figures():
    """Which op marks ran (each step's counts are in its figures), and why they ran in Python if they did."""
    ops = opmarks.last_marks()
    d = {"impl": "none" if ops is None else "native" if getattr(ops, "native", False) else "python"}
    if opmarks.native_why():
        d["python_because"] = opmarks.native_why()
    return d


def report(path, script_status):
    """Write the JSON report (final stats, per-step figures, integrity) to path ('-': stderr); returns the
    integrity verdict (True when nothing was lost or moved inside a window)."""
    st = _state
    tg = _targets.AllocatorTarget(0)
    final = tg.stats()
    proc = _preload()
    layer = {}
    if proc is not None:
        buf = ctypes.create_string_buffer(512)
        proc.hoff_simload_stats_json(buf, len(buf))
        layer = json.loads(buf.value.decode())
    integrity = {k: int(final.get(k, 0)) for k in ("window_violations", "discard_touches", "crc_errors",
                                                   "transfer_errors")}
    integrity["ok"] = integrity["window_violations"] == 0 and integrity["discard_touches"] == 0 and \
        integrity["crc_errors"] == 0
    doc = {"mode": "sim", "budget": {"asked": None if st.budget[0] == "none" else
                                     ("%g%%" % (st.budget[1] * 100) if st.budget[0] == "pct" else st.budget[1]),
                                     "bytes": int(final.get("budget_bytes", 0))},
           "script_status": script_status, "integrity": integrity, "preload": layer,
           "steps": list(st.steps), "final": final, "floor": tg.floor(),
           "degradations": {"torch_compile_calls": st.compile_calls,
                            "unwrapped_compiled_frames": sum(s.get("unwrapped_compiled_frames", 0)
                                                             for s in st.steps)},
           "marks": _marks_figures(), "compiled_regions": compiled.figures()}
    floor = doc["floor"]
    if floor.get("bytes"):
        # Where the working-set floor comes from, in one line: a budget below it cannot be met by any plan.
        act = next((s.get("recorded_peak_bytes", 0) for s in st.steps if s.get("recorded_peak_bytes")), 0)
        share = " (%.0f%% of the activation peak %.1f MiB)" % (100.0 * floor["bytes"] / act, act / 2**20) if act else ""
        sys.stderr.write("hoff: --sim: working-set floor %.1f MiB%s: %d blocks in use at once in %s, %s phase; %s\n"
                         % (floor["bytes"] / 2**20, share, floor.get("blocks", 0), floor.get("op"),
                            floor.get("phase"), floor.get("advice") or "no plan goes below it"))
    doc["rank"] = int(os.environ["RANK"]) if os.environ.get("RANK", "").isdigit() else None
    doc["pid"] = os.getpid()
    text = json.dumps(doc, indent=1, sort_keys=True)
    if path:
        path = path if path == "-" else expand_path(path)
        if path == "-":
            sys.stderr.write(text + "\n")
        else:
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                f.write(text + "\n")
            os.replace(tmp, path)
    return integrity
