/* common.c — what several hoff-plan commands print or load: traces with their budget, JSON strings, the
 * planner list, where the working-set floor comes from (show and info).  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hoff-plan.h"
#include "mem/pool.h"

int hp_load_trace(const char *path, struct hoff__trace *t) {
    char err[512];
    int rc;

    hoff__trace_init(t);
    err[0] = '\0';
    rc = hoff__trace_load(t, path, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s: cannot read trace %s: %s\n", hp_cmd, path,
                err[0] ? err : (hoff_last_error()[0] ? hoff_last_error() : hoff_strerror(rc)));
        hoff__trace_destroy(t);
        return -1;
    }
    return 0;
}

int hp_trace_load(const struct hp_args *a, int check_scale, struct hp_trace *ht) {
    if (hp_load_trace(a->trace_path, &ht->t))
        return EXIT_FAIL;
    ht->offload_peak = hoff__trace_offload_peak(&ht->t, hoff__pool_block_bytes, &ht->peak_ev);
    if (hp_resolve_budget(a->sub, &a->budget, ht->offload_peak, &ht->budget) ||
        (check_scale && hp_check_scale(a->sub, &ht->t, a->compute_scale, a->gpu_step_ms))) {
        hoff__trace_destroy(&ht->t);
        return EXIT_USAGE;
    }
    return 0;
}

void hp_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

const char *hp_yes(int v) {
    return v ? "true" : "false";
}

const char *hp_base_name(const char *path) {
    const char *s = strrchr(path, '/');

    return s ? s + 1 : path;
}

void hp_list_planners(FILE *f) {
    const struct hoff__planner *p;
    int i;

    for (i = 0; (p = hoff__planner_at(i)) != NULL; i++)
        fprintf(f, "  %-10s %s\n", p->name, p->help ? p->help : "");
}

void hp_plan_opts(const struct hp_args *a, uint64_t budget, struct hoff__plan_opts *po) {
    memset(po, 0, sizeof *po);
    po->budget_bytes = budget;
    po->host_cap_bytes = a->host_cap;
    po->guard_after_alloc = (uint32_t)a->guard_after;
    po->guard_before_free = (uint32_t)a->guard_before;
    po->block_bytes = hoff__pool_block_bytes; /* as the runtime plans */
    po->h2d_gbps = a->bandwidth;
    po->d2h_gbps = a->bandwidth;
}

/* --- where the working-set floor comes from (show, info) ------------------ */

int hp_floor(const char *sub, const struct hoff__trace *t, const struct hoff__plan_opts *po, uint64_t bytes,
             uint32_t ev, struct hp_floor *f) {
    uint32_t *ids = NULL, i;
    int rc;

    memset(f, 0, sizeof *f);
    f->bytes = bytes;
    f->ev = ev;
    f->w.op_ev = UINT32_MAX;
    if (bytes == 0) /* no floor: nothing is in use on the device */
        return 0;
    if ((rc = hoff__plan_floor_where(t, po, ev, &f->w, &ids)) != 0) {
        fprintf(stderr, "%s %s: where the working-set floor comes from: %s\n", hp_cmd, sub,
                rc == -ENOMEM ? "out of memory" : hoff_strerror(rc));
        return EXIT_FAIL;
    }
    /* The largest, largest first (ties: the lower id first). */
    for (i = 0; i < f->w.blocks; i++) {
        uint64_t b = hoff__plan_bytes(po->block_bytes, &t->blocks[ids[i]]);
        unsigned k = f->ntop < HP_FLOOR_TOP ? f->ntop++ : HP_FLOOR_TOP;

        if (k == HP_FLOOR_TOP && b <= f->top_bytes[HP_FLOOR_TOP - 1])
            continue;
        if (k == HP_FLOOR_TOP)
            k--;
        for (; k > 0 && f->top_bytes[k - 1] < b; k--) {
            f->top[k] = f->top[k - 1];
            f->top_bytes[k] = f->top_bytes[k - 1];
        }
        f->top[k] = ids[i];
        f->top_bytes[k] = b;
    }
    free(ids);
    return 0;
}

void hp_floor_text(const struct hoff__trace *t, const struct hp_floor *f, uint64_t budget, const char *budget_name,
                   const char *indent) {
    const char *advice = hoff__plan_floor_advice(f->w.phase);
    unsigned k;

    printf("%sworking-set floor: %s at event %" PRIu32 " (%" PRIu32 " blocks on the device): no plan goes below "
           "it%s%s%s\n",
           indent, SZ(f->bytes), f->ev, f->w.blocks, budget && budget < f->bytes ? "; " : "",
           budget && budget < f->bytes ? budget_name : "",
           budget && budget < f->bytes ? " is below it, so the plan is for it" : "");
    if (f->bytes == 0)
        return;
    if (f->w.op_ev == UINT32_MAX)
        printf("%s  where: the step's end closes the use windows open there (no op mark after it; the mark "
               "before: %s)\n",
               indent, hoff__plan_op_at(t, f->ev));
    else
        printf("%s  where: op %s, %s%s (its mark, event %" PRIu32 ", closes the use windows open there; the "
               "mark before: %s)\n",
               indent, hoff__plan_op_name(t, f->w.op_ev),
               f->w.phase ? hoff_phase_name((int)f->w.phase) : "no phase recorded", f->w.phase ? " phase" : "",
               f->w.op_ev, hoff__plan_op_at(t, f->ev));
    printf("%s  largest blocks:", indent);
    for (k = 0; k < f->ntop; k++)
        printf("%s b%" PRIu32 " %s", k ? "," : "", f->top[k], SZ(f->top_bytes[k]));
    if (f->w.blocks > f->ntop)
        printf(" (and %" PRIu32 " more)", f->w.blocks - f->ntop);
    putchar('\n');
    if (budget && budget < f->bytes && *advice)
        printf("%s  the floor is %s\n", indent, advice);
}

void hp_floor_json(const struct hoff__trace *t, const struct hp_floor *f) {
    unsigned k;

    printf("\"floor_bytes\":%" PRIu64 ",\"floor_ev\":%" PRIu32 ",\"floor_blocks\":%" PRIu32 ",\"floor_op\":", f->bytes,
           f->ev, f->w.blocks);
    hp_json_str(stdout, f->bytes ? hoff__plan_op_name(t, f->w.op_ev) : "");
    if (f->w.op_ev == UINT32_MAX)
        printf(",\"floor_op_ev\":null");
    else
        printf(",\"floor_op_ev\":%" PRIu32, f->w.op_ev);
    printf(",\"floor_prev_op\":");
    hp_json_str(stdout, f->bytes ? hoff__plan_op_at(t, f->ev) : "");
    printf(",\"floor_phase\":\"%s\",\"floor_largest\":[", hoff_phase_name((int)f->w.phase));
    for (k = 0; k < f->ntop; k++)
        printf("%s{\"block\":%" PRIu32 ",\"bytes\":%" PRIu64 "}", k ? "," : "", f->top[k], f->top_bytes[k]);
    printf("],\"floor_advice\":");
    hp_json_str(stdout, hoff__plan_floor_advice(f->w.phase));
}
