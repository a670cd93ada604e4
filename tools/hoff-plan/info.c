/* info.c — hoff-plan info: summarise a trace (events by kind, blocks by pool, retained, pinned and kept blocks,
 * the peaks without offload, the working-set floor and where it comes from, the step time, the header).
 * Threading: single-threaded. */
#include "config.h"

#include <inttypes.h>
#include <string.h>

#include "hoff-plan.h"
#include "mem/pool.h"

static void usage(FILE *f) {
    fprintf(f, "usage: hoff-plan info TRACE [--json]\n"
               "Summarises a trace: events by kind, blocks by pool, retained, pinned and kept\n"
               "blocks, the peaks without offload, the working-set floor and where it comes from\n"
               "(the op, its phase, the largest blocks), the step time and the header fields.\n"
               "\n"
               "  --json       print one JSON object\n"
               "  -h, --help   this text\n"
               "\n"
               "Exit status: 0 ok, 1 unreadable trace, 2 bad usage.\n");
}

/* The figures info prints. */
struct info {
    size_t kinds[HOFF__TEV_KIND_COUNT], peak_ev;
    uint64_t managed, device, pinned, retained, retained_bytes, managed_bytes, device_bytes, kept, kept_bytes;
    uint64_t offload_peak, tpeak, tpeak_asked;
    struct hp_floor floor; /* under the runtime's plan options and the budget the trace was recorded with */
};

/* 0 or EXIT_FAIL (reported). */
static int count(const struct hp_args *a, const struct hoff__trace *t, struct info *n) {
    struct hoff__plan_opts po;
    uint64_t floor;
    uint32_t floor_ev;
    size_t i;
    int rc;

    memset(n, 0, sizeof *n);
    for (i = 0; i < t->nev; i++)
        if (t->ev[i].kind < HOFF__TEV_KIND_COUNT)
            n->kinds[t->ev[i].kind]++;
    for (i = 0; i < t->nblocks; i++) {
        const struct hoff__tblock *b = &t->blocks[i];

        if (b->pool == 1) {
            n->managed++;
            n->managed_bytes += b->size;
        } else {
            n->device++;
            n->device_bytes += b->size;
        }
        n->pinned += b->pinned != 0;
        if (b->kept) { /* counted in the device pool above, as the plan counts it */
            n->kept++;
            n->kept_bytes += b->size;
        }
        if (b->retained) {
            n->retained++;
            n->retained_bytes += b->size;
        }
    }
    n->offload_peak = hoff__trace_offload_peak(t, hoff__pool_block_bytes, &n->peak_ev);
    n->tpeak = hoff__trace_peak(t, hoff__pool_block_bytes, HOFF__POOLS_ALL, NULL);
    n->tpeak_asked = hoff__trace_peak(t, NULL, HOFF__POOLS_ALL, NULL);
    hp_plan_opts(a, t->budget_bytes, &po);
    if ((rc = hoff__plan_floor(t, &po, &floor, &floor_ev)) != 0) {
        fprintf(stderr, "%s info: the working-set floor of %s: %s\n", hp_cmd, a->trace_path, hoff_strerror(rc));
        return EXIT_FAIL;
    }
    return hp_floor("info", t, &po, floor, floor_ev, &n->floor);
}

static void print_json(const char *path, const struct hoff__trace *t, const struct info *n) {
    printf("{\"trace\":");
    hp_json_str(stdout, path);
    printf(",\"version\":%" PRIu32 ",\"backend\":", t->version);
    hp_json_str(stdout, t->backend);
    printf(",\"events\":%zu,\"allocs\":%zu,\"frees\":%zu,\"accesses\":%zu,\"ops\":%zu,\"regions\":%zu"
           ",\"op_names\":%" PRIu32,
           t->nev, n->kinds[HOFF__TEV_ALLOC], n->kinds[HOFF__TEV_FREE], n->kinds[HOFF__TEV_ACCESS],
           n->kinds[HOFF__TEV_OP], n->kinds[HOFF__TEV_REGION_BEGIN], t->nnames);
    printf(",\"blocks\":%" PRIu32 ",\"managed_blocks\":%" PRIu64 ",\"managed_bytes\":%" PRIu64
           ",\"device_blocks\":%" PRIu64 ",\"device_bytes\":%" PRIu64 ",\"pinned_blocks\":%" PRIu64
           ",\"retained_blocks\":%" PRIu64 ",\"retained_bytes\":%" PRIu64 ",\"kept_blocks\":%" PRIu64
           ",\"kept_bytes\":%" PRIu64,
           t->nblocks, n->managed, n->managed_bytes, n->device, n->device_bytes, n->pinned, n->retained,
           n->retained_bytes, n->kept, n->kept_bytes);
    printf(",\"offload_peak_bytes\":%" PRIu64 ",\"offload_peak_ev\":%zu,\"total_peak_bytes\":%" PRIu64
           ",\"total_peak_asked_bytes\":%" PRIu64 ",\"has_access_events\":%s",
           n->offload_peak, n->peak_ev, n->tpeak, n->tpeak_asked, hp_yes(t->has_access_events));
    printf(",\"step_ns\":%" PRIu64 ",\"step_gpu_ns\":", t->step_ns);
    if (t->step_gpu_ns == HOFF__TIME_UNKNOWN)
        printf("null");
    else
        printf("%" PRIu64, t->step_gpu_ns);
    printf(",\"budget_bytes\":%" PRIu64 ",\"host_cap_bytes\":%" PRIu64 ",\"h2d_gbps\":%g,\"d2h_gbps\":%g,",
           t->budget_bytes, t->host_cap_bytes, t->h2d_gbps, t->d2h_gbps);
    hp_floor_json(t, &n->floor); /* last: its array of objects comes after every flat member */
    printf("}\n");
}

static const char *time_or_unknown(uint64_t ns, char *buf, size_t len) {
    return ns == HOFF__TIME_UNKNOWN ? "unknown" : hoff__fmt_time(ns, buf, len);
}

static void print_text(const char *path, const struct hoff__trace *t, const struct info *n) {
    char tb[32], gb[32];

    printf("trace: %s (format version %" PRIu32 ", recorded on %s)\n", path, t->version,
           t->backend[0] ? t->backend : "?");
    printf("events: %zu (%zu allocs, %zu frees, %zu accesses, %zu ops, %zu regions; %" PRIu32 " op names)\n", t->nev,
           n->kinds[HOFF__TEV_ALLOC], n->kinds[HOFF__TEV_FREE], n->kinds[HOFF__TEV_ACCESS], n->kinds[HOFF__TEV_OP],
           n->kinds[HOFF__TEV_REGION_BEGIN], t->nnames);
    printf("blocks: %" PRIu32 " (%" PRIu64 " managed, %s; %" PRIu64 " device pool, %s; %" PRIu64
           " pinned in regions)\n",
           t->nblocks, n->managed, SZ(n->managed_bytes), n->device, SZ(n->device_bytes), n->pinned);
    printf("retained at step end: %" PRIu64 " blocks, %s\n", n->retained, SZ(n->retained_bytes));
    printf("kept (not activations; device memory for the plan): %" PRIu64 " blocks, %s\n", n->kept, SZ(n->kept_bytes));
    printf("access marks: %s\n", t->has_access_events ? "yes" : "no");
    printf("offload peak without offload: %s (event %zu)\n", SZ(n->offload_peak), n->peak_ev);
    printf("peak of all live bytes: %s (%s asked for)\n", SZ(n->tpeak), SZ(n->tpeak_asked));
    hp_floor_text(t, &n->floor, t->budget_bytes, "the budget it was recorded with", "");
    printf("step time: %s host, %s device\n", time_or_unknown(t->step_ns, tb, sizeof tb),
           time_or_unknown(t->step_gpu_ns, gb, sizeof gb));
    printf("recorded with: budget %s, host cap %s, H2D %g GB/s, D2H %g GB/s\n",
           t->budget_bytes ? SZ(t->budget_bytes) : "none", t->host_cap_bytes ? SZ(t->host_cap_bytes) : "none",
           t->h2d_gbps, t->d2h_gbps);
}

int hp_cmd_info(int argc, char **argv) {
    struct hp_args a;
    struct hoff__trace t;
    struct info n;
    int rc;

    rc = hp_parse("info", argc, argv, HP_F(JSON) | HP_F(HELP), usage, &a);
    if (rc)
        return rc == HP_HELP_SHOWN ? 0 : rc;
    if ((rc = hp_trace_operand(&a, argc, argv, 0, 0)) != 0)
        return rc;
    if (hp_load_trace(a.trace_path, &t))
        return EXIT_FAIL;
    if ((rc = count(&a, &t, &n)) != 0) {
        hoff__trace_destroy(&t);
        return rc;
    }
    if (a.json)
        print_json(a.trace_path, &t, &n);
    else
        print_text(a.trace_path, &t, &n);
    hoff__trace_destroy(&t);
    return 0;
}
