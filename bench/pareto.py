#!/usr/bin/env python3
"""pareto.py -- device memory saved against step-time cost: hoff's predicted plans and the peers' published points.

usage: bench/pareto.py [--hoff-plan PATH] [--svg FILE] [--results FILE] [--budgets 90,80,...] [--jobs N]
       bench/pareto.py --from FILE [--svg FILE]       (redraw from a results file; runs nothing)

For each shape it writes a synthetic trace (`hoff-plan synth --layers 4 --hidden 4096 --seq S --tflops T
--hbm-gbps G --input-reads`) and, for each budget (a share of the trace's activation peak), runs
`hoff-plan advise TRACE --budget P% --bandwidth B --json`.  From each advise object it takes three plans:
hoff offload-only, hoff combined (recompute advice + offload) and full activation checkpointing, and prints
one JSON row per (shape, budget, plan) on stdout: the memory the plan saves (x) and its step-time cost, the
predicted step over the no-offload step (y).  --svg draws them with the peers' published points (PEERS below,
each with its source); --results writes the rows, the peers and the assumptions as one JSON object.

Shapes:
- llama3-8b-fsdp8: torchtitan's Llama-3-8B setup (8 GPUs, FSDP2, local batch 1, seq 8192, bf16 compute, fp32
  master params, fp32 grads, AdamW).  The activations are a STAND-IN: hoff's synthetic GPT layer (h 4096, 4h MLP
  with GELU, MHA, flash attention), not Llama's SwiGLU (14336) / GQA layer; the 4-layer trace's per-layer figures
  are scaled to 32 layers (bytes x 8; the step-time ratios carry over, the pattern repeats per layer).  Memory
  saved is a share of the modelled per-GPU total peak: the parameter, gradient and AdamW shards of the real
  8.03 B parameters (16 bytes each / 8 GPUs), two layers of all-gathered bf16 parameters in flight, and the
  activation peak.  FSDP's communication is not modelled (the step is compute and the PCIe link only).
- gpt-h4096-s8K/32K/128K: bench/shapes's GPT shapes (4 layers); memory saved is a share of the activation peak.

The step times are hoff's PREDICTED replays (its model at the trace's op times and the link), not GPU
measurements; the peers' points are GPU measurements.  Standard library only.
"""
import argparse
import concurrent.futures
import json
import math
import os
import subprocess
import sys
import tempfile

# --- the H100 clock ---------------------------------------------------------------------------------------------
H100_BF16_DENSE_TFLOPS = 989.4  # H100 SXM5 bf16 dense tensor-core peak
DEFAULT_TFLOPS = 400.0  # the synth's compute rate: 40.4% MFU of the peak above
DEFAULT_HBM_GBPS = 3350.0  # H100 SXM5 HBM3
DEFAULT_LINK_GBPS = 50.0  # PCIe Gen5 x16 each way with both directions busy (shared/FACTS.md: 49-52 GB/s)
DEFAULT_BUDGETS = (90, 80, 75, 70, 60, 50, 40, 30, 25, 20)  # with bench/shapes' 75, 50 and 25
GiB = float(1 << 30)

# --- Llama-3-8B under FSDP2 on 8 GPUs, torchtitan's llama3_8b config ---------------------------------------------
LLAMA = {
    "dim": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 8, "ffn": 14336, "vocab": 128256,
    "gpus": 8, "seq": 8192, "local_batch": 1,
    # fp32 master params (4) + fp32 grads (4) + AdamW exp_avg and exp_avg_sq in fp32 (8)
    "state_bytes_per_param": 16,
    "gathered_layers": 2,  # the layer computing and the one FSDP2 prefetches, unsharded in bf16
    "gathered_bytes_per_param": 2,
}


def llama_params(c=LLAMA):
    h, kv = c["dim"], c["dim"] * c["n_kv_heads"] // c["n_heads"]
    layer = 2 * h * h + 2 * h * kv + 3 * h * c["ffn"] + 2 * h  # wq, wo, wk, wv, w1/w2/w3, two RMSNorms
    total = c["n_layers"] * layer + 2 * c["vocab"] * h + h  # + tok_embeddings, output (untied), final norm
    return layer, total


SHAPES = [
    # name, seq, kind
    ("llama3-8b-fsdp8", 8192, "llama"),
    ("gpt-h4096-s8K", 8192, "gpt"),
    ("gpt-h4096-s32K", 32768, "gpt"),
    ("gpt-h4096-s128K", 131072, "gpt"),
]
TRACE_LAYERS = 4
HIDDEN = 4096

# --- the peers' published points ---------------------------------------------------------------------------------
# Every number below is quoted from its source; step_cost_pct is derived from the quoted throughput change as
# TPS_before / TPS_after - 1 (a throughput cost c is a step-time cost of 1 / (1 - c) - 1).  "max" marks a bound
# ("<1%" overhead): the point is drawn at the bound with a downward tick.
TT3521 = ("https://github.com/pytorch/torchtitan/pull/3521 (ghstack; its commit "
          "080e6a2b3f118ce51289d691ed9f8cdcf04ad2f9 in pytorch/torchtitan, \"[graph_trainer] Add view replay and "
          "tuning for CPU activation offloading\", Michael Lazos, 2026-06-03, results in the commit message)")
TT3521_SHAPE = "Llama3 8B, dp_shard=8, tp=1, seq=8192, bs=1, 8xH100, with a pinned memory pool"
TT3521_WHAT = ("measured on GPUs (8xH100). graph_trainer's CPU activation offload pass: tensors chosen largest-first "
               "up to --compile.cpu_offload_budget_gb per rank, forward waits deferred by "
               "--compile.cpu_offload_defer_n_layers. The message gives 'Overhead' (the TPS cost) as a bound and "
               "'Mem Saved'; it does not name the baseline: the pass runs in the sac_and_offload memory policy "
               "(graph_trainer's default SAC, then offload), so the baseline is most likely the default SAC policy")
PEERS = [
    {"id": "torchtitan-3521-5GB", "label": "torchtitan offload, 5 GB", "short": "5 GB", "shape": TT3521_SHAPE,
     "saved_pct": 9.9, "tps_cost_pct_max": 1.0, "detail": "budget 5 GB, defer 8: overhead <1%, mem saved 9.9%",
     "source": TT3521, "what": TT3521_WHAT, "verified": True},
    {"id": "torchtitan-3521-8GB", "label": "torchtitan offload, 8 GB", "short": "8 GB", "shape": TT3521_SHAPE,
     "saved_pct": 16.6, "tps_cost_pct_max": 5.0, "detail": "budget 8 GB, defer 8: overhead <5%, mem saved 16.6%",
     "source": TT3521, "what": TT3521_WHAT, "verified": True},
    {"id": "torchtitan-3521-10GB", "label": "torchtitan offload, 10 GB", "short": "10 GB", "shape": TT3521_SHAPE,
     "saved_pct": 20.4, "tps_cost_pct_max": 7.0, "detail": "budget 10 GB, defer 8: overhead <7%, mem saved 20.4%",
     "source": TT3521, "what": TT3521_WHAT, "verified": True},
    {"id": "torchtitan-3521-100GB", "label": "torchtitan offload, 100 GB", "short": "100 GB", "shape": TT3521_SHAPE,
     "saved_pct": 33.4, "tps_cost_pct_max": 23.0,
     "detail": "budget 100 GB, defer 1: overhead <23%, mem saved 33.4%",
     "source": TT3521, "what": TT3521_WHAT, "verified": True},
    {"id": "torchtitan-3429-full-ac", "label": "torchtitan full AC", "short": "full AC", "saved_pct": 38.8,
     "tps_before": 7890, "tps_after": 7006,
     "shape": ("Llama3 8B, FSDP8 + TP1, 8xH100, 20 steps, c4_test; torchtitan's llama3_8b config at that commit: "
               "local batch 1, seq 8192"),
     "detail": ("graph_trainer --compile.memory_policy full against default: peak memory 52.44 -> 32.07 GiB "
                "(-38.8%), TPS (step 20) 7,890 -> 7,006 (-11.2%), MFU 46.20% -> 41.02%"),
     "source": ("https://github.com/pytorch/torchtitan/pull/3429 (merged as commit "
                "27aa49077c433f35be9d866f1908c12a1550a033, \"[graph_trainer] Add full recompute memory policy\")"),
     "what": ("measured on GPUs (8xH100). Full activation checkpointing (every op recomputed but layer boundaries, "
              "RNG and higher-order ops) against graph_trainer's `default` memory policy, which is selective AC "
              "(saves the compute-intensive ops), not no-AC"),
     "verified": True},
]

# Looked for and not drawn: no memory-saved / step-cost pair at a comparable shape.
NOT_DRAWN = [
    {"source": "https://github.com/pytorch/torchtitan/pull/3429 (FSDP4 + TP2 table)",
     "why": "same PR as the full-AC point, but TP2: a different per-GPU shape (full: -33.0% peak, -10.2% TPS)"},
    {"source": "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md",
     "why": "TPS and memory per configuration with selective or full AC, never both on the same configuration, "
            "so no AC trade-off can be read from it"},
    {"source": "https://github.com/pytorch/torchtitan/pull/4636 (auto_perf_maxing)",
     "why": "its table (full 68.56 GiB, 1,406 TPS; auto_perf_maxing +5.2-5.8% TPS over full) does not state the "
            "model and shape in the part found here, and its baseline is full AC"},
    {"source": "https://github.com/NVIDIA/Megatron-LM/pull/1752 (zero-overhead activation offload)",
     "why": "MoE model at dp4 ep4 pp2: 1.44 GB offloaded at about +0.3% iteration time, not a dense 8B shape"},
    {"source": "MEMO, SIGMOD 2025, https://arxiv.org/abs/2407.12117",
     "why": "reports MFU against Megatron-LM and DeepSpeed for a 7B model up to 1M tokens on 8 A800s, not memory "
            "saved against step time at a comparable shape"},
]


def peer_points():
    out = []
    for p in PEERS:
        q = dict(p)
        if "tps_cost_pct_max" in p:
            c = p["tps_cost_pct_max"] / 100.0
            q["step_cost_pct"] = round(100.0 * (1.0 / (1.0 - c) - 1.0), 2)
            q["bound"] = "max"
        else:
            q["step_cost_pct"] = round(100.0 * (p["tps_before"] / p["tps_after"] - 1.0), 2)
            q["bound"] = "exact"
        out.append(q)
    return out


# --- running hoff-plan -------------------------------------------------------------------------------------------
def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode != 0:
        sys.exit("pareto.py: %s: exit %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()[-2000:]))
    return p.stdout


def synth_cmd(a, seq, path):
    return [a.hoff_plan, "synth", "--layers", str(TRACE_LAYERS), "--hidden", str(HIDDEN), "--seq", str(seq),
            "--tflops", "%g" % a.tflops, "--hbm-gbps", "%g" % a.hbm_gbps, "--input-reads", "-o", path]


def advise_cmd(a, trace, pct):
    return [a.hoff_plan, "advise", trace, "--budget", "%d%%" % pct, "--bandwidth", "%g" % a.gbps, "--json"]


def advise(a, trace, pct):
    out = run(advise_cmd(a, trace, pct))
    try:
        return json.loads(out)
    except ValueError as e:
        sys.exit("pareto.py: advise %s %d%%: not one JSON object (%s): %r" % (trace, pct, e, out[:500]))


# --- rows --------------------------------------------------------------------------------------------------------
PLANS = ("offload_only", "combined", "full_checkpoint")


def llama_memory(act_peak_trace):
    """The modelled per-GPU memory of the Llama shape: states, gathered params, the activation peak x 32/4."""
    layer, total = llama_params()
    scale = LLAMA["n_layers"] / float(TRACE_LAYERS)
    states = total * LLAMA["state_bytes_per_param"] // LLAMA["gpus"]
    gathered = LLAMA["gathered_layers"] * layer * LLAMA["gathered_bytes_per_param"]
    act = int(act_peak_trace * scale)
    return {"params": total, "layer_params": layer, "scale": scale, "state_bytes": states,
            "gathered_bytes": gathered, "act_peak_bytes": act, "total_peak_bytes": states + gathered + act}


def rows_of(shape, kind, seq, pct, adv):
    """One row per plan of one advise object."""
    out = []
    peak = adv["peak_bytes"]
    base = adv["no_offload"]["step_ns"]
    mem = llama_memory(peak) if kind == "llama" else None
    scale = mem["scale"] if mem else 1.0
    denom = mem["total_peak_bytes"] if mem else peak
    for plan in PLANS:
        p = adv.get(plan)
        r = {"shape": shape, "hidden": HIDDEN, "seq": seq, "trace_layers": TRACE_LAYERS,
             "layers": LLAMA["n_layers"] if mem else TRACE_LAYERS, "budget_pct": pct,
             "budget_bytes": adv["budget_bytes"], "act_peak_trace_bytes": peak, "plan": plan,
             "chosen": adv.get("chosen") == plan, "no_offload_step_ns": base, "compute_ns": adv.get("compute_ns"),
             "bound_ns": adv.get("bound_ns"), "h2d_gbps": adv.get("h2d_gbps"), "d2h_gbps": adv.get("d2h_gbps"),
             "saved_of": "per-GPU total peak (modelled)" if mem else "activation peak", "denom_bytes": denom}
        if mem:
            r.update({"llama_" + k: v for k, v in mem.items()})
        if not p:
            r.update({"available": False, "feasible": False})
            out.append(r)
            continue
        # The plan's peak_bytes is the activation peak of the step as that plan runs it before any offload (the
        # trace's for offload-only, lower where ops are recomputed); a feasible plan keeps at most the budget
        # resident, so the device holds min(that peak, budget) at most.
        plan_peak = p.get("peak_bytes") or peak
        held = min(plan_peak, adv["budget_bytes"])
        saved = int((peak - held) * scale)
        r.update({"available": True, "feasible": bool(p.get("feasible")), "step_ns": p["step_ns"],
                  "stall_ns": p.get("stall_ns"), "recompute_ns": p.get("recompute_ns"),
                  "plan_peak_trace_bytes": plan_peak, "held_trace_bytes": held, "floor_bytes": p.get("floor_bytes"),
                  "bytes_d2h": p.get("bytes_d2h"), "saved_bytes": saved,
                  "saved_pct": round(100.0 * saved / denom, 3),
                  "step_cost_pct": round(100.0 * (p["step_ns"] / float(base) - 1.0), 3),
                  "bound_cost_pct": round(100.0 * (adv["bound_ns"] / float(base) - 1.0), 3)
                  if adv.get("bound_ns") else None, "units": p.get("units")})
        if plan == "combined":
            r["recompute_ops"] = len(adv.get("recompute") or [])
            r["recompute_bytes_trace"] = sum(x.get("bytes", 0) for x in adv.get("recompute") or [])
        out.append(r)
    return out


def collect(a):
    work = a.workdir or tempfile.mkdtemp(prefix="hoff-pareto-")
    os.makedirs(work, exist_ok=True)
    traces = {}
    for name, seq, kind in SHAPES:
        if a.shapes and name not in a.shapes:
            continue
        if seq not in traces:
            path = os.path.join(work, "synth-L%d-h%d-s%d.trace" % (TRACE_LAYERS, HIDDEN, seq))
            run(synth_cmd(a, seq, path))
            traces[seq] = path
    jobs = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as ex:
        for seq, path in traces.items():
            for pct in a.budgets:
                jobs[(seq, pct)] = ex.submit(advise, a, path, pct)
        adv = {k: f.result() for k, f in jobs.items()}
    rows = []
    for name, seq, kind in SHAPES:
        if seq not in traces or (a.shapes and name not in a.shapes):
            continue
        for pct in a.budgets:
            rows.extend(rows_of(name, kind, seq, pct, adv[(seq, pct)]))
    return rows, adv, traces


# --- the plot ----------------------------------------------------------------------------------------------------
PLAN_STYLE = {  # colour, marker, legend
    "offload_only": ("#1f77b4", "circle", "hoff offload-only (predicted)"),
    "combined": ("#d62728", "diamond", "hoff combined: recompute advice + offload (predicted)"),
    "full_checkpoint": ("#2ca02c", "triangle", "full activation checkpointing (hoff's model)"),
}
SHAPE_DASH = {"gpt-h4096-s8K": "", "gpt-h4096-s32K": ' stroke-dasharray="5,3"', "gpt-h4096-s128K":
              ' stroke-dasharray="1.5,2.5"'}


def nice_max(v, steps=(5, 10, 15, 20, 25, 30, 40, 50, 60, 80, 100)):
    for s in steps:
        if v <= s:
            return s
    return math.ceil(v / 50.0) * 50


def ticks(vmax):
    """Gridlines at 0..vmax: the smallest round step that gives at most 6 intervals."""
    for step in (1, 2, 2.5, 5, 10, 20, 25, 50, 100):
        n = vmax / step
        if n <= 6 and abs(n - round(n)) < 1e-9:
            return [step * i for i in range(int(round(n)) + 1)]
    return [vmax * i / 5.0 for i in range(6)]


def marker(kind, x, y, c, filled=True, r=4.5):
    fill = c if filled else "white"
    if kind == "circle":
        return '<circle cx="%.1f" cy="%.1f" r="%.1f" fill="%s" stroke="%s"/>' % (x, y, r, fill, c)
    if kind == "diamond":
        return ('<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s" stroke="%s"/>'
                % (x, y - r - 1, x + r + 1, y, x, y + r + 1, x - r - 1, y, fill, c))
    if kind == "triangle":
        return ('<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="%s" stroke="%s"/>'
                % (x, y - r - 1, x + r + 1, y + r, x - r - 1, y + r, fill, c))
    if kind == "star":
        pts = []
        for i in range(10):
            rr = (r + 2) if i % 2 == 0 else (r + 2) * 0.45
            ang = math.pi / 2 + i * math.pi / 5
            pts.append("%.1f,%.1f" % (x + rr * math.cos(ang), y - rr * math.sin(ang)))
        return '<polygon points="%s" fill="%s" stroke="#000"/>' % (" ".join(pts), fill)
    if kind == "cross":
        return ('<path d="M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f" stroke="%s" stroke-width="2.2"/>'
                % (x - r, y - r, x + r, y + r, x - r, y + r, x + r, y - r, c))
    raise ValueError(kind)


def panel(out, rows, peers, ox, oy, w, h, title, xlabel, by_shape):
    L, R, T, B = 62, 12, 26, 40
    pts = [r for r in rows if r.get("available") and r.get("feasible")]
    xmax = nice_max(max([r["saved_pct"] for r in pts] + [p["saved_pct"] for p in peers] + [1]) * 1.05)
    ymax = nice_max(max([r["step_cost_pct"] for r in pts] + [p["step_cost_pct"] for p in peers] + [1]) * 1.08)
    X = lambda v: ox + L + v / float(xmax) * (w - L - R)
    Y = lambda v: oy + T + (ymax - v) / float(ymax) * (h - T - B)
    out.append('<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>' % (ox + L, oy + 16, title))
    for xv in ticks(xmax):
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e4e4e4"/>' % (X(xv), oy + T, X(xv), oy + h - B))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%g%%</text>' % (X(xv), oy + h - B + 15, xv))
    for yv in ticks(ymax):
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e4e4e4"/>' % (ox + L, Y(yv), ox + w - R, Y(yv)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">+%g%%</text>' % (ox + L - 5, Y(yv) + 4, yv))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>'
               % (ox + L, oy + T, w - L - R, h - T - B))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % (ox + (L + w - R) // 2, oy + h - 8, xlabel))
    cy = oy + (T + h - B) // 2
    out.append('<text x="%d" y="%d" transform="rotate(-90 %d %d)" text-anchor="middle">step-time cost '
               '(over the no-offload step)</text>' % (ox + 13, cy, ox + 13, cy))
    groups = {}
    for r in pts:
        groups.setdefault((r["shape"], r["plan"]), []).append(r)
    for (shape, plan), rs in sorted(groups.items()):
        c, mk, _ = PLAN_STYLE[plan]
        rs = sorted(rs, key=lambda r: (r["saved_pct"], r["step_cost_pct"]))
        dash = SHAPE_DASH.get(shape, "") if by_shape else ""
        if len(rs) > 1:
            out.append('<polyline fill="none" stroke="%s" stroke-width="1.3"%s points="%s"/>'
                       % (c, dash, " ".join("%.1f,%.1f" % (X(r["saved_pct"]), Y(r["step_cost_pct"])) for r in rs)))
        seen = set()
        for r in rs:
            k = (round(r["saved_pct"], 1), round(r["step_cost_pct"], 1))
            if k in seen:
                continue
            seen.add(k)
            out.append(marker(mk, X(r["saved_pct"]), Y(r["step_cost_pct"]), c, filled=r.get("chosen", False)))
    for p in peers:
        x, y = X(p["saved_pct"]), Y(p["step_cost_pct"])
        if p["bound"] == "max":
            out.append('<path d="M%.1f %.1fL%.1f %.1f" stroke="#000" stroke-width="1.2" marker-end="url(#down)"/>'
                       % (x, y, x, y + 14))
            out.append(marker("star", x, y, "#f2c14e"))
        else:
            out.append(marker("cross", x, y, "#000"))
        out.append('<text x="%.1f" y="%.1f" font-size="10" text-anchor="end">%s</text>'
                   % (x - 8, y - 5, p.get("short", "")))
    return X, Y


def svg(rows, peers, meta):
    W, H, PH = 1080, 570, 420
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="11">' % (W, H), '<rect width="100%" height="100%" fill="white"/>',
           '<defs><marker id="down" viewBox="0 0 10 10" refX="5" refY="5" markerWidth="6" markerHeight="6" '
           'orient="auto"><path d="M0 0L10 5L0 10z" fill="#000"/></marker></defs>',
           '<text x="14" y="18" font-size="14">Device memory saved against step-time cost, H100 clock: '
           '%g TFLOP/s (%.1f%% MFU of %g bf16 dense), HBM %g GB/s, PCIe %g GB/s each way</text>'
           % (meta["tflops"], 100.0 * meta["tflops"] / H100_BF16_DENSE_TFLOPS, H100_BF16_DENSE_TFLOPS,
              meta["hbm_gbps"], meta["gbps"])]
    llama = [r for r in rows if r["shape"].startswith("llama")]
    gpt = [r for r in rows if r["shape"].startswith("gpt")]
    panel(out, llama, peers, 0, 28, 540, PH, "Llama-3-8B, FSDP2 on 8 GPUs, s 8192 (hoff: GPT stand-in layer)",
          "memory saved, % of the per-GPU total peak", False)
    panel(out, gpt, [], 550, 28, 520, PH, "GPT h 4096, 4 layers: s 8K solid, 32K dashed, 128K dotted",
          "memory saved, % of the activation peak", True)
    ly = 28 + PH + 16
    items = [(PLAN_STYLE[p][1], PLAN_STYLE[p][0], PLAN_STYLE[p][2]) for p in PLANS]
    for i, (mk, c, txt) in enumerate(items):
        out.append(marker(mk, 24, ly + 17 * i, c, filled=False))
        out.append('<text x="36" y="%d">%s</text>' % (ly + 17 * i + 4, txt))
    out.append('<text x="14" y="%d">one point per budget, 90..20%% of the activation peak; filled: advise\'s '
               'choice</text>' % (ly + 17 * 3 + 4))
    out.append('<text x="14" y="%d">(combined = offload-only where it recomputes nothing)</text>' % (ly + 17 * 4 + 4))
    out.append('<text x="14" y="%d">hoff: predicted replays, not GPU runs; FSDP communication not modelled</text>'
               % (ly + 17 * 5 + 4))
    out.append(marker("star", 560, ly, "#f2c14e"))
    out.append('<text x="572" y="%d">torchtitan PR 3521: CPU activation offload, 8xH100, measured;</text>' % (ly + 4))
    out.append('<text x="572" y="%d">"overhead &lt; X%%" drawn at the bound (arrow: below it)</text>' % (ly + 17 + 4))
    out.append(marker("cross", 560, ly + 34, "#000"))
    out.append('<text x="572" y="%d">torchtitan PR 3429: full AC vs default (SAC), 8xH100, measured</text>'
               % (ly + 34 + 4))
    out.append('<text x="560" y="%d">peers: %% of their measured per-GPU peak; their baseline is SAC, not no-AC</text>'
               % (ly + 51 + 4))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hoff-plan", default="./hoff-plan", help="the hoff-plan binary (default ./hoff-plan)")
    ap.add_argument("--budgets", default=",".join(str(b) for b in DEFAULT_BUDGETS),
                    help="budgets, %% of the activation peak (default 90..20)")
    ap.add_argument("--shapes", default="", help="comma-separated subset of: " + ", ".join(s[0] for s in SHAPES))
    ap.add_argument("--tflops", type=float, default=DEFAULT_TFLOPS)
    ap.add_argument("--hbm-gbps", type=float, default=DEFAULT_HBM_GBPS)
    ap.add_argument("--gbps", type=float, default=DEFAULT_LINK_GBPS, help="PCIe, each way")
    ap.add_argument("--jobs", type=int, default=2, help="advise runs at once (default 2)")
    ap.add_argument("--workdir", default="", help="where the traces go (default a new temporary directory)")
    ap.add_argument("--svg", default="", help="write the plot here")
    ap.add_argument("--results", default="", help="write rows, peers and assumptions here as one JSON object")
    ap.add_argument("--from", dest="from_file", default="", help="read a --results file instead of running")
    a = ap.parse_args()
    a.budgets = [int(x) for x in a.budgets.split(",") if x.strip()]
    a.shapes = [x for x in a.shapes.split(",") if x.strip()]
    known = set(s[0] for s in SHAPES)
    if any(s not in known for s in a.shapes):
        sys.exit("pareto.py: unknown shape in --shapes (known: %s)" % ", ".join(sorted(known)))
    if a.from_file:
        with open(a.from_file) as f:
            res = json.load(f)
        rows, peers, meta = res["rows"], res["peers"], res["clock"]
    else:
        rows, _, _ = collect(a)
        peers = peer_points()
        meta = {"tflops": a.tflops, "mfu_of": H100_BF16_DENSE_TFLOPS, "hbm_gbps": a.hbm_gbps, "gbps": a.gbps}
    if a.results and not a.from_file:
        layer, total = llama_params()
        res = {"clock": meta,
               "mfu": round(a.tflops / H100_BF16_DENSE_TFLOPS, 4),
               "commands": {"synth": " ".join(synth_cmd(a, "SEQ", "TRACE")),
                            "advise": "%s advise TRACE --budget PCT%% --bandwidth %g --json" % (a.hoff_plan, a.gbps)},
               "llama": dict(LLAMA, params=total, layer_params=layer),
               "note": ("hoff's step times are predicted replays (its model at the trace's op times and the link), "
                        "not GPU measurements; the peers' points are GPU measurements. The llama shape's activations "
                        "are hoff's synthetic GPT layer (4h GELU MLP, MHA) at h 4096, s 8192, scaled from 4 to 32 "
                        "layers; FSDP's communication is not modelled."),
               "hoff_plan_version": run([a.hoff_plan, "--version"]).strip(),
               "rows": rows, "peers": peers, "peers_not_drawn": NOT_DRAWN}
        with open(a.results, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(svg(rows, peers, meta))
    for r in rows:
        print(json.dumps(r, separators=(",", ":")))


if __name__ == "__main__":
    main()
