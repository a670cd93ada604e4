// marks_native_probe.cpp — a probe for bench/marks_native.py, not part of hoff: what op marks would cost from a
// C++ RecordFunction global callback instead of hoff's Python TorchDispatchMode (python/hoff/opmarks.py), for
// issue 27's "the marks' CPU cost".  At the start of each outermost aten op (RecordScope::FUNCTION, nested ops
// skipped by a thread-local depth) it marks a read of every tensor argument's storage of at least min_bytes
// (hoff_access), at its end a write of every output's and an op boundary (hoff_mark_op): the calls the Python mode
// makes, into the same libhoff, on the same context.  It keeps no phase, no sim clock and no log: a cost probe.
// Threading: the callback runs on every thread that runs aten ops; its state is set before it is added.
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>

#include <dlfcn.h>

#include <cstdint>

namespace {

typedef int (*access_fn)(void *ctx, void *ptr, int write, void *stream);
typedef int (*mark_fn)(void *ctx, const char *name);

access_fn g_access;
mark_fn g_mark;
void *g_ctx;
size_t g_min;
at::CallbackHandle g_handle;
thread_local int t_depth;

void mark(const c10::IValue &v, int write) {
    if (v.isTensor()) {
        const at::Tensor &t = v.toTensor();
        if (t.defined() && t.has_storage()) {
            const c10::Storage &s = t.storage();
            if (s.nbytes() >= g_min && s.data())
                g_access(g_ctx, const_cast<void *>(s.data()), write, nullptr);
        }
    } else if (v.isTensorList()) {
        for (const at::Tensor &t : v.toTensorList().vec())
            mark(c10::IValue(t), write);
    }
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction &fn) {
    if (t_depth++ == 0)
        for (const c10::IValue &v : fn.inputs())
            mark(v, 0);
    return nullptr;
}

void on_end(const at::RecordFunction &fn, at::ObserverContext *) {
    if (--t_depth == 0) {
        for (const c10::IValue &v : fn.outputs())
            mark(v, 1);
        g_mark(g_ctx, fn.name());
    }
}

} // namespace

// Add the callback, marking into ctx through the libhoff loaded at path.  0, or -1 when path is not loaded.
extern "C" __attribute__((visibility("default"))) int probe_add(void *ctx, const char *path, size_t min_bytes) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    if (!lib)
        return -1;
    g_access = (access_fn)dlsym(lib, "hoff_access");
    g_mark = (mark_fn)dlsym(lib, "hoff_mark_op");
    if (!g_access || !g_mark)
        return -1;
    g_ctx = ctx;
    g_min = min_bytes;
    g_handle = at::addGlobalCallback(at::RecordFunctionCallback(on_start, on_end)
                                         .needsInputs(true)
                                         .needsOutputs(true)
                                         .scopes({at::RecordScope::FUNCTION}));
    return 0;
}

extern "C" __attribute__((visibility("default"))) void probe_remove(void) {
    at::removeCallback(g_handle);
}
