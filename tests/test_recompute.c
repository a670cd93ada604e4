/* test_recompute.c — recompute advice (plan/recompute.c, plan/advise.c): the model of a hand-built step with
 * phases (its forward ops, what they save and read, where they are made again), the rewrite event by event, its
 * refusals, and the advice on synthetic transformer steps: combined never worse than offload only or full
 * checkpointing, the bound under every step, recompute chosen (and strictly better) where the link cannot carry
 * the budget.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mem/pool.h"
#include "plan/recompute.h"
#include "trace/synth.h"
#include "testutil.h"

static void phase(struct hoff__trace *t, unsigned ph) {
    t->ev[t->nev - 1].flags = (uint8_t)(ph << HOFF__TEV_PHASE_SHIFT);
}

/* A step as the Python package records it (a mark ends its op, with its phase):
 *   0 x = alloc 100          (op "embed")
 *   1 op embed fwd
 *   2 a = alloc 100, 3 read x          (op "aten.gelu")
 *   4 op aten.gelu fwd
 *   5 b = alloc 200, 6 read a          (op "aten.mm")
 *   7 op aten.mm fwd
 *   8 c = alloc 300, 9 read b, 10 free c   (op "aten.gelu" again: a temporary)
 *  11 op aten.gelu fwd
 *  12 read b, 13 free b                (op "mm.bwd")
 *  14 op mm.bwd bwd
 *  15 read a, 16 free a, 17 read x, 18 free x
 *  19 op gelu.bwd bwd */
static void hand_trace(struct hoff__trace *t, uint32_t *x, uint32_t *a, uint32_t *b) {
    uint32_t c;

    hoff_test_trace_begin(t);
    *x = hoff_test_al(t, 100);
    hoff_test_op_named(t, "embed");
    phase(t, HOFF_PHASE_FORWARD);
    *a = hoff_test_al(t, 100);
    hoff_test_ac(t, *x, 0);
    hoff_test_op_named(t, "aten.gelu");
    phase(t, HOFF_PHASE_FORWARD);
    *b = hoff_test_al(t, 200);
    hoff_test_ac(t, *a, 0);
    hoff_test_op_named(t, "aten.mm");
    phase(t, HOFF_PHASE_FORWARD);
    c = hoff_test_al(t, 300);
    hoff_test_ac(t, *b, 0);
    hoff_test_fr(t, c);
    hoff_test_op_named(t, "aten.gelu");
    phase(t, HOFF_PHASE_FORWARD);
    hoff_test_ac(t, *b, 0);
    hoff_test_fr(t, *b);
    hoff_test_op_named(t, "mm.bwd");
    phase(t, HOFF_PHASE_BACKWARD);
    hoff_test_ac(t, *a, 0);
    hoff_test_fr(t, *a);
    hoff_test_ac(t, *x, 0);
    hoff_test_fr(t, *x);
    hoff_test_op_named(t, "gelu.bwd");
    phase(t, HOFF_PHASE_BACKWARD);
    hoff_test_fin(t);
    CU_ASSERT_EQUAL_FATAL(t->nev, 20);
}

static void test_model(void) {
    struct hoff__trace t;
    struct hoff__rc_model m;
    uint32_t x, a, b;
    uint64_t *T;

    hand_trace(&t, &x, &a, &b);
    T = hoff__plan_times(&t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T);
    CU_ASSERT_EQUAL_FATAL(hoff__rc_model_build(&t, T, NULL, &m), 0);
    CU_ASSERT_EQUAL(m.bwd_ev, 12); /* after the last forward op's mark */
    CU_ASSERT_EQUAL(m.niv, 4);
    CU_ASSERT_EQUAL_FATAL(m.nu, 3); /* embed (x), gelu (a), mm (b); the second gelu saves nothing */
    CU_ASSERT_STRING_EQUAL(hoff__rc_op_name(&t, &m, m.u[0].interval), "embed");
    CU_ASSERT_STRING_EQUAL(hoff__rc_op_name(&t, &m, m.u[1].interval), "aten.gelu");
    CU_ASSERT_STRING_EQUAL(hoff__rc_op_name(&t, &m, m.u[2].interval), "aten.mm");
    CU_ASSERT_EQUAL(m.u[1].occurrence, 0);
    CU_ASSERT_EQUAL(m.u[1].interval, 1);
    CU_ASSERT_EQUAL(m.u[1].bytes, 100);
    CU_ASSERT_EQUAL(m.u[1].cost_ns, T[4] - T[1]);
    CU_ASSERT_EQUAL(m.u[1].nin, 1);
    CU_ASSERT_EQUAL(m.in[m.u[1].first_in], x);
    CU_ASSERT_EQUAL(m.u[1].regen_ev, 15); /* the op that first reads a in the backward starts at 15 */
    CU_ASSERT_EQUAL(m.u[2].regen_ev, 12);
    CU_ASSERT(m.u[0].ok && m.u[1].ok && m.u[2].ok);
    CU_ASSERT_EQUAL(m.fwd_close[a], 7); /* a's last forward read (6) closes at the mark 7 */
    CU_ASSERT_EQUAL(m.fwd_close[b], 11);
    CU_ASSERT_EQUAL(m.bwd_first[a], 15);
    /* aten.mm reads a: with a freed before its recompute at 12 it could not be made again.  Here a lives to 16. */
    free(T);
    hoff__rc_model_destroy(&m);
    hoff__trace_destroy(&t);
}

static void test_rewrite(void) {
    struct hoff__trace t, r;
    struct hoff__rc_model m;
    struct hoff__rc_group g;
    uint32_t x, a, b, bad = 0;
    uint64_t *T;

    hand_trace(&t, &x, &a, &b);
    T = hoff__plan_times(&t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T);
    CU_ASSERT_EQUAL_FATAL(hoff__rc_model_build(&t, T, NULL, &m), 0);
    g.regen_ev = m.u[1].regen_ev;
    g.cost_ns = 5000;
    g.blk = m.blk + m.u[1].first_blk;
    g.nblk = m.u[1].nblk;
    g.tmp = NULL;
    g.ntmp = 0;
    CU_ASSERT_EQUAL_FATAL(hoff__rc_rewrite(&t, &m, &g, 1, &r), 0);
    /* One free (a's first half, before the mark 7), one alloc and one mark (at 15) more. */
    CU_ASSERT_EQUAL_FATAL(r.nev, t.nev + 3);
    CU_ASSERT_EQUAL(r.nblocks, t.nblocks + 1);
    CU_ASSERT_EQUAL(r.ev[7].kind, HOFF__TEV_FREE);
    CU_ASSERT_EQUAL(r.ev[7].block, a);
    CU_ASSERT_EQUAL(r.ev[8].kind, HOFF__TEV_OP);
    CU_ASSERT_EQUAL(r.ev[16].kind, HOFF__TEV_ALLOC); /* a made again: the new block */
    CU_ASSERT_EQUAL(r.ev[16].block, t.nblocks);
    CU_ASSERT_EQUAL(r.ev[16].size, 100);
    CU_ASSERT_EQUAL(r.ev[17].kind, HOFF__TEV_OP);
    CU_ASSERT_STRING_EQUAL(hoff__tev_op_name(&r, &r.ev[17]), "hoff.recompute");
    CU_ASSERT_EQUAL(hoff__tev_phase(&r.ev[17]), HOFF_PHASE_BACKWARD);
    CU_ASSERT_EQUAL(r.ev[17].t_cpu_ns, t.ev[15].t_cpu_ns + 5000);
    CU_ASSERT_EQUAL(r.ev[18].kind, HOFF__TEV_ACCESS); /* the backward's read of a: the new block */
    CU_ASSERT_EQUAL(r.ev[18].block, t.nblocks);
    CU_ASSERT_EQUAL(r.ev[18].t_cpu_ns, t.ev[15].t_cpu_ns + 5000);
    CU_ASSERT_EQUAL(r.ev[19].kind, HOFF__TEV_FREE);
    CU_ASSERT_EQUAL(r.ev[19].block, t.nblocks);
    CU_ASSERT_EQUAL(r.blocks[a].free_ev, 7);
    CU_ASSERT_EQUAL(r.step_ns, t.step_ns + 5000);
    hoff__trace_destroy(&r);

    /* Refused: a block that is not a saved activation, and a recompute after its first backward use. */
    g.blk = &bad;
    g.nblk = 1;
    bad = 2; /* c: a temporary */
    CU_ASSERT_EQUAL(hoff__rc_rewrite(&t, &m, &g, 1, &r), -EINVAL);
    hoff__trace_destroy(&r);
    bad = a;
    g.regen_ev = 17; /* a is read at 15 */
    CU_ASSERT_EQUAL(hoff__rc_rewrite(&t, &m, &g, 1, &r), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "cannot be recomputed"));
    hoff__trace_destroy(&r);
    g.regen_ev = 3; /* in the forward */
    CU_ASSERT_EQUAL(hoff__rc_rewrite(&t, &m, &g, 1, &r), -EINVAL);
    hoff__trace_destroy(&r);
    free(T);
    hoff__rc_model_destroy(&m);
    hoff__trace_destroy(&t);

    /* No op marks: nothing to recompute, said so. */
    hoff_test_trace_begin(&t);
    x = hoff_test_al(&t, 100);
    hoff_test_fr(&t, x);
    hoff_test_fin(&t);
    T = hoff__plan_times(&t);
    CU_ASSERT_EQUAL(hoff__rc_model_build(&t, T, NULL, &m), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "no op marks"));
    free(T);
    hoff__trace_destroy(&t);
}

/* A chain: op p makes a forward temporary c that op q reads (and frees) to make its saved d.  Recomputing q needs
 * c, so it runs p too (cost p + q), makes c again and frees it once done.
 *   0 x = alloc 100, 1 op p fwd (x: p's input)
 *   2 c = alloc 50, 3 read x, 4 op p2 fwd       ("p2": the op that makes c)
 *   5 d = alloc 80, 6 read c, 7 free c, 8 op q fwd
 *   9 read d, 10 free d, 11 read x, 12 free x, 13 op q.bwd bwd */
static void test_chain(void) {
    struct hoff__trace t, r;
    struct hoff__rc_model m;
    struct hoff__rc_group g;
    uint32_t x, c, d;
    uint64_t *T;

    hoff_test_trace_begin(&t);
    x = hoff_test_al(&t, 100);
    hoff_test_op_named(&t, "p");
    phase(&t, HOFF_PHASE_FORWARD);
    c = hoff_test_al(&t, 50);
    hoff_test_ac(&t, x, 0);
    hoff_test_op_named(&t, "p2");
    phase(&t, HOFF_PHASE_FORWARD);
    d = hoff_test_al(&t, 80);
    hoff_test_ac(&t, c, 0);
    hoff_test_fr(&t, c);
    hoff_test_op_named(&t, "q");
    phase(&t, HOFF_PHASE_FORWARD);
    hoff_test_ac(&t, d, 0);
    hoff_test_fr(&t, d);
    hoff_test_ac(&t, x, 0);
    hoff_test_fr(&t, x);
    hoff_test_op_named(&t, "q.bwd");
    phase(&t, HOFF_PHASE_BACKWARD);
    hoff_test_fin(&t);
    T = hoff__plan_times(&t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T);
    CU_ASSERT_EQUAL_FATAL(hoff__rc_model_build(&t, T, NULL, &m), 0);
    CU_ASSERT_EQUAL_FATAL(m.nu, 2); /* p (x) and q (d) */
    CU_ASSERT_STRING_EQUAL(hoff__rc_op_name(&t, &m, m.u[1].interval), "q");
    CU_ASSERT(m.u[1].ok);
    CU_ASSERT_EQUAL_FATAL(m.u[1].nop, 2); /* q, then p2 which makes c */
    CU_ASSERT_EQUAL(m.ops[m.u[1].first_op], 2);
    CU_ASSERT_EQUAL(m.ops[m.u[1].first_op + 1], 1);
    CU_ASSERT_STRING_EQUAL(hoff__rc_op_name(&t, &m, 1), "p2");
    CU_ASSERT_EQUAL(hoff__rc_op_occurrence(&t, &m, 1), 0);
    CU_ASSERT_EQUAL_FATAL(m.u[1].ntmp, 1);
    CU_ASSERT_EQUAL(m.tmp[m.u[1].first_tmp], c);
    CU_ASSERT_EQUAL(m.u[1].cost_ns, m.iv_ns[2] + m.iv_ns[1]);
    g = (struct hoff__rc_group){m.u[1].regen_ev, m.u[1].cost_ns,           m.blk + m.u[1].first_blk,
                                m.u[1].nblk,     m.tmp + m.u[1].first_tmp, m.u[1].ntmp};
    CU_ASSERT_EQUAL_FATAL(hoff__rc_rewrite(&t, &m, &g, 1, &r), 0);
    /* d's last forward use (its alloc) closes at the mark 8: 8 free d; 9 op q; then at the backward's first op
     * (event 9): 10 alloc d', 11 alloc c', 12 op hoff.recompute, 13 free c', 14 read d' ... */
    CU_ASSERT_EQUAL_FATAL(r.nev, t.nev + 5);
    CU_ASSERT_EQUAL(r.ev[8].kind, HOFF__TEV_FREE);
    CU_ASSERT_EQUAL(r.ev[8].block, d);
    CU_ASSERT_EQUAL(r.ev[10].kind, HOFF__TEV_ALLOC);
    CU_ASSERT_EQUAL(r.ev[10].size, 80);
    CU_ASSERT_EQUAL(r.ev[11].kind, HOFF__TEV_ALLOC);
    CU_ASSERT_EQUAL(r.ev[11].size, 50);
    CU_ASSERT_EQUAL(r.ev[12].kind, HOFF__TEV_OP);
    CU_ASSERT_EQUAL(r.ev[13].kind, HOFF__TEV_FREE);
    CU_ASSERT_EQUAL(r.ev[13].block, r.ev[11].block);
    CU_ASSERT_EQUAL(r.ev[14].kind, HOFF__TEV_ACCESS);
    CU_ASSERT_EQUAL(r.ev[14].block, r.ev[10].block);
    CU_ASSERT_EQUAL(r.step_ns, t.step_ns + m.u[1].cost_ns);
    hoff__trace_destroy(&r);
    /* A temporary the model does not know as one is refused. */
    g.tmp = &d;
    CU_ASSERT_EQUAL(hoff__rc_rewrite(&t, &m, &g, 1, &r), -EINVAL);
    hoff__trace_destroy(&r);
    free(T);
    hoff__rc_model_destroy(&m);
    hoff__trace_destroy(&t);
}

/* The advice on a synthetic step under a budget of pct% of its offload peak; its figures checked against each
 * other and against a replay-free recomputation of the chosen trace. */
static void advise_one(const struct hoff__synth_opts *so, int pct, struct hoff__rc_advice *ad, uint64_t *compute) {
    struct hoff__trace t, r;
    struct hoff__rc_model m;
    struct hoff__plan_opts po;
    uint64_t *T, peak;

    hoff__trace_init(&t);
    CU_ASSERT_EQUAL_FATAL(hoff__synth_transformer(&t, so), 0);
    T = hoff__plan_times(&t);
    CU_ASSERT_PTR_NOT_NULL_FATAL(T);
    memset(&po, 0, sizeof po);
    po.block_bytes = hoff__pool_block_bytes;
    peak = hoff__trace_offload_peak(&t, po.block_bytes, NULL);
    po.budget_bytes = peak * (uint64_t)pct / 100;
    po.h2d_gbps = po.d2h_gbps = 50;
    po.guard_after_alloc = po.guard_before_free = 1;
    po.groups = 1;
    CU_ASSERT_EQUAL_FATAL(hoff__rc_model_build(&t, T, po.block_bytes, &m), 0);
    CU_ASSERT_EQUAL_FATAL(hoff__rc_advise(&t, &m, &po, NULL, ad), 0);
    *compute = m.compute_ns;
    CU_ASSERT_EQUAL(ad->peak_bytes, peak);
    /* The chosen step's trace: its peak is the one the advice planned. */
    CU_ASSERT_EQUAL_FATAL(hoff__rc_advice_rewrite(&t, &m, ad, &r), 0);
    CU_ASSERT_EQUAL(hoff__trace_offload_peak(&r, po.block_bytes, NULL), ad->combined.peak_bytes);
    CU_ASSERT(r.nev >= t.nev);
    hoff__trace_destroy(&r);
    free(T);
    hoff__rc_model_destroy(&m);
    hoff__trace_destroy(&t);
}

static void test_advise(void) {
    static const int pct[] = {90, 50, 35};
    struct hoff__synth_opts so;
    int roof, i, strictly = 0;

    for (roof = 0; roof < 2; roof++)
        for (i = 0; i < 3; i++) {
            struct hoff__rc_advice ad;
            uint64_t compute;

            hoff__synth_defaults(&so);
            so.layers = 2;
            so.hidden = 1024;
            so.seq = 4096;
            so.tflops = 100;
            so.hbm_gbps = roof ? 2000 : 0;
            so.input_reads = roof;
            advise_one(&so, pct[i], &ad, &compute);
            CU_ASSERT(ad.offload_only.have && ad.combined.have);
            CU_ASSERT(ad.full.have); /* L0, L1: two layer regions */
            /* Never worse than either alternative. */
            CU_ASSERT(ad.combined.feasible >= ad.offload_only.feasible);
            if (ad.offload_only.feasible)
                CU_ASSERT(ad.combined.step_ns <= ad.offload_only.step_ns);
            if (ad.full.feasible)
                CU_ASSERT(ad.combined.step_ns <= ad.full.step_ns);
            /* The bound is under every step of the model, and no lower than the compute. */
            CU_ASSERT(ad.bound_ns >= compute);
            if (ad.combined.feasible)
                CU_ASSERT(ad.bound_ns <= ad.combined.step_ns);
            if (ad.full.feasible)
                CU_ASSERT(ad.bound_ns <= ad.full.step_ns);
            /* Full checkpointing recomputes each layer's forward. */
            CU_ASSERT(ad.full.recompute_ns > 0);
            CU_ASSERT(ad.full.peak_bytes < ad.peak_bytes);
            if (ad.nunits) {
                CU_ASSERT_STRING_EQUAL(ad.chosen, "combined");
                CU_ASSERT(ad.combined.recompute_ns > 0);
                CU_ASSERT(ad.combined.peak_bytes < ad.peak_bytes);
            }
            if (roof && pct[i] == 35) { /* the link cannot carry it: recompute pays */
                CU_ASSERT(ad.nunits > 0 && ad.combined.feasible && ad.offload_only.feasible);
                CU_ASSERT(ad.combined.step_ns < ad.offload_only.step_ns);
                strictly += ad.combined.step_ns < ad.offload_only.step_ns;
            }
            hoff__rc_advice_destroy(&ad);
        }
    CU_ASSERT_EQUAL(strictly, 1);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"model", test_model}, {"rewrite", test_rewrite}, {"chain", test_chain}, {"advise", test_advise}, {NULL, NULL},
    };
    return hoff_test_run("recompute", tests);
}
