/* spill.c — the NVMe tier's commands: spill a block's host copy to the file and drop its host pages, restore
 * it into a fresh host copy.  Threading: run on hoff's tier thread; the block is in flight (SPILLING or
 * RESTORING), so nobody else touches its bytes or b->spill until the command's completion is seen. */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "mem/mem.h"
#include "core/core.h"
#include "tier/nvme.h"
#include "tier/spill.h"

int hoff__spill_run(void *arg, const struct hoff__cmd *c) {
    struct hoff__mem *mem = arg;
    struct hoff__block *b = c->cookie;
    struct hoff__backend *be = mem->be;
    struct hoff__nvme_spill *sp = NULL;
    void *host = NULL;
    int rc;

    hoff__error_clear(); /* a failure below reports its own message (residency carries it back) */
    if (!mem->nvme || !be->ops->host_bytes)
        return hoff__error(-ENOTSUP, "spill of %p: no NVMe tier", c->ptr);
    rc = be->ops->host_bytes(be, c->ptr, c->size, &host);
    if (rc)
        return rc;
    rc = hoff__nvme_spill(mem->nvme, host, c->size, (uint64_t)(uintptr_t)c->ptr, &sp);
    if (rc)
        return rc; /* the host copy is untouched: the block stays on the host */
    if (be->ops->host_drop && (rc = be->ops->host_drop(be, c->ptr, c->size)) != 0) {
        hoff__nvme_drop(mem->nvme, sp); /* keep the host copy instead */
        return rc;
    }
    b->spill = sp;
    if (be->ops->nvme_model)
        be->ops->nvme_model(be, c->size, 1, c->after, c->done);
    return 0;
}

int hoff__restore_run(void *arg, const struct hoff__cmd *c) {
    struct hoff__mem *mem = arg;
    struct hoff__block *b = c->cookie;
    struct hoff__backend *be = mem->be;
    void *host = NULL;
    int rc;

    hoff__error_clear();
    if (!mem->nvme || !b->spill || !be->ops->host_make)
        return hoff__error(-EINVAL, "restore of %p: nothing spilled", c->ptr);
    rc = be->ops->host_make(be, c->ptr, c->size, &host);
    if (rc)
        return rc;
    /* CRC-checked chunk by chunk; on failure the spill is kept, to retry. */
    rc = hoff__nvme_restore(mem->nvme, b->spill, host, c->size);
    if (rc)
        return rc;
    hoff__nvme_drop(mem->nvme, b->spill);
    b->spill = NULL;
    if (be->ops->nvme_model)
        be->ops->nvme_model(be, c->size, 0, c->after, c->done);
    return 0;
}
