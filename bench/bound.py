#!/usr/bin/env python3
"""bound.py -- a lower bound on the exposed stall of any offload plan made of a trace's gaps.

usage: bench/bound.py [--hoff-plan PATH] [--milp-max-gaps N] [--time-limit S] [--check]
                      TRACE... --budget PCT[,PCT...] [--gpu-step MS | --compute-scale X]
                      [--bandwidth G] [--checkpoints N|all] [--milp-vars x|all]
                      [--runtime-gaps] [--fault-gbps G] [--no-latency]

For each (trace, budget) it runs `hoff-plan model TRACE --budget PCT% --json` (the planner-
independent model: event times on the simulated clock, resident offload bytes per event with the
planned releases, the candidate gaps), solves an LP relaxation (scipy's HiGHS) and, for small
traces, a MILP, and prints one JSON line:

  trace, budget_pct, budget_bytes, step_ns, nev, ngaps, gap_set, ncheckpoints, lp_rows, lp_cols,
  lp_bound_ns, lp_status, lp_seconds, milp_bound_ns, milp_status, milp_incumbent_ns, milp_seconds
  (+ with --check: greedy_stall_ns, timed_stall_ns, *_faults, *_within_budget, check)

The bounds are ns of exposed stall (step time less compute) in one step, on the clock `hoff-plan
simulate` models with the same --gpu-step/--compute-scale and --bandwidth.  lp_bound_ns is null
(lp_status "infeasible: ...", naming the event) when no plan made of the gaps keeps the budget.
milp_bound_ns is null when the MILP is skipped (milp_status "skipped: N gaps > --milp-max-gaps")
or stopped by --time-limit with no dual bound; one stopped by the limit reports HiGHS's dual bound
(milp_status "time_limit: dual bound"); an optimal one reports its dual bound too (HiGHS stops at
a relative gap of 1e-4), so milp_bound_ns is always a valid bound; milp_incumbent_ns is the best
integral point found (a solution of the relaxation, not a plan).

--check runs `hoff-plan simulate --json --planner greedy|timed` on the same (trace, budget, clock,
bandwidth) and prints their stall_ns (the last replay step) beside the bound; a bound above a
simulated stall by more than 1 us + 1e-6 relative (solver tolerances) is a VIOLATION: on stderr,
exit status 1.

Exit status: 0 ok, 1 a violation or a tool that failed, 2 bad usage, 3 hoff-plan refused a simulation
because the machine has too little memory available now (its exit status 3; its message on stderr).


THE MODEL
=========

Inputs (hoff-plan model): events i = 0..n-1 at compute times t_i (non-decreasing, the simulated
clock with no stall); r_i the resident offload bytes at event i with no offload (the releases of
dead tails planned, as every planner starts); the budget B; need_i = max(0, r_i - B); the gaps
g = (a_g, b_g, s_g): the block may leave after event a_g and must be back for its use at event
b_g (b_g = n: never needed again in the step, no prefetch); two FIFO copy engines, D2H at bd and
H2D at bh bytes/ns, each call costing lat ns on its engine (a copy of s bytes occupies its engine
lat + s/bw).

What a plan does, as the runtime carries it out (lib/plan/timed.c states the same): an eviction
AFTER a is issued when event a+1 comes; the block holds device memory until its D2H copy has
landed; a prefetch BEFORE p holds device memory from p on, and the use at b waits for it.  So a
gap's block is *away* (not counted resident) on an interval of events inside (a_g, b_g), from its
landing to its prefetch -- not on the whole gap.  The budget holds at every event (the runtime
waits for evictions to land, or evicts on demand, before it goes on).

Time.  S_i >= 0 is the stall before event i's call (S_0 = 0; S non-decreasing); S_n the stall of
the step, the objective (minimised).  Event i's call starts at sigma_i = t_i + S_i and ends, after
its own waits, at phi_i = t_i + S_{i+1}.  (The brief this was written from minimised S_{n-1} with
event i at tau_i = t_i + S_i; the split into sigma/phi only says when within a call the waits
fall.  Prefetches for b_g = n never need to land.)

Checkpoints K: events with need > 0 at which the per-gap model below is written (--checkpoints
N, default 16: the largest need, the largest D2H and H2D deficits of the aggregated windows below,
then by turns the next of each ranking and evenly spaced over-budget events; 'all': every
over-budget event -- the LP grows as |K| * ngaps and HiGHS takes minutes at |K| ~ 300).

Variables, for each gap g with a checkpoint in (a_g, b_g) (K_g; the other gaps get none):
  x_g in [0,1]      g is used (away at some checkpoint);
  L_gc in [0,1]     g's eviction has landed by phi_c              (non-decreasing in c, <= x_g);
  R_gc in [0,1]     g's (last) prefetch has been issued by sigma_c (non-decreasing in c, <= L_gc;
                    none when g never comes back);
  away at c = L_gc - R_gc.
A plan gives integral values: x_g = 1 iff the block is away at a checkpoint, L from its first
landing, R from its last prefetch (a block evicted twice in one gap counts as away in between:
coverage only gains, and the copies charged below are a subset of the real ones).

Constraints (per gap and engine, w_g = s_g/bw + lat, time):
  coverage   c in K:  sum_{g: c in K_g} s_g (L_gc - R_gc) >= need_c.
  D2H        c in K, j = a_h of each gap with a_h < c:
               sum_{g: j <= a_g < c < b_g} w_g L_gc + sum_{g: j <= a_g, b_g <= c} w_g x_g
                 <= phi_c - sigma_{j+1}
             [issued at sigma_{a_g+1} >= sigma_{j+1} or later, landed by phi_c (a used gap that
             ended by c was away at a checkpoint before b_g <= c)].
  H2D        c in K, k = b_h of each gap that comes back, b_h > c:
               sum_{g: a_g < c < b_g <= k} w_g (x_g - R_gc) + sum_{g: c <= a_g, b_g <= k} w_g x_g
                 <= phi_k - sigma_{c+1}      (+ fg/bh (S_{k+1} - S_{c+1}) with --fault-gbps fg)
             [a used block not prefetched by sigma_c is prefetched at sigma_p, p > c (or after a
             landing later than c) and has landed when its use at b_g <= k completes].
  aggregated windows, at every event i with need_i > 0 (not only at checkpoints), with no gap
  variables: the bytes away at i are >= need_i, so for every j = a_g (k = b_g) of a gap
  spanning i:  S_{i+1} - S_{j+1} >= X/bd + m lat - (t_i - t_{j+1}),  X = need_i - (bytes of the
  gaps spanning i with a_g < j);  S_{k+1} - S_{i+1} >= X/bh + m lat - (t_k - t_{i+1}),  X =
  need_i - (bytes of the gaps spanning i that are not back by k);  m = ceil(X / the largest gap
  that can carry them) calls.  They follow from the per-gap constraints at i; dominated ones are
  dropped.  (They are the LP form of bench/planners' bound_ns, summed along S instead of maxed.)
The sums over j (over k) are suffix (prefix) sums, written as chains of auxiliary variables, so
the LP has O(sum_g |K_g| + |K| ngaps) non-zeros, not O(|K| ngaps^2).

Why it is a lower bound.  Every plan made of the gaps whose blocks come back by prefetch over H2D
and that keeps the budget gives a feasible point (the integral values above, S its real stalls)
whose objective is its stall: each constraint charges a window only with copies that really
happen inside it, and a FIFO engine carries at most length/(s/bw + lat) of them; any subset of
checkpoints and windows only drops constraints.  Not modelled, which can only make a real run
slower: the D2H latency of discards (releases), copies queued from other windows, the issuing
thread's own cost, the warmup.  Outside the model:
  - page-ins on demand (faults) instead of prefetches: the sim pages in at 8 GB/s + 20 us in the
    compute stream while H2D keeps copying; --fault-gbps G adds that channel to the H2D windows;
  - the runtime's evictions on demand of blocks the planners may not move: blocks without access
    marks inside their guard margins (the planners keep them resident one event after the alloc
    and one before the free), retained blocks after their last access.  --runtime-gaps adds them
    (hoff-plan model's runtime_gaps, away with no prefetch; a block's plan gaps that overlap are
    dropped): a bound on runs, not only on plans;
  - runs over the budget (simulate's within_budget false);
  - transfers that move several blocks in one call (groups laid out in one mapping): the latency
    is charged per gap; --no-latency drops it (a bound for such runs too).

Why not one x_g covering the whole gap (the model in the brief this was written from): x_g = 1
would claim the block away at every event in (a_g, b_g), so the D2H window (a_g, a_g+1) must
hold the whole eviction and (b_g-1, b_g) the whole prefetch.  Real plans land an eviction some
events later and prefetch early, where the budget allows (timed does exactly that), so that model
is not a relaxation of the plans it is compared with: its optimum can exceed a stall a planner
reaches.  The per-checkpoint L/R variables fix that.

The LP relaxes x, L, R to [0,1]; the MILP (ngaps <= --milp-max-gaps) makes x binary (--milp-vars
all: L and R too, the exact per-checkpoint semantics; slower).
"""

import argparse
import bisect
import json
import math
import os
import shutil
import subprocess
import sys
import time

try:
    import numpy as np
    from scipy.optimize import linprog, milp, LinearConstraint, Bounds
    from scipy.sparse import coo_matrix
except ImportError as e:  # pragma: no cover
    sys.stderr.write("bound.py: needs numpy and scipy (Debian: apt-get install python3-scipy): %s\n" % e)
    sys.exit(2)

US = 1000.0            # the LP's time unit: microseconds
MIB = float(1 << 20)   # the coverage rows' byte unit


def die_usage(msg):
    sys.stderr.write("bound.py: %s\n(see 'bench/bound.py --help')\n" % msg)
    sys.exit(2)


# --- the model from hoff-plan -------------------------------------------------------------------

def clock_args(a):
    out = []
    if a.gpu_step is not None:
        out += ["--gpu-step", repr(a.gpu_step)]
    if a.compute_scale is not None:
        out += ["--compute-scale", repr(a.compute_scale)]
    if a.bandwidth is not None:
        out += ["--bandwidth", repr(a.bandwidth)]
    return out


class MemoryRefused(RuntimeError):
    """hoff-plan refused a simulation for memory (its exit status 3): the machine, not the bound."""


def run_json(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if p.returncode == 3:
        raise MemoryRefused(p.stderr.strip())
    if p.returncode not in (0, 1) or not p.stdout.strip():
        raise RuntimeError("%s exited %d: %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
    return json.loads(p.stdout), p.returncode


def get_model(a, trace, pct):
    m, rc = run_json([a.hoff_plan, "model", trace, "--budget", "%s%%" % pct, "--json"] + clock_args(a))
    if rc != 0:
        raise RuntimeError("hoff-plan model %s failed" % trace)
    n = m["nev"]
    # (a, b, size, block, back): back = the block comes back for a use at b (b < n).
    gaps = [(g[0], g[1], g[2], g[3], g[1] < n) for g in m["gaps"]]
    if a.runtime_gaps:
        extra = [(g[0], g[1], g[2], g[3], False) for g in m.get("runtime_gaps", [])]
        span = {}
        for g in extra:
            span.setdefault(g[3], []).append((g[0], g[1]))
        # A runtime gap replaces the gaps of its block it overlaps (a guarded lifetime).
        gaps = [g for g in gaps if not any(g[0] < e - 1 and s < g[1] - 1 for (s, e) in span.get(g[3], ()))]
        gaps += extra
    m["gaps5"] = gaps
    return m


# --- the LP --------------------------------------------------------------------------------------

class Rows:
    """A <= system in COO form."""

    def __init__(self):
        self.r, self.c, self.v, self.ub = [], [], [], []

    def add(self, terms, ub):
        k = len(self.ub)
        for col, val in terms:
            if val != 0.0:
                self.r.append(k)
                self.c.append(col)
                self.v.append(val)
        self.ub.append(ub)
        return k


def spans(m):
    """For every event with need > 0: the gaps spanning it (a_g < i < b_g)."""
    n, B = m["nev"], m["budget_bytes"]
    res = m["resident"]
    over = [i for i in range(n) if B and res[i] > B]
    starts = {}
    for g, (ga, gb, _s, _b, _back) in enumerate(m["gaps5"]):
        if gb > ga + 1:
            starts.setdefault(ga + 1, []).append(g)
    live, out, k = set(), {}, 0
    gaps = m["gaps5"]
    for i in range(n):
        for g in starts.get(i, ()):
            live.add(g)
        if k < len(over) and over[k] == i:
            out[i] = [g for g in live if gaps[g][1] > i]
            k += 1
        live = {g for g in live if gaps[g][1] > i + 1}
    return over, out


def time_rows(m, over, G_of, lat_d, lat_h, fg):
    """The aggregated windows at every over-budget event i (no gap variables): at least need_i -
    (bytes of the gaps spanning i that started before j) crossed D2H in [sigma_{j+1}, phi_i], and
    at least need_i - (bytes spanning i that are used after k) cross H2D in [sigma_{i+1}, phi_k],
    each in at least ceil(X / largest such gap) calls.  They follow from the per-gap constraints
    at i (the away bytes at i are >= need_i), so they are valid without i being a checkpoint.
    Returns (i, j, d_ns): S_{i+1} - S_{j+1} >= d_ns (D2H) and (k, i, d_ns): S_{k+1} - S_{i+1} >= d
    (H2D), dominated ones dropped, plus per event the largest deficits (to pick checkpoints)."""
    B = m["budget_bytes"]
    t, res, gaps = m["t_ns"], m["resident"], m["gaps5"]
    bd, bh = float(m["d2h_gbps"]), float(m["h2d_gbps"])
    rows, dD, dH = [], {}, {}
    for i in over:
        need = res[i] - B
        gi = sorted(G_of[i], key=lambda g: gaps[g][0])
        pre = [0]
        for g in gi:
            pre.append(pre[-1] + gaps[g][2])
        # D2H: j over the distinct a of gi, from the largest down; new = gaps with a >= j.
        best, new, smax, idx = -math.inf, 0, 0, len(gi) - 1
        dD[i] = 0.0
        while idx >= 0:
            j = gaps[gi[idx]][0]
            while idx >= 0 and gaps[gi[idx]][0] == j:
                new += gaps[gi[idx]][2]
                smax = max(smax, gaps[gi[idx]][2])
                idx -= 1
            x = need - pre[idx + 1]           # less the bytes of the gaps with a < j
            if x <= 0:
                continue
            calls = math.ceil(x / smax) if smax else 0
            d = x / bd + calls * lat_d - (t[i] - t[j + 1])
            dD[i] = max(dD[i], d)
            if d > 0 and d > best:   # a smaller j with no larger deficit is implied
                rows.append((i, j, d))
                best = d
        # H2D: k over the distinct b of the gaps of gi that come back, ascending; back = b <= k.
        gb_sorted = sorted((g for g in gi if gaps[g][4]), key=lambda g: gaps[g][1])
        late_total = sum(gaps[g][2] for g in gi)
        best, back, smax, idx = -math.inf, 0, 0, 0
        dH[i] = 0.0
        while idx < len(gb_sorted):
            k = gaps[gb_sorted[idx]][1]
            while idx < len(gb_sorted) and gaps[gb_sorted[idx]][1] == k:
                back += gaps[gb_sorted[idx]][2]
                smax = max(smax, gaps[gb_sorted[idx]][2])
                idx += 1
            x = need - (late_total - back)
            if x <= 0:
                continue
            calls = math.ceil(x / smax) if smax else 0
            d = (x / bh + calls * lat_h - (t[k] - t[i + 1])) * bh / (bh + fg)
            dH[i] = max(dH[i], d)
            if d > 0 and d > best:   # a larger k with no larger deficit is implied
                rows.append((k, i, d))
                best = d
    return rows, dD, dH


def pick_checkpoints(over, need, dD, dH, count):
    """Up to count events for the per-gap model: the largest need, the largest D2H, H2D and total
    deficits, then by turns the next of each ranking and evenly spaced events."""
    if count == "all" or len(over) <= int(count):
        return list(over)
    count = int(count)
    ranks = [sorted(over, key=lambda i: (-need[i], i)),
             sorted(over, key=lambda i: (-dD[i], i)),
             sorted(over, key=lambda i: (-dH[i], i)),
             sorted(over, key=lambda i: (-(dD[i] + dH[i]), i)),
             [over[round(q * (len(over) - 1) / max(1, count - 1))] for q in range(count)]]
    keep, pos = [], [0] * len(ranks)
    while len(keep) < count:
        moved = False
        for r, lst in enumerate(ranks):
            while pos[r] < len(lst) and lst[pos[r]] in keep:
                pos[r] += 1
            if pos[r] < len(lst) and len(keep) < count:
                keep.append(lst[pos[r]])
                pos[r] += 1
                moved = True
        if not moved:
            break
    return sorted(keep)


def build(m, a):
    """The LP of the module docstring.  Returns a dict with the matrices, or one with 'infeasible'."""
    n, B = m["nev"], m["budget_bytes"]
    t, res = m["t_ns"], m["resident"]
    bd, bh = float(m["d2h_gbps"]), float(m["h2d_gbps"])
    lat = 0.0 if a.no_latency else float(m["latency_ns"])
    fg = float(a.fault_gbps or 0.0)
    lat_h = 0.0 if fg > 0 else lat   # a page-in takes no H2D call
    gaps_all = m["gaps5"]
    over, G_of = spans(m)
    need = {i: res[i] - B for i in over}
    for i in over:
        cover = sum(gaps_all[g][2] for g in G_of[i])
        if cover < need[i]:
            return {"infeasible": "event %d needs %d bytes away, its gaps hold %d" % (i, need[i], cover),
                    "K": [], "gaps": [], "over": over}
    trows, dD, dH = time_rows(m, over, G_of, lat, lat_h, fg)
    K = pick_checkpoints(over, need, dD, dH, a.checkpoints)

    # K_g for every gap (checkpoints strictly inside); the gaps without one get no variables.
    gaps, Kg = [], []
    for (ga, gb, s, blk, back) in gaps_all:
        lo = bisect.bisect_right(K, ga)
        hi = bisect.bisect_left(K, gb)
        if hi > lo:
            gaps.append((ga, gb, s, blk, back))
            Kg.append(K[lo:hi])

    ncol = 0

    def new():
        nonlocal ncol
        ncol += 1
        return ncol - 1

    G = len(gaps)
    X = [new() for _ in range(G)]
    L, R = [], []            # per gap: {c: col}
    for g, kk in enumerate(Kg):
        L.append({c: new() for c in kk})
        R.append({c: new() for c in kk} if gaps[g][4] else {})
    # S at the points used: 0, n, c+1, j+1, k+1.
    spts = {0, n}
    for c in K:
        spts.add(c + 1)
    for (ga, gb, _s, _b, back) in gaps:
        spts.add(ga + 1)
        if back:
            spts.add(gb + 1)
    for (p, q, _d) in trows:
        spts.add(p + 1)
        spts.add(q + 1)
    spts = sorted(p for p in spts if p <= n)
    S = {p: new() for p in spts}

    rows = Rows()
    # S non-decreasing.
    for p, q in zip(spts, spts[1:]):
        rows.add([(S[p], 1.0), (S[q], -1.0)], 0.0)
    # The aggregated windows at every over-budget event.
    for (p, q, d) in trows:
        rows.add([(S[q + 1], 1.0), (S[p + 1], -1.0)], -d / US)
    # L, R monotone, R <= L, L <= x.
    for g, kk in enumerate(Kg):
        for c, d in zip(kk, kk[1:]):
            rows.add([(L[g][c], 1.0), (L[g][d], -1.0)], 0.0)
            if R[g]:
                rows.add([(R[g][c], 1.0), (R[g][d], -1.0)], 0.0)
        rows.add([(L[g][kk[-1]], 1.0), (X[g], -1.0)], 0.0)
        for c in kk:
            if R[g]:
                rows.add([(R[g][c], 1.0), (L[g][c], -1.0)], 0.0)
    # Coverage.
    by_c = {c: [] for c in K}
    for g, kk in enumerate(Kg):
        for c in kk:
            by_c[c].append(g)
    for c in K:
        terms = []
        for g in by_c[c]:
            s = gaps[g][2] / MIB
            terms.append((L[g][c], -s))
            if R[g]:
                terms.append((R[g][c], s))
        rows.add(terms, -need[c] / MIB)

    wd = [(g[2] / bd + lat) / US for g in gaps]     # D2H time of gap g, us
    wh = [(g[2] / bh + lat_h) / US for g in gaps]   # H2D time, us
    hfac = 1.0 + fg / bh

    # D2H windows: for c, the gaps with a_g < c by a_g descending; chain P.
    order_a = sorted(range(G), key=lambda g: -gaps[g][0])
    order_b = sorted((g for g in range(G) if gaps[g][4]), key=lambda g: gaps[g][1])
    for c in K:
        prev, idx, total = None, 0, 0.0
        cand = [g for g in order_a if gaps[g][0] < c]
        while idx < len(cand):
            j = gaps[cand[idx]][0]
            terms = []
            while idx < len(cand) and gaps[cand[idx]][0] == j:
                g = cand[idx]
                col = L[g][c] if c in L[g] else X[g]   # spans c, or ended by c (b_g <= c)
                terms.append((col, wd[g]))
                total += wd[g]
                idx += 1
            P = new()
            if prev is not None:
                terms.append((prev, 1.0))
            terms.append((P, -1.0))
            rows.add(terms, 0.0)                   # P >= prev + this group's copies
            prev = P
            slack = (t[c] - t[j + 1]) / US         # compute time in the window
            if total > slack + 1e-9:               # else it cannot bind
                rows.add([(P, 1.0), (S[c + 1], -1.0), (S[j + 1], 1.0)], slack)
    # H2D windows: for c, the gaps that come back (b_g > c) and span c or start at/after c, by b_g.
    for c in K:
        prev, idx, total = None, 0, 0.0
        cand = [g for g in order_b if gaps[g][1] > c and (gaps[g][0] >= c or c in L[g])]
        while idx < len(cand):
            k = gaps[cand[idx]][1]
            terms = []
            while idx < len(cand) and gaps[cand[idx]][1] == k:
                g = cand[idx]
                terms.append((X[g], wh[g]))
                if gaps[g][0] < c:                 # spans c: less what was prefetched by c
                    terms.append((R[g][c], -wh[g]))
                total += wh[g]
                idx += 1
            Q = new()
            if prev is not None:
                terms.append((prev, 1.0))
            terms.append((Q, -1.0))
            rows.add(terms, 0.0)
            prev = Q
            slack = (t[k] - t[c + 1]) / US
            if total > slack + 1e-9:
                rows.add([(Q, 1.0), (S[k + 1], -hfac), (S[c + 1], hfac)], slack)

    A = coo_matrix((rows.v, (rows.r, rows.c)), shape=(len(rows.ub), ncol)).tocsr()
    cost = np.zeros(ncol)
    cost[S[n]] = 1.0
    lb = np.zeros(ncol)
    ub = np.full(ncol, np.inf)
    for col in X:
        ub[col] = 1.0
    for d in L + R:
        for col in d.values():
            ub[col] = 1.0
    ub[S[0]] = 0.0
    integ_x = np.zeros(ncol)
    integ_all = np.zeros(ncol)
    for col in X:
        integ_x[col] = 1
        integ_all[col] = 1
    for d in L + R:
        for col in d.values():
            integ_all[col] = 1
    return {"A": A, "b": np.array(rows.ub), "c": cost, "lb": lb, "ub": ub, "K": K, "gaps": gaps,
            "over": over, "ntime_rows": len(trows), "integ_x": integ_x, "integ_all": integ_all}


def solve_lp(P):
    t0 = time.time()
    r = linprog(P["c"], A_ub=P["A"], b_ub=P["b"], bounds=np.column_stack([P["lb"], P["ub"]]),
                method="highs")
    dt = time.time() - t0
    if r.status != 0:
        return None, "error: " + r.message, dt
    return r.fun * US, "optimal", dt


def solve_milp(P, a):
    t0 = time.time()
    integ = P["integ_all"] if a.milp_vars == "all" else P["integ_x"]
    r = milp(P["c"], constraints=LinearConstraint(P["A"], -np.inf, P["b"]), integrality=integ,
             bounds=Bounds(P["lb"], P["ub"]), options={"time_limit": a.time_limit, "disp": False})
    dt = time.time() - t0
    dual = getattr(r, "mip_dual_bound", None)
    if dual is None and "mip_dual_bound" in r:
        dual = r["mip_dual_bound"]
    inc = r.fun * US if r.x is not None and r.fun is not None else None
    if r.status == 0:
        return (dual if dual is not None and math.isfinite(dual) else r.fun) * US, "optimal", inc, dt
    if r.status == 1:  # iteration or time limit
        if dual is not None and math.isfinite(dual):
            return dual * US, "time_limit: dual bound", inc, dt
        return None, "time_limit: no dual bound", inc, dt
    return None, "error: " + str(r.message), inc, dt


# --- the check -------------------------------------------------------------------------------------

def simulate(a, trace, pct, planner):
    s, rc = run_json([a.hoff_plan, "simulate", trace, "--budget", "%s%%" % pct, "--planner", planner,
                      "--json"] + clock_args(a))
    return s


def fmt_ns(v):
    return None if v is None else int(math.floor(v + 1e-9))


def main():
    ap = argparse.ArgumentParser(
        prog="bench/bound.py",
        description="Lower bound on the exposed stall of any offload plan made of a trace's gaps "
                    "(LP relaxation; MILP for small traces).  The model is in this file's docstring.")
    ap.add_argument("traces", nargs="+", metavar="TRACE")
    ap.add_argument("--budget", required=True, metavar="PCT[,PCT...]",
                    help="budgets, percent of the trace's offload peak (e.g. 50,25,10)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--gpu-step", type=float, metavar="MS", help="scale compute so a step takes MS ms")
    g.add_argument("--compute-scale", type=float, metavar="X", help="divide compute gaps by X")
    ap.add_argument("--bandwidth", type=float, metavar="G", help="H2D and D2H GB/s (default: hoff-plan's 50)")
    ap.add_argument("--hoff-plan", metavar="PATH", help="the hoff-plan binary (default ./hoff-plan, then PATH)")
    ap.add_argument("--milp-max-gaps", type=int, default=200, metavar="N",
                    help="solve the MILP only with at most N gaps (default 200; 0 = never)")
    ap.add_argument("--time-limit", type=float, default=60.0, metavar="S", help="MILP time limit, s (default 60)")
    ap.add_argument("--milp-vars", choices=("x", "all"), default="x",
                    help="binary variables in the MILP: x (gap used; default) or all (x, L, R)")
    ap.add_argument("--checkpoints", default="16", metavar="N|all",
                    help="events with the per-gap model (default 16; all: every over-budget event, slow)")
    ap.add_argument("--fault-gbps", type=float, default=0.0, metavar="G",
                    help="also let blocks come back by page-in at G GB/s during stalls (default 0: no)")
    ap.add_argument("--no-latency", action="store_true",
                    help="charge no per-call latency (for runs that move several blocks in one call)")
    ap.add_argument("--runtime-gaps", action="store_true",
                    help="also the away intervals the runtime's evictions on demand can use (blocks "
                         "without access marks from alloc to free, retained blocks after their last "
                         "access; never brought back): a bound on runs, not only on plans")
    ap.add_argument("--check", action="store_true",
                    help="simulate greedy and timed and check bound <= their stall (exit 1 if not)")
    a = ap.parse_args()

    try:
        pcts = [p.strip().rstrip("%") for p in a.budget.split(",") if p.strip()]
        for p in pcts:
            if not (0 < float(p) <= 1000):
                raise ValueError(p)
    except ValueError:
        die_usage("--budget: expected percentages such as 50,25,10, got '%s'" % a.budget)
    if a.gpu_step is not None and not a.gpu_step > 0:
        die_usage("--gpu-step: expected a positive number")
    if a.compute_scale is not None and not a.compute_scale > 0:
        die_usage("--compute-scale: expected a positive number")
    if a.bandwidth is not None and not a.bandwidth > 0:
        die_usage("--bandwidth: expected a positive number")
    if a.checkpoints != "all" and not (a.checkpoints.isdigit() and int(a.checkpoints) >= 1):
        die_usage("--checkpoints: expected a count >= 1 or 'all', got '%s'" % a.checkpoints)
    if a.time_limit <= 0 or a.milp_max_gaps < 0 or a.fault_gbps < 0:
        die_usage("--time-limit must be > 0, --milp-max-gaps and --fault-gbps >= 0")
    if not a.hoff_plan:
        a.hoff_plan = "./hoff-plan" if os.access("./hoff-plan", os.X_OK) else shutil.which("hoff-plan")
        if not a.hoff_plan:
            die_usage("no hoff-plan in . or on PATH; give --hoff-plan PATH")
    for tr in a.traces:
        if not os.path.exists(tr):
            die_usage("no such trace: %s" % tr)

    status = 0
    for tr in a.traces:
        for pct in pcts:
            try:
                m = get_model(a, tr, pct)
            except (RuntimeError, ValueError) as e:
                sys.stderr.write("bound.py: %s\n" % e)
                status = 1
                continue
            out = {"trace": tr, "budget_pct": float(pct), "budget_bytes": m["budget_bytes"],
                   "step_ns": m["step_ns"], "nev": m["nev"], "ngaps": len(m["gaps5"]),
                   "gap_set": "runtime" if a.runtime_gaps else "plans"}
            t0 = time.time()
            P = build(m, a)
            out["build_seconds"] = round(time.time() - t0, 3)
            out["ncheckpoints"] = len(P["K"])
            out["nvar_gaps"] = len(P["gaps"])
            lp = None
            if "infeasible" in P:
                out.update({"lp_bound_ns": None, "lp_status": "infeasible: " + P["infeasible"],
                            "lp_seconds": 0.0, "milp_bound_ns": None, "milp_status": "infeasible",
                            "milp_incumbent_ns": None, "milp_seconds": 0.0})
            else:
                out["lp_rows"], out["lp_cols"] = P["A"].shape
                lp, st, dt = solve_lp(P)
                out.update({"lp_bound_ns": fmt_ns(lp), "lp_status": st, "lp_seconds": round(dt, 3)})
                if a.milp_max_gaps and len(m["gaps5"]) <= a.milp_max_gaps:
                    mb, mst, inc, dt = solve_milp(P, a)
                    out.update({"milp_bound_ns": fmt_ns(mb), "milp_status": mst,
                                "milp_incumbent_ns": fmt_ns(inc), "milp_seconds": round(dt, 3)})
                else:
                    out.update({"milp_bound_ns": None,
                                "milp_status": "skipped: %d gaps > --milp-max-gaps %d"
                                               % (len(m["gaps5"]), a.milp_max_gaps),
                                "milp_incumbent_ns": None, "milp_seconds": 0.0})
            if a.check:
                best = max([v for v in (out["lp_bound_ns"], out["milp_bound_ns"]) if v is not None],
                           default=None)
                verdict = "ok"
                for pl in ("greedy", "timed"):
                    try:
                        s = simulate(a, tr, pct, pl)
                    except MemoryRefused:
                        raise
                    except (RuntimeError, ValueError) as e:
                        sys.stderr.write("bound.py: %s\n" % e)
                        status = 1
                        verdict = "simulate failed"
                        continue
                    out[pl + "_stall_ns"] = s["stall_ns"]
                    out[pl + "_faults"] = s["faults"]
                    out[pl + "_within_budget"] = s["within_budget"]
                    if best is not None and best > s["stall_ns"] + 1000 + 1e-6 * s["stall_ns"]:
                        verdict = "VIOLATION"
                        sys.stderr.write(
                            "bound.py: VIOLATION: %s at %s%%: bound %d ns > %s's simulated stall %d ns "
                            "(faults %d, within budget %s)\n"
                            % (tr, pct, best, pl, s["stall_ns"], s["faults"], s["within_budget"]))
                        status = 1
                out["check"] = verdict
            print(json.dumps(out), flush=True)
    return status


if __name__ == "__main__":
    try:
        sys.exit(main())
    except MemoryRefused as e:
        sys.stderr.write("bound.py: %s\n" % e)
        sys.exit(3)
