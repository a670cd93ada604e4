/* workload.c — the demo's synthetic transformer: the activations one layer saves for backward, the parameters,
 * the modelled compute per layer, and the block size hoff hands out for each offload candidate (probed on a
 * throw-away context).  Threading: single-threaded. */
#include <errno.h>
#include <stdlib.h>

#include "hoff-demo.h"

/* The activations one layer saves for backward (flash attention: no s x s
 * scores).  b*s*h elements in bf16 is the unit. */
void build_workload(struct demo *d, uint64_t managed_min) {
    size_t bsh = (size_t)d->batch * d->seq * d->hidden;
    size_t heads = d->hidden >= 64 ? d->hidden / 64 : 1;
    struct {
        const char *name;
        size_t bytes;
    } s[] = {
        {"ln1_input", bsh * 2},     {"qkv", bsh * 3 * 2},
        {"attn_out", bsh * 2},      {"attn_lse", (size_t)d->batch * heads * d->seq * 4}, /* fp32 */
        {"attn_dropout_mask", bsh},                                                      /* 1 byte */
        {"ln2_input", bsh * 2},     {"mlp_fc1", bsh * 4 * 2},
        {"mlp_gelu", bsh * 4 * 2},
    };
    double fwd_flops;

    d->nspec = (int)(sizeof(s) / sizeof(s[0]));
    d->act_bytes_layer = d->cand_bytes_layer = 0;
    for (int i = 0; i < d->nspec; i++) {
        d->spec[i].name = s[i].name;
        d->spec[i].bytes = (s[i].bytes + 7) & ~(size_t)7;
        d->spec[i].candidate = d->spec[i].bytes >= managed_min;
        d->spec[i].usable = d->spec[i].bytes;
        d->act_bytes_layer += d->spec[i].bytes;
        if (d->spec[i].candidate)
            d->cand_bytes_layer += d->spec[i].bytes;
    }
    /* Parameters: qkv, out projection, fc1, fc2 (bf16) and two layer norms. */
    d->param_bytes = (uint64_t)d->layers * (12ull * d->hidden * d->hidden * 2 + 4ull * d->hidden * 2);
    d->nparams = (uint64_t)d->layers * 6;
    /* Forward FLOPs of a layer: 24*b*s*h^2 (matmuls) + 4*b*s^2*h (attention). */
    fwd_flops =
        24.0 * d->batch * d->seq * (double)d->hidden * d->hidden + 4.0 * d->batch * (double)d->seq * d->seq * d->hidden;
    /* A step computes for 3 * layers * fwd; main refuses one past the
     * longest step hoff models (the sim clock must not saturate). */
    d->step_compute_ns = 3.0 * d->layers * (fwd_flops / (d->tflops * 1e3));
    if (d->step_compute_ns > (double)HOFF__STEP_NS_MAX)
        return;
    d->fwd_ns = (uint64_t)(fwd_flops / (d->tflops * 1e3));
    if (d->fwd_ns == 0)
        d->fwd_ns = 1;
    d->bwd_ns = 2 * d->fwd_ns;
}

/* What hoff hands out for each offload candidate: a throw-away context with
 * the same configuration and no budget. */
int probe_sizes(struct demo *d, const struct hoff_config *cfg, const char **what) {
    struct hoff_config c = *cfg;
    hoff_ctx *probe;
    int rc;

    c.budget_bytes = 0;
    *what = "hoff_init";
    rc = hoff_init(&probe, &c);
    if (rc)
        return rc;
    d->cand_usable_layer = 0;
    for (int i = 0; i < d->nspec; i++) {
        void *p;
        if (!d->spec[i].candidate)
            continue;
        p = hoff_malloc_flags(probe, d->spec[i].bytes, NULL, HOFF_ALLOC_MANAGED);
        if (!p) {
            *what = "hoff_malloc_flags (probing the block sizes)";
            rc = errno ? -errno : -ENOMEM;
            hoff_shutdown(probe);
            return rc;
        }
        d->spec[i].usable = hoff_block_size(probe, p);
        if (d->spec[i].usable < d->spec[i].bytes)
            d->spec[i].usable = d->spec[i].bytes;
        d->cand_usable_layer += d->spec[i].usable;
        hoff_free(probe, p, NULL);
    }
    return hoff_shutdown(probe);
}
