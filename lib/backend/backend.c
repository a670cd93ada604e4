/* backend.c — choosing a backend, and the cuda entry point of a build without CUDA.
 * Threading: no state. */
#include "config.h"

#include <errno.h>

#include "backend/backend.h"
#include "core/core.h"

#ifndef HAVE_CUDA
int hoff__backend_open_cuda(const struct hoff_config *cfg, struct hoff__backend **out) {
    (void)cfg;
    *out = NULL;
    return hoff__error(-ENODEV, "the cuda backend is not built in (configure found no CUDA; "
                                "rebuild with --with-cuda=DIR)");
}

int hoff__cuda_current_device(void) {
    return -ENODEV;
}
#endif
