// hoff_shim.cpp — the C++ side of hoff's seam with PyTorch: the only native piece built against the installed
// PyTorch (python/hoff/shim.py compiles it at first use, into a cache, keyed by PyTorch's version and this file).
//
// Why it exists.  PyTorch's Python API registers a CUDAPluggableAllocator from two C function pointers (alloc,
// free); its other hooks (set_init_fn, set_reset_fn, set_memory_fraction_fn, set_base_alloc_fn,
// set_record_stream_fn, set_begin_allocate_to_pool, set_end_allocate_to_pool_fn, set_release_pool) are C++ methods
// taking std::function, reachable from C++ only, and the begin-pool hook hands over a std::function filter.  And a
// C function cannot raise PyTorch's torch.cuda.OutOfMemoryError: PyTorch turns a thrown c10::OutOfMemoryError into
// it, and a NULL from alloc_fn becomes a tensor with no memory.  So this file:
//   - is the alloc/free pair the CUDAPluggableAllocator is made from (the registration stays PyTorch's own
//     CUDAPluggableAllocator, torch.cuda.memory.change_current_allocator): both call libhoff's hoff_torch_alloc
//     and hoff_torch_free, and a failed allocation throws c10::OutOfMemoryError with PyTorch's message shape and
//     hoff's figures (any other failure throws c10::Error with hoff's message);
//   - registers every other hook on that allocator, each one line into libhoff's hoff_torch_* entry point;
//   - keeps the filters of the graph pools PyTorch begins, and tells libhoff which pool an allocation made during a
//     capture belongs to (hoff_torch_graph_pool_use around the allocation).
// Nothing else: every rule stays in libhoff, which it reaches through the library Python loaded (dlopen of the
// same path, so HOFF_LIBRARY and the sim library are honoured).  It is plain C++20 against PyTorch's headers (2.15's
// need C++20).
//
// Threading: the alloc/free pair and the hooks are called by PyTorch from any thread; `g_lib` is written once by
// hoff_shim_bind before the allocator exists; the pool table has its own mutex.
#include <torch/csrc/cuda/CUDAPluggableAllocator.h>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/Exception.h>

#include <dlfcn.h>
#include <sys/types.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

namespace tpa = torch::cuda::CUDAPluggableAllocator;

struct Lib {
    void *(*alloc)(ssize_t, int, void *);
    void (*free)(void *, ssize_t, int, void *);
    void (*init)(int);
    void (*empty_cache)(void);
    void (*set_memory_fraction)(double, int);
    void (*record_stream)(void *, void *);
    const char *(*last_error)(void);
    int (*oom_text)(int, size_t, char *, size_t);
    void (*pool_begin)(int, uint64_t, uint64_t);
    void (*pool_end)(int, uint64_t, uint64_t);
    void (*pool_release)(int, uint64_t, uint64_t);
    void (*pool_use)(uint64_t, uint64_t);
};

Lib g_lib;
std::atomic<bool> g_bound{false};

struct Pool {
    int device;
    c10::cuda::MempoolId_t id;
    std::function<bool(cudaStream_t)> filter;
};
std::mutex g_pool_lock;
std::vector<Pool> g_pools;              // pools PyTorch began allocating to and has not ended
std::atomic<int> g_npools{0};           // g_pools.size(), read without the lock on every allocation
enum { H_INIT, H_RESET, H_FRACTION, H_RECORD, H_BEGIN, H_END, H_RELEASE, H_COUNT };
std::atomic<uint64_t> g_hooks[H_COUNT];       // calls of each hook, for hoff_shim_counts

void count(int h) {
    g_hooks[h].fetch_add(1, std::memory_order_relaxed);
}

std::string hoff_error(const char *fallback) {
    const char *e = g_lib.last_error ? g_lib.last_error() : nullptr;
    return e && *e ? std::string(e) : std::string(fallback);
}

// The pool the allocation on `stream` belongs to: the first begun pool of the device whose filter takes the
// stream.  {0, 0} when none (or none begun).
c10::cuda::MempoolId_t pool_of(int device, cudaStream_t stream) {
    std::lock_guard<std::mutex> g(g_pool_lock);
    for (const Pool &p : g_pools)
        if (p.device == device && p.filter && p.filter(stream))
            return p.id;
    return {0, 0};
}

void *alloc_in(size_t size, int device, cudaStream_t stream) {
    if (g_npools.load(std::memory_order_acquire) > 0) {
        c10::cuda::MempoolId_t id = pool_of(device, stream);
        if (id.first || id.second) {
            g_lib.pool_use(id.first, id.second);
            void *p = g_lib.alloc((ssize_t)size, device, (void *)stream);
            int e = errno;
            g_lib.pool_use(0, 0);
            errno = e;
            return p;
        }
    }
    return g_lib.alloc((ssize_t)size, device, (void *)stream);
}

} // namespace

extern "C" {

// The alloc_fn of the CUDAPluggableAllocator.  Throws (through PyTorch's C++ frames, into its Python binding,
// which raises torch.cuda.OutOfMemoryError or RuntimeError) instead of returning NULL for a failed allocation.
__attribute__((visibility("default"))) void *hoff_shim_alloc(size_t size, int device, cudaStream_t stream) {
    TORCH_CHECK(g_bound.load(std::memory_order_acquire),
                "hoff: the shim's allocator was used before hoff_shim_bind (hoff.install() does both in order)");
    if (size == 0)
        return nullptr; // as PyTorch's own allocator: no memory for 0 bytes
    errno = 0;
    void *p = alloc_in(size, device, stream);
    if (p)
        return p;
    if (errno != ENOMEM) // hoff_torch_alloc's rule of what is out of memory (ENOMEM)
        TORCH_CHECK(false, "hoff could not allocate ", size, " bytes on CUDA device ", device, ": ",
                    hoff_error("no hoff context for the device"));
    char text[1024] = "";
    g_lib.oom_text(device, size, text, sizeof text);
    TORCH_CHECK_WITH(OutOfMemoryError, false, text);
}

__attribute__((visibility("default"))) void hoff_shim_free(void *ptr, size_t size, int device,
                                                            cudaStream_t stream) {
    if (g_bound.load(std::memory_order_acquire))
        g_lib.free(ptr, (ssize_t)size, device, (void *)stream);
}

// Resolve libhoff's entry points from the library at `path` (already loaded by Python: the same handle).
// 0, or -1 with the reason in err.
__attribute__((visibility("default"))) int hoff_shim_bind(const char *path, char *err, size_t errlen) {
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        std::snprintf(err, errlen, "cannot open %s: %s", path, dlerror());
        return -1;
    }
    Lib l{};
    struct {
        const char *name;
        void **slot;
    } syms[] = {
        {"hoff_torch_alloc", (void **)&l.alloc},
        {"hoff_torch_free", (void **)&l.free},
        {"hoff_torch_init", (void **)&l.init},
        {"hoff_torch_empty_cache", (void **)&l.empty_cache},
        {"hoff_torch_set_memory_fraction", (void **)&l.set_memory_fraction},
        {"hoff_torch_record_stream", (void **)&l.record_stream},
        {"hoff_last_error", (void **)&l.last_error},
        {"hoff_torch_oom_text", (void **)&l.oom_text},
        {"hoff_torch_graph_pool_begin", (void **)&l.pool_begin},
        {"hoff_torch_graph_pool_end", (void **)&l.pool_end},
        {"hoff_torch_graph_pool_release", (void **)&l.pool_release},
        {"hoff_torch_graph_pool_use", (void **)&l.pool_use},
    };
    for (auto &s : syms) {
        *s.slot = dlsym(h, s.name);
        if (!*s.slot) {
            std::snprintf(err, errlen, "%s has no %s (an older libhoff than this package)", path, s.name);
            return -1;
        }
    }
    g_lib = l;
    g_bound.store(true, std::memory_order_release);
    return 0;
}

// Register every hook on PyTorch's current allocator, which must be the CUDAPluggableAllocator made from
// hoff_shim_alloc/hoff_shim_free.  0, or -1 with the reason in err.
__attribute__((visibility("default"))) int hoff_shim_attach(char *err, size_t errlen) {
    if (!g_bound.load(std::memory_order_acquire)) {
        std::snprintf(err, errlen, "hoff_shim_bind was not called");
        return -1;
    }
    auto cur = tpa::getCurrentAllocator();
    auto a = std::dynamic_pointer_cast<tpa::CUDAPluggableAllocator>(cur);
    if (!a) {
        std::snprintf(err, errlen, "PyTorch's current CUDA allocator is not a CUDAPluggableAllocator (%s)",
                      cur ? "another allocator" : "none was changed");
        return -1;
    }
    a->set_init_fn([](int n) { count(H_INIT); g_lib.init(n); });
    a->set_reset_fn([]() { count(H_RESET); g_lib.empty_cache(); });
    a->set_memory_fraction_fn([](double f, int d) { count(H_FRACTION); g_lib.set_memory_fraction(f, d); });
    a->set_record_stream_fn([](void *p, cudaStream_t s) { count(H_RECORD); g_lib.record_stream(p, (void *)s); });
    // set_base_alloc_fn stays unset: PyTorch then answers with the pointer itself, which is right for hoff (a
    // block is never split between allocations); only CUDA IPC reads the size it leaves, and hoff refuses IPC.
    a->set_begin_allocate_to_pool(
        [](int device, c10::cuda::MempoolId_t id, std::function<bool(cudaStream_t)> filter) {
            count(H_BEGIN);
            {
                std::lock_guard<std::mutex> g(g_pool_lock);
                g_pools.push_back(Pool{device, id, std::move(filter)});
                g_npools.store((int)g_pools.size(), std::memory_order_release);
            }
            g_lib.pool_begin(device, id.first, id.second);
        });
    a->set_end_allocate_to_pool_fn([](int device, c10::cuda::MempoolId_t id) {
        count(H_END);
        {
            std::lock_guard<std::mutex> g(g_pool_lock);
            for (auto it = g_pools.begin(); it != g_pools.end(); ++it)
                if (it->device == device && it->id == id) {
                    g_pools.erase(it);
                    break;
                }
            g_npools.store((int)g_pools.size(), std::memory_order_release);
        }
        g_lib.pool_end(device, id.first, id.second);
    });
    a->set_release_pool([](int device, c10::cuda::MempoolId_t id) {
        count(H_RELEASE);
        g_lib.pool_release(device, id.first, id.second);
    });
    return 0;
}

// The hook calls so far, in the order init, reset (empty_cache), memory fraction, record_stream, begin pool,
// end pool, release pool: for tests and `python -m hoff --stats` (hoff.shim.hook_counts).
__attribute__((visibility("default"))) void hoff_shim_counts(uint64_t *out, int n) {
    for (int i = 0; i < n && i < H_COUNT; i++)
        out[i] = g_hooks[i].load(std::memory_order_relaxed);
}

// For the CPU tests (no driver): call the current allocator's C++ methods the way PyTorch does, so that a test
// sees each hook reach libhoff through PyTorch's own CUDAPluggableAllocator.  what: 0 malloc(size, device 0,
// default stream) and free it (an OutOfMemoryError or c10::Error is caught: its message goes to msg, and the
// return is 2 or 3), 1 emptyCache, 2 setMemoryFraction(fraction, 0), 3 recordStream of ptr on the default
// stream, 4 begin a pool (id0, id1) whose filter takes every stream, 5 end it, 6 release it, 7 malloc(size) kept
// (its pointer goes to *out), 8 free *out.  Returns 0 (1 for an unknown `what`).
__attribute__((visibility("default"))) int hoff_shim_selftest(int what, size_t size, double fraction, void *ptr,
                                                               uint64_t id0, uint64_t id1, void **out, char *msg,
                                                               size_t msglen) {
    auto a = std::dynamic_pointer_cast<tpa::CUDAPluggableAllocator>(tpa::getCurrentAllocator());
    if (!a) {
        std::snprintf(msg, msglen, "no CUDAPluggableAllocator is current");
        return 4;
    }
    c10::cuda::MempoolId_t id{id0, id1};
    try {
        switch (what) {
        case 0: {
            void *p = a->malloc(size, 0, nullptr);
            if (p)
                a->raw_delete(p);
            return 0;
        }
        case 1:
            a->emptyCache();
            return 0;
        case 2:
            a->setMemoryFraction(fraction, 0);
            return 0;
        case 3: {
            c10::DataPtr dp(ptr, c10::Device(c10::DeviceType::CUDA, 0));
            // The default stream, made without asking the driver (a CPU test has none).
            c10::cuda::CUDAStream s(c10::cuda::CUDAStream::UNCHECKED,
                                    c10::Stream(c10::Stream::DEFAULT, c10::Device(c10::DeviceType::CUDA, 0)));
            a->recordStream(dp, s);
            return 0;
        }
        case 4:
            a->beginAllocateToPool(0, id, [](cudaStream_t) { return true; });
            return 0;
        case 5:
            a->endAllocateToPool(0, id);
            return 0;
        case 6:
            a->releasePool(0, id);
            return 0;
        case 7:
            *out = a->malloc(size, 0, nullptr);
            return 0;
        case 8:
            a->raw_delete(*out);
            return 0;
        default:
            return 1;
        }
    } catch (const c10::OutOfMemoryError &e) {
        std::snprintf(msg, msglen, "%s", e.what_without_backtrace());
        return 2;
    } catch (const c10::Error &e) {
        std::snprintf(msg, msglen, "%s", e.what_without_backtrace());
        return 3;
    }
}

} // extern "C"
