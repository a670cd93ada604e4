# common.py — the training loop the bench models share: a few steps of forward, backward and an optimizer step,
# each one hoff step (OffloadSession), on CPU; under hoff-record the second step becomes a trace.
# Threading: single-threaded (PyTorch on CPU as Debian builds it runs one thread).
"""Shared training loop for bench/models/*.py."""

import argparse
import contextlib
import json
import os
import sys
import time

import torch

try:
    import hoff
except ImportError:  # run from a source tree without 'pip install ./python'
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import hoff


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--steps", type=int, default=3, help="training steps (default 3; hoff-record records step 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-access-marks", action="store_true", help="no saved_tensors_hooks access marks")
    p.add_argument("--no-op-marks", action="store_true", help="no per-aten-op boundaries (OffloadConfig.op_marks)")
    p.add_argument("--no-session", action="store_true", help="no OffloadSession at all (plain PyTorch)")
    p.add_argument("--session-mode", default="auto", choices=("auto", "allocator", "record"),
                   help="the OffloadSession's mode (bench/marks.py uses 'allocator': hoff's sim context on CPU)")
    p.add_argument("--json", action="store_true", help="end with one JSON line: per-step times and marks")
    p.add_argument("--compile", default="none", choices=("none", "blocks", "whole"),
                   help="torch.compile (inductor) each block of the model's 'blocks' (as torchtitan does), or the "
                        "whole model (default none)")
    p.add_argument("--digest", metavar="FILE",
                   help="write SHA-256 digests of every step's loss and gradients and of the final parameters "
                        "(JSON), to compare runs bit for bit (tests/sim_train.sh)")
    return p


def _sha(tensors):
    """SHA-256 of the bytes of tensors, in order (None marks a missing one)."""
    import hashlib
    h = hashlib.sha256()
    for t in tensors:
        if t is None:
            h.update(b"none")
        else:
            h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def compile_model(model, how):
    """The model to call: itself, compiled whole, or with each module of its 'blocks' compiled."""
    if how == "whole":
        return torch.compile(model)
    if how == "blocks":
        blocks = getattr(model, "blocks", None)
        if not isinstance(blocks, torch.nn.ModuleList):
            sys.exit("--compile blocks: %s has no 'blocks' ModuleList" % type(model).__name__)
        for i in range(len(blocks)):
            blocks[i] = torch.compile(blocks[i])
    return model


def train(model, batch, loss_fn, args, lr=1e-3):
    """Run args.steps steps; each is one hoff step.  batch() gives (model inputs tuple, target);
    loss_fn(output, target) the loss."""
    torch.manual_seed(args.seed)
    run = compile_model(model, getattr(args, "compile", "none"))
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    nparams = sum(p.numel() for p in model.parameters())
    mode = "recording (hoff-record)" if hoff.recording() else ("hoff allocator" if hoff.is_installed() else "plain")
    print("%s: %.2f M parameters, %d steps, %s" % (model.__class__.__name__, nparams / 1e6, args.steps, mode),
          flush=True)
    session = hoff.OffloadSession(hoff.OffloadConfig(access_marks=not args.no_access_marks,
                                                     op_marks=not args.no_op_marks), mode=args.session_mode)
    times, cpu = [], []
    digest = {"loss": [], "grads": []}
    for i in range(args.steps):
        inputs, target = batch()
        t0, c0 = time.perf_counter(), time.process_time()
        with (contextlib.nullcontext() if args.no_session else session):
            opt.zero_grad(set_to_none=True)
            out = run(*inputs)
            loss = loss_fn(out, target)
            loss.backward()
            if args.digest:  # read while the step is open: blocks may be away (paged in on demand)
                digest["loss"].append(_sha([loss]))
                digest["grads"].append(_sha([q.grad for q in model.parameters()]))
            opt.step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        print("step %d (%s): loss %.4f, %.2f s" % (i, "no session" if args.no_session else session.phase,
                                                    loss.item(), times[-1]), flush=True)
    if session.last_hooks is not None:
        h = session.last_hooks
        print("access marks in the last step: %d packs, %d unpacks (%d of them of storages hoff does not track)"
              % (h.packed, h.unpacked, h.unmatched), flush=True)
    if args.digest:
        digest["params"] = _sha(list(model.parameters()))
        with open(args.digest, "w") as f:
            json.dump(digest, f, indent=1)
    if args.json:
        ops = session.last_ops
        print(json.dumps({"step_s": times, "cpu_s": cpu, "aten_ops": ops.ops if ops else None,
                          "op_accesses": ops.accesses if ops else None,
                          "marks": "native" if getattr(ops, "native", False) else "python" if ops else None}),
              flush=True)
