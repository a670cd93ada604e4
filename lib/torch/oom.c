/* oom.c — the text of PyTorch's out-of-memory error under hoff (hoff_torch_oom_text): PyTorch's own shape ("CUDA
 * out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of ... of which ... is free."), which
 * batch-size finders and people recognise, then why hoff failed and hoff's figures for the device.  The C++ shim
 * (python/hoff/_shim/hoff_shim.cpp) throws it as c10::OutOfMemoryError, which PyTorch raises in Python as
 * torch.cuda.OutOfMemoryError.
 * Threading: any thread; call it on the thread whose allocation failed, right after (hoff_last_error is that
 * thread's). */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "core/core.h"

/* Append to buf (len bytes, n used so far) as snprintf would; a full buffer ends the message. */
static void put(char *buf, size_t len, size_t *n, const char *fmt, ...) {
    va_list ap;
    int w;

    if (*n >= len)
        return;
    va_start(ap, fmt);
    w = vsnprintf(buf + *n, len - *n, fmt, ap);
    va_end(ap);
    if (w > 0)
        *n += (size_t)w;
}

HOFF_API int hoff_torch_oom_text(int device, size_t size, char *buf, size_t len) {
    char why[512], a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32];
    struct hoff_stats st;
    uint64_t free_b = 0, total_b = 0;
    struct hoff_ctx *ctx;
    const char *le = hoff_last_error();
    size_t n = 0;

    if (!buf || !len)
        return hoff__error(-EINVAL, "hoff_torch_oom_text: %s (a buffer of at least 1 byte is needed)",
                           buf ? "len is 0" : "buf is NULL");
    snprintf(why, sizeof why, "%s", le && *le ? le : "the allocation failed");
    put(buf, len, &n, "CUDA out of memory. Tried to allocate %s.", hoff__fmt_size(size, a, sizeof a));
    ctx = device >= 0 ? hoff_torch_context(device) : NULL;
    if (!ctx) {
        put(buf, len, &n, " GPU %d: hoff: %s.", device, why);
        return 0;
    }
    memset(&st, 0, sizeof st);
    st.version = HOFF_STATS_VERSION;
    st.size = sizeof st;
    hoff_stats_get(ctx, &st);
    if (ctx->mem.be->ops->mem_info(ctx->mem.be, &free_b, &total_b) == 0 && total_b)
        put(buf, len, &n, " GPU %d has a total capacity of %s of which %s is free.", device,
            hoff__fmt_size(total_b, b, sizeof b), hoff__fmt_size(free_b, c, sizeof c));
    put(buf, len, &n,
        " hoff could not allocate it: %s. hoff hands out %s in blocks (%s reserved in its pools); its "
        "activation budget is %s (%s resident), the host tier holds %s%s%s%s. A smaller batch fits; "
        "hoff.memory_stats() and hoff-stat show every tier.",
        why, hoff__fmt_size(st.device_in_use_bytes + st.managed_in_use_bytes, d, sizeof d),
        hoff__fmt_size(st.device_pool_bytes + st.managed_pool_bytes, e, sizeof e),
        st.budget_bytes ? hoff__fmt_size(st.budget_bytes, f, sizeof f) : "unset",
        hoff__fmt_size(st.resident_bytes, g, sizeof g), hoff__fmt_size(st.host_bytes, h, sizeof h),
        st.host_cap_bytes ? " (cap " : "", st.host_cap_bytes ? hoff__fmt_size(st.host_cap_bytes, a, sizeof a) : "",
        st.host_cap_bytes ? ")" : "");
    return 0;
}
