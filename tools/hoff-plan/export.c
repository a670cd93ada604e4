/* export.c — hoff-plan export: the simulated replay as Chrome trace-event JSON (Perfetto): a compute track
 * (steps, ops, stalls), the D2H and H2D copy engines, the NVMe tier, and counters of the bytes per tier.
 * Threading: single-threaded (the replay itself runs in recorder.c). */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "core/outfile.h"
#include "hoff-plan.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: hoff-plan export TRACE --budget SIZE|PCT%% --perfetto FILE.json [options]\n"
            "Writes the simulated replay as Chrome trace-event JSON, which ui.perfetto.dev and\n"
            "chrome://tracing open: a compute track (steps, ops, stalls for faults and waits),\n"
            "D2H and H2D copy tracks (every eviction and prefetch), an NVMe track (spills and\n"
            "restores), and counter tracks for the bytes on the device, the host tier and the\n"
            "NVMe tier.  Times are the sim's virtual clock; every step is exported.\n"
            "\n"
            "  --perfetto FILE      the JSON to write (required)\n" PIC_FLAGS_HELP "  -h, --help           this text\n"
            "\n"
            "Exit status: 0 ok, 1 unreadable trace, runtime error or unwritable file, 2 bad usage,\n"
            "3 refused: the machine has too little memory available now (--no-memory-check).\n");
}

#define TID_COMPUTE 1
#define TID_D2H 2
#define TID_H2D 3
#define TID_NVME 4

/* The file being written. */
struct ex {
    struct pic p;
    FILE *f;
    int first; /* no event written yet */
    size_t nslices;
};

static void sep(struct ex *x) {
    fputs(x->first ? "\n" : ",\n", x->f);
    x->first = 0;
}

/* ns as trace-event microseconds. */
static double us(uint64_t ns) {
    return (double)ns / 1000.0;
}

static void slice(struct ex *x, int tid, const char *name, const char *cat, uint64_t t0, uint64_t t1,
                  const char *args) {
    sep(x);
    fprintf(x->f, "{\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"name\":", tid);
    hp_json_str(x->f, name);
    fprintf(x->f, ",\"cat\":\"%s\",\"ts\":%.3f,\"dur\":%.3f%s%s}", cat, us(t0), us(t1 > t0 ? t1 - t0 : 0),
            args ? ",\"args\":" : "", args ? args : "");
    x->nslices++;
}

static void counter(struct ex *x, const char *name, uint64_t t, uint64_t v) {
    sep(x);
    fprintf(x->f, "{\"ph\":\"C\",\"pid\":1,\"name\":\"%s\",\"ts\":%.3f,\"args\":{\"bytes\":%" PRIu64 "}}", name, us(t),
            v);
}

static void tier_counters(struct ex *x, const struct rec_sample *s) {
    counter(x, "device: resident offload bytes", s->t, s->st.resident_bytes);
    counter(x, "host tier bytes", s->t, s->st.host_bytes);
    counter(x, "NVMe tier bytes", s->t, s->st.nvme_bytes);
}

/* The metadata and the tracks. */
static void head(struct ex *x) {
    static const struct {
        int tid;
        const char *name;
    } tracks[] = {{TID_COMPUTE, "compute"},
                  {TID_D2H, "D2H copy engine (evictions)"},
                  {TID_H2D, "H2D copy engine (prefetches)"},
                  {TID_NVME, "NVMe tier (spills, restores)"}};
    const struct pic *p = &x->p;
    char args[256];
    int k;

    fprintf(x->f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"tool\":\"hoff-plan export\",\"trace\":");
    hp_json_str(x->f, p->a.trace_path);
    fprintf(x->f, ",\"planner\":");
    hp_json_str(x->f, p->planner);
    fprintf(x->f,
            ",\"budget_bytes\":%" PRIu64 ",\"offload_peak_bytes\":%" PRIu64 ",\"bandwidth_gbps\":%g,\"steps\":%d"
            ",\"host_cap_bytes\":%" PRIu64 ",\"evictions\":%" PRIu64 ",\"prefetches\":%" PRIu64 ",\"spills\":%" PRIu64
            ",\"restores\":%" PRIu64 ",\"clock\":\"sim virtual time\"},\n\"traceEvents\":[",
            p->ht.budget, p->ht.offload_peak, p->a.bandwidth, p->rec.steps, p->a.host_cap, p->last.evictions,
            p->last.prefetches, p->last.spills, p->last.restores);
    sep(x);
    fprintf(x->f, "{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":");
    snprintf(args, sizeof args, "hoff sim replay: %s (budget %s)", hp_base_name(p->a.trace_path), SZ(p->ht.budget));
    hp_json_str(x->f, args);
    fprintf(x->f, "}}");
    for (k = 0; k < (int)(sizeof tracks / sizeof tracks[0]); k++) {
        sep(x);
        fprintf(x->f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"%s\"}}",
                tracks[k].tid, tracks[k].name);
        sep(x);
        fprintf(x->f, "{\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}",
                tracks[k].tid, k);
    }
}

/* Step k on the compute track: a slice for the step, one per op (op mark
 * to the next), the tier counters after every event and the late prefetches. */
static void compute_step(struct ex *x, int k) {
    const struct pic *p = &x->p;
    const struct hoff__trace *t = &p->ht.t;
    struct rec_sample *b = rec_at(&p->rec, k, 0), *e = rec_at(&p->rec, k, p->rec.per_step - 1), *s0 = b;
    size_t op_ev = SIZE_MAX, i;
    uint64_t op_t = 0;
    char name[64];

    if (!b || !e)
        return;
    snprintf(name, sizeof name, "step %d (%s)", k, k == 0 ? "warmup" : "replay");
    slice(x, TID_COMPUTE, name, "step", b->t, e->t, NULL);
    for (i = 0; i <= t->nev; i++) {
        struct rec_sample *s = rec_at(&p->rec, k, i + 1);
        int is_op = i < t->nev && t->ev[i].kind == HOFF__TEV_OP;

        if ((is_op || i == t->nev) && op_ev != SIZE_MAX && s) {
            const char *op = hoff__tev_op_name(t, &t->ev[op_ev]);

            slice(x, TID_COMPUTE, op[0] ? op : "op", "op", op_t, s->t, NULL);
        }
        if (is_op && s) {
            op_ev = i;
            op_t = s->t;
        }
        if (s && i < t->nev) {
            tier_counters(x, s);
            if (s0 && s->st.late_prefetches > s0->st.late_prefetches) {
                sep(x);
                fprintf(x->f,
                        "{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":%d,\"name\":\"late prefetch\",\"ts\":%.3f,"
                        "\"args\":{\"event\":%zu,\"count\":%" PRIu64 "}}",
                        TID_COMPUTE, us(s->t), i, s->st.late_prefetches - s0->st.late_prefetches);
            }
        }
        if (s)
            s0 = s;
    }
    tier_counters(x, e);
}

/* The budget as a counter, every copy and stall as the sim's engines and
 * clock had them, and a note when the NVMe track stays empty. */
static void transfers(struct ex *x) {
    static const char *const names[] = {"evict",         "prefetch",      "fault (page-in)", "wait for a transfer",
                                        "spill (write)", "restore (read)"};
    static const char *const cats[] = {"d2h", "h2d", "stall", "stall", "nvme", "nvme"};
    static const int tids[] = {TID_D2H, TID_H2D, TID_COMPUTE, TID_COMPUTE, TID_NVME, TID_NVME};
    const struct pic *p = &x->p;
    struct rec_sample *b = rec_at(&p->rec, 0, 0), *e = rec_at(&p->rec, p->rec.steps - 1, p->rec.per_step - 1);
    char args[128];
    size_t j;

    if (p->ht.budget && b && e) {
        counter(x, "budget", b->t, p->ht.budget);
        counter(x, "budget", e->t, p->ht.budget);
    }
    for (j = 0; j < p->rec.nsp; j++) {
        const struct rec_span *sp = &p->rec.sp[j];

        snprintf(args, sizeof args, "{\"bytes\":%" PRIu64 ",\"step\":%d}", sp->bytes, sp->step);
        slice(x, tids[sp->kind], names[sp->kind], cats[sp->kind], sp->t0, sp->t1, args);
    }
    if (!p->last.spills && !p->last.restores) {
        sep(x);
        fprintf(x->f,
                "{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":%d,\"name\":\"no NVMe traffic in this replay\","
                "\"ts\":%.3f}",
                TID_NVME, b ? us(b->t) : 0.0);
    }
}

int hp_cmd_export(int argc, char **argv) {
    struct ex x;
    struct hoff__outfile of;
    int rc, k;

    memset(&x, 0, sizeof x);
    rc = pic_setup(&x.p, "export", argc, argv, HP_F(PERFETTO), HP_F(PERFETTO), "--perfetto FILE.json is required",
                   usage);
    if (rc)
        return rc == HP_HELP_SHOWN ? 0 : rc;
    rc = EXIT_FAIL;
    if (hoff__out_open(&of, x.p.a.perfetto) < 0) {
        fprintf(stderr, "%s export: %s\n", hp_cmd, hoff_last_error());
        goto out;
    }
    x.f = of.f;
    x.first = 1;
    head(&x);
    for (k = 0; k < x.p.rec.steps; k++)
        compute_step(&x, k);
    transfers(&x);
    fprintf(x.f, "\n]}\n");
    if (hoff__out_commit(&of) < 0) {
        fprintf(stderr, "%s export: %s\n", hp_cmd, hoff_last_error());
        goto out;
    }
    printf("%s: %d steps, %zu slices (%zu copies and stalls), counters after each of %zu events\n", x.p.a.perfetto,
           x.p.rec.steps, x.nslices, x.p.rec.nsp, x.p.ht.t.nev);
    rc = 0;
out:
    pic_free(&x.p);
    return rc;
}
