// hoff_marks.cpp — hoff's op marks from PyTorch's dispatcher, natively: a thread-local RecordFunction callback that
// does for each aten op what python/hoff/opmarks.py's TorchDispatchMode does, at a fraction of its CPU cost and
// without stopping TorchDynamo (a TorchDispatchMode makes compiled frames run eagerly; a RecordFunction callback
// does not).  Built into the same shim as hoff_shim.cpp (python/hoff/shim.py), with or without its CUDA half.
//
// The rule, per op, is the Python mode's (opmarks.py, whose docstring is the reference): at the start of an
// outermost aten op (RecordScope::FUNCTION; ops the op calls itself are inside it) a read of the block of every
// tensor argument of at least min_bytes; at its end, once its kernels are enqueued, a write of every output that is
// a new block and of every argument its schema writes (alias_info is_write), then an op boundary named
// "aten.mm.default", with its phase (forward, backward, loss, optimizer) set first when it changed.  What differs:
// - the ops are the ones called through the dispatcher from outside any other op (aten::linear, where the Python
//   mode, below autograd, sees its decomposition t + addmm): one boundary per such op, every tensor it touches
//   marked, so its kernels lie inside the windows as before;
// - autograd's backward threads are reached through PyTorch's ThreadLocalState, which carries a thread-local
//   callback as it carries a dispatch mode; an intra-op worker thread (at::in_parallel_region) runs part of an op
//   and marks nothing of its own;
// - an op whose tensors all lack memory (TorchDynamo tracing with fake tensors, meta tensors) is not a use of any
//   block and gets no boundary;
// - "opaque" regions (hoff_marks_opaque: a compiled region, whose generated kernels are no aten ops) keep the
//   access marks of the aten ops inside but no boundary: every window opened in one, or at its entry, lasts to
//   its end, when the caller marks the boundary;
// - a compiled frame TorchDynamo runs outside any hoff region is counted and made opaque (unwrapped_begin).
// Phases: the optimizer and backward depths are hoff.grads' (pushed by hoff_marks_phase_state), the loss words too.
//
// Threading: the callback runs on the thread that started the marks and the threads its ThreadLocalState reaches
// (autograd's), from hoff_marks_start to hoff_marks_stop (one at a time, under g_lock, on that thread); the targets
// are written only while it is not added.  Per-thread
// state (op depth, quiet and opaque depth, the open op's reads, the op cache) is thread_local; counters are atomics.
#include <ATen/core/function_schema.h>
#include <ATen/Parallel.h>
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <c10/core/Storage.h>

#ifdef HOFF_SHIM_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

extern "C" __attribute__((visibility("default"))) int hoff_marks_opaque(int delta);

namespace {

enum { T_CTX = 0, T_RECORD = 1 }; // a libhoff context (hoff_access ...), the recorder of hoff-record
enum { PH_FORWARD = 1, PH_BACKWARD = 2, PH_LOSS = 3, PH_OPTIMIZER = 4 }; // enum hoff_phase (include/hoff.h)
constexpr int MAX_TARGETS = 4;

struct Fns {
    int (*access)(void *, void *, int, void *);
    int (*mark)(void *, const char *);
    int (*phase)(void *, int);
    int64_t (*r_access)(const void *, int);
    int (*r_mark)(const char *);
    int (*r_phase)(int);
};

Fns g_fn;
bool g_ctx_bound, g_rec_bound;
// A target of the marks: each call goes to a libhoff context or to hoff-record's recorder, by kind.
struct Target {
    int kind;
    void *ctx;

    void access(const void *p, int write, void *stream) const {
        if (kind == T_CTX)
            g_fn.access(ctx, const_cast<void *>(p), write, stream);
        else
            g_fn.r_access(p, write);
    }
    void phase(int ph) const {
        if (kind == T_CTX)
            g_fn.phase(ctx, ph);
        else
            g_fn.r_phase(ph);
    }
    void mark(const char *name) const {
        if (kind == T_CTX)
            g_fn.mark(ctx, name);
        else
            g_fn.r_mark(name);
    }
};
Target g_targets[MAX_TARGETS];
int g_ntargets;
size_t g_min;
std::vector<std::string> g_loss_words;

std::mutex g_lock; // start/stop and the op table
std::atomic<bool> g_on{false};
at::CallbackHandle g_handle;

std::atomic<int> g_opt{0}, g_bwd{0}; // hoff.grads' optimizer and backward depths
std::atomic<int> g_phase{-1};        // the phase last set on the targets
std::atomic<uint64_t> g_ops{0}, g_accesses{0}, g_skipped{0}, g_opaque_ops{0}, g_unwrapped{0};
std::atomic<uint64_t> g_gen{0}; // hoff_marks_start calls: a step's marks (thread state of an older one is void)
std::mutex g_threads_lock;
std::unordered_set<uint64_t> g_threads; // threads the callback marked on (ids of this process)

struct OpInfo {
    std::string name;         // "aten.mm.default"
    std::string base;         // "mm": the op's name without its namespace, which the loss words are matched in
    bool loss;                // one of a loss function's own ops (hoff.grads.is_loss_op)
    bool schema;              // its schema was found
    std::vector<int> written; // the indices of the arguments it writes
};
// By name and overload, under g_lock; entries are never removed (the threads' caches point into them).
std::unordered_map<std::string, std::unique_ptr<OpInfo>> g_table;

thread_local int t_depth;  // FUNCTION-scope ops open on this thread
thread_local int t_quiet;  // hoff's own ops (hoff_marks_quiet)
thread_local int t_opaque; // compiled regions open (hoff_marks_opaque), of the generation t_opaque_gen
thread_local uint64_t t_opaque_gen;
thread_local bool t_marking; // the open outermost op is marked (not quiet, not fake)
thread_local std::vector<const void *> t_reads;  // blocks the open outermost op reads
thread_local std::vector<const void *> t_writes; // ...and writes
// ...and the blocks of the arguments its schema writes, with their streams: taken at its start, since the inputs a
// RecordFunction hands over are valid in the start callback only (the dispatcher boxes them into a temporary)
thread_local std::vector<std::pair<const void *, void *>> t_wargs;
thread_local std::unordered_map<const char *, const OpInfo *> t_cache; // by RecordFunction::name()'s pointer
thread_local bool t_seen;                        // ...and has a tensor with memory among its inputs
thread_local const OpInfo *t_info;               // ...and is this op

// The compiled regions open on this thread in this step's marks (one left open by an older step counts none).
int opaque_depth() {
    return t_opaque_gen == g_gen.load(std::memory_order_relaxed) ? t_opaque : 0;
}

bool is_loss(const std::string &base) {
    for (const std::string &w : g_loss_words)
        if (base.find(w) != std::string::npos)
            return true;
    return false;
}

// The op fn records, or nullptr when it records no dispatcher op: autograd's engine wraps each backward node in a
// FUNCTION-scope record ("autograd::engine::evaluate_function: MmBackward0") whose ops are the ones to mark.
// Cached per thread by the op's name pointer, which is its schema's (stable for the process); a record without an
// operator has a transient name and is never cached.
const OpInfo *op_info(const at::RecordFunction &fn) {
    const char *key = fn.name();
    auto it = t_cache.find(key);
    if (it != t_cache.end())
        return it->second;
    auto on = fn.operator_name();
    if (!on)
        return nullptr;
    const std::string overload = on->overload_name.empty() ? "default" : on->overload_name;
    std::lock_guard<std::mutex> g(g_lock);
    auto &slot = g_table[on->name + "." + overload];
    if (!slot) {
        auto info = std::make_unique<OpInfo>();
        std::string dotted = on->name;
        size_t p = dotted.find("::");
        if (p != std::string::npos)
            dotted.replace(p, 2, ".");
        info->name = dotted + "." + overload;
        info->base = p != std::string::npos ? on->name.substr(p + 2) : on->name;
        info->loss = is_loss(info->base);
        auto sch = fn.operator_schema();
        info->schema = (bool)sch;
        if (sch) {
            const auto &args = sch->arguments();
            for (size_t i = 0; i < args.size(); i++)
                if (args[i].alias_info() && args[i].alias_info()->isWrite())
                    info->written.push_back((int)i);
        }
        slot = std::move(info);
    }
    t_cache.emplace(key, slot.get());
    return slot.get();
}

// The block of t (its storage's base address) if it is one hoff may track; *real: t has memory.
const void *block_of(const at::Tensor &t, bool *real) {
    if (!t.defined() || !t.has_storage())
        return nullptr;
    const c10::Storage &s = t.storage();
    const void *p = s.data();
    if (!p)
        return nullptr;
    *real = true;
    return s.nbytes() >= g_min ? p : nullptr;
}

void *stream_of(const at::Tensor &t) {
#ifdef HOFF_SHIM_CUDA
    if (t.is_cuda())
        return (void *)c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
#endif
    (void)t;
    return nullptr;
}

void access(const void *p, int write, void *stream) {
    for (int i = 0; i < g_ntargets; i++)
        g_targets[i].access(p, write, stream);
    g_accesses.fetch_add(1, std::memory_order_relaxed);
}

template <typename F> void each_tensor(const c10::IValue &v, F &&f) {
    if (v.isTensor()) {
        f(v.toTensor());
    } else if (v.isTensorList()) {
        for (const at::Tensor &t : v.toTensorList().vec())
            f(t);
    } else if (v.isList()) { // List[Optional[Tensor]] (index) and the like
        for (const c10::IValue &e : v.toListRef())
            if (e.isTensor())
                f(e.toTensor());
    }
}

bool seen(const void *p) {
    for (const void *q : t_reads)
        if (q == p)
            return true;
    return false;
}

// The record TorchDynamo makes around every run of a compiled frame ("Torch-Compiled Region: 0/0", PyTorch 2.3
// and later).  One that runs while no hoff region is open on its thread was not made through hoff's torch.compile
// wrapper (torch._dynamo.optimize, a model compiled before hoff was installed): its kernels' reads of the blocks it
// was given are not marked.  It is counted (the package says so), and no boundary falls inside it.
struct UnwrappedRegion : at::ObserverContext {};

bool is_compiled_frame(const char *name) {
    static const char prefix[] = "Torch-Compiled Region";
    return name && std::strncmp(name, prefix, sizeof prefix - 1) == 0;
}

std::unique_ptr<at::ObserverContext> unwrapped_begin(const at::RecordFunction &fn) {
    if (!g_on.load(std::memory_order_relaxed) || opaque_depth() > 0 || !is_compiled_frame(fn.name()))
        return nullptr;
    g_unwrapped.fetch_add(1, std::memory_order_relaxed);
    hoff_marks_opaque(1);
    return std::make_unique<UnwrappedRegion>();
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction &fn) {
    if (at::in_parallel_region()) // an intra-op worker running part of an op: inside that op (on_end skips too)
        return nullptr;
    const OpInfo *info = op_info(fn);
    if (!info)
        return unwrapped_begin(fn);
    if (t_depth++ != 0)
        return nullptr;
    t_info = info;
    // An op in flight when the step's marks stop still gets this callback's end (a RecordFunction keeps the
    // callbacks it started with): it keeps the depth balanced and marks nothing once g_on is false.
    t_marking = t_quiet == 0 && g_on.load(std::memory_order_relaxed);
    t_reads.clear();
    t_seen = false;
    if (!t_marking)
        return nullptr;
    bool real = false;
    auto in = fn.inputs();
    for (const c10::IValue &v : in)
        each_tensor(v, [&](const at::Tensor &t) {
            const void *p = block_of(t, &real);
            if (p && !seen(p)) {
                t_reads.push_back(p);
                access(p, 0, stream_of(t));
            }
        });
    t_wargs.clear();
    for (int i : info->written)
        if ((size_t)i < in.size())
            each_tensor(in[i], [&](const at::Tensor &t) {
                const void *p = block_of(t, &real);
                if (p)
                    t_wargs.emplace_back(p, stream_of(t));
            });
    t_seen = real;
    return nullptr;
}

void set_phase(int ph) {
    if (g_phase.exchange(ph, std::memory_order_relaxed) == ph)
        return;
    for (int i = 0; i < g_ntargets; i++)
        g_targets[i].phase(ph);
}

void note_thread() {
    static thread_local uint64_t noted;
    uint64_t gen = g_gen.load(std::memory_order_relaxed);
    if (noted == gen)
        return;
    noted = gen;
    std::lock_guard<std::mutex> g(g_threads_lock);
    g_threads.insert((uint64_t)pthread_self());
}

// An op boundary named name on every target, its phase set first when it changed.
void boundary(const char *name, bool loss) {
    int ph = g_opt.load(std::memory_order_relaxed)   ? PH_OPTIMIZER
             : loss                                  ? PH_LOSS
             : g_bwd.load(std::memory_order_relaxed) ? PH_BACKWARD
                                                     : PH_FORWARD;
    set_phase(ph);
    for (int i = 0; i < g_ntargets; i++)
        g_targets[i].mark(name);
    g_ops.fetch_add(1, std::memory_order_relaxed);
    note_thread();
}

void on_end(const at::RecordFunction &fn, at::ObserverContext *octx) {
    if (at::in_parallel_region())
        return;
    if (!op_info(fn)) {
        if (octx) // an unwrapped compiled frame's end (only those get an observer context)
            hoff_marks_opaque(-1);
        return;
    }
    if (--t_depth != 0 || !t_marking || !g_on.load(std::memory_order_relaxed))
        return;
    const OpInfo *info = t_info;
    bool real = t_seen;
    std::vector<const void *> &done = t_writes;
    done.clear();
    auto write = [&](const void *p, void *stream) {
        for (const void *q : done)
            if (q == p)
                return;
        done.push_back(p);
        access(p, 1, stream);
    };
    for (const c10::IValue &v : fn.outputs()) // the outputs are the op's own, valid here
        each_tensor(v, [&](const at::Tensor &t) {
            const void *p = block_of(t, &real);
            if (p && !(info->schema && seen(p))) // a new block (a view of an argument is covered by its read)
                write(p, stream_of(t));
        });
    for (const auto &w : t_wargs)
        write(w.first, w.second);
    if (!real) { // fake or meta tensors only (TorchDynamo tracing): no block is used, no kernel enqueued
        g_skipped.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (opaque_depth() > 0) { // inside a compiled region: its end is the boundary
        g_opaque_ops.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    boundary(info->name.c_str(), info->loss);
}

} // namespace

extern "C" {

// Resolve the entry points of a libhoff context (from the library at libhoff_path, which Python loaded; NULL:
// skip) and of hoff-record's recorder (from the process, when it is preloaded).  0, or -1 with the reason in err.
__attribute__((visibility("default"))) int hoff_marks_bind(const char *libhoff_path, char *err, size_t errlen) {
    std::lock_guard<std::mutex> g(g_lock);
    if (g_on) {
        std::snprintf(err, errlen, "the marks are running");
        return -1;
    }
    if (libhoff_path && *libhoff_path) {
        void *h = dlopen(libhoff_path, RTLD_NOW | RTLD_GLOBAL);
        if (!h) {
            std::snprintf(err, errlen, "cannot open %s: %s", libhoff_path, dlerror());
            return -1;
        }
        g_fn.access = (int (*)(void *, void *, int, void *))dlsym(h, "hoff_access");
        g_fn.mark = (int (*)(void *, const char *))dlsym(h, "hoff_mark_op");
        g_fn.phase = (int (*)(void *, int))dlsym(h, "hoff_set_phase");
        if (!g_fn.access || !g_fn.mark || !g_fn.phase) {
            std::snprintf(err, errlen, "%s lacks hoff_access, hoff_mark_op or hoff_set_phase", libhoff_path);
            return -1;
        }
        g_ctx_bound = true;
    }
    g_fn.r_access = (int64_t (*)(const void *, int))dlsym(RTLD_DEFAULT, "hoff_record_access");
    g_fn.r_mark = (int (*)(const char *))dlsym(RTLD_DEFAULT, "hoff_record_mark_op");
    g_fn.r_phase = (int (*)(int))dlsym(RTLD_DEFAULT, "hoff_record_set_phase");
    g_rec_bound = g_fn.r_access && g_fn.r_mark && g_fn.r_phase;
    return 0;
}

// Start marking into n targets: kinds[i] 0 (the libhoff context ctxs[i]) or 1 (hoff-record's recorder), blocks of
// at least min_bytes, loss_words the words of a loss function's op names, separated by ','.  0, or -1 with the
// reason in err (already running, too many targets, a kind not bound).
__attribute__((visibility("default"))) int hoff_marks_start(const int *kinds, void *const *ctxs, int n,
                                                             size_t min_bytes, const char *loss_words, char *err,
                                                             size_t errlen) {
    std::lock_guard<std::mutex> g(g_lock);
    if (g_on) {
        std::snprintf(err, errlen, "the marks of another step are running (hoff_marks_stop first)");
        return -1;
    }
    if (n < 1 || n > MAX_TARGETS) {
        std::snprintf(err, errlen, "%d targets: expected 1 to %d", n, MAX_TARGETS);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if ((kinds[i] == T_CTX && (!g_ctx_bound || !ctxs[i])) || (kinds[i] == T_RECORD && !g_rec_bound) ||
            (kinds[i] != T_CTX && kinds[i] != T_RECORD)) {
            std::snprintf(err, errlen, "target %d: kind %d is not bound (hoff_marks_bind)", i, kinds[i]);
            return -1;
        }
        g_targets[i] = Target{kinds[i], ctxs[i]};
    }
    g_ntargets = n;
    g_min = min_bytes;
    std::vector<std::string> words;
    for (const char *s = loss_words ? loss_words : ""; *s;) {
        const char *e = std::strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : std::strlen(s);
        if (len)
            words.emplace_back(s, len);
        s += len + (e ? 1 : 0);
    }
    if (words != g_loss_words) { // the ops seen so far are classified again (no callback runs now)
        g_loss_words = std::move(words);
        for (auto &e : g_table)
            e.second->loss = is_loss(e.second->base);
    }
    g_phase.store(-1, std::memory_order_relaxed);
    g_gen.fetch_add(1);
    g_ops = 0;
    g_accesses = 0;
    g_skipped = 0;
    g_opaque_ops = 0;
    g_unwrapped = 0;
    {
        std::lock_guard<std::mutex> t(g_threads_lock);
        g_threads.clear();
    }
    // A thread-local callback: PyTorch's ThreadLocalState carries it, as it carries a TorchDispatchMode, to the
    // threads autograd runs this thread's backward on, and not to threads that run ops of their own at the same
    // time (a DataLoader's pin-memory thread, another model's): their op boundaries would close this thread's
    // windows while its kernels run.
    g_handle = at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end)
                                         .needsInputs(true)
                                         .needsOutputs(true)
                                         .scopes({at::RecordScope::FUNCTION}));
    g_on = true;
    return 0;
}

// Stop marking (no-op when not running), on the thread that started (the callback is that thread's).
__attribute__((visibility("default"))) void hoff_marks_stop(void) {
    std::lock_guard<std::mutex> g(g_lock);
    if (!g_on)
        return;
    at::removeCallback(g_handle);
    g_on = false;
}

// hoff.grads' state, when it changes: optimizer steps open, backward calls open.
__attribute__((visibility("default"))) void hoff_marks_phase_state(int optimizer_depth, int backward_depth) {
    g_opt.store(optimizer_depth, std::memory_order_relaxed);
    g_bwd.store(backward_depth, std::memory_order_relaxed);
}

// This thread runs hoff's own aten ops (delta +1) or stops (-1): they are not marked (hoff.opmarks.quiet).
__attribute__((visibility("default"))) int hoff_marks_quiet(int delta) {
    t_quiet += delta;
    return t_quiet;
}

// This thread enters (+1) or leaves (-1) a compiled region (hoff.compiled): no op boundary until it leaves, access
// marks kept.  Returns the depth now.  A region a step left open ends with it (hoff_marks_start begins anew).
__attribute__((visibility("default"))) int hoff_marks_opaque(int delta) {
    uint64_t gen = g_gen.load(std::memory_order_relaxed);
    if (t_opaque_gen != gen) {
        t_opaque_gen = gen;
        t_opaque = 0;
    }
    t_opaque += delta;
    if (t_opaque < 0)
        t_opaque = 0;
    return t_opaque;
}

// An access of the block at ptr (nbytes its size, stream the CUDA stream or NULL) by a compiled region, whose
// kernels are no aten ops: marked on every target when nbytes is at least the marks' min_bytes.  0 when the
// marks are running, -1 otherwise.
__attribute__((visibility("default"))) int hoff_marks_access(void *ptr, size_t nbytes, int write, void *stream) {
    if (!g_on)
        return -1;
    if (ptr && nbytes >= g_min)
        access(ptr, write ? 1 : 0, stream);
    return 0;
}

// The op boundary of a compiled region's end, named name (on this thread: nothing compiled is open any more).
// 0 when the marks are running, -1 otherwise.
__attribute__((visibility("default"))) int hoff_marks_boundary(const char *name) {
    if (!g_on)
        return -1;
    boundary(name, false);
    return 0;
}

// Counters since hoff_marks_start: out[0] op boundaries, out[1] access marks, out[2] ops skipped (no memory),
// out[3] threads marked on, out[4] aten ops run inside compiled regions (no boundary of their own), out[5] runs
// of compiled frames no hoff region covered (their reads unmarked).
__attribute__((visibility("default"))) void hoff_marks_counts(uint64_t *out, int n) {
    uint64_t v[6] = {g_ops.load(), g_accesses.load(), g_skipped.load(), 0, g_opaque_ops.load(), g_unwrapped.load()};
    {
        std::lock_guard<std::mutex> t(g_threads_lock);
        v[3] = g_threads.size();
    }
    for (int i = 0; i < n && i < 6; i++)
        out[i] = v[i];
}

} // extern "C"
