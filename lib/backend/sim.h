/* sim.h — the simulated device's internals, shared by its files and by nothing else.  The device: a
 * capacity, one virtual clock, two copy engines with bandwidth and per-call latency, per-mapping
 * residency that really moves the bytes, and demand faults with their stall.  Deterministic.  Its
 * model (below), its state (struct sim, its mappings and their pages), and the files that implement
 * it: sim_map.c (the mappings and the device's capacity), sim_page.c (page residency and
 * protection: the moves, faults, use windows, the tiers' host copies), sim_clock.c (the virtual
 * clock: copy engines, issuing thread, events, waits, the simulated NVMe), sim.c (the function
 * table, open and close).  backend/backend.h is the interface the rest of hoff sees.
 * Threading: every op is thread safe (one mutex per backend, s->lock); the other functions declared
 * here expect that lock held. */
#ifndef HOFF_BACKEND_SIM_H
#define HOFF_BACKEND_SIM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/xfer.h"

/*
 * The model.
 *
 * Time.  One virtual compute timeline, `now` (ns), shared by every stream:
 * streams are opaque values and compute is serial.  compute(s, ns) advances
 * now by ns; clock_ns() returns now.  Time only moves through compute, the
 * waits (event_sync, stream_wait, sync) and faults, so polling event_query
 * never completes a pending event by itself.
 *
 * Copy engines.  D2H (evict, discard) and H2D (prefetch) are two FIFOs, each
 * with a `busy_until`.  A transfer of size bytes issued at `now` starts at
 *     start = max(now, engine busy_until, after->t if after is recorded)
 * and ends at
 *     end = start + sim_latency_ns + ceil(size / gbps)
 * (gbps is GB/s = bytes per ns).  The engine is busy until end and "done", if
 * given, is recorded at end.  A discard costs the latency only, on D2H; a
 * prefetch of a discarded mapping costs the latency only, on H2D (no copy).
 * The two engines overlap with each other; each engine serialises its calls.
 *
 * The issuing thread.  Every transfer call (evict, prefetch, discard) also
 * costs the thread that makes it sim_call_ns of its own time (the page-table
 * work cudaMemPrefetchAsync does in the calling thread), and that thread is
 * one serial resource for both directions: with `issuer_free` the time the
 * thread is done with its previous call, a call made at `now` is issued at
 *     issued = max(now, issuer_free) + sim_call_ns,   issuer_free = issued
 * and its transfer starts at max(issued, engine busy_until, after->t).  One
 * call over a range of several blocks pays it once; so do the tier's NVMe
 * operations not at all (their own thread).  sim_call_ns = 0 gives the model
 * without it.
 *
 * Events are {t, recorded}.  event_record(ev, s) sets t = now.  event_query
 * is 0 for an event never recorded or with t <= now, else -EAGAIN.
 * event_sync and stream_wait both make compute wait: if t > now, now = t and
 * the difference is added to wait_stall_ns.  sync() waits the same way for
 * both engines' busy_until.
 *
 * Memory.  dev_alloc is host memory aligned to 512 bytes.  managed_alloc is an
 * anonymous mmap aligned to 2 MiB, with a state per 2 MiB page (resident,
 * evicted, discarded; and whether an evicted page has a host copy) and a host
 * shadow (an anonymous mmap of the mapping's size) allocated at its first
 * eviction and freed with the mapping.  Every op but managed_free takes any
 * 2 MiB-aligned range of whole pages inside one mapping (a group of blocks
 * laid out in one mapping moves with one call, or block by block); the
 * state tests below apply to every page of the range.  device_used = dev_alloc bytes + resident managed
 * bytes; an allocation that would take device_used above sim_device_bytes
 * fails with -ENOMEM.  Transfers and faults that bring bytes back never fail
 * on capacity (the runtime above enforces its budget); each time one leaves
 * device_used above capacity, over_capacity is counted.
 *
 * Bytes move for real, at the call (made from hoff's issuing thread); virtual
 * time only decides when "done" completes.  evict copies the device view to
 * the shadow, then overwrites the view with 0xDB (HOFF_SIM_POISON) and also
 * mprotect()s it PROT_NONE (HOFF_SIM_PROTECT), so a block used while not
 * resident reads poison or crashes instead of passing by accident.  prefetch
 * unprotects and copies the shadow back (PROTECT mode: the view kept the
 * bytes behind the protection; it is made readable, checked against the
 * shadow and only then writable, so no store from another thread lands
 * before the copy).  discard poisons/protects without a
 * copy; its contents stay 0xDB (undefined) when it comes back.  populate
 * makes an evicted or discarded mapping resident with undefined (poisoned)
 * contents, at no time cost.
 *
 * Faults.  fault() on a mapping that is not resident makes it resident at
 * once (copying the shadow back unless it was discarded) and stalls compute:
 * an evicted mapping costs sim_fault_ns + ceil(size / sim_fault_gbps) and
 * counts its bytes in bytes_faulted; a discarded one has nothing to move and
 * costs sim_fault_ns only.  now advances by the stall.  A resident mapping
 * costs nothing (stall 0).
 */

#define SIM_POISON 0xDB

struct hoff__event {
    uint64_t t;
    int recorded;
};

enum map_kind { MAP_DEVICE, MAP_MANAGED };
/* The state of one 2 MiB page of a managed mapping; PG_NOHOST marks an
 * evicted page whose host copy was dropped (spilled to the NVMe tier). */
enum page_state { PG_RESIDENT = 0, PG_EVICTED = 1, PG_DISCARDED = 2, PG_STATE = 3, PG_NOHOST = 4 };

/* A page's use windows (window_open/window_close): how many are open, and
 * the virtual time the last one closed. */
struct win {
    uint32_t open;
    uint64_t end;
};

struct mapping {
    struct mapping *next; /* hash chain */
    unsigned char *p;
    size_t size;
    int kind;              /* enum map_kind */
    uint8_t *pg;           /* managed: enum page_state per 2 MiB page */
    struct win *win;       /* managed: per page, allocated at the first window */
    unsigned char *shadow; /* managed: host copy (mmap of size bytes), allocated lazily */
};

/* A range of whole pages inside one managed mapping. */
struct range {
    struct mapping *m;
    size_t first, n;  /* pages */
    unsigned char *p; /* m->p + first * grain */
    size_t size;      /* n * grain */
};

struct sim {
    struct hoff__backend be; /* first: the ops table */
    pthread_mutex_t lock;
    uint64_t capacity;
    double h2d_gbps, d2h_gbps, fault_gbps, nvme_read_gbps, nvme_write_gbps;
    uint64_t latency_ns, fault_ns;
    int protect;
    unsigned fail_at, fail_count; /* hoff__sim_test_fail_protect's countdown (0: off) and failures left */
    uint64_t call_ns;             /* the issuing thread's own cost per transfer call */
    struct mapping **buckets;     /* power-of-two hash table keyed by address */
    size_t nbuckets, count;
    struct mapping **sorted; /* managed mappings by address, for ranges inside one */
    size_t nsorted, cap_sorted;
    struct hoff__sim_counters c; /* now_ns and busy_until live here too */
    hoff__xfer_observer observe; /* hoff__sim_observe's, called under lock */
    void *observe_arg;
};

static inline struct sim *to_sim(struct hoff__backend *be) {
    return (struct sim *)be;
}

/* sim_map.c (lock held): the range (p, size) of whole 2 MiB pages inside one managed mapping, or an
 * error naming op; add size bytes to device_used (and to over_capacity when count_over and above the
 * capacity); unmap and free a managed mapping, giving its resident pages back. */
int hoff__sim_find_range(struct sim *s, const void *p, size_t size, const char *op, struct range *r);
void hoff__sim_used_add(struct sim *s, uint64_t size, int count_over);
void hoff__sim_managed_release(struct sim *s, struct mapping *m);

/* sim_clock.c (lock held): queue a transfer of dur ns on the engine whose busy_until is *busy. */
void hoff__sim_schedule(struct sim *s, uint64_t *busy, uint64_t dur, int call, hoff__event *after, hoff__event *done,
                        int kind, const void *p, uint64_t size);

/* The ops (struct hoff__backend_ops in backend/backend.h says what each does), by file. */
/* sim_map.c */
int hoff__sim_mem_info(struct hoff__backend *be, uint64_t *free_b, uint64_t *total_b);
int hoff__sim_dev_alloc(struct hoff__backend *be, size_t size, void **out);
int hoff__sim_dev_free(struct hoff__backend *be, void *p, size_t size);
int hoff__sim_managed_alloc(struct hoff__backend *be, size_t size, void **out);
int hoff__sim_managed_free(struct hoff__backend *be, void *p, size_t size);
int hoff__sim_memcpy(struct hoff__backend *be, void *dst, const void *src, size_t n);
/* sim_page.c */
int hoff__sim_window_open(struct hoff__backend *be, void *p, size_t size, hoff_stream st);
int hoff__sim_window_close(struct hoff__backend *be, void *p, size_t size);
int hoff__sim_evict(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done);
int hoff__sim_evict_node(struct hoff__backend *be, void *p, size_t size, int node, hoff__event *after,
                         hoff__event *done);
int hoff__sim_prefetch(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done);
int hoff__sim_discard(struct hoff__backend *be, void *p, size_t size, hoff__event *after, hoff__event *done);
int hoff__sim_fault(struct hoff__backend *be, void *p, size_t size, hoff_stream st, uint64_t *stall_ns);
int hoff__sim_populate(struct hoff__backend *be, void *p, size_t size, hoff_stream st);
int hoff__sim_host_bytes(struct hoff__backend *be, void *p, size_t size, void **host);
int hoff__sim_host_drop(struct hoff__backend *be, void *p, size_t size);
int hoff__sim_host_make(struct hoff__backend *be, void *p, size_t size, void **host);
/* sim_clock.c */
int hoff__sim_event_create(struct hoff__backend *be, hoff__event **out);
int hoff__sim_event_elapsed_ns(struct hoff__backend *be, hoff__event *a, hoff__event *b, uint64_t *ns);
void hoff__sim_event_destroy(struct hoff__backend *be, hoff__event *ev);
int hoff__sim_event_record(struct hoff__backend *be, hoff__event *ev, hoff_stream st);
int hoff__sim_event_query(struct hoff__backend *be, hoff__event *ev);
int hoff__sim_event_sync(struct hoff__backend *be, hoff__event *ev);
int hoff__sim_stream_wait(struct hoff__backend *be, hoff_stream st, hoff__event *ev);
int hoff__sim_transfer_wait(struct hoff__backend *be, int dir, hoff__event *ev);
int hoff__sim_sync(struct hoff__backend *be);
uint64_t hoff__sim_clock_ns(struct hoff__backend *be);
int hoff__sim_compute(struct hoff__backend *be, hoff_stream st, uint64_t ns);
int hoff__sim_nvme_model(struct hoff__backend *be, uint64_t bytes, int write, hoff__event *after, hoff__event *done);

#endif
