/* sim_clock.c — the sim's virtual clock: the two copy engines and the issuing thread a transfer is
 * queued on (the clock of core/xfer.h), the waits that advance compute, events, sync, simulated
 * compute, and the simulated NVMe device.  The model: backend/sim.h.
 * Threading: the ops take s->lock; schedule and wait_until expect it held. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend/sim.h"
#include "core/core.h"
#include "core/xfer.h"

/* Queue a transfer of dur ns on the engine whose busy_until is *busy (the
 * clock of core/xfer.h); call: it is a transfer call of the issuing thread,
 * which pays call_ns first.  Reports it to the observer as kind, over
 * (p, size) (NULL for the NVMe tier's, which has no address). */
void hoff__sim_schedule(struct sim *s, uint64_t *busy, uint64_t dur, int call, hoff__event *after, hoff__event *done,
                        int kind, const void *p, uint64_t size) {
    uint64_t start, end, issued = s->c.now_ns;

    end = hoff__xfer_call(s->c.now_ns, call ? &s->c.issuer_busy_until : NULL, s->call_ns, busy,
                          after && after->recorded ? after->t : 0, s->latency_ns, dur, &start);
    if (call) {
        issued = s->c.issuer_busy_until;
        s->c.transfer_calls++;
    }
    if (done) {
        done->t = end;
        done->recorded = 1;
    }
    if (s->observe)
        s->observe(s->observe_arg, &(struct hoff__xfer_obs){.kind = kind,
                                                            .p = p,
                                                            .block = UINT32_MAX,
                                                            .bytes = size,
                                                            .issued = issued,
                                                            .start = start,
                                                            .end = end});
}

/* Compute waits until t (counted as a wait stall). */
static void wait_until(struct sim *s, uint64_t t) {
    if (t > s->c.now_ns) {
        if (s->observe)
            s->observe(
                s->observe_arg,
                &(struct hoff__xfer_obs){
                    .kind = HOFF__XF_WAIT, .block = UINT32_MAX, .issued = s->c.now_ns, .start = s->c.now_ns, .end = t});
        s->c.wait_stall_ns += t - s->c.now_ns;
        s->c.now_ns = t;
    }
}

/* --- events ------------------------------------------------------------- */

int hoff__sim_event_create(struct hoff__backend *be, hoff__event **out) {
    if (!out)
        return hoff__error(-EINVAL, "sim: event_create: out is NULL");
    *out = calloc(1, sizeof **out);
    return *out ? 0 : hoff__error(-ENOMEM, "sim: event_create: out of memory");
}

int hoff__sim_event_elapsed_ns(struct hoff__backend *be, hoff__event *a, hoff__event *b, uint64_t *ns) {
    struct sim *s = to_sim(be);
    int rc = 0;

    if (!a || !b || !ns)
        return hoff__error(-EINVAL, "sim: event_elapsed_ns: NULL argument");
    pthread_mutex_lock(&s->lock);
    if (!a->recorded || !b->recorded)
        rc = hoff__error(-EINVAL, "sim: event_elapsed_ns: an event was never recorded");
    else if (a->t > s->c.now_ns || b->t > s->c.now_ns)
        rc = -EAGAIN;
    else
        *ns = b->t >= a->t ? b->t - a->t : 0;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void hoff__sim_event_destroy(struct hoff__backend *be, hoff__event *ev) {
    free(ev);
}

int hoff__sim_event_record(struct hoff__backend *be, hoff__event *ev, hoff_stream st) {
    struct sim *s = to_sim(be);

    if (!ev)
        return hoff__error(-EINVAL, "sim: event_record: event is NULL");
    pthread_mutex_lock(&s->lock);
    ev->t = s->c.now_ns;
    ev->recorded = 1;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int hoff__sim_event_query(struct hoff__backend *be, hoff__event *ev) {
    struct sim *s = to_sim(be);
    int rc;

    if (!ev)
        return hoff__error(-EINVAL, "sim: event_query: event is NULL");
    pthread_mutex_lock(&s->lock);
    rc = (!ev->recorded || ev->t <= s->c.now_ns) ? 0 : -EAGAIN;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int hoff__sim_event_sync(struct hoff__backend *be, hoff__event *ev) {
    struct sim *s = to_sim(be);

    if (!ev)
        return hoff__error(-EINVAL, "sim: event_sync: event is NULL");
    pthread_mutex_lock(&s->lock);
    if (ev->recorded)
        wait_until(s, ev->t);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int hoff__sim_stream_wait(struct hoff__backend *be, hoff_stream st, hoff__event *ev) {
    /* Compute is one timeline: a stream waiting is compute waiting. */
    if (!ev)
        return hoff__error(-EINVAL, "sim: stream_wait: event is NULL");
    return hoff__sim_event_sync(be, ev);
}

/* The next transfer in direction dir waits for ev: its copy engine starts
 * no earlier (the engine is FIFO, as a CUDA stream is).  An event never
 * recorded is no wait, as cudaStreamWaitEvent has it. */
int hoff__sim_transfer_wait(struct hoff__backend *be, int dir, hoff__event *ev) {
    struct sim *s = to_sim(be);
    uint64_t *busy;

    if (!ev)
        return hoff__error(-EINVAL, "sim: transfer_wait: event is NULL");
    if (dir != HOFF__XFER_D2H && dir != HOFF__XFER_H2D)
        return hoff__error(-EINVAL, "sim: transfer_wait: direction %d (expected D2H 0 or H2D 1)", dir);
    pthread_mutex_lock(&s->lock);
    busy = dir == HOFF__XFER_H2D ? &s->c.h2d_busy_until : &s->c.d2h_busy_until;
    if (ev->recorded && ev->t > *busy)
        *busy = ev->t;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int hoff__sim_sync(struct hoff__backend *be) {
    struct sim *s = to_sim(be);

    pthread_mutex_lock(&s->lock);
    wait_until(s, s->c.d2h_busy_until > s->c.h2d_busy_until ? s->c.d2h_busy_until : s->c.h2d_busy_until);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

uint64_t hoff__sim_clock_ns(struct hoff__backend *be) {
    struct sim *s = to_sim(be);
    uint64_t t;

    pthread_mutex_lock(&s->lock);
    t = s->c.now_ns;
    pthread_mutex_unlock(&s->lock);
    return t;
}

int hoff__sim_compute(struct hoff__backend *be, hoff_stream st, uint64_t ns) {
    struct sim *s = to_sim(be);

    pthread_mutex_lock(&s->lock);
    s->c.now_ns = hoff__sat_add(s->c.now_ns, ns);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

/* One simulated NVMe device: reads and writes share it.  The tier thread
 * runs the real I/O whenever it gets to it, so the virtual clock may have
 * moved on since the operation was issued; it starts in virtual time at its
 * issue (after, recorded then) or when the device is free, not when the
 * thread got there, so the simulation stays deterministic. */
int hoff__sim_nvme_model(struct hoff__backend *be, uint64_t bytes, int write, hoff__event *after, hoff__event *done) {
    struct sim *s = to_sim(be);
    uint64_t now;

    pthread_mutex_lock(&s->lock);
    now = s->c.now_ns;
    if (after && after->recorded && after->t < now)
        s->c.now_ns = after->t; /* hoff__sim_schedule() starts from now: from the issue instead */
    hoff__sim_schedule(s, &s->c.nvme_busy_until, hoff__copy_ns(bytes, write ? s->nvme_write_gbps : s->nvme_read_gbps),
                       0, after, done, write ? HOFF__XF_SPILL : HOFF__XF_RESTORE, NULL, bytes);
    s->c.now_ns = now;
    if (write)
        s->c.bytes_nvme_written += bytes;
    else
        s->c.bytes_nvme_read += bytes;
    pthread_mutex_unlock(&s->lock);
    return 0;
}
