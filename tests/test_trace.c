/* test_trace.c — the trace IR (append validation, finish, offload peak) and its text format (round trips,
 * gzip, the reader's error messages, kept blocks and op phases, 10 million events), and the driver that replays
 * a trace through the API (its keeps and phases).  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_ZLIB
#include <zlib.h>
#endif

#include "core/core.h"
#include "testutil.h"
#include "trace/drive.h"
#include "trace/trace.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

#define UNK HOFF__TIME_UNKNOWN

/* --- helpers ------------------------------------------------------------------ */

static int ev_alloc(struct hoff__trace *t, uint32_t id, uint64_t size, int pool, uint64_t tc) {
    struct hoff__tev e = {.kind = HOFF__TEV_ALLOC,
                          .block = id,
                          .size = size,
                          .pool = (uint8_t)pool,
                          .stream = 7,
                          .t_cpu_ns = tc,
                          .t_gpu_ns = UNK,
                          .name = UINT32_MAX};
    return hoff__trace_append(t, &e);
}

static int ev_blk(struct hoff__trace *t, int kind, uint32_t id, int write, uint64_t tc) {
    struct hoff__tev e = {.kind = (uint8_t)kind,
                          .block = id,
                          .flags = write ? HOFF__TEV_WRITE : 0,
                          .stream = 7,
                          .t_cpu_ns = tc,
                          .t_gpu_ns = UNK,
                          .name = UINT32_MAX};
    return hoff__trace_append(t, &e);
}

static int ev_mark(struct hoff__trace *t, int kind, uint32_t name, uint64_t tc) {
    struct hoff__tev e = {.kind = (uint8_t)kind, .name = name, .t_cpu_ns = tc, .t_gpu_ns = UNK};
    return hoff__trace_append(t, &e);
}

static char *tmp_path(const char *suffix) {
    static char path[256];
    const char *dir = getenv("TMPDIR");
    int fd;

    snprintf(path, sizeof path, "%s/hoff-trace-XXXXXX%s", dir && *dir ? dir : "/tmp", suffix);
    fd = mkstemps(path, (int)strlen(suffix));
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    return path;
}

/* Every field of a against b. */
static void assert_same(const struct hoff__trace *a, const struct hoff__trace *b) {
    size_t i;
    uint32_t k;

    CU_ASSERT_EQUAL_FATAL(a->nev, b->nev);
    CU_ASSERT_EQUAL(a->version, b->version);
    CU_ASSERT_EQUAL_FATAL(a->nblocks, b->nblocks);
    CU_ASSERT_EQUAL(a->budget_bytes, b->budget_bytes);
    CU_ASSERT_EQUAL(a->host_cap_bytes, b->host_cap_bytes);
    CU_ASSERT(memcmp(&a->h2d_gbps, &b->h2d_gbps, sizeof(double)) == 0);
    CU_ASSERT(memcmp(&a->d2h_gbps, &b->d2h_gbps, sizeof(double)) == 0);
    CU_ASSERT_EQUAL(a->step_ns, b->step_ns);
    CU_ASSERT_EQUAL(a->step_gpu_ns, b->step_gpu_ns);
    CU_ASSERT_STRING_EQUAL(a->backend, b->backend);
    CU_ASSERT_EQUAL_FATAL(a->nnames, b->nnames);
    for (k = 0; k < a->nnames; k++)
        CU_ASSERT_STRING_EQUAL(a->names[k], b->names[k]);
    for (i = 0; i < a->nev; i++) {
        const struct hoff__tev *x = &a->ev[i], *y = &b->ev[i];
        int same = x->kind == y->kind && x->pool == y->pool && x->flags == y->flags && x->block == y->block &&
                   x->name == y->name && x->size == y->size && x->stream == y->stream && x->t_cpu_ns == y->t_cpu_ns &&
                   x->t_gpu_ns == y->t_gpu_ns;
        CU_ASSERT(same);
        if (!same) {
            printf("\nevent %zu differs\n", i);
            break;
        }
    }
    CU_ASSERT_EQUAL(a->has_access_events, b->has_access_events);
    CU_ASSERT_EQUAL_FATAL(a->nacc, b->nacc);
    if (a->nblocks)
        CU_ASSERT(memcmp(a->blocks, b->blocks, a->nblocks * sizeof *a->blocks) == 0);
    for (i = 0; i < a->nacc; i++)
        CU_ASSERT(a->acc[i].ev == b->acc[i].ev && a->acc[i].write == b->acc[i].write);
}

/* A trace with every kind of event, odd names, every header field. */
static void rich(struct hoff__trace *t) {
    struct hoff__tev e;
    uint32_t n_fwd, n_bwd, n_odd, n_empty;

    hoff__trace_init(t);
    t->budget_bytes = 3ull << 30;
    t->host_cap_bytes = 64ull << 30;
    t->h2d_gbps = 23.456789012345678;
    t->d2h_gbps = 0.1;
    t->step_ns = 123456789;
    t->step_gpu_ns = 98765432;
    strcpy(t->backend, "cuda");
    n_fwd = hoff__trace_name(t, "layer0.fwd");
    n_bwd = hoff__trace_name(t, "aten::mm");
    n_odd = hoff__trace_name(t, "sp ace\\back\tslash\xc3\xa9\x7f#-");
    n_empty = hoff__trace_name(t, "");
    CU_ASSERT_EQUAL(n_fwd, 0);
    CU_ASSERT_EQUAL(n_empty, 3);
    CU_ASSERT_EQUAL(hoff__trace_name(t, "aten::mm"), n_bwd);

    CU_ASSERT_EQUAL(ev_mark(t, HOFF__TEV_OP, n_fwd, 10), 0);
    CU_ASSERT_EQUAL(ev_alloc(t, 0, 1 << 20, 1, 11), 0);
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_ALLOC;
    e.block = 1;
    e.size = (1ull << 47) - 1;
    e.pool = 0;
    e.stream = UINT64_MAX;
    e.t_cpu_ns = 12;
    e.t_gpu_ns = 0;
    e.name = UINT32_MAX;
    CU_ASSERT_EQUAL(hoff__trace_append(t, &e), 0);
    e.block = 2;
    e.size = 1;
    e.pool = 1;
    e.stream = 0;
    e.flags = HOFF__TEV_PINNED; /* pinned outside a region */
    e.t_gpu_ns = UNK;
    CU_ASSERT_EQUAL(hoff__trace_append(t, &e), 0);
    CU_ASSERT_EQUAL(ev_blk(t, HOFF__TEV_ACCESS, 0, 1, 13), 0);
    CU_ASSERT_EQUAL(ev_blk(t, HOFF__TEV_ACCESS, 1, 0, 14), 0);
    CU_ASSERT_EQUAL(ev_mark(t, HOFF__TEV_REGION_BEGIN, UINT32_MAX, 15), 0);
    CU_ASSERT_EQUAL(ev_mark(t, HOFF__TEV_REGION_BEGIN, UINT32_MAX, 15), 0);
    CU_ASSERT_EQUAL(ev_alloc(t, 3, 4096, 1, 16), 0);
    CU_ASSERT_EQUAL(ev_mark(t, HOFF__TEV_REGION_END, UINT32_MAX, 17), 0);
    CU_ASSERT_EQUAL(ev_alloc(t, 4, 8192, 1, 18), 0);
    CU_ASSERT_EQUAL(ev_mark(t, HOFF__TEV_REGION_END, UINT32_MAX, 19), 0);
    CU_ASSERT_EQUAL(ev_mark(t, HOFF__TEV_OP, n_odd, 20), 0);
    CU_ASSERT_EQUAL(ev_mark(t, HOFF__TEV_OP, UINT32_MAX, 21), 0);
    CU_ASSERT_EQUAL(ev_mark(t, HOFF__TEV_OP, n_empty, 21), 0);
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_FREE;
    e.block = 0;
    e.stream = 99;
    e.t_cpu_ns = HOFF__STEP_NS_MAX; /* the largest time a trace may hold */
    e.t_gpu_ns = HOFF__STEP_NS_MAX;
    CU_ASSERT_EQUAL(hoff__trace_append(t, &e), 0);
    e.kind = HOFF__TEV_ACCESS;
    e.block = 3;
    e.flags = HOFF__TEV_WRITE;
    e.t_gpu_ns = 5;
    CU_ASSERT_EQUAL(hoff__trace_append(t, &e), 0);
    e.kind = HOFF__TEV_REGION_BEGIN;
    e.t_gpu_ns = 6;
    CU_ASSERT_EQUAL(hoff__trace_append(t, &e), 0);
    e.kind = HOFF__TEV_REGION_END;
    e.t_gpu_ns = 7;
    CU_ASSERT_EQUAL(hoff__trace_append(t, &e), 0);
    e.kind = HOFF__TEV_OP;
    e.name = n_bwd;
    e.t_gpu_ns = 8;
    CU_ASSERT_EQUAL(hoff__trace_append(t, &e), 0);
    CU_ASSERT_EQUAL(ev_blk(t, HOFF__TEV_FREE, 3, 0, 30), 0);
    CU_ASSERT_EQUAL(ev_blk(t, HOFF__TEV_FREE, 2, 0, 31), 0);
    CU_ASSERT_EQUAL(hoff__trace_finish(t), 0);
}

/* --- the IR ---------------------------------------------------------------------- */

static void test_append_validation(void) {
    struct hoff__trace t;
    struct hoff__tev e;
    int i;

    hoff__trace_init(&t);
    CU_ASSERT_EQUAL(t.version, HOFF__TRACE_VERSION);
    CU_ASSERT_EQUAL(ev_alloc(&t, 1, 4096, 1, 0), -EINVAL); /* ids start at 0 */
    CU_ASSERT_EQUAL(ev_alloc(&t, 0, 0, 1, 0), -EINVAL);    /* size 0 */
    CU_ASSERT_EQUAL(ev_alloc(&t, 0, 1ull << 47, 1, 0), -EINVAL);
    CU_ASSERT_EQUAL(ev_alloc(&t, 0, 4096, 2, 0), -EINVAL); /* pool */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, 0, 0, 0), -EINVAL);
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_ACCESS, 0, 0, 0), -EINVAL);
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_END, UINT32_MAX, 0), -EINVAL);
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_OP, 0, 0), -EINVAL); /* no names yet */
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_KIND_COUNT, UINT32_MAX, 0), -EINVAL);
    CU_ASSERT_EQUAL(t.nev, 0);
    CU_ASSERT_EQUAL(t.nblocks, 0);

    CU_ASSERT_EQUAL(ev_alloc(&t, 0, 4096, 1, 1), 0);
    CU_ASSERT_EQUAL(ev_alloc(&t, 0, 4096, 1, 1), -EINVAL); /* a second alloc of 0 */
    CU_ASSERT_EQUAL(ev_alloc(&t, 2, 4096, 1, 1), -EINVAL); /* not dense */
    CU_ASSERT_EQUAL(ev_alloc(&t, 1, 4096, 0, 2), 0);
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_ACCESS, 2, 0, 3), -EINVAL);
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_ACCESS, 0, 1, 3), 0);
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, 0, 0, 4), 0);
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, 0, 0, 5), -EINVAL); /* double free */
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "already freed"));
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_ACCESS, 0, 0, 5), -EINVAL); /* use after free */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, UINT32_MAX, 0, 5), -EINVAL);
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_BEGIN, UINT32_MAX, 6), 0);
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_END, UINT32_MAX, 7), 0);
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_END, UINT32_MAX, 8), -EINVAL);
    CU_ASSERT_EQUAL(t.nev, 6);
    CU_ASSERT_EQUAL(t.nblocks, 2);

    /* Fields that do not apply to a kind are normalized. */
    memset(&e, 0xab, sizeof e);
    e.kind = HOFF__TEV_FREE;
    e.block = 1;
    e.stream = 3;
    CU_ASSERT_EQUAL(hoff__trace_append(&t, &e), 0);
    CU_ASSERT_EQUAL(t.ev[6].size, 0);
    CU_ASSERT_EQUAL(t.ev[6].pool, 0);
    CU_ASSERT_EQUAL(t.ev[6].flags, 0);
    CU_ASSERT_EQUAL(t.ev[6].name, UINT32_MAX);
    CU_ASSERT_EQUAL(t.ev[6].stream, 3);

    /* Geometric growth: many events and blocks. */
    for (i = 0; i < 200000; i++) {
        CU_ASSERT_EQUAL_FATAL(ev_alloc(&t, t.nblocks, 64, 1, (uint64_t)i), 0);
        CU_ASSERT_EQUAL_FATAL(ev_blk(&t, HOFF__TEV_FREE, t.nblocks - 1, 0, (uint64_t)i), 0);
    }
    CU_ASSERT_EQUAL(t.nev, 7 + 400000);
    CU_ASSERT_EQUAL(t.nblocks, 2 + 200000);
    CU_ASSERT_EQUAL(hoff__trace_finish(&t), 0);
    CU_ASSERT_EQUAL(t.nacc, 3 + 200000);
    hoff__trace_destroy(&t);
    CU_ASSERT_EQUAL(t.nev, 0);
    CU_ASSERT_PTR_NULL(t.ev);
    hoff__trace_destroy(&t); /* twice is fine */
}

static void test_names(void) {
    struct hoff__trace t;
    char buf[32];
    uint32_t i;

    hoff__trace_init(&t);
    for (i = 0; i < 5000; i++) {
        snprintf(buf, sizeof buf, "op%u", i);
        CU_ASSERT_EQUAL_FATAL(hoff__trace_name(&t, buf), i);
    }
    for (i = 0; i < 5000; i += 7) {
        snprintf(buf, sizeof buf, "op%u", i);
        CU_ASSERT_EQUAL(hoff__trace_name(&t, buf), i);
        CU_ASSERT_STRING_EQUAL(t.names[i], buf);
    }
    CU_ASSERT_EQUAL(t.nnames, 5000);
    CU_ASSERT_EQUAL(hoff__trace_name(&t, NULL), UINT32_MAX);
    hoff__trace_destroy(&t);
}

static void test_finish(void) {
    struct hoff__trace t;
    const struct hoff__tblock *b;

    hoff__trace_init(&t);
    CU_ASSERT_EQUAL(ev_alloc(&t, 0, 100, 1, 0), 0);                         /* 0 */
    CU_ASSERT_EQUAL(ev_alloc(&t, 1, 200, 0, 1), 0);                         /* 1 */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_ACCESS, 0, 1, 2), 0);              /* 2 */
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_BEGIN, UINT32_MAX, 3), 0); /* 3 */
    CU_ASSERT_EQUAL(ev_alloc(&t, 2, 300, 1, 4), 0);                         /* 4: pinned */
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_END, UINT32_MAX, 5), 0);   /* 5 */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_ACCESS, 1, 0, 6), 0);              /* 6 */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, 0, 0, 7), 0);                /* 7 */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_ACCESS, 1, 0, 8), 0);              /* 8 */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_ACCESS, 2, 0, 9), 0);              /* 9 */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, 2, 0, 10), 0);               /* 10 */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_ACCESS, 1, 1, 11), 0);             /* 11 */
    CU_ASSERT(t.ev[4].flags & HOFF__TEV_PINNED);
    CU_ASSERT_FALSE(t.ev[0].flags & HOFF__TEV_PINNED);
    CU_ASSERT_EQUAL(hoff__trace_finish(&t), 0);
    CU_ASSERT_EQUAL(hoff__trace_finish(&t), 0); /* idempotent */

    CU_ASSERT_EQUAL(t.has_access_events, 1);
    CU_ASSERT_EQUAL(t.nacc, 3 + 5);
    b = &t.blocks[0];
    CU_ASSERT(b->size == 100 && b->pool == 1 && !b->pinned && !b->retained);
    CU_ASSERT(b->alloc_ev == 0 && b->free_ev == 7 && b->naccess == 2);
    CU_ASSERT(t.acc[b->first_access].ev == 0 && t.acc[b->first_access].write == 1);
    CU_ASSERT(t.acc[b->first_access + 1].ev == 2 && t.acc[b->first_access + 1].write == 1);
    b = &t.blocks[1];
    CU_ASSERT(b->size == 200 && b->pool == 0 && !b->pinned && b->retained);
    CU_ASSERT(b->alloc_ev == 1 && b->free_ev == UINT32_MAX && b->naccess == 4);
    CU_ASSERT(t.acc[b->first_access].ev == 1 && t.acc[b->first_access].write == 1);
    CU_ASSERT(t.acc[b->first_access + 1].ev == 6 && t.acc[b->first_access + 1].write == 0);
    CU_ASSERT(t.acc[b->first_access + 2].ev == 8 && t.acc[b->first_access + 2].write == 0);
    CU_ASSERT(t.acc[b->first_access + 3].ev == 11 && t.acc[b->first_access + 3].write == 1);
    b = &t.blocks[2];
    CU_ASSERT(b->size == 300 && b->pinned && !b->retained && b->free_ev == 10 && b->naccess == 2);
    CU_ASSERT(t.acc[b->first_access].ev == 4 && t.acc[b->first_access + 1].ev == 9);
    /* Grouped by block, in block order. */
    CU_ASSERT_EQUAL(t.blocks[0].first_access, 0);
    CU_ASSERT_EQUAL(t.blocks[1].first_access, 2);
    CU_ASSERT_EQUAL(t.blocks[2].first_access, 6);

    /* More events after a finish, then finish again. */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, 1, 0, 12), 0);
    CU_ASSERT_EQUAL(hoff__trace_finish(&t), 0);
    CU_ASSERT_FALSE(t.blocks[1].retained);
    CU_ASSERT_EQUAL(t.blocks[1].free_ev, 12);
    hoff__trace_destroy(&t);

    /* Without access events. */
    hoff__trace_init(&t);
    CU_ASSERT_EQUAL(ev_alloc(&t, 0, 100, 1, 0), 0);
    CU_ASSERT_EQUAL(hoff__trace_finish(&t), 0);
    CU_ASSERT_EQUAL(t.has_access_events, 0);
    CU_ASSERT_EQUAL(t.nacc, 1);
    CU_ASSERT(t.blocks[0].retained);
    hoff__trace_destroy(&t);

    /* An empty trace. */
    hoff__trace_init(&t);
    CU_ASSERT_EQUAL(hoff__trace_finish(&t), 0);
    CU_ASSERT_EQUAL(t.nacc, 0);
    hoff__trace_destroy(&t);

    /* Unbalanced regions. */
    hoff__trace_init(&t);
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_BEGIN, UINT32_MAX, 0), 0);
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_BEGIN, UINT32_MAX, 0), 0);
    CU_ASSERT_EQUAL(ev_alloc(&t, 0, 100, 1, 0), 0);
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_END, UINT32_MAX, 0), 0);
    CU_ASSERT_EQUAL(hoff__trace_finish(&t), -EINVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hoff_last_error(), "unbalanced regions: 1 still open"));
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_END, UINT32_MAX, 0), 0);
    CU_ASSERT_EQUAL(hoff__trace_finish(&t), 0);
    CU_ASSERT(t.blocks[0].pinned);
    hoff__trace_destroy(&t);
}

static uint64_t round100(int pool, uint64_t size) {
    (void)pool;
    return (size + 99) / 100 * 100;
}

static void test_offload_peak(void) {
    struct hoff__trace t;
    size_t at = 99;

    hoff__trace_init(&t);
    CU_ASSERT_EQUAL(hoff__trace_offload_peak(&t, NULL, &at), 0);
    CU_ASSERT_EQUAL(at, 0);
    CU_ASSERT_EQUAL(ev_alloc(&t, 0, 100, 1, 0), 0);                         /* 0: 100 */
    CU_ASSERT_EQUAL(ev_alloc(&t, 1, 1000, 0, 0), 0);                        /* 1: device, no */
    CU_ASSERT_EQUAL(ev_alloc(&t, 2, 50, 1, 0), 0);                          /* 2: 150 */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, 0, 0, 0), 0);                /* 3: 150 (inclusive), then 50 */
    CU_ASSERT_EQUAL(ev_alloc(&t, 3, 30, 1, 0), 0);                          /* 4: 80 */
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_BEGIN, UINT32_MAX, 0), 0); /* 5 */
    CU_ASSERT_EQUAL(ev_alloc(&t, 4, 40, 1, 0), 0);                          /* 6: pinned, counts: 120 */
    CU_ASSERT_EQUAL(ev_mark(&t, HOFF__TEV_REGION_END, UINT32_MAX, 0), 0);   /* 7 */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_ACCESS, 2, 0, 0), 0);              /* 8 */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, 2, 0, 0), 0);                /* 9: 80, then 30 */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, 4, 0, 0), 0);                /* 10 */
    CU_ASSERT_EQUAL(ev_alloc(&t, 5, 100, 1, 0), 0);                         /* 11: 130 */
    CU_ASSERT_EQUAL(hoff__trace_offload_peak(&t, NULL, &at), 150);
    CU_ASSERT_EQUAL(at, 2);
    CU_ASSERT_EQUAL(ev_alloc(&t, 6, 21, 1, 0), 0); /* 12: 151, 3 and 5 retained */
    CU_ASSERT_EQUAL(hoff__trace_finish(&t), 0);
    CU_ASSERT_EQUAL(hoff__trace_offload_peak(&t, NULL, &at), 151);
    CU_ASSERT_EQUAL(at, 12);
    CU_ASSERT_EQUAL(hoff__trace_offload_peak(&t, NULL, NULL), 151);
    /* Counting what each block holds (here every block holds 100). */
    CU_ASSERT_EQUAL(hoff__trace_offload_peak(&t, round100, &at), 300);
    CU_ASSERT_EQUAL(at, 6);
    hoff__trace_destroy(&t);
}

/* --- the text format ------------------------------------------------------------------ */

static void test_round_trip(void) {
    struct hoff__trace a, b, c;
    char err[256], *mem = NULL;
    size_t memlen = 0;
    FILE *f;
    char *path;

    rich(&a);
    CU_ASSERT(a.ev[8].flags & HOFF__TEV_PINNED); /* block 3, in a region */
    CU_ASSERT(a.blocks[2].pinned);               /* pinned explicitly */
    CU_ASSERT(a.blocks[4].pinned);
    CU_ASSERT(a.blocks[1].retained);

    /* FILE, streaming reader. */
    f = tmpfile();
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(hoff__trace_write(&a, f), 0);
    rewind(f);
    CU_ASSERT_EQUAL(hoff__trace_read(&b, f, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(err, "");
    fclose(f);
    assert_same(&a, &b);

    /* Memory. */
    f = open_memstream(&mem, &memlen);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(hoff__trace_write(&b, f), 0);
    fclose(f);
    CU_ASSERT(strncmp(mem, "hoff-trace 1\n", 13) == 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(mem, "\nname 2 sp\\x20ace\\x5cback\\x09slash\xc3\xa9\\x7f#-\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(mem, "\nname 3\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(mem, "\nbackend cuda\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(mem, "\nd2h_gbps 0.10000000000000001\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(mem, "\na 1 140737488355327 0 18446744073709551615 12 0\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(mem, "\na 2 1 1 0 12 p\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(mem, "\no - 21\n"));
    CU_ASSERT(memlen > 4 && strcmp(mem + memlen - 5, "\nend\n") == 0);
    CU_ASSERT_EQUAL(hoff__trace_parse(&c, mem, memlen, err, sizeof err), 0);
    assert_same(&a, &c);
    hoff__trace_destroy(&c);
    /* CRLF line ends, comments and blank lines are accepted. */
    {
        size_t i, o = 0;
        char *crlf = malloc(memlen * 2 + 64);

        CU_ASSERT_PTR_NOT_NULL_FATAL(crlf);
        for (i = 0; i < memlen; i++) {
            if (mem[i] == '\n') {
                crlf[o++] = '\r';
                if (i == 12)
                    o += (size_t)sprintf(crlf + o, "\n# a comment\r\n\r");
            }
            crlf[o++] = mem[i];
        }
        CU_ASSERT_EQUAL(hoff__trace_parse(&c, crlf, o, err, sizeof err), 0);
        CU_ASSERT_STRING_EQUAL(err, "");
        assert_same(&a, &c);
        hoff__trace_destroy(&c);
        free(crlf);
    }
    free(mem);

    /* Path. */
    path = tmp_path(".trace");
    CU_ASSERT_EQUAL(hoff__trace_save(&a, path), 0);
    CU_ASSERT_EQUAL(hoff__trace_load(&c, path, err, sizeof err), 0);
    assert_same(&a, &c);
    hoff__trace_destroy(&c);
    unlink(path);
    CU_ASSERT_EQUAL(hoff__trace_load(&c, path, err, sizeof err), -ENOENT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "cannot open"));
    hoff__trace_destroy(&c);
    CU_ASSERT_EQUAL(hoff__trace_save(&a, "/nonexistent-dir/x.trace"), -ENOENT);

    /* An empty trace. */
    hoff__trace_destroy(&b);
    hoff__trace_init(&b);
    CU_ASSERT_EQUAL(hoff__trace_finish(&b), 0);
    f = tmpfile();
    CU_ASSERT_EQUAL(hoff__trace_write(&b, f), 0);
    rewind(f);
    CU_ASSERT_EQUAL(hoff__trace_read(&c, f, err, sizeof err), 0);
    fclose(f);
    assert_same(&b, &c);
    hoff__trace_destroy(&c);

    /* The writer refuses what the reader would refuse. */
    b.h2d_gbps = NAN;
    f = tmpfile();
    CU_ASSERT_EQUAL(hoff__trace_write(&b, f), -EINVAL);
    fclose(f);
    hoff__trace_destroy(&b);
    hoff__trace_destroy(&a);
}

static void test_gzip(void) {
    struct hoff__trace a, b;
    char err[256], *path;
    unsigned char magic[2] = {0, 0};
    FILE *f;

    rich(&a);
    path = tmp_path(".trace.gz");
#ifdef HAVE_ZLIB
    CU_ASSERT_EQUAL(hoff__trace_save(&a, path), 0);
    f = fopen(path, "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fread(magic, 1, 2, f), 2);
    CU_ASSERT(magic[0] == 0x1f && magic[1] == 0x8b);
    CU_ASSERT_EQUAL(hoff__trace_read(&b, f, err, sizeof err), -EINVAL); /* not at the start: no magic */
    hoff__trace_destroy(&b);
    rewind(f);
    CU_ASSERT_EQUAL(hoff__trace_read(&b, f, err, sizeof err), 0);
    fclose(f);
    assert_same(&a, &b);
    hoff__trace_destroy(&b);
    CU_ASSERT_EQUAL(hoff__trace_load(&b, path, err, sizeof err), 0);
    assert_same(&a, &b);
    hoff__trace_destroy(&b);
    {
        /* From memory, two gzip members concatenated, and truncated. */
        char *text = NULL, *gz;
        size_t tlen = 0, half;
        uLongf glen1, glen2;
        FILE *m = open_memstream(&text, &tlen);

        CU_ASSERT_EQUAL(hoff__trace_write(&a, m), 0);
        fclose(m);
        half = tlen / 2;
        gz = malloc(2 * compressBound(tlen) + 64);
        glen1 = glen2 = compressBound(tlen) + 32;
        {
            z_stream z;

            memset(&z, 0, sizeof z);
            CU_ASSERT_EQUAL(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
            z.next_in = (Bytef *)text;
            z.avail_in = (uInt)half;
            z.next_out = (Bytef *)gz;
            z.avail_out = (uInt)glen1;
            CU_ASSERT_EQUAL(deflate(&z, Z_FINISH), Z_STREAM_END);
            glen1 = z.total_out;
            deflateEnd(&z);
            memset(&z, 0, sizeof z);
            CU_ASSERT_EQUAL(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
            z.next_in = (Bytef *)text + half;
            z.avail_in = (uInt)(tlen - half);
            z.next_out = (Bytef *)gz + glen1;
            z.avail_out = (uInt)glen2;
            CU_ASSERT_EQUAL(deflate(&z, Z_FINISH), Z_STREAM_END);
            glen2 = z.total_out;
            deflateEnd(&z);
        }
        CU_ASSERT_EQUAL(hoff__trace_parse(&b, gz, glen1 + glen2, err, sizeof err), 0);
        assert_same(&a, &b);
        hoff__trace_destroy(&b);
        CU_ASSERT_EQUAL(hoff__trace_parse(&b, gz, glen1 + glen2 - 9, err, sizeof err), -EINVAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "gzip"));
        hoff__trace_destroy(&b);
        gz[glen1 + 20] ^= 0x55;
        CU_ASSERT_EQUAL(hoff__trace_parse(&b, gz, glen1 + glen2, err, sizeof err), -EINVAL);
        hoff__trace_destroy(&b);
        free(gz);
        free(text);
    }
#else
    CU_ASSERT_EQUAL(hoff__trace_save(&a, path), -ENOTSUP);
    f = fopen(path, "wb");
    fwrite("\x1f\x8b\x08\x00junk", 1, 8, f);
    fclose(f);
    CU_ASSERT_EQUAL(hoff__trace_load(&b, path, err, sizeof err), -ENOTSUP);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "without zlib"));
    hoff__trace_destroy(&b);
    (void)magic;
#endif
    unlink(path);
    hoff__trace_destroy(&a);
}

struct bad {
    const char *in;
    int err;
    const char *msg; /* the whole message */
};

#define H "hoff-trace 1\n"

static const struct bad bad[] = {
    {"", -EINVAL, "1:1: expected 'hoff-trace 1', got end of file"},
    {"hoff-trace 2\nend\n", -EINVAL, "1:12: expected version 1, got '2'"},
    {"hoff-trac 1\nend\n", -EINVAL, "1:1: expected 'hoff-trace' (the first line is 'hoff-trace 1'), got 'hoff-trac'"},
    {"hoff-trace\nend\n", -EINVAL, "1:11: expected a version number, got end of line"},
    {"hoff-trace 1 x\nend\n", -EINVAL, "1:14: expected end of line, got 'x'"},
    {H "a 0 4096 1 0 10\nx 1 2\nend\n", -EINVAL, "3:1: expected an event (a, f, r, w, o, rb, re, end), got 'x'"},
    {H "a 0 4096 1 0\nend\n", -EINVAL, "2:13: expected a cpu time in ns, got end of line"},
    {H "a 0 4096 1  0 10\nend\n", -EINVAL, "2:12: expected a stream, got ' '"},
    {H "a 0 4k 1 0 10\nend\n", -EINVAL, "2:5: expected a size in bytes (1 to 2^47-1), got '4k'"},
    {H "a 0 0 1 0 10\nend\n", -EINVAL, "2:5: expected a size in bytes (1 to 2^47-1), got '0'"},
    {H "a 0 140737488355328 1 0 10\nend\n", -ERANGE,
     "2:5: expected a size in bytes (1 to 2^47-1), got '140737488355328'"},
    {H "a 0 4096 1 0 18446744073709551616\nend\n", -ERANGE,
     "2:14: number out of range: expected a cpu time in ns, got '18446744073709551616'"},
    /* Times past the longest step hoff models cannot be on a step's clock. */
    {H "a 0 4096 1 0 1000000000000001\nend\n", -ERANGE,
     "2:14: cpu time out of range: expected a cpu time from 0 to 10^15 ns (11.6 days, the longest step hoff "
     "models), got '1000000000000001'"},
    {H "a 0 4096 1 0 10 18446744073709551614\nend\n", -ERANGE,
     "2:17: gpu time out of range: expected a gpu time from 0 to 10^15 ns (11.6 days, the longest step hoff "
     "models) or 18446744073709551615 (unknown), got '18446744073709551614'"},
    {H "a 0 4096 1 0 10\nf 0 0 18446744073709551000\nend\n", -ERANGE,
     "3:7: cpu time out of range: expected a cpu time from 0 to 10^15 ns (11.6 days, the longest step hoff "
     "models), got '18446744073709551000'"},
    {"hoff-trace 1\nstep_ns 18446744073709551615\nend\n", -ERANGE,
     "2:9: step time out of range: expected a step time from 0 to 10^15 ns (11.6 days, the longest step hoff "
     "models), got '18446744073709551615'"},
    {H "a 0 4096 2 0 10\nend\n", -EINVAL, "2:10: expected a pool (0 device, 1 managed), got '2'"},
    {H "a 0 4096 1 0 10\nf 3 0 11\nend\n", -EINVAL, "3:3: expected a live block id, got '3' (never allocated)"},
    {H "a 0 4096 1 0 10\nf 0 0 11\nr 0 0 12\nend\n", -EINVAL,
     "4:3: expected a live block id, got '0' (freed at event 1)"},
    {H "a 0 4096 1 0 10\na 2 4096 1 0 10\nend\n", -EINVAL,
     "3:3: expected block id 1 (ids are dense, in allocation order), got '2'"},
    {H "a 0 4096 1 0 10\n", -EINVAL, "3:1: expected 'end' (the trace is truncated), got end of file"},
    {H "a 0 4096 1 0 1", -EINVAL, "3:1: expected 'end' (the trace is truncated), got end of file"},
    {H "budgte 5\nend\n", -EINVAL,
     "2:1: expected a header key (budget, host_cap, h2d_gbps, d2h_gbps, step_ns, step_gpu_ns, backend, name) "
     "or an event, got 'budgte'"},
    {H "budget 5\nhost_cap 1\nbudget 6\nend\n", -EINVAL, "4:1: duplicate header key 'budget' (first on line 2)"},
    {H "a 0 4096 1 0 10 20 p x\nend\n", -EINVAL, "2:22: expected 'p', 'k' or end of line, got 'x'"},
    {H "a 0 4096 1 0 10 20 q\nend\n", -EINVAL, "2:20: expected 'p', 'k' or end of line, got 'q'"},
    /* The allocation's flags: each at most once, nothing after them. */
    {H "a 0 4096 1 0 10 p p\nend\n", -EINVAL, "2:19: expected each of 'p' and 'k' at most once, got 'p'"},
    {H "a 0 4096 1 0 10 k k\nend\n", -EINVAL, "2:19: expected each of 'p' and 'k' at most once, got 'k'"},
    {H "a 0 4096 1 0 10 20 k p k\nend\n", -EINVAL, "2:24: expected each of 'p' and 'k' at most once, got 'k'"},
    {H "a 0 4096 1 0 10 K\nend\n", -EINVAL, "2:17: expected a gpu time in ns, 'p', 'k' or end of line, got 'K'"},
    {H "a 0 4096 1 0 10 k x\nend\n", -EINVAL, "2:19: expected 'p', 'k' or end of line, got 'x'"},
    {H "a 0 4096 1 0 10 k 20\nend\n", -EINVAL, "2:19: expected 'p', 'k' or end of line, got '20'"},
    {H "a 0 4096 1 0 10 kp\nend\n", -EINVAL, "2:17: expected a gpu time in ns, 'p', 'k' or end of line, got 'kp'"},
    {H "a 0 4096 1 0 10 k \nend\n", -EINVAL, "2:19: expected 'p', 'k' or end of line, got end of line"},
    /* The op's phase: one known word, after the gpu time. */
    {H "o - 5 fwdd\nend\n", -EINVAL,
     "2:7: expected a gpu time in ns, a phase (fwd, bwd, loss, opt) or end of line, got 'fwdd'"},
    {H "o - 5 FWD\nend\n", -EINVAL,
     "2:7: expected a gpu time in ns, a phase (fwd, bwd, loss, opt) or end of line, got 'FWD'"},
    {H "o - 5 6 backward\nend\n", -EINVAL,
     "2:9: expected a phase (fwd, bwd, loss, opt) or end of line, got 'backward'"},
    {H "o - 5 6 7\nend\n", -EINVAL, "2:9: expected a phase (fwd, bwd, loss, opt) or end of line, got '7'"},
    {H "o - 5 fwd bwd\nend\n", -EINVAL, "2:11: expected end of line, got 'bwd'"},
    {H "o - 5 opt 6\nend\n", -EINVAL, "2:11: expected end of line, got '6'"},
    {H "o - 5 \nend\n", -EINVAL,
     "2:7: expected a gpu time in ns, a phase (fwd, bwd, loss, opt) or end of line, got end of line"},
    {H "end\ngarbage\n", -EINVAL, "3:1: expected end of file after 'end', got 'garbage'"},
    {H "end\n\x01\n", -EINVAL, "3:1: expected end of file after 'end', got '\\x01'"},
    {H "a 0 4096 1 0 10\nbudget 5\nend\n", -EINVAL,
     "3:1: expected an event (a, f, r, w, o, rb, re, end); header keys come before the first event, got 'budget'"},
    {H "re 5\nend\n", -EINVAL, "2:1: expected an open region, got 're' (no 'rb' is open)"},
    {H "rb 5\nrb 6\nre 7\nend\n", -EINVAL, "5:1: expected 're' closing 1 open region(s), got 'end'"},
    {H "name 1 x\nend\n", -EINVAL, "2:6: expected name index 0 (names are numbered from 0), got '1'"},
    {H "name 0 x\nname 1 x\nend\n", -EINVAL, "3:1: duplicate op name (the same as name 0)"},
    {H "name 0 a\\x00b\nend\n", -EINVAL,
     "2:9: expected an op name (bytes 0x21-0x7e and 0x80-0xff as they are, others as \\xHH, never \\x00), "
     "got '\\x5cx00b'"},
    {H "name 0 x\no 1 5\nend\n", -EINVAL, "3:3: expected an op name index (0 to 0) or '-', got '1'"},
    {H "o x 5\nend\n", -EINVAL, "2:3: expected '-' (the header has no names), got 'x'"},
    {H "h2d_gbps nan\nend\n", -EINVAL, "2:10: expected a bandwidth in GB/s (a decimal number >= 0), got 'nan'"},
    {H "h2d_gbps -1\nend\n", -EINVAL, "2:10: expected a bandwidth in GB/s (a decimal number >= 0), got '-1'"},
    {H "d2h_gbps 1e999\nend\n", -ERANGE,
     "2:10: number out of range: expected a bandwidth in GB/s (a decimal number >= 0), got '1e999'"},
    {H "backend 0123456789abcdef\nend\n", -EINVAL,
     "2:9: expected a backend name of at most 15 bytes, got '0123456789abcdef'"},
    {H "a 0 4096 1 0 10 \nend\n", -EINVAL, "2:17: expected a gpu time in ns, 'p', 'k' or end of line, got end of line"},
    {H "w 0 0 5\nend\n", -EINVAL, "2:3: expected a live block id, got '0' (never allocated)"},
    {H "f\nend\n", -EINVAL, "2:2: expected a live block id, got end of line"},
    {H "end 5\n", -EINVAL, "2:5: expected end of line, got '5'"},
    {H "step_ns 1 2\nend\n", -EINVAL, "2:11: expected end of line, got '2'"},
    {"\x1f\x8b", -EINVAL, NULL}, /* gzip magic then nothing */
    {"\x1f\x8bnot gzip at all", -EINVAL, NULL},
};

static void test_reader_errors(void) {
    struct hoff__trace t;
    char err[512];
    size_t i;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = hoff__trace_parse(&t, bad[i].in, strlen(bad[i].in), err, sizeof err);
        int want = bad[i].err;

#ifndef HAVE_ZLIB
        if (!bad[i].msg)
            want = -ENOTSUP;
#endif
        if (rc != want || (bad[i].msg && strcmp(err, bad[i].msg) != 0))
            printf("\ninput %zu: rc %d (want %d)\n  got:  %s\n  want: %s\n", i, rc, want, err,
                   bad[i].msg ? bad[i].msg : "(any)");
        CU_ASSERT_EQUAL(rc, want);
        if (bad[i].msg)
            CU_ASSERT_STRING_EQUAL(err, bad[i].msg);
        CU_ASSERT(err[0] != 0);
        CU_ASSERT_STRING_EQUAL(hoff_last_error(), err);
        CU_ASSERT_EQUAL(t.nev, 0); /* left empty */
        hoff__trace_destroy(&t);
    }

    /* A NUL byte inside a line, and a small err buffer. */
    {
        static const char in[] = H "a 0 40\0006 1 0 10\nend\n";
        char small[8];

        CU_ASSERT_EQUAL(hoff__trace_parse(&t, in, sizeof in - 1, err, sizeof err), -EINVAL);
        CU_ASSERT_STRING_EQUAL(err, "2:5: expected a size in bytes (1 to 2^47-1), got '40\\x006'");
        hoff__trace_destroy(&t);
        CU_ASSERT_EQUAL(hoff__trace_parse(&t, in, sizeof in - 1, small, sizeof small), -EINVAL);
        CU_ASSERT_STRING_EQUAL(small, "2:5: ex");
        hoff__trace_destroy(&t);
        CU_ASSERT_EQUAL(hoff__trace_parse(&t, in, sizeof in - 1, NULL, 0), -EINVAL);
        hoff__trace_destroy(&t);
    }
    /* A line longer than 1 MiB. */
    {
        size_t n = (1u << 20) + 100;
        char *in = malloc(n + 64);

        strcpy(in, H "# ");
        memset(in + strlen(in), 'x', n);
        strcpy(in + 13 + n, "\nend\n");
        CU_ASSERT_EQUAL(hoff__trace_parse(&t, in, strlen(in), err, sizeof err), -EINVAL);
        CU_ASSERT_STRING_EQUAL(err, "2:1048577: line longer than 1048576 bytes");
        hoff__trace_destroy(&t);
        free(in);
    }
}

/* Errors far into a file come through the streaming reader with the right line. */
static void test_reader_errors_streaming(void) {
    struct hoff__trace t;
    char err[256];
    FILE *f = tmpfile();
    uint32_t i;

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(H "budget 1\n", f);
    for (i = 0; i < 300000; i++) /* about 8 MiB: crosses the reader's 4 MiB chunks */
        fprintf(f, "a %u 4096 1 0 %u\nf %u 0 %u\n", i, i, i, i);
    fputs("f 7 0 1\nend\n", f);
    rewind(f);
    CU_ASSERT_EQUAL(hoff__trace_read(&t, f, err, sizeof err), -EINVAL);
    CU_ASSERT_STRING_EQUAL(err, "600003:3: expected a live block id, got '7' (freed at event 15)");
    hoff__trace_destroy(&t);
    fclose(f);

    /* Lines of exactly the limit, and one byte more, through the streaming reader. */
    {
        size_t max = (size_t)1 << 20, k;

        for (i = 0; i < 2; i++) {
            f = tmpfile();
            CU_ASSERT_PTR_NOT_NULL_FATAL(f);
            fputs(H "a 0 64 1 0 1\n#", f);
            for (k = 1; k < max + i; k++)
                fputc('x', f);
            fputs("\nf 0 0 2\nend\n", f);
            rewind(f);
            if (i == 0) {
                CU_ASSERT_EQUAL(hoff__trace_read(&t, f, err, sizeof err), 0);
                CU_ASSERT_EQUAL(t.nev, 2);
            } else {
                CU_ASSERT_EQUAL(hoff__trace_read(&t, f, err, sizeof err), -EINVAL);
                CU_ASSERT_STRING_EQUAL(err, "3:1048577: line longer than 1048576 bytes");
            }
            hoff__trace_destroy(&t);
            fclose(f);
        }
    }
    /* A long op name round-trips; one too long to fit a line is refused by the writer. */
    {
        struct hoff__trace a;
        size_t n = 300000;
        char *name = malloc(n + 1);

        memset(name, 'n', n);
        name[n] = 0;
        name[17] = ' ';
        hoff__trace_init(&a);
        CU_ASSERT_EQUAL(hoff__trace_name(&a, name), 0);
        CU_ASSERT_EQUAL(ev_mark(&a, HOFF__TEV_OP, 0, 1), 0);
        CU_ASSERT_EQUAL(hoff__trace_finish(&a), 0);
        f = tmpfile();
        CU_ASSERT_EQUAL(hoff__trace_write(&a, f), 0);
        rewind(f);
        CU_ASSERT_EQUAL(hoff__trace_read(&t, f, err, sizeof err), 0);
        fclose(f);
        assert_same(&a, &t);
        hoff__trace_destroy(&t);
        memset(name, ' ', n); /* each space is written as 4 bytes */
        CU_ASSERT_EQUAL(hoff__trace_name(&a, name), 1);
        f = tmpfile();
        CU_ASSERT_EQUAL(hoff__trace_write(&a, f), -ENAMETOOLONG);
        fclose(f);
        hoff__trace_destroy(&a);
        free(name);
    }
}

/* --- kept blocks and op phases ------------------------------------------------- */

/* Every form of an allocation's flags and of an op's phase, as a hand-written
 * file may have them. */
static const char kept_text[] = H "name 0 f\n"
                                  "name 1 b\n"
                                  "o 0 1 fwd\n"                       /* 0 */
                                  "a 0 4194304 1 0 2 k\n"             /* 1 */
                                  "a 1 4194304 1 0 3 4 p k\n"         /* 2 */
                                  "a 2 4194304 1 0 5 k p\n"           /* 3: written "p k" */
                                  "a 3 4194304 0 0 6 7 k\n"           /* 4: a device-pool block kept */
                                  "a 4 4194304 1 0 8 p\n"             /* 5 */
                                  "rb 9\n"                            /* 6 */
                                  "a 5 4194304 1 0 10 k\n"            /* 7: pinned by its region, written "p k" */
                                  "re 11\n"                           /* 8 */
                                  "o 1 12 13 bwd\n"                   /* 9 */
                                  "o - 14 loss\n"                     /* 10 */
                                  "o 0 15 18446744073709551615 opt\n" /* 11: written without the unknown time */
                                  "o - 16 17\n"                       /* 12 */
                                  "o - 18\n"                          /* 13 */
                                  "w 0 0 19\n"                        /* 14 */
                                  "f 0 0 20\n"                        /* 15 */
                                  "f 4 0 21\n"                        /* 16 */
                                  "end\n";

static char *text_of(const struct hoff__trace *t, size_t *len) {
    char *mem = NULL;
    FILE *f = open_memstream(&mem, len);

    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(hoff__trace_write(t, f), 0);
    fclose(f);
    return mem;
}

/* k and p in any order, the phase words with and without a gpu time: read
 * into the flags, written in one form, and that text reads back to the same
 * trace and writes to the same bytes. */
static void test_kept_and_phases(void) {
    static const struct {
        size_t ev;
        unsigned phase;
        uint64_t gpu;
    } ops[] = {{0, HOFF_PHASE_FORWARD, UNK},    {9, HOFF_PHASE_BACKWARD, 13}, {10, HOFF_PHASE_LOSS, UNK},
               {11, HOFF_PHASE_OPTIMIZER, UNK}, {12, HOFF_PHASE_NONE, 17},    {13, HOFF_PHASE_NONE, UNK}};
    static const char *const lines[] = {"\no 0 1 fwd\n",
                                        "\na 0 4194304 1 0 2 k\n",
                                        "\na 1 4194304 1 0 3 4 p k\n",
                                        "\na 2 4194304 1 0 5 p k\n",
                                        "\na 3 4194304 0 0 6 7 k\n",
                                        "\na 4 4194304 1 0 8 p\n",
                                        "\na 5 4194304 1 0 10 p k\n",
                                        "\no 1 12 13 bwd\n",
                                        "\no - 14 loss\n",
                                        "\no 0 15 opt\n",
                                        "\no - 16 17\n",
                                        "\no - 18\n"};
    struct hoff__trace a, b;
    struct hoff__tev e;
    char err[256], *t1, *t2;
    size_t n1, n2, i;
    uint32_t k;

    CU_ASSERT_EQUAL_FATAL(hoff__trace_parse(&a, kept_text, sizeof kept_text - 1, err, sizeof err), 0);
    CU_ASSERT_EQUAL_FATAL(a.nev, 17);
    CU_ASSERT_EQUAL(a.ev[1].flags, HOFF__TEV_KEPT);
    CU_ASSERT_EQUAL(a.ev[2].flags, HOFF__TEV_PINNED | HOFF__TEV_KEPT);
    CU_ASSERT_EQUAL(a.ev[3].flags, HOFF__TEV_PINNED | HOFF__TEV_KEPT);
    CU_ASSERT_EQUAL(a.ev[4].flags, HOFF__TEV_KEPT);
    CU_ASSERT_EQUAL(a.ev[5].flags, HOFF__TEV_PINNED);
    CU_ASSERT_EQUAL(a.ev[7].flags, HOFF__TEV_PINNED | HOFF__TEV_KEPT);
    /* A kept block is device memory for the plan; its event keeps the pool
     * it was allocated from. */
    for (k = 0; k < a.nblocks; k++) {
        CU_ASSERT_EQUAL(a.blocks[k].kept, k != 4);
        CU_ASSERT_EQUAL(a.blocks[k].pool, k == 4);
        CU_ASSERT_EQUAL(a.ev[a.blocks[k].alloc_ev].pool, k != 3);
    }
    for (i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        CU_ASSERT_EQUAL(a.ev[ops[i].ev].kind, HOFF__TEV_OP);
        CU_ASSERT_EQUAL(hoff__tev_phase(&a.ev[ops[i].ev]), ops[i].phase);
        CU_ASSERT_EQUAL(a.ev[ops[i].ev].flags, ops[i].phase << HOFF__TEV_PHASE_SHIFT);
        CU_ASSERT_EQUAL(a.ev[ops[i].ev].t_gpu_ns, ops[i].gpu);
    }

    /* write -> read -> write: the same trace, the same bytes. */
    t1 = text_of(&a, &n1);
    for (i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        if (!strstr(t1, lines[i]))
            printf("\nno '%.*s' in:\n%s", (int)strlen(lines[i]) - 2, lines[i] + 1, t1);
        CU_ASSERT_PTR_NOT_NULL(strstr(t1, lines[i]));
    }
    CU_ASSERT_EQUAL_FATAL(hoff__trace_parse(&b, t1, n1, err, sizeof err), 0);
    assert_same(&a, &b);
    t2 = text_of(&b, &n2);
    CU_ASSERT(n1 == n2 && memcmp(t1, t2, n1) == 0);
    free(t1);
    free(t2);
    hoff__trace_destroy(&b);

    /* The same through a FILE (the streaming reader). */
    {
        FILE *f = tmpfile();

        CU_ASSERT_PTR_NOT_NULL_FATAL(f);
        CU_ASSERT_EQUAL(hoff__trace_write(&a, f), 0);
        rewind(f);
        CU_ASSERT_EQUAL(hoff__trace_read(&b, f, err, sizeof err), 0);
        fclose(f);
        assert_same(&a, &b);
        hoff__trace_destroy(&b);
    }

    /* Appending: a phase outside enum hoff_phase is refused; an op keeps
     * only its phase bits, an allocation only its p and k. */
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_OP;
    e.name = UINT32_MAX;
    e.t_gpu_ns = UNK;
    e.flags = (uint8_t)(HOFF_PHASE_COUNT << HOFF__TEV_PHASE_SHIFT);
    CU_ASSERT_EQUAL(hoff__trace_append(&a, &e), -EINVAL);
    e.flags = (uint8_t)((HOFF_PHASE_LOSS << HOFF__TEV_PHASE_SHIFT) | HOFF__TEV_WRITE | HOFF__TEV_KEPT);
    CU_ASSERT_EQUAL(hoff__trace_append(&a, &e), 0);
    CU_ASSERT_EQUAL(a.ev[a.nev - 1].flags, HOFF_PHASE_LOSS << HOFF__TEV_PHASE_SHIFT);
    e.kind = HOFF__TEV_ALLOC;
    e.block = a.nblocks;
    e.size = 4096;
    e.pool = 1;
    e.flags = 0xff & ~HOFF__TEV_PINNED;
    CU_ASSERT_EQUAL(hoff__trace_append(&a, &e), 0);
    CU_ASSERT_EQUAL(a.ev[a.nev - 1].flags, HOFF__TEV_KEPT);
    CU_ASSERT_EQUAL(hoff__trace_finish(&a), 0);
    CU_ASSERT(a.blocks[a.nblocks - 1].kept && a.blocks[a.nblocks - 1].pool == 0);
    hoff__trace_destroy(&a);
}

/* Device blocks cost twice their size here, so that the pool a peak counts
 * a block in shows. */
static uint64_t device_double(int pool, uint64_t size) {
    return pool == 0 ? 2 * size : size;
}

/* A kept block is not an offload candidate: the offload peak leaves it out,
 * the peak of every pool counts it in the device pool's bytes. */
static void test_offload_peak_kept(void) {
    struct hoff__trace t;
    struct hoff__tev e;
    size_t at = 99;

    hoff__trace_init(&t);
    CU_ASSERT_EQUAL(ev_alloc(&t, 0, 100, 1, 0), 0); /* 0: 100 */
    memset(&e, 0, sizeof e);
    e.kind = HOFF__TEV_ALLOC;
    e.block = 1;
    e.size = 1000;
    e.pool = 1;
    e.flags = HOFF__TEV_KEPT;
    e.t_gpu_ns = UNK;
    e.name = UINT32_MAX;
    CU_ASSERT_EQUAL(hoff__trace_append(&t, &e), 0); /* 1: kept, 1000 of device memory */
    CU_ASSERT_EQUAL(ev_alloc(&t, 2, 50, 1, 0), 0);  /* 2: 150 managed */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, 0, 0, 0), 0);
    CU_ASSERT_EQUAL(ev_alloc(&t, 3, 120, 1, 0), 0); /* 4: 170 managed */
    CU_ASSERT_EQUAL(ev_blk(&t, HOFF__TEV_FREE, 1, 0, 0), 0);
    /* While appending (before hoff__trace_finish) and after it. */
    CU_ASSERT_EQUAL(hoff__trace_offload_peak(&t, NULL, &at), 170);
    CU_ASSERT_EQUAL(at, 4);
    CU_ASSERT_EQUAL(hoff__trace_finish(&t), 0);
    CU_ASSERT_EQUAL(hoff__trace_offload_peak(&t, NULL, &at), 170);
    CU_ASSERT_EQUAL(at, 4);
    CU_ASSERT_EQUAL(hoff__trace_offload_peak(&t, device_double, &at), 170);
    CU_ASSERT_EQUAL(hoff__trace_peak(&t, NULL, HOFF__POOLS_MANAGED, NULL), 170);
    CU_ASSERT_EQUAL(hoff__trace_peak(&t, NULL, HOFF__POOLS_DEVICE, &at), 1000);
    CU_ASSERT_EQUAL(at, 1);
    CU_ASSERT_EQUAL(hoff__trace_peak(&t, device_double, HOFF__POOLS_ALL, &at), 2170);
    CU_ASSERT_EQUAL(at, 4);
    hoff__trace_destroy(&t);
}

/* --- driving a trace: keeps and phases reach the API ---------------------------- */

/* Forward, backward, the optimizer: gradients 2 and 3 kept right after their
 * allocation; the last op mark says no phase, after the optimizer's. */
static const char drive_text[] = H "name 0 fwd.l0\n"
                                   "name 1 fwd.l1\n"
                                   "name 2 bwd.l1\n"
                                   "name 3 bwd.l0\n"
                                   "name 4 adam\n"
                                   "a 0 4194304 1 0 0\n"
                                   "w 0 0 10000\n"
                                   "o 0 20000 fwd\n"
                                   "a 1 6291456 1 0 30000\n"
                                   "w 1 0 40000\n"
                                   "r 0 0 50000\n"
                                   "o 1 60000 fwd\n"
                                   "r 1 0 70000\n"
                                   "a 2 8388608 1 0 80000 k\n"
                                   "w 2 0 90000\n"
                                   "o 2 100000 bwd\n"
                                   "f 1 0 110000\n"
                                   "r 0 0 120000\n"
                                   "a 3 6291456 1 0 130000 k\n"
                                   "w 3 0 140000\n"
                                   "o 3 150000 bwd\n"
                                   "f 0 0 160000\n"
                                   "r 2 0 170000\n"
                                   "r 3 0 180000\n"
                                   "a 4 2097152 1 0 190000\n"
                                   "w 4 0 200000\n"
                                   "o 4 210000 opt\n"
                                   "f 4 0 220000\n"
                                   "o - 230000\n"
                                   "end\n";

/* hoff__trace_drive calls hoff_keep after a kept allocation and
 * hoff_set_phase where the phase changes: the step the context records has
 * the same keeps and phases, the replay allocates the kept blocks outside the
 * budget, and every stamp survives. */
static void test_drive_keeps_and_phases(void) {
    struct hoff__trace t, rec;
    struct hoff__drive_opts o;
    struct hoff__drive_result r;
    /* Budget: the floor with the gradients kept (blocks 0 and 1); step 1 replays. */
    struct hoff_config cfg = hoff_test_replay_config(0, 10u << 20);
    struct hoff_stats st;
    hoff_ctx *ctx;
    char err[256], *path;
    size_t i;

    CU_ASSERT_EQUAL_FATAL(hoff__trace_parse(&t, drive_text, sizeof drive_text - 1, err, sizeof err), 0);
    cfg.sim_protect = HOFF_SIM_POISON;
    ctx = hoff_test_open(&cfg);
    memset(&o, 0, sizeof o);
    o.steps = 2;
    o.verify = 1;
    o.compute_scale = 1;
    CU_ASSERT_EQUAL_FATAL(hoff__trace_drive(ctx, &t, &o, &r), 0);
    if (r.integrity_errors)
        printf("\n%s\n", r.first_error);
    CU_ASSERT_EQUAL(r.integrity_errors, 0);
    CU_ASSERT(r.blocks_verified > 0);
    CU_ASSERT_EQUAL(r.step[1].plan_state, HOFF_PLAN_REPLAY);
    st = hoff_test_stats(ctx);
    CU_ASSERT_EQUAL(st.keep_marks, 2);
    CU_ASSERT_EQUAL(st.kept_bytes, (8u + 6u) << 20);
    CU_ASSERT_EQUAL(st.kept_allocs, 2); /* the replay's */
    CU_ASSERT_EQUAL(st.divergent_steps, 0);
    CU_ASSERT_EQUAL(st.plan_floor_bytes, 10u << 20);
    CU_ASSERT_EQUAL(st.plan_floor_phase, HOFF_PHASE_FORWARD);
    CU_ASSERT(st.plan_feasible);

    /* The recorded step, event by event. */
    path = tmp_path(".trace");
    CU_ASSERT_EQUAL_FATAL(hoff_trace_save(ctx, path), 0);
    CU_ASSERT_EQUAL_FATAL(hoff__trace_load(&rec, path, err, sizeof err), 0);
    unlink(path);
    CU_ASSERT_EQUAL_FATAL(rec.nev, t.nev);
    for (i = 0; i < t.nev; i++) {
        const struct hoff__tev *x = &t.ev[i], *y = &rec.ev[i];
        int same = x->kind == y->kind && x->flags == y->flags;

        if (!same)
            printf("\nevent %zu: kind %d flags %#x recorded as kind %d flags %#x\n", i, x->kind, x->flags, y->kind,
                   y->flags);
        CU_ASSERT(same);
    }
    hoff__drive_result_free(&r);
    hoff__trace_destroy(&rec);
    hoff__trace_destroy(&t);
    hoff_shutdown(ctx);
}

/* --- 10 million events ------------------------------------------------------------ */

static void test_ten_million(void) {
#ifdef SANITIZED
    printf("\n  skipped: 10 million events under sanitizers ");
    CU_PASS("skipped under sanitizers");
#else
    const size_t want = 10 * 1000 * 1000;
    struct hoff__trace a, b;
    uint64_t rng = 42, tc = 0;
    char err[256], *path;
    double t0, t1, t2;
    uint32_t live[64], nlive = 0, ops[16], k;
    size_t i;

    hoff__trace_init(&a);
    a.budget_bytes = 1ull << 33;
    a.h2d_gbps = 50;
    a.d2h_gbps = 48.5;
    strcpy(a.backend, "sim");
    for (k = 0; k < 16; k++) {
        char nm[32];

        snprintf(nm, sizeof nm, "layers.%u.mlp", k);
        ops[k] = hoff__trace_name(&a, nm);
    }
    t0 = hoff_test_now_s();
    while (a.nev < want - 64 - 1) {
        uint64_t r = hoff_test_rand(&rng);
        struct hoff__tev e;

        memset(&e, 0, sizeof e);
        e.t_cpu_ns = tc += r % 5000;
        e.t_gpu_ns = r & 1 ? tc + 100 : UNK;
        e.stream = 0;
        switch ((r >> 8) % 8) {
        case 0:
        case 1:
        case 2:
            if (nlive < 64) {
                e.kind = HOFF__TEV_ALLOC;
                e.block = a.nblocks;
                e.size = (r >> 16) % (64ull << 20) + 1;
                e.pool = (r >> 12) & 1;
                live[nlive++] = a.nblocks;
                break;
            } /* fall through */
        case 3:
        case 4:
            if (nlive) {
                k = (uint32_t)((r >> 20) % nlive);
                e.kind = HOFF__TEV_FREE;
                e.block = live[k];
                live[k] = live[--nlive];
                break;
            } /* fall through */
        case 5:
        case 6:
            if (nlive) {
                e.kind = HOFF__TEV_ACCESS;
                e.block = live[(r >> 20) % nlive];
                e.flags = (r >> 40) & 1;
                break;
            } /* fall through */
        default: e.kind = HOFF__TEV_OP; e.name = (r >> 30) & 1 ? ops[(r >> 32) % 16] : UINT32_MAX;
        }
        CU_ASSERT_EQUAL_FATAL(hoff__trace_append(&a, &e), 0);
    }
    while (a.nev < want) {
        struct hoff__tev e = {.kind = HOFF__TEV_OP, .name = UINT32_MAX, .t_cpu_ns = tc, .t_gpu_ns = UNK};

        CU_ASSERT_EQUAL_FATAL(hoff__trace_append(&a, &e), 0);
    }
    CU_ASSERT_EQUAL_FATAL(hoff__trace_finish(&a), 0);
    path = tmp_path(".trace");
    t1 = hoff_test_now_s();
    CU_ASSERT_EQUAL_FATAL(hoff__trace_save(&a, path), 0);
    t2 = hoff_test_now_s();
    printf("\n  built %zu events in %.2f s, wrote them in %.2f s", a.nev, t1 - t0, t2 - t1);
    t1 = hoff_test_now_s();
    CU_ASSERT_EQUAL(hoff__trace_load(&b, path, err, sizeof err), 0);
    t2 = hoff_test_now_s();
    printf("\n  read them in %.2f s: %.1f M events/s ", t2 - t1, (double)b.nev / (t2 - t1) / 1e6);
    unlink(path);
    CU_ASSERT_EQUAL(b.nev, want);
    CU_ASSERT_EQUAL(b.nblocks, a.nblocks);
    CU_ASSERT_EQUAL(b.nacc, a.nacc);
    CU_ASSERT_EQUAL(b.nnames, 16);
    if (b.nev == want) {
        for (i = 0; i < want; i++) {
            const struct hoff__tev *x = &a.ev[i], *y = &b.ev[i];

            if (x->kind != y->kind || x->pool != y->pool || x->flags != y->flags || x->block != y->block ||
                x->name != y->name || x->size != y->size || x->stream != y->stream || x->t_cpu_ns != y->t_cpu_ns ||
                x->t_gpu_ns != y->t_gpu_ns)
                break;
        }
        CU_ASSERT_EQUAL(i, want);
    }
    hoff__trace_destroy(&b);
    hoff__trace_destroy(&a);
#endif
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"append_validation", test_append_validation},
        {"names", test_names},
        {"finish", test_finish},
        {"offload_peak", test_offload_peak},
        {"round_trip", test_round_trip},
        {"gzip", test_gzip},
        {"reader_errors", test_reader_errors},
        {"reader_errors_streaming", test_reader_errors_streaming},
        {"kept_and_phases", test_kept_and_phases},
        {"offload_peak_kept", test_offload_peak_kept},
        {"drive_keeps_and_phases", test_drive_keeps_and_phases},
        {"ten_million", test_ten_million},
        {NULL, NULL},
    };

    return hoff_test_run("trace", tests);
}
