/* show.c — hoff-plan show: run a planner on a trace and print the schedule, event by event with the actions
 * planned before and after each, and a summary (with where the working-set floor comes from).
 * Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "hoff-plan.h"
#include "mem/pool.h"

static void usage(FILE *f) {
    fprintf(f, "usage: hoff-plan show TRACE --budget SIZE|PCT%% [options]\n"
               "Runs a planner on TRACE and prints the schedule: every event with the actions\n"
               "planned before and after it, then a summary, with where the working-set floor\n"
               "comes from (the op, its phase, the largest blocks in use there).\n"
               "\n"
               "  --budget SIZE|PCT%%       resident offload bytes allowed: a size (512M, 2G) or a\n"
               "                           percentage of the trace's offload peak\n"
               "  --planner NAME           planner (default timed)\n"
               "  --host-cap SIZE          host-tier bytes (default: no limit)\n"
               "  --bandwidth GBPS         H2D and D2H bandwidth for timed planners (default 50)\n"
               "  --guard-after-alloc N    blocks without access marks: events after the alloc\n"
               "                           before an eviction (default 1)\n"
               "  --guard-before-free N    ...and events before the free by which they are back\n"
               "                           (default 1)\n"
               "  --actions-only           list only the events that have actions\n"
               "  --json                   print one JSON object\n"
               "  -h, --help               this text\n"
               "\n"
               "Planners:\n");
    hp_list_planners(f);
    fprintf(f, "\nExit status: 0 ok, 1 unreadable trace or planner error, 2 bad usage.\n");
}

/* One line of text for event i. */
static const char *ev_text(const struct hoff__trace *t, size_t i, char *buf, size_t len) {
    const struct hoff__tev *e = &t->ev[i];
    const struct hoff__tblock *b = e->block < t->nblocks ? &t->blocks[e->block] : NULL;

    switch (e->kind) {
    case HOFF__TEV_ALLOC: /* the pool the plan counts it in: a kept block's is the device's */
        snprintf(buf, len, "alloc b%" PRIu32 " %s %s%s%s%s", e->block, SZ(e->size),
                 (b ? b->pool : e->pool) ? "managed" : "device", b && b->kept ? " kept" : "",
                 b && b->pinned ? " pinned" : "", b && b->retained ? " retained" : "");
        break;
    case HOFF__TEV_FREE:
    case HOFF__TEV_ACCESS: snprintf(buf, len, "%s b%" PRIu32, hoff__tev_kind_name(e), e->block); break;
    case HOFF__TEV_OP:
        if (hoff__tev_phase(e))
            snprintf(buf, len, "op %s (%s)", hoff__tev_op_name(t, e), hoff_phase_name((int)hoff__tev_phase(e)));
        else
            snprintf(buf, len, "op %s", hoff__tev_op_name(t, e));
        break;
    case HOFF__TEV_REGION_BEGIN: snprintf(buf, len, "region begin"); break;
    case HOFF__TEV_REGION_END: snprintf(buf, len, "region end"); break;
    default: snprintf(buf, len, "kind %d", e->kind); break;
    }
    return buf;
}

static void print_actions(const struct hoff__schedule *s, size_t from, size_t to, int when, int json) {
    size_t k;
    int n = 0;

    for (k = from; k < to; k++) {
        if (s->act[k].when != when)
            continue;
        if (json)
            printf("%s{\"kind\":\"%s\",\"block\":%" PRIu32 ",\"copy_ev\":%" PRIu32 "}", n ? "," : "",
                   hoff__act_kind_name(s->act[k].kind), s->act[k].block, s->act[k].copy_ev);
        else
            printf("%s%s b%" PRIu32, n ? ", " : "", hoff__act_kind_name(s->act[k].kind), s->act[k].block);
        n++;
    }
}

/* What show prints: the trace, the plan and its resident bytes per event. */
struct show {
    struct hp_args a;
    struct hp_trace ht;
    const struct hoff__planner *pl;
    struct hoff__plan_opts po;
    struct hoff__schedule s;
    uint64_t *res;
    struct hp_floor floor;
};

static void event_json(const struct show *w, size_t i, size_t k0, size_t k, int first) {
    const struct hoff__tev *e = &w->ht.t.ev[i];

    printf("%s{\"ev\":%zu,\"kind\":\"%s\"", first ? "" : ",", i, hoff__tev_kind_name(e));
    if (e->kind == HOFF__TEV_ALLOC || e->kind == HOFF__TEV_FREE || e->kind == HOFF__TEV_ACCESS)
        printf(",\"block\":%" PRIu32, e->block);
    if (e->kind == HOFF__TEV_ALLOC) {
        /* The pool the plan counts the block in: a kept block's is the device's. */
        int pool = e->block < w->ht.t.nblocks ? w->ht.t.blocks[e->block].pool : e->pool;

        printf(",\"size\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"pool\":\"%s\",\"pinned\":%s,\"kept\":%s", e->size,
               hoff__pool_block_bytes(pool, e->size), pool ? "managed" : "device",
               hp_yes((e->flags & HOFF__TEV_PINNED) != 0), hp_yes((e->flags & HOFF__TEV_KEPT) != 0));
    }
    if (e->kind == HOFF__TEV_ACCESS)
        printf(",\"write\":%s", hp_yes((e->flags & HOFF__TEV_WRITE) != 0));
    if (e->kind == HOFF__TEV_OP) {
        printf(",\"name\":");
        hp_json_str(stdout, hoff__tev_op_name(&w->ht.t, e));
        printf(",\"phase\":\"%s\"", hoff_phase_name((int)hoff__tev_phase(e)));
    }
    printf(",\"resident_bytes\":%" PRIu64 ",\"before\":[", w->res[i]);
    print_actions(&w->s, k0, k, HOFF__ACT_BEFORE, 1);
    printf("],\"after\":[");
    print_actions(&w->s, k0, k, HOFF__ACT_AFTER, 1);
    printf("]}");
}

static void event_text(const struct show *w, size_t i, size_t k0, size_t k) {
    const struct hoff__schedule *s = &w->s;
    char buf[160];
    int nb = 0, na = 0;
    size_t j;

    for (j = k0; j < k; j++) {
        nb += s->act[j].when == HOFF__ACT_BEFORE;
        na += s->act[j].when == HOFF__ACT_AFTER;
    }
    printf("%8zu  %-40s %10s  ", i, ev_text(&w->ht.t, i, buf, sizeof buf), SZ(w->res[i]));
    if (nb) {
        printf("before: ");
        print_actions(s, k0, k, HOFF__ACT_BEFORE, 0);
    }
    if (na) {
        printf("%safter: ", nb ? "; " : "");
        print_actions(s, k0, k, HOFF__ACT_AFTER, 0);
    }
    putchar('\n');
}

/* Every event (or those with actions) with its actions. */
static void print_events(const struct show *w) {
    const struct hoff__schedule *s = &w->s;
    size_t i, k, k0;
    int first = 1;

    for (i = 0, k = 0; i < w->ht.t.nev; i++) {
        k0 = k;
        while (k < s->nact && s->act[k].ev < i)
            k0 = ++k; /* out of order cannot happen in a sorted schedule */
        while (k < s->nact && s->act[k].ev == i)
            k++;
        if (w->a.actions_only && k == k0)
            continue;
        if (w->a.json)
            event_json(w, i, k0, k, first);
        else
            event_text(w, i, k0, k);
        first = 0;
    }
}

static void print_summary(const struct show *w) {
    const struct hoff__schedule *s = &w->s;
    const struct hoff__trace *t = &w->ht.t;
    size_t nk[HOFF__ACT_KIND_COUNT] = {0}, k;
    char buf[160];

    for (k = 0; k < s->nact; k++)
        if (s->act[k].kind < HOFF__ACT_KIND_COUNT)
            nk[s->act[k].kind]++;
    if (w->a.json) {
        /* The floor last: its array of objects comes after every flat member. */
        printf("],\"summary\":{\"feasible\":%s,\"plan_feasible\":%s", hp_yes(s->feasible), hp_yes(s->feasible));
        printf(",\"peak_bytes\":%" PRIu64 ",\"peak_ev\":%" PRIu32 ",\"nopeak_bytes\":%" PRIu64
               ",\"offload_peak_bytes\":%" PRIu64 ",\"actions\":%zu,\"evictions\":%zu"
               ",\"prefetches\":%zu,\"releases\":%zu,\"bytes_d2h\":%" PRIu64 ",\"bytes_h2d\":%" PRIu64
               ",\"plan_ns\":%" PRIu64 ",",
               s->peak_bytes, s->peak_ev, s->nopeak_bytes, w->ht.offload_peak, s->nact, nk[HOFF__ACT_EVICT],
               nk[HOFF__ACT_PREFETCH], nk[HOFF__ACT_RELEASE], s->bytes_d2h, s->bytes_h2d, s->plan_ns);
        hp_floor_json(t, &w->floor);
        printf("}}\n");
        return;
    }
    printf("summary:\n");
    printf("  feasible: %s\n", s->feasible ? "yes"
                                           : "NO (the budget cannot be met; the peak below is the lowest "
                                             "the planner reached)");
    hp_floor_text(t, &w->floor, s->budget_bytes, "the budget", "  ");
    printf("  peak: %s at event %" PRIu32 " (%s); without offload %s at event %zu\n", SZ(s->peak_bytes), s->peak_ev,
           s->peak_ev < t->nev ? ev_text(t, s->peak_ev, buf, sizeof buf) : "-", SZ(w->ht.offload_peak), w->ht.peak_ev);
    printf("  actions: %zu (%zu evictions, %zu prefetches, %zu releases)\n", s->nact, nk[HOFF__ACT_EVICT],
           nk[HOFF__ACT_PREFETCH], nk[HOFF__ACT_RELEASE]);
    printf("  bytes planned: %s D2H, %s H2D\n", SZ(s->bytes_d2h), SZ(s->bytes_h2d));
    printf("  plan time: %s\n", TM(s->plan_ns));
}

/* Build the plan and its resident bytes per event.  0 or EXIT_FAIL (reported). */
static int build(struct show *w) {
    int rc;

    hp_plan_opts(&w->a, w->ht.budget, &w->po);
    w->pl = hoff__planner_find(w->a.planner);
    rc = hoff__plan_build(w->pl, &w->ht.t, &w->po, &w->s);
    if (rc) {
        fprintf(stderr, "%s show: planner %s failed on %s: %s\n", hp_cmd, w->pl->name, w->a.trace_path,
                hoff_last_error()[0] ? hoff_last_error() : hoff_strerror(rc));
        return EXIT_FAIL;
    }
    /* The per-event column is the library's residency walk, in the block bytes
     * the planner and the summary count (size classes, the managed grain). */
    w->res = calloc(w->ht.t.nev ? w->ht.t.nev : 1, sizeof *w->res);
    if (!w->res || (rc = hoff__schedule_resident(&w->ht.t, &w->s, w->res, &(uint64_t){0}, &(uint32_t){0})) != 0) {
        fprintf(stderr, "%s show: %s\n", hp_cmd,
                !w->res || rc == -ENOMEM ? "out of memory" : "the planner's schedule does not apply to the trace");
        return EXIT_FAIL;
    }
    return hp_floor("show", &w->ht.t, &w->po, w->s.floor_bytes, w->s.floor_ev, &w->floor);
}

int hp_cmd_show(int argc, char **argv) {
    const uint64_t accepted = HP_F(BUDGET) | HP_F(PLANNER) | HP_F(HOST_CAP) | HP_F(BANDWIDTH) | HP_F(GUARD_AFTER) |
                              HP_F(GUARD_BEFORE) | HP_F(ACTIONS_ONLY) | HP_F(JSON) | HP_F(HELP);
    struct show w;
    int rc;

    memset(&w, 0, sizeof w);
    rc = hp_parse("show", argc, argv, accepted, usage, &w.a);
    if (rc)
        return rc == HP_HELP_SHOWN ? 0 : rc;
    if ((rc = hp_trace_operand(&w.a, argc, argv, 1, 1)) != 0 || (rc = hp_trace_load(&w.a, 0, &w.ht)) != 0)
        return rc;
    hoff__schedule_init(&w.s);
    if ((rc = build(&w)) == 0) {
        if (w.a.json) {
            printf("{\"trace\":");
            hp_json_str(stdout, w.a.trace_path);
            printf(",\"planner\":");
            hp_json_str(stdout, w.pl->name);
            printf(",\"budget_bytes\":%" PRIu64 ",\"events\":[", w.ht.budget);
        } else {
            printf("trace %s: %zu events, %" PRIu32 " blocks; planner %s, budget %s\n", w.a.trace_path, w.ht.t.nev,
                   w.ht.t.nblocks, w.pl->name, w.ht.budget ? SZ(w.ht.budget) : "none");
            printf("%8s  %-40s %10s  %s\n", "event", "what", "resident", "actions");
        }
        print_events(&w);
        print_summary(&w);
    }
    free(w.res);
    hoff__schedule_destroy(&w.s);
    hoff__trace_destroy(&w.ht.t);
    return rc;
}
