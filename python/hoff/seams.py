# seams.py — the one table of the places where PyTorch meets a pluggable allocator (issue 26): each row's PyTorch
# names, what hoff does about it today and the way out, and the settings of training libraries that reach a row for
# the script.  Pure data: `python -m hoff --check` (hoff.check) and the docs are made from it.
# Threading: immutable module-level tuples; safe anywhere.
"""The seams between PyTorch and hoff, as data.

This table is the single source for ``python -m hoff --check`` (which reads a
script and reports every call or setting of a row, with the row's verdict and
message) and for the docs: the table in ``python/README.md`` is the output of
``python -m hoff --check --table`` (``hoff.check.table_markdown``), and
``python/tests/test_check.py`` fails when the two differ.  When a row changes
(hoff registers a hook, turns a setting off, refuses a call), change its
``verdict`` and ``message`` here, regenerate the README table, and adjust the
expectations of ``test_check.py``.  Nothing else holds a verdict.

Verdicts are those of ``python -m hoff script.py`` on a GPU (hoff installed as
PyTorch's CUDA allocator through ``CUDAPluggableAllocator``):

``works``
    the call does what it does without hoff.
``works through hoff``
    hoff answers it (its hook or its figures) with no change to the script.
``turned off with a warning``
    the launcher turns the setting off and says so once.
``refused``
    the call fails with hoff's own message, which says the way out.
``not supported yet``
    none of those yet: PyTorch raises its own "does not yet support", or the
    call is dropped without a word.  The message says what happens today and
    what to do instead.

Each :class:`Seam` says how ``--check`` finds it: ``refs`` (dotted names whose
use anywhere in a script is the row: a call, a reference, an ``except``
clause), ``settings`` (dotted attributes whose assignment of a value that is
not false is the row), ``methods`` (methods called on any object) and ``env``
(environment variables set to a value that is not false).  ``torch.compile``'s
modes are :data:`COMPILE_GRAPH_MODES` and :data:`COMPILE_GRAPH_BACKENDS`.
A :class:`LibrarySetting` is an argument a script gives a training library
(``Trainer(benchmark=True)``) after which the library makes a row's call for
it; an :class:`ArgsSetting` is the same made on the command line (ARGS) of a
script whose library parses it.
"""

from dataclasses import dataclass

WORKS = "works"
THROUGH_HOFF = "works through hoff"
TURNED_OFF = "turned off with a warning"
REFUSED = "refused"
NOT_YET = "not supported yet"
VERDICTS = (WORKS, THROUGH_HOFF, TURNED_OFF, REFUSED, NOT_YET)


@dataclass(frozen=True)
class Seam:
    """One row: a way a script meets PyTorch's allocator, and hoff's answer."""
    id: str
    what: str            # what the script does, in words
    names: tuple         # the PyTorch names, as the docs show them (the first is the row's name)
    verdict: str         # one of VERDICTS
    message: str         # what happens under hoff today, and the way out
    who: str             # who does it: scripts and libraries known to
    refs: tuple = ()     # dotted names: any use of one is the row
    settings: tuple = ()  # dotted attributes: an assignment of a value that is not false
    methods: tuple = ()  # method names called on any object that is not a module
    env: tuple = ()      # environment variables set to a value that is not false


_STATS_READ = ("memory_stats", "memory_stats_as_nested_dict", "memory_allocated", "max_memory_allocated",
               "memory_reserved", "max_memory_reserved", "memory_cached", "max_memory_cached", "memory_summary")
_ACCEL_CALLS = ("memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
                "reset_peak_memory_stats", "reset_accumulated_memory_stats", "empty_cache")

SEAMS = (
    Seam(
        id="cudnn_benchmark",
        what="cuDNN benchmark mode, with convolutions",
        names=("torch.backends.cudnn.benchmark",),
        verdict=TURNED_OFF,
        message=("kept off: cuDNN's benchmark mode sizes its workspace from the allocator's cacheInfo, which "
                 "PyTorch's pluggable allocator (hoff's registration) does not support (it raises at the first "
                 "convolution); convolutions use cuDNN's heuristics instead, with the same results and possibly "
                 "a slower algorithm; to benchmark, run without hoff"),
        who="torchvision's reference training scripts, Lightning Trainer(benchmark=True)",
        settings=("torch.backends.cudnn.benchmark",),
    ),
    Seam(
        id="memory_stats",
        what="PyTorch's memory statistics",
        names=tuple("torch.cuda." + n for n in _STATS_READ),
        verdict=THROUGH_HOFF,
        message=("hoff's figures under PyTorch's keys: allocation and active count the blocks PyTorch holds from "
                 "hoff, allocated_bytes and active_bytes their bytes, requested_bytes what PyTorch asked for, "
                 "reserved_bytes the bytes mapped in hoff's device and managed pools (a managed block counted "
                 "whether it is on the device or evicted; CUDA graphs' memory is hoff's graph_private_bytes); "
                 "every figure is under all and "
                 "large_pool (hoff has no small pool), and the segment, inactive-split and oversize figures are "
                 "0 (hoff keeps none of them); hoff.memory_stats() has hoff's own counters"),
        who=("torchtitan's memory monitor, Lightning's DeviceStatsMonitor, HF Trainer with memory metrics, "
             "training loops that print the peak"),
        refs=tuple("torch.cuda." + n for n in _STATS_READ) + tuple("torch.cuda.memory." + n for n in _STATS_READ),
    ),
    Seam(
        id="stats_reset",
        what="resetting PyTorch's peak or accumulated memory statistics",
        names=("torch.cuda.reset_peak_memory_stats", "torch.cuda.reset_max_memory_allocated",
               "torch.cuda.reset_max_memory_cached", "torch.cuda.reset_accumulated_memory_stats"),
        verdict=THROUGH_HOFF,
        message=("resets hoff's figures: the peaks (and hoff's own peak_* counters) become the current values; "
                 "the accumulated counts and num_ooms become 0"),
        who="torchtitan's memory monitor (at start-up), HF Trainer with memory metrics, benchmark loops",
        refs=tuple(p + n for p in ("torch.cuda.", "torch.cuda.memory.")
                   for n in ("reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
                             "reset_accumulated_memory_stats")),
    ),
    Seam(
        id="memory_fraction_get",
        what="reading the memory fraction",
        names=("torch.cuda.get_per_process_memory_fraction",),
        verdict=THROUGH_HOFF,
        message=("the fraction the script set with set_per_process_memory_fraction (1.0 if none): under hoff, "
                 "the share of the device's memory that is hoff's activation budget"),
        who="jobs that share a GPU",
        refs=("torch.cuda.get_per_process_memory_fraction", "torch.cuda.memory.get_per_process_memory_fraction"),
    ),
    Seam(
        id="compile_cudagraphs",
        what="torch.compile with CUDA graphs (cudagraph trees)",
        names=('torch.compile(mode="reduce-overhead")', 'torch.compile(mode="max-autotune")',
               "torch._inductor.config.triton.cudagraphs"),
        verdict=TURNED_OFF,
        message=("runs without CUDA graphs: cudagraph trees checkpoint the allocator's pools with "
                 "getCheckpointState and "
                 "checkPoolLiveAllocations, which PyTorch's pluggable allocator (hoff's registration) does not "
                 "support; mode \"reduce-overhead\" runs as \"default\", \"max-autotune\" as "
                 "\"max-autotune-no-cudagraphs\", and the option triton.cudagraphs is set to False: the same "
                 "compiled kernels, without the graph launch; for CUDA graphs, run without hoff"),
        who="anyone after speed (HF TrainingArguments(torch_compile_mode=...))",
        settings=("torch._inductor.config.triton.cudagraphs",),
    ),
    Seam(
        id="compile_cudagraphs_backend",
        what="torch.compile's CUDA-graph backend",
        names=('torch.compile(backend="cudagraphs")',),
        verdict=REFUSED,
        message=("refused at the call: the backend is CUDA graphs (cudagraph trees), which checkpoint the "
                 "allocator's pools with getCheckpointState and checkPoolLiveAllocations, not supported by "
                 "PyTorch's pluggable allocator (hoff's registration); compile with the default backend "
                 "(mode \"default\" or \"max-autotune-no-cudagraphs\"), or run without hoff"),
        who="CUDA-graph experiments",
    ),
    Seam(
        id="compile",
        what="torch.compile without CUDA graphs (a whole model, or a function)",
        names=("torch.compile", "torch.nn.Module.compile"),
        verdict=WORKS,
        message=("it runs compiled inside hoff's steps, each call of what torch.compile made being one op to hoff "
                 "(hoff.compiled): hoff moves activations between compiled regions, not inside one, so compile per "
                 "block (as torchtitan does) rather than the whole model, which hoff says once; with hoff's op "
                 "marks in Python (no shim: HOFF_SHIM=0 or no C++ compiler) the compiled code runs eagerly in the "
                 "steps, which hoff also says"),
        who="nanoGPT-style training scripts, HF TrainingArguments(torch_compile=True)",
    ),
    Seam(
        id="cuda_graphs",
        what="CUDA graph capture",
        names=("torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.make_graphed_callables",
               "torch.cuda.graph_pool_handle"),
        verdict=THROUGH_HOFF,
        message=("PyTorch's graph-pool calls reach hoff through its shim: a capture's allocations get "
                 "graph-private device memory (never offloaded) tagged with PyTorch's pool; when PyTorch "
                 "releases the pool (its graphs are gone), hoff reuses that memory for later captures after a "
                 "device-wide synchronisation, and empty_cache returns it (hoff-config(7), CUDA graphs); not yet "
                 "run on a GPU"),
        who="Megatron-style graphing",
        refs=tuple(p + n for p in ("torch.cuda.", "torch.cuda.graphs.")
                   for n in ("graph", "CUDAGraph", "make_graphed_callables", "graph_pool_handle")),
    ),
    Seam(
        id="record_stream",
        what="a tensor used on another stream",
        names=("Tensor.record_stream",),
        verdict=THROUGH_HOFF,
        message=("reaches hoff through its shim (also when PyTorch's C++ calls it: NCCL process groups, FSDP): "
                 "hoff neither moves the block nor hands it out again before the work queued on that stream by "
                 "then is done"),
        who="side-stream code, FSDP1, older DDP, activation-offload code",
        refs=("torch.Tensor.record_stream",),
        methods=("record_stream",),
    ),
    Seam(
        id="empty_cache",
        what="emptying the allocator's cache",
        names=("torch.cuda.empty_cache",),
        verdict=THROUGH_HOFF,
        message=("reaches hoff: hoff returns its cached, unused blocks of every device (and the memory of "
                 "released CUDA graph pools)"),
        who="HF TrainingArguments(torch_empty_cache_steps=...), Lightning's CUDA set-up and teardown, "
            "torchtitan's memory monitor",
        refs=("torch.cuda.empty_cache", "torch.cuda.memory.empty_cache"),
    ),
    Seam(
        id="accelerator_memory",
        what="torch.accelerator's memory calls on CUDA",
        names=tuple("torch.accelerator." + n for n in _ACCEL_CALLS),
        verdict=THROUGH_HOFF,
        message=("on CUDA, hoff answers them as it answers torch.cuda's (hoff's figures under PyTorch's keys, "
                 "the resets, empty_cache); on another accelerator they are PyTorch's own"),
        who="device-generic training code (PyTorch 2.6 and later)",
        refs=tuple(p + n for p in ("torch.accelerator.", "torch.accelerator.memory.") for n in _ACCEL_CALLS),
    ),
    Seam(
        id="memory_fraction",
        what="capping the process's share of device memory",
        names=("torch.cuda.set_per_process_memory_fraction",),
        verdict=THROUGH_HOFF,
        message=("reaches hoff: hoff's activation budget becomes that fraction of the device's memory (a budget "
                 "for activations, not a cap on all of the process's allocations); the next step records and "
                 "plans again"),
        who="jobs that share a GPU",
        refs=("torch.cuda.set_per_process_memory_fraction", "torch.cuda.memory.set_per_process_memory_fraction"),
    ),
    Seam(
        id="oom",
        what="handling an out-of-memory error",
        names=("torch.cuda.OutOfMemoryError", "torch.OutOfMemoryError"),
        verdict=THROUGH_HOFF,
        message=("a failed hoff allocation raises torch.cuda.OutOfMemoryError with PyTorch's message (\"CUDA out "
                 "of memory. Tried to allocate ...\") and hoff's figures, and num_ooms counts it, so handlers and "
                 "batch-size finders work; this needs hoff's shim (without it hoff warns at start-up)"),
        who="accelerate's find_executable_batch_size, Lightning's batch-size tuner, HF auto_find_batch_size",
        refs=("torch.cuda.OutOfMemoryError", "torch.OutOfMemoryError", "torch.cuda.memory.OutOfMemoryError"),
    ),
    Seam(
        id="memory_history",
        what="recording the allocator's history and snapshots",
        names=("torch.cuda.memory._record_memory_history", "torch.cuda.memory._snapshot",
               "torch.cuda.memory._dump_snapshot", "torch.cuda.memory_snapshot"),
        verdict=REFUSED,
        message=("refused at the call: PyTorch's pluggable allocator (hoff's registration) keeps no allocation "
                 "history or snapshot; record the memory history in a run without hoff (python script.py rather "
                 "than python -m hoff script.py); hoff's own view of memory is hoff-stat(1) and "
                 "hoff.memory_stats()"),
        who="memory debugging, torchtitan's --profiling.enable_memory_snapshot",
        refs=("torch.cuda.memory._record_memory_history",
              "torch.cuda.memory._snapshot", "torch.cuda.memory._dump_snapshot", "torch.cuda.memory_snapshot",
              "torch.cuda.memory.memory_snapshot"),
    ),
    Seam(
        id="cuda_ipc",
        what="sharing CUDA tensors between processes",
        names=("torch.multiprocessing.Queue", "torch.multiprocessing.SimpleQueue", "torch.multiprocessing.Pipe",
               "UntypedStorage._share_cuda_"),
        verdict=REFUSED,
        message=("refused at the call: PyTorch's pluggable allocator (hoff's registration) has no CUDA IPC "
                 "handles; send CPU tensors (tensor.cpu()) through the queue, or run that producer without hoff"),
        who="RL and data pipelines",
        refs=("torch.multiprocessing.Queue", "torch.multiprocessing.SimpleQueue", "torch.multiprocessing.Pipe",
              "torch.multiprocessing.JoinableQueue", "torch.multiprocessing.reductions.reduce_tensor",
              "torch.multiprocessing.reductions.reduce_storage"),
        methods=("_share_cuda_",),
    ),
    Seam(
        id="mem_pool",
        what="a private memory pool for some allocations",
        names=("torch.cuda.MemPool", "torch.cuda.use_mem_pool"),
        verdict=REFUSED,
        message=("refused at the call: a MemPool is a pool of PyTorch's caching allocator (createOrIncrefPool), "
                 "which PyTorch's pluggable allocator (hoff's registration) does not support; allocate those "
                 "tensors in a run without hoff"),
        who="NCCL symmetric memory, custom allocators for some tensors (PyTorch 2.5 and later)",
        refs=tuple(p + n for p in ("torch.cuda.", "torch.cuda.memory.") for n in ("MemPool", "use_mem_pool")),
    ),
    Seam(
        id="nccl_register_hook",
        what="NCCL buffer registration through the allocator",
        names=("TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK",),
        verdict=REFUSED,
        message=("refused at init_process_group: ProcessGroupNCCL would attach an allocator trace tracker, which "
                 "PyTorch's pluggable allocator (hoff's registration) refuses; unset it, or set it to 0, for a "
                 "job under hoff (NCCL then copies through its own buffers)"),
        who="NCCL buffer registration",
        env=("TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK",),
    ),
)

BY_ID = {s.id: s for s in SEAMS}

# torch.compile's modes and backends that use CUDA graphs (inductor's "triton.cudagraphs"), and its option.
COMPILE_GRAPH_MODES = ("reduce-overhead", "max-autotune")
COMPILE_GRAPH_BACKENDS = ("cudagraphs",)
COMPILE_GRAPH_OPTION = "triton.cudagraphs"
COMPILE_NAMES = ("torch.compile",)
# The PyTorch name of a compile in a mode a library was given: {value} is the mode as the script gives it.
COMPILE_MODE_NAME = 'torch.compile(mode="{value}")'

# The training libraries --check does not read, by the top-level modules a script imports them from.
LIBRARIES = {
    "lightning": ("lightning", "pytorch_lightning"),
    "transformers": ("transformers",),
    "accelerate": ("accelerate",),
    "torchtitan": ("torchtitan",),
}
LIBRARY_TITLES = {"lightning": "Lightning", "transformers": "HF", "accelerate": "accelerate",
                  "torchtitan": "torchtitan"}

# Conditions on a keyword argument's value (LibrarySetting.when, ArgsSetting.when).
TRUE = "true"      # a value that is not false
FALSE = "false"    # a value that is false (False, 0, None)
ANY = "any"        # the call itself, whatever its arguments


@dataclass(frozen=True)
class LibrarySetting:
    """A call a script makes to a training library after which the library makes PyTorch calls for it."""
    library: str        # a key of LIBRARIES
    callee: str         # the library's name the script uses: "Trainer" (from any of the library's modules)
    keyword: str        # the keyword argument that makes the setting; "" with when=ANY
    when: object        # TRUE, FALSE, ANY, or a tuple of the string values that make it
    text: str           # the setting as a script writes it
    calls: tuple        # the PyTorch names the library then uses (each a name of a Seam)
    how: str            # where the library makes them
    method: bool = False  # callee is a method, on any object, in a file that imports the library


_HF_ARGS = ("TrainingArguments", "Seq2SeqTrainingArguments")
_HF_MEMORY = ("torch.cuda.reset_peak_memory_stats", "torch.cuda.memory_allocated",
              "torch.cuda.max_memory_allocated", "torch.cuda.empty_cache")
_TITAN_MONITOR = ("torch.cuda.reset_peak_memory_stats", "torch.cuda.empty_cache", "torch.cuda.memory_stats")
_TITAN_HOW = "torchtitan's DeviceMemoryMonitor resets the peaks and empties the cache when it is built, " \
             "and reads memory_stats at every logged step"

LIBRARY_SETTINGS = (
    LibrarySetting("lightning", "Trainer", "benchmark", TRUE, "Trainer(benchmark=True)",
                   ("torch.backends.cudnn.benchmark",), "Lightning sets torch.backends.cudnn.benchmark from it"),
    LibrarySetting("lightning", "Trainer", "", ANY, "Trainer(...)", ("torch.cuda.empty_cache",),
                   "Lightning's CUDA accelerator empties the cache when it sets up and tears down the device"),
    LibrarySetting("lightning", "Fabric", "", ANY, "Fabric(...)", ("torch.cuda.empty_cache",),
                   "Lightning's CUDA accelerator empties the cache when it sets up and tears down the device"),
    LibrarySetting("lightning", "DeviceStatsMonitor", "", ANY, "DeviceStatsMonitor()", ("torch.cuda.memory_stats",),
                   "Lightning's CUDA device statistics are torch.cuda.memory_stats"),
    LibrarySetting("lightning", "BatchSizeFinder", "", ANY, "BatchSizeFinder()", ("torch.cuda.OutOfMemoryError",),
                   "Lightning's batch-size finder grows the batch until an out-of-memory error"),
    LibrarySetting("lightning", "scale_batch_size", "", ANY, "Tuner.scale_batch_size()",
                   ("torch.cuda.OutOfMemoryError",),
                   "Lightning's batch-size finder grows the batch until an out-of-memory error", method=True),
) + tuple(
    s for cls in _HF_ARGS for s in (
        LibrarySetting("transformers", cls, "torch_empty_cache_steps", TRUE,
                       "%s(torch_empty_cache_steps=N)" % cls, ("torch.cuda.empty_cache",),
                       "HF's Trainer empties the cache every N steps (accelerate's clear_device_cache)"),
        LibrarySetting("transformers", cls, "skip_memory_metrics", FALSE, "%s(skip_memory_metrics=False)" % cls,
                       _HF_MEMORY, "HF's TrainerMemoryTracker makes these calls at each stage"),
        LibrarySetting("transformers", cls, "auto_find_batch_size", TRUE, "%s(auto_find_batch_size=True)" % cls,
                       ("torch.cuda.OutOfMemoryError",),
                       "HF's Trainer halves the batch on an out-of-memory error (accelerate's "
                       "find_executable_batch_size)"),
        LibrarySetting("transformers", cls, "torch_compile", TRUE, "%s(torch_compile=True)" % cls,
                       ("torch.compile",), "HF's Trainer compiles the model"),
        LibrarySetting("transformers", cls, "torch_compile_mode", COMPILE_GRAPH_MODES,
                       '%s(torch_compile_mode="reduce-overhead" or "max-autotune")' % cls, (COMPILE_MODE_NAME,),
                       "HF's Trainer compiles the model in that mode"),
    )
) + (
    LibrarySetting("accelerate", "find_executable_batch_size", "", ANY, "find_executable_batch_size",
                   ("torch.cuda.OutOfMemoryError",), "accelerate halves the batch on an out-of-memory error"),
    LibrarySetting("accelerate", "release_memory", "", ANY, "release_memory(...)", ("torch.cuda.empty_cache",),
                   "accelerate empties the cache after releasing the objects"),
    LibrarySetting("accelerate", "clear_device_cache", "", ANY, "clear_device_cache()", ("torch.cuda.empty_cache",),
                   "accelerate's clear_device_cache is torch.cuda.empty_cache on CUDA"),
    LibrarySetting("torchtitan", "build_device_memory_monitor", "", ANY, "build_device_memory_monitor()",
                   _TITAN_MONITOR, _TITAN_HOW),
    LibrarySetting("torchtitan", "DeviceMemoryMonitor", "", ANY, "DeviceMemoryMonitor()", _TITAN_MONITOR,
                   _TITAN_HOW),
    LibrarySetting("torchtitan", "build_metrics_processor", "", ANY, "build_metrics_processor()", _TITAN_MONITOR,
                   "torchtitan's metrics processor builds a DeviceMemoryMonitor: " + _TITAN_HOW),
)


@dataclass(frozen=True)
class ArgsSetting:
    """A command-line option (in ARGS) that a library parses for the script, after which it makes PyTorch calls."""
    library: str        # a key of LIBRARIES
    reader: str         # the library's name that parses ARGS; "" = the script imports the library
    flag: str           # the option
    when: object        # TRUE, FALSE or a tuple of string values
    calls: tuple        # the PyTorch names the library then uses
    how: str


ARGS_SETTINGS = (
    ArgsSetting("transformers", "HfArgumentParser", "--torch_empty_cache_steps", TRUE, ("torch.cuda.empty_cache",),
                "HF's Trainer empties the cache every N steps"),
    ArgsSetting("transformers", "HfArgumentParser", "--skip_memory_metrics", FALSE, _HF_MEMORY,
                "HF's TrainerMemoryTracker makes these calls at each stage"),
    ArgsSetting("transformers", "HfArgumentParser", "--auto_find_batch_size", TRUE, ("torch.cuda.OutOfMemoryError",),
                "HF's Trainer halves the batch on an out-of-memory error"),
    ArgsSetting("transformers", "HfArgumentParser", "--torch_compile", TRUE, ("torch.compile",),
                "HF's Trainer compiles the model"),
    ArgsSetting("transformers", "HfArgumentParser", "--torch_compile_mode", COMPILE_GRAPH_MODES,
                (COMPILE_MODE_NAME,), "HF's Trainer compiles the model in that mode"),
    ArgsSetting("lightning", "LightningCLI", "--trainer.benchmark", TRUE, ("torch.backends.cudnn.benchmark",),
                "Lightning sets torch.backends.cudnn.benchmark from it"),
    ArgsSetting("torchtitan", "", "--profiling.enable_memory_snapshot", TRUE,
                ("torch.cuda.memory._record_memory_history",), "torchtitan records the allocator's history"),
)


def seam_of(name):
    """The Seam whose names, refs or settings hold the PyTorch name (a KeyError names it otherwise)."""
    if name == COMPILE_MODE_NAME:
        name = name.format(value=COMPILE_GRAPH_MODES[0])
    for s in SEAMS:
        if name in s.names or name in s.refs or name in s.settings:
            return s
    raise KeyError("no seam has the PyTorch name %r" % name)
