# __main__.py — the launcher: python -m hoff [options] script.py ARGS | -m module ARGS.  Installs hoff as the CUDA
# allocator before the script runs and marks steps by a convention, so a script runs under hoff unchanged.
# Threading: runs the script on the main thread; step marks come from whatever thread calls the marked function.
"""python -m hoff — run a training script under hoff with no change to it.

usage: python -m hoff [--step-mark SPEC] [--no-install] [--stats] [--] script.py [ARGS...]
       python -m hoff [options] -m module [ARGS...]
       python -m hoff --sim [--budget SIZE|PCT%] [--stats-json FILE] [options] script.py [ARGS...]
       python -m hoff --check [--json] [options] script.py [ARGS...]

Before the script runs, hoff becomes PyTorch's CUDA allocator (hoff.install()).
Steps are marked by the first of these that applies:

1. The script marks its own steps: it calls hoff.step() at the top of each
   iteration, or uses ``with hoff.OffloadSession():`` blocks.  Automatic
   marking then stands aside (a step it had opened is dropped).
2. --step-mark SPEC, or the variable HOFF_STEP_MARK:
   - ``optimizer`` (the default): every optimizer step ends a training step;
     the first optimizer step only starts step 0, so the first iteration, in
     which the optimizer creates its state, runs unmarked.
   - ``MODULE:QUALNAME`` (``mytrain.loop:train_step``, ``torch.optim.Adam.step``
     with a dot also works): every return from that function is a step
     boundary.  It must be importable before the script runs (the script's own
     functions are not: call hoff.step() there).
   - ``none``: no automatic marks (hoff is then a plain caching allocator
     unless the script marks steps).
The step still open when the script ends is ended (abandoned if it failed).

Options:
  --step-mark SPEC  as above (overrides HOFF_STEP_MARK)
  --no-install      do not install the allocator (marks only: for hoff-record
                    on a machine without CUDA, this is automatic)
  --stats           print hoff.memory_stats() as JSON on stderr at the end
                    (with "shim_hooks": the calls of PyTorch's allocator
                    hooks that reached hoff through its shim, and "op_marks":
                    the last step's, native or python, and their counts)
  --sim             what-if and verification mode, on CPU: the script's large
                    CPU storages become blocks of hoff's simulated device
                    (libhoff-sim.so is preloaded), evicted, prefetched and
                    paged in for real by hoff's whole pipeline (hoff(7))
  --budget B        with --sim: the budget, a size (512M) or a percentage of
                    the first step's activation peak (its offload bytes with
                    no offload, gradients not counted: recorded_peak_bytes;
                    50%; later steps re-plan under it)
  --stats-json FILE with --sim: write final statistics and per-step figures
                    as JSON ('-': stderr); %r in FILE is the rank (RANK), %p
                    the process id; under several ranks (WORLD_SIZE > 1) a
                    FILE with neither is an error
  --check           read the script (and the modules next to it that it
                    imports) without running it, and print one line per
                    PyTorch call or setting that meets hoff's allocator
                    (cuDNN benchmark, memory statistics, empty_cache,
                    record_stream, CUDA graphs, torch.compile modes, ...),
                    those a training library makes for the script too
                    (Lightning's Trainer(benchmark=True), torchtitan's
                    memory monitor), with what hoff does about it; no GPU
                    or torch needed, nothing installed; exit status 0
                    ('python -m hoff --check --help'; --table: the table)
  --json            with --check: a JSON list instead of lines
  -h, --help        this help

Under --sim the exit status is 3 when the script succeeded but hoff lost
bytes (a touch of a released block) or moved one inside its use window.

Without CUDA, and not under hoff-record, the launcher stops with the reason
(exit status 1).  The script's exit status is the launcher's.
"""

import importlib
import json
import os
import runpy
import sys

from . import _record, _sim, allocator, check, grads, opmarks, session, shim

USAGE = __doc__.split("\n\n", 1)[1].split("\n\n", 1)[0]


def _err(msg):
    sys.stderr.write("hoff: %s\n" % msg)


def _resolve(spec):
    """(owner, attribute name) for 'module:qual.name' or 'module.qual.name'."""
    if ":" in spec:
        modname, qual = spec.split(":", 1)
        mod = importlib.import_module(modname)
    else:
        parts = spec.split(".")
        mod = None
        for i in range(len(parts) - 1, 0, -1):
            try:
                mod = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            qual = ".".join(parts[i:])
            break
        if mod is None:
            raise ImportError("no importable module in %r" % spec)
    owner = mod
    names = qual.split(".")
    for n in names[:-1]:
        owner = getattr(owner, n)
    getattr(owner, names[-1])  # AttributeError if missing
    return owner, names[-1]


def _wrap(owner, name):
    raw = owner.__dict__.get(name, getattr(owner, name)) if hasattr(owner, "__dict__") else getattr(owner, name)
    kind = None
    if isinstance(raw, staticmethod):
        kind, fn = staticmethod, raw.__func__
    elif isinstance(raw, classmethod):
        kind, fn = classmethod, raw.__func__
    else:
        fn = raw

    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        session._implicit.boundary("auto")
        return out

    setattr(owner, name, kind(wrapper) if kind else wrapper)


def _install_optimizer_mark():
    """Every optimizer step is a step boundary (needs torch; a no-op without it)."""
    try:
        import torch.optim
        import torch.optim.optimizer as oo
    except ImportError:
        return "optimizer (torch not importable: no marks)"
    if hasattr(oo, "register_optimizer_step_post_hook"):  # PyTorch >= 2.0
        oo.register_optimizer_step_post_hook(lambda opt, args, kwargs: session._implicit.boundary("auto"))
        return "optimizer"
    # PyTorch 1.x calls Optimizer._optimizer_step_code after every step of any optimizer.
    orig = torch.optim.Optimizer._optimizer_step_code

    def _step_code(self):
        orig(self)
        session._implicit.boundary("auto")

    torch.optim.Optimizer._optimizer_step_code = _step_code
    return "optimizer"


def _setup_marks(spec):
    spec = (spec or "optimizer").strip()
    if spec.lower() == "none":
        session._implicit.auto_enabled = False
        return "none"
    if spec.lower() == "optimizer":
        return _install_optimizer_mark()
    try:
        owner, name = _resolve(spec)
    except (ImportError, AttributeError, ValueError) as e:
        raise SystemExit(_fail("HOFF_STEP_MARK=%s: cannot find it (%s); expected 'optimizer', 'none' or "
                               "MODULE:QUALNAME importable before the script runs" % (spec, e)))
    _wrap(owner, name)
    return spec


def _fail(msg):
    _err(msg)
    return 1


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if check.requested(argv):  # a preflight: reads the script, runs nothing
        return check.main(argv)
    step_mark = os.environ.get("HOFF_STEP_MARK")
    do_install = True
    stats = False
    module = None
    sim = False
    budget = None
    stats_json = None
    orig = list(argv)
    while argv:
        a = argv[0]
        if a in ("-h", "--help"):
            sys.stdout.write(__doc__)
            return 0
        if a == "--step-mark":
            if len(argv) < 2:
                _err("--step-mark needs a value (optimizer, none or MODULE:QUALNAME)")
                return 2
            step_mark = argv[1]
            argv = argv[2:]
        elif a.startswith("--step-mark="):
            step_mark = a.split("=", 1)[1]
            argv = argv[1:]
        elif a == "--no-install":
            do_install = False
            argv = argv[1:]
        elif a == "--stats":
            stats = True
            argv = argv[1:]
        elif a == "--sim":
            sim = True
            argv = argv[1:]
        elif a in ("--budget", "--stats-json") or a.startswith(("--budget=", "--stats-json=")):
            name, eq, val = a.partition("=")
            if not eq:
                if len(argv) < 2:
                    _err("%s needs a value" % name)
                    return 2
                val = argv[1]
                argv = argv[2:]
            else:
                argv = argv[1:]
            if name == "--budget":
                budget = val
            else:
                stats_json = val
        elif a == "-m":
            if len(argv) < 2:
                _err("-m needs a module name")
                return 2
            module = argv[1]
            argv = argv[2:]
            break
        elif a == "--":
            argv = argv[1:]
            break
        elif a.startswith("-"):
            _err("unknown option %r (see 'python -m hoff --help')" % a)
            return 2
        else:
            break
    if module is None and not argv:
        _err("no script to run\n" + USAGE)
        return 2
    if (budget is not None or stats_json is not None) and not sim:
        _err("--budget and --stats-json belong to --sim (see 'python -m hoff --help')")
        return 2
    if sim:
        try:
            if budget is not None:
                _sim.parse_budget(budget)
            _sim.check_stats_path(stats_json)
            if not _sim.launched():
                _sim.reexec(orig)  # with the preload; returns only on failure
        except ValueError as e:
            _err(str(e))
            return 2
        except (_sim.SimError, OSError) as e:
            return _fail("--sim: %s" % e)
        do_install = False

    if module is None:
        script = argv[0]
        if not os.path.exists(script):
            return _fail("%s: no such file" % script)
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    else:
        sys.argv = [module] + argv
        sys.path.insert(0, os.getcwd())

    if sim:
        try:
            _sim.arm(budget)
        except (_sim.SimError, ValueError, RuntimeError) as e:
            return _fail("--sim: %s" % e)
    if do_install:
        try:
            allocator.install()
        except RuntimeError as e:
            if _record.active() and "CUDA is not available" in str(e):
                _err("CUDA is not available: running without hoff's allocator; the step marks go to "
                     "hoff-record (CPU recording mode)")
            else:
                return _fail(str(e))
    grads.install()  # before the script builds its optimizers: their gradients are watched from the start
    _setup_marks(step_mark)

    failed = False
    code = 0
    try:
        if module is None:
            runpy.run_path(argv[0], run_name="__main__")
        else:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code
        failed = code not in (None, 0)
    except BaseException:
        session._implicit.close(failed=True)
        if sim:  # the figures of the steps that ran, for the post-mortem
            _sim.report(stats_json, 1)
        raise
    session._implicit.close(failed=failed)
    if sim:
        integrity = _sim.report(stats_json, code if isinstance(code, int) or code is None else 1)
        if not integrity["ok"]:
            _err("--sim: integrity failure: %d touches of released blocks, %d moves inside use windows, %d CRC "
                 "errors (see hoff(7))" % (integrity["discard_touches"], integrity["window_violations"],
                                            integrity["crc_errors"]))
            if code in (None, 0):
                code = 3
    if stats:
        try:
            d = allocator.memory_stats()
            if shim.loaded() is not None:  # the calls of PyTorch's hooks that reached hoff (hoff.shim)
                d["shim_hooks"] = shim.hook_counts()
            m = opmarks.last_marks()  # the last step's op marks: which ran, and what they counted
            if m is not None:
                d["op_marks"] = {"impl": "native" if getattr(m, "native", False) else "python",
                                 "ops": int(m.ops), "accesses": int(m.accesses),
                                 "compiled_region_aten_ops": int(getattr(m, "compiled_ops", 0)),
                                 "unwrapped_compiled_frames": int(getattr(m, "unwrapped_compiled", 0))}
            sys.stderr.write("hoff: stats: %s\n" % json.dumps(d, sort_keys=True))
        except RuntimeError as e:
            _err("no stats: %s" % e)
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write("%s\n" % code)
    return 1


if __name__ == "__main__":
    sys.exit(main())
