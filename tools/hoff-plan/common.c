/* common.c — what several hoff-plan commands print or load: traces with their budget, JSON strings, the
 * planner list.  Threading: single-threaded. */
#include "config.h"

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
