#!/usr/bin/env python3
# ab_train.py — the A/B PyTorch training check of the one GPU run: a deterministic small GPT (bf16, sequence 8192)
# trained 6 steps under PyTorch's default allocator, hoff (no budget, 50% and 25% of the default's activation
# peak, op marks on and off), save_on_cpu and checkpoint, each configuration in its own subprocess; losses and
# gradient hashes must be bitwise equal to the default's.  Writes one JSON (--out).  `--self-test` runs a tiny
# model on CPU (no hoff) and checks that the comparison itself works.  Threading: one main thread per process,
# plus the memory sampler thread in each child.
"""A/B training check: default allocator vs hoff vs save_on_cpu vs checkpoint.

    ab_train.py --out train.json [--time-limit S] [--hoff-library PATH]    (on a GPU)
    ab_train.py --self-test                                                 (CPU, tiny)

Each configuration runs in a fresh subprocess (a pluggable allocator can be
installed only before any CUDA allocation).  Per configuration: per-step loss
(exact, as float.hex), a per-step exact integer fingerprint of the gradients,
a SHA-256 over all gradient bytes of the last step, bitwise equality with the
default's, peak device memory sampled with torch.cuda.mem_get_info on a thread
and from hoff.memory_stats(), the median step time of steps 3-6, and hoff's
stall and fault counters.  Exit: 0 ok, 1 a failure or mismatch, 77 skipped
(no CUDA), 2 bad usage.
"""

import argparse
import ctypes
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.normpath(os.path.join(HERE, "..", "..", "python"))
MiB = 1 << 20

# name: (allocator, budget fraction of the default's activation peak or None, op_marks, activation strategy)
CONFIGS = {
    "default": ("torch", None, None, "plain"),
    "hoff_nobudget": ("hoff", None, True, "plain"),
    "hoff_50": ("hoff", 0.50, True, "plain"),
    "hoff_25": ("hoff", 0.25, True, "plain"),
    "save_on_cpu": ("torch", None, None, "save_on_cpu"),
    "checkpoint": ("torch", None, None, "checkpoint"),
    "hoff_nobudget_nomarks": ("hoff", None, False, "plain"),
    "hoff_50_nomarks": ("hoff", 0.50, False, "plain"),
    "hoff_25_nomarks": ("hoff", 0.25, False, "plain"),
}
# The default runs twice: if PyTorch itself is not bitwise reproducible here, no comparison means anything.
GPU_ORDER = ["default", "default_again"] + [n for n in CONFIGS if n != "default"]
ALIASES = {"default_again": "default"}
# The self-test: the default twice (determinism across processes), another seed (must differ), and the two
# activation strategies that need no GPU.
SELF_TEST = [("default", "default", 0), ("default_again", "default", 0), ("default_seed1", "default", 1),
             ("save_on_cpu", "save_on_cpu", 0), ("checkpoint", "checkpoint", 0)]

HOFF_KEYS = ("budget_bytes", "peak_resident_bytes", "step_peak_resident_bytes", "device_pool_bytes",
             "managed_pool_bytes", "peak_host_bytes", "evictions", "bytes_evicted", "prefetches",
             "bytes_prefetched", "discards", "faults", "bytes_faulted", "late_prefetches", "stall_ns",
             "budget_evictions", "budget_overruns", "oversub_refusals", "transfer_errors", "window_refusals",
             "window_violations", "plan_feasible", "plan_peak_bytes", "plan_stall_ns", "actions_fired",
             "actions_skipped", "divergent_steps", "replans", "steps", "alloc_failures")


def usage(msg):
    """Bad usage: say what was wrong and what is accepted, exit 2."""
    sys.stderr.write(msg.rstrip() + "\n")
    sys.exit(2)


def model_args(p):
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d-model", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))


def check_model_args(a):
    for name in ("layers", "d_model", "heads", "seq", "vocab", "steps"):
        if getattr(a, name) < 1:
            usage("ab_train.py: --%s: expected a whole number of at least 1, got %d"
                             % (name.replace("_", "-"), getattr(a, name)))
    if a.d_model % a.heads:
        usage("ab_train.py: --d-model %d is not a multiple of --heads %d" % (a.d_model, a.heads))
    if a.steps < 3:
        usage("ab_train.py: --steps: expected at least 3 (steps 3.. are timed), got %d" % a.steps)


def model_argv(a):
    return ["--layers", str(a.layers), "--d-model", str(a.d_model), "--heads", str(a.heads), "--seq", str(a.seq),
            "--vocab", str(a.vocab), "--steps", str(a.steps), "--device", a.device, "--dtype", a.dtype]


# --------------------------------------------------------------------------------------------------------------
# The child: one configuration, in its own process.
# --------------------------------------------------------------------------------------------------------------

def build_model(torch, a, dev, dtype):
    import torch.utils.checkpoint  # noqa: F401 - not imported by `import torch` on every version
    nn = torch.nn
    F = torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = a.d_model
            self.ln1 = nn.LayerNorm(d, device=dev, dtype=dtype)
            self.qkv = nn.Linear(d, 3 * d, device=dev, dtype=dtype)
            self.proj = nn.Linear(d, d, device=dev, dtype=dtype)
            self.ln2 = nn.LayerNorm(d, device=dev, dtype=dtype)
            self.fc1 = nn.Linear(d, 4 * d, device=dev, dtype=dtype)
            self.fc2 = nn.Linear(4 * d, d, device=dev, dtype=dtype)

        def attention(self, x, mask):
            t, d = x.shape
            h = a.heads
            q, k, v = self.qkv(x).view(t, 3, h, d // h).permute(1, 2, 0, 3).unbind(0)  # each (h, t, d/h)
            att = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
            att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = torch.matmul(att, v).transpose(0, 1).reshape(t, d)
            return self.proj(y)

        def forward(self, x, mask):
            x = x + self.attention(self.ln1(x), mask)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(a.vocab, a.d_model, device=dev, dtype=dtype)
            self.pos = nn.Embedding(a.seq, a.d_model, device=dev, dtype=dtype)
            self.blocks = nn.ModuleList([Block() for _ in range(a.layers)])
            self.ln = nn.LayerNorm(a.d_model, device=dev, dtype=dtype)
            self.head = nn.Linear(a.d_model, a.vocab, bias=False, device=dev, dtype=dtype)
            self.register_buffer("mask", torch.ones(a.seq, a.seq, dtype=torch.bool, device=dev).triu(1),
                                 persistent=False)
            self.checkpoint = False

        def forward(self, tokens):
            # The embedding as a one-hot matmul (cuBLAS, deterministic): embedding_dense_backward's sum over
            # repeated tokens may not be, and one nondeterministic op voids every bitwise comparison.
            onehot = F.one_hot(tokens, a.vocab).to(self.emb.weight.dtype)
            x = torch.matmul(onehot, self.emb.weight) + self.pos.weight
            for b in self.blocks:
                if self.checkpoint:
                    x = torch.utils.checkpoint.checkpoint(b, x, self.mask, use_reentrant=False)
                else:
                    x = b(x, self.mask)
            return self.head(self.ln(x))

    torch.manual_seed(a.seed)
    m = GPT()
    with torch.no_grad():
        for name, p in sorted(m.named_parameters()):
            if name.endswith(".bias"):
                p.zero_()
            elif ".ln" in name or name.startswith("ln."):
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02)
    return m


class Sampler:
    """Peak device memory in use (total - free), from torch.cuda.mem_get_info on a thread every INTERVAL s
    (as coarse as Python's thread switch interval: finer would only take the GIL from the training thread,
    whose op marks run in Python, and skew the step times it is compared by)."""

    INTERVAL = 0.005

    def __init__(self, torch, dev):
        self.torch, self.dev = torch, dev
        free, self.total = torch.cuda.mem_get_info(dev)
        self.baseline = self.total - free
        self.peak = self.baseline
        self.samples = 0
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._run, name="ab-mem-sampler", daemon=True)
        self._th.start()

    def _run(self):
        while not self._stop.is_set():
            free, total = self.torch.cuda.mem_get_info(self.dev)
            self.peak = max(self.peak, total - free)
            self.samples += 1
            self._stop.wait(self.INTERVAL)

    def stop(self):
        self._stop.set()
        self._th.join()


def xent(torch, logits, y, vocab):
    """Mean cross-entropy in float32 through a one-hot product: elementwise ops and plain reductions only
    (nll_loss's CUDA kernels and gather's backward are not deterministic everywhere)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    onehot = torch.nn.functional.one_hot(y, vocab).to(logp.dtype)
    return -(logp * onehot).sum() / y.numel()


def grad_bytes(torch, g):
    """The bytes of a gradient, as the device holds them."""
    c = g.detach().contiguous().cpu()
    return ctypes.string_at(c.data_ptr(), c.numel() * c.element_size())


def grad_fingerprint(torch, params):
    """An exact integer fingerprint of every gradient's bits (sum and sum of squares of the 16/32-bit words,
    in int64: exact, so deterministic on any reduction order)."""
    out = []
    for p in params:
        g = p.grad
        if g is None:
            out.append([0, 0, 0])
            continue
        w = g.detach().contiguous().view(torch.int16 if g.element_size() == 2 else torch.int32).to(torch.int64)
        out.append(torch.stack([w.sum(), (w * w).sum(), (w * torch.arange(1, w.numel() + 1, device=w.device)
                                                           .view(w.shape) % 65521).sum()]))
    flat = [x if isinstance(x, list) else x.tolist() for x in out]
    return hashlib.sha256(json.dumps(flat).encode()).hexdigest()[:32]


def child(a):
    """Run one configuration; write its result JSON to a.result (rewritten after every step)."""
    res = {"config": a.child, "status": "running", "steps_done": 0, "losses": [], "loss_hex": [],
           "grad_fingerprints": [], "step_s": [], "warnings": []}

    def save():
        tmp = a.result + ".tmp"
        with open(tmp, "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
        os.replace(tmp, a.result)

    seen_warnings = set()

    def on_warning(message, category, filename, lineno, file=None, line=None):
        text = "%s: %s" % (category.__name__, str(message)[:300])
        if text not in seen_warnings and len(seen_warnings) < 12:
            seen_warnings.add(text)
            res["warnings"].append(text)

    warnings.showwarning = on_warning
    warnings.simplefilter("always")
    alloc, _frac, op_marks, strategy = CONFIGS[a.base]
    t_start = time.monotonic()
    try:
        hoff = None
        if alloc == "hoff":
            if PYDIR not in sys.path:
                sys.path.insert(0, PYDIR)
            import hoff
            cfg = hoff.OffloadConfig(max_resident_activation_mb=a.budget_mb or 0, op_marks=op_marks)
            res["hoff_library"] = hoff.install(cfg)  # before any CUDA allocation
            res["budget_mb"] = a.budget_mb or 0
        import torch
        res["torch"] = torch.__version__
        dev = torch.device(a.device)
        if dev.type == "cuda" and dev.index is None:
            # torch.cuda.set_device and friends want an index: HOFF_DEVICE's, as test_cuda and probes use.
            dev = torch.device("cuda", int(os.environ.get("HOFF_DEVICE", "0") or 0))
        dtype = getattr(torch, a.dtype)
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        cuda = dev.type == "cuda"
        sampler = None
        if cuda:
            torch.cuda.set_device(dev)
            res["device"] = torch.cuda.get_device_name(dev)
            sampler = Sampler(torch, dev)
        m = build_model(torch, a, dev, dtype)
        m.checkpoint = strategy == "checkpoint"
        params = [p for _, p in sorted(m.named_parameters())]
        res["params"] = sum(p.numel() for p in params)
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.1)
        gen = torch.Generator().manual_seed(a.seed + 7)
        data = [torch.randint(0, a.vocab, (a.seq + 1,), generator=gen) for _ in range(a.steps)]
        session = hoff.OffloadSession(cfg) if hoff else None
        torch_peaks = []

        def sync():
            if cuda:
                torch.cuda.synchronize(dev)

        for step in range(a.steps):
            tokens = data[step].to(dev)
            x, y = tokens[:-1], tokens[1:]
            if cuda and alloc == "torch":
                torch.cuda.reset_peak_memory_stats(dev)
                at_start = torch.cuda.memory_allocated(dev)
            sync()
            t0 = time.monotonic()
            if session is not None:
                ctx = session
            elif strategy == "save_on_cpu":
                ctx = torch.autograd.graph.save_on_cpu(pin_memory=cuda)
            else:
                ctx = _Null()
            fp_s = 0.0
            with ctx:
                logits = m(x)
                loss = xent(torch, logits, y, a.vocab)
                del logits
                loss.backward()
                # The hashes are not part of the step: timed apart, and kept out of hoff's offload.
                sync()
                f0 = time.monotonic()
                with (hoff.skip_offload() if hoff else _Null()):
                    res["grad_fingerprints"].append(grad_fingerprint(torch, params))
                    if step == a.steps - 1:
                        h = hashlib.sha256()
                        for p in params:
                            if p.grad is not None:
                                h.update(grad_bytes(torch, p.grad))
                        res["grad_sha256"] = h.hexdigest()
                sync()
                fp_s = time.monotonic() - f0
                opt.step()
                opt.zero_grad(set_to_none=True)
            sync()
            res["step_s"].append(time.monotonic() - t0 - fp_s)
            if cuda and alloc == "torch":
                torch_peaks.append(torch.cuda.max_memory_allocated(dev) - at_start)
            lv = loss.item()
            res["losses"].append(lv)
            res["loss_hex"].append(float(lv).hex())
            res["steps_done"] = step + 1
            if hoff is not None:
                st = hoff.memory_stats()
                res.setdefault("hoff_per_step", []).append({k: st.get(k) for k in
                                                            ("faults", "stall_ns", "late_prefetches",
                                                             "step_peak_resident_bytes", "evictions",
                                                             "prefetches", "budget_overruns")})
            if sampler is not None:
                res["peak_used_bytes"] = sampler.peak
            save()
        if torch_peaks:
            res["torch_step_peak_bytes"] = torch_peaks
            # The activation peak: the most any step after the first (which also creates the optimizer's
            # state) allocated above what was allocated at its start.
            res["activation_peak_bytes"] = max(torch_peaks[1:] or torch_peaks)
        if sampler is not None:
            sampler.stop()
            res["peak_used_bytes"] = sampler.peak
            res["baseline_used_bytes"] = sampler.baseline
            res["peak_over_baseline_bytes"] = sampler.peak - sampler.baseline
            res["mem_samples"] = sampler.samples
            res["mem_sample_interval_s"] = Sampler.INTERVAL
        if hoff is not None:
            st = hoff.memory_stats()
            res["hoff"] = {k: st.get(k) for k in HOFF_KEYS}
            res["hoff_stats"] = st
        res["final_loss"] = res["losses"][-1]
        res["median_step_s"] = statistics.median(res["step_s"][2:])
        res["status"] = "ok"
    except BaseException as e:  # noqa: BLE001 - everything goes into the JSON
        res["status"] = "failed"
        res["error"] = "%s: %s" % (type(e).__name__, e)
        res["traceback"] = traceback.format_exc()[-4000:]
    res["wall_s"] = time.monotonic() - t_start
    save()
    return 0 if res["status"] == "ok" else 1


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# --------------------------------------------------------------------------------------------------------------
# The parent: every configuration in its own subprocess, then the comparison.
# --------------------------------------------------------------------------------------------------------------

def run_child(a, name, base, seed, budget_mb, timeout, env):
    fd, path = tempfile.mkstemp(prefix="ab-%s." % name, suffix=".json")
    os.close(fd)
    os.unlink(path)
    argv = [sys.executable, os.path.abspath(__file__), "--child", name, "--base", base, "--result", path,
            "--seed", str(seed)] + model_argv(a)
    if budget_mb is not None:
        argv += ["--budget-mb", "%.3f" % budget_mb]
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        rc, out, timed_out = p.returncode, p.stdout, False
    except subprocess.TimeoutExpired as e:
        rc, out, timed_out = None, e.stdout or b"", True
    res = None
    try:
        with open(path) as f:
            res = json.load(f)
    except (OSError, ValueError):
        pass
    finally:
        for q in (path, path + ".tmp"):
            if os.path.exists(q):
                os.unlink(q)
    if res is None:
        res = {"config": name, "status": "failed", "error": "the subprocess wrote no result"}
    if timed_out:
        res["status"] = "timeout"
        res["error"] = "no result after %.0f s (killed); the steps done before are kept" % timeout
    elif rc != 0 and res.get("status") == "ok":
        res["status"] = "failed"
        res["error"] = "the subprocess exited %s after an ok result" % rc
    elif rc != 0 and "error" not in res:
        res["status"] = "failed"
        res["error"] = "the subprocess exited %s (killed by a signal if negative)" % rc
    res["exit"] = rc
    res["subprocess_s"] = round(time.monotonic() - t0, 3)
    text = out.decode(errors="replace")
    if res["status"] != "ok" and text:
        res["output_tail"] = text[-3000:]
    return res


def compare(ref, res):
    """Bitwise equality of res with the reference: losses, per-step gradient fingerprints, last gradients."""
    if not ref or ref.get("status") != "ok" or res.get("status") != "ok":
        return None
    losses = res["loss_hex"] == ref["loss_hex"]
    fps = res["grad_fingerprints"] == ref["grad_fingerprints"]
    grads = res.get("grad_sha256") is not None and res.get("grad_sha256") == ref.get("grad_sha256")
    first = None
    for i, (x, y) in enumerate(zip(res["loss_hex"], ref["loss_hex"])):
        if x != y:
            first = i + 1
            break
    return {"losses": losses, "grad_fingerprints": fps, "grads": grads, "bitwise": losses and fps and grads,
            "first_loss_mismatch_step": first}


def write(path, doc):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def probe_torch():
    """(torch version, cuda available, device name, why not) without touching CUDA's allocator."""
    try:
        import torch
    except ImportError as e:
        return None, False, None, "import torch failed: %s" % e
    if getattr(torch.version, "cuda", None) is None:
        return torch.__version__, False, None, "PyTorch %s is built without CUDA" % torch.__version__
    if not torch.cuda.is_available():
        return torch.__version__, False, None, "PyTorch %s sees no CUDA device" % torch.__version__
    return torch.__version__, True, None, ""


def parent(a):
    t_start = time.monotonic()
    deadline = t_start + a.time_limit
    doc = {"status": "running", "reason": "", "python": sys.version.split()[0], "model": {
        "layers": a.layers, "d_model": a.d_model, "heads": a.heads, "seq": a.seq, "vocab": a.vocab,
        "batch": 1, "steps": a.steps, "dtype": a.dtype, "device": a.device, "optimizer": "AdamW",
        "attention": "explicit softmax(QK^T) with a causal mask"}, "reference": "default", "configs": {}}
    tv, ok, _, why = probe_torch()
    doc["torch"] = tv
    if a.self_test:
        plan = SELF_TEST
        if tv is None:
            doc["status"] = "skipped"
            doc["reason"] = why
            write(a.out, doc)
            print("ab_train: self-test skipped: %s" % why)
            return 77
    else:
        plan = [(n, ALIASES.get(n, n), 0) for n in (a.configs.split(",") if a.configs else GPU_ORDER)]
        for n, _, _ in plan:
            if n not in CONFIGS and n not in ALIASES:
                usage("ab_train.py: --configs: unknown configuration %r (known: %s)"
                                 % (n, ", ".join(GPU_ORDER)))
        if plan[0][0] != "default":
            plan.insert(0, ("default", "default", 0))
        if not ok or a.device != "cuda":
            doc["status"] = "skipped"
            doc["reason"] = why or "--device %s: the A/B check needs CUDA (--self-test runs on CPU)" % a.device
            write(a.out, doc)
            print("ab_train: skipped: %s" % doc["reason"])
            return 77
    env = dict(os.environ)
    env.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    env["PYTHONHASHSEED"] = "0"
    if a.hoff_library:
        env["HOFF_LIBRARY"] = a.hoff_library
    write(a.out, doc)
    ref = None
    for i, (name, base, seed_off) in enumerate(plan):
        left = deadline - time.monotonic()
        remaining = len(plan) - i
        if left < 15:
            doc["configs"][name] = {"config": name, "status": "skipped",
                                    "reason": "the time limit (%d s) was spent before it" % a.time_limit}
            continue
        # An equal share of what is left, but up to 2.5 shares for the first ones (a slow start is normal).
        timeout = min(left, max(left / remaining * 2.5, 20)) if remaining > 1 else left
        frac = CONFIGS[base][1]
        budget_mb = None
        if frac is not None:
            peak = (ref or {}).get("activation_peak_bytes")
            if not peak:
                doc["configs"][name] = {"config": name, "status": "skipped",
                                        "reason": "no activation peak from the default run to size the budget"}
                write(a.out, doc)
                continue
            budget_mb = max(frac * peak / MiB, 2.0)
        print("ab_train: %s (timeout %.0f s)%s" % (name, timeout,
                                                  " budget %.0f MiB" % budget_mb if budget_mb else ""), flush=True)
        res = run_child(a, name, base, a.seed + seed_off, budget_mb, timeout, env)
        if budget_mb is not None:
            res["budget_fraction"] = frac
        if name == "default":
            ref = res
        else:
            res["equal_to_default"] = compare(ref, res)
        doc["configs"][name] = res
        eq = res.get("equal_to_default")
        print("ab_train: %s: %s%s%s" % (name, res["status"],
                                         "" if res["status"] == "ok" else " (%s)" % res.get("error", ""),
                                         "" if eq is None else ", bitwise equal to default: %s" % eq["bitwise"]),
              flush=True)
        write(a.out, doc)
    doc["summary"] = summarize(doc, plan)
    doc["wall_s"] = round(time.monotonic() - t_start, 3)
    problems = verdict(doc, a.self_test)
    doc["status"] = "failed" if problems else "ok"
    doc["reason"] = "; ".join(problems)
    write(a.out, doc)
    for row in doc["summary"]:
        print("ab_train: %-22s %-8s bitwise=%-5s peak=%s step=%s stall=%s faults=%s" % (
            row["config"], row["status"], row["bitwise_equal"], row["peak_used_gib"], row["median_step_s"],
            row["hoff_stall_s"], row["hoff_faults"]))
    print("ab_train: %s%s" % (doc["status"], (": " + doc["reason"]) if doc["reason"] else ""))
    return 1 if problems else 0


def summarize(doc, plan):
    rows = []
    for name, _, _ in plan:
        r = doc["configs"].get(name, {})
        eq = r.get("equal_to_default")
        h = r.get("hoff") or {}
        rows.append({
            "config": name, "status": r.get("status"),
            "bitwise_equal": (True if name == "default" and r.get("status") == "ok" else
                              (eq or {}).get("bitwise")),
            "final_loss": r.get("final_loss"),
            "peak_used_gib": round(r["peak_used_bytes"] / (1 << 30), 3) if r.get("peak_used_bytes") else None,
            "hoff_peak_resident_gib": (round(h["peak_resident_bytes"] / (1 << 30), 3)
                                       if h.get("peak_resident_bytes") is not None else None),
            "median_step_s": round(r["median_step_s"], 4) if r.get("median_step_s") is not None else None,
            "hoff_stall_s": round(h["stall_ns"] / 1e9, 4) if h.get("stall_ns") is not None else None,
            "hoff_faults": h.get("faults"),
        })
    return rows


def verdict(doc, self_test):
    """What makes the check fail: the default failing, or (GPU) any hoff configuration failing or differing,
    or (self-test) the default not reproducing itself or not telling another seed apart."""
    c = doc["configs"]
    problems = []
    if c.get("default", {}).get("status") != "ok":
        return ["the default configuration did not run: %s" % c.get("default", {}).get("error", "?")]
    if self_test:
        for name, want in (("default_again", True), ("default_seed1", False), ("save_on_cpu", None),
                           ("checkpoint", None)):
            r = c.get(name, {})
            if r.get("status") != "ok":
                problems.append("%s did not run: %s" % (name, r.get("error", r.get("reason", "?"))))
                continue
            eq = r["equal_to_default"]["bitwise"]
            if want is not None and eq != want:
                problems.append("%s is %sbitwise equal to the default" % (name, "not " if want else ""))
        return problems
    again = c.get("default_again")
    if again is not None:
        if again.get("status") != "ok":
            problems.append("default_again did not run (%s): PyTorch's own reproducibility is unknown"
                            % again.get("error", again.get("reason", "?")))
        elif not again["equal_to_default"]["bitwise"]:
            problems.append("the default is not bitwise reproducible across processes here (%s): the "
                            "comparisons below say nothing about hoff" % again["equal_to_default"])
    for name, r in c.items():
        if not name.startswith("hoff"):
            continue
        if r.get("status") != "ok":
            problems.append("%s: %s (%s)" % (name, r.get("status"), r.get("error", r.get("reason", ""))))
        elif not (r.get("equal_to_default") or {}).get("bitwise"):
            problems.append("%s differs from the default (%s)" % (name, r.get("equal_to_default")))
    return problems


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="the JSON result file")
    p.add_argument("--time-limit", type=float, default=420, help="seconds for all configurations (default 420)")
    p.add_argument("--hoff-library", help="libhoff.so to use (sets HOFF_LIBRARY for the hoff configurations)")
    p.add_argument("--configs", help="comma-separated configurations (default: all: %s)" % ",".join(GPU_ORDER))
    p.add_argument("--self-test", action="store_true", help="tiny model on CPU: default twice, another seed, "
                   "save_on_cpu, checkpoint; checks the comparison itself")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--base", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--budget-mb", type=float, help=argparse.SUPPRESS)
    model_args(p)
    a = p.parse_args(argv)
    if a.self_test:
        # Tiny, and on the CPU; still bf16 (the GPU run's dtype) where this PyTorch has it on the CPU.
        a.layers, a.d_model, a.heads, a.seq, a.vocab, a.device = 2, 64, 4, 128, 256, "cpu"
    check_model_args(a)
    if a.time_limit <= 0:
        usage("ab_train.py: --time-limit: expected seconds above 0, got %s" % a.time_limit)
    if a.child:
        if a.base not in CONFIGS or not a.result:
            usage("ab_train.py: --child needs --base (one of %s) and --result" % ", ".join(CONFIGS))
        return child(a)
    return parent(a)


if __name__ == "__main__":
    sys.exit(main())
