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
        verdict=NOT_YET,
        message=("with a convolution PyTorch raises 'CUDAPluggableAllocator does not yet support cacheInfo' "
                 "(cuDNN's benchmark mode sizes its workspace from it); under hoff leave benchmark mode off "
                 "(torch.backends.cudnn.benchmark = False, Lightning's Trainer(benchmark=False))"),
        who="torchvision's reference training scripts, Lightning Trainer(benchmark=True)",
        settings=("torch.backends.cudnn.benchmark",),
    ),
    Seam(
        id="memory_stats",
        what="PyTorch's memory statistics",
        names=tuple("torch.cuda." + n for n in _STATS_READ),
        verdict=NOT_YET,
        message=("PyTorch's pluggable allocator raises 'does not yet support getDeviceStats' once CUDA is in use; "
                 "read hoff's own figures with hoff.memory_stats() (hoff's counters under hoff's names, "
                 "hoff_stats(3), not PyTorch's keys)"),
        who=("torchtitan's memory monitor, Lightning's DeviceStatsMonitor, HF Trainer with memory metrics, "
             "training loops that print the peak"),
        refs=tuple("torch.cuda." + n for n in _STATS_READ) + tuple("torch.cuda.memory." + n for n in _STATS_READ),
    ),
    Seam(
        id="stats_reset",
        what="resetting PyTorch's peak or accumulated memory statistics",
        names=("torch.cuda.reset_peak_memory_stats", "torch.cuda.reset_max_memory_allocated",
               "torch.cuda.reset_max_memory_cached", "torch.cuda.reset_accumulated_memory_stats"),
        verdict=NOT_YET,
        message=("PyTorch's pluggable allocator raises 'does not yet support resetPeakStats' "
                 "('resetAccumulatedStats' for the accumulated ones) once CUDA is in use; hoff has no reset of "
                 "its peaks: read hoff.memory_stats() before and after instead (step_peak_resident_bytes is "
                 "per step)"),
        who="torchtitan's memory monitor (at start-up), HF Trainer with memory metrics, benchmark loops",
        refs=tuple(p + n for p in ("torch.cuda.", "torch.cuda.memory.")
                   for n in ("reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached",
                             "reset_accumulated_memory_stats")),
    ),
    Seam(
        id="memory_fraction_get",
        what="reading the memory fraction",
        names=("torch.cuda.get_per_process_memory_fraction",),
        verdict=NOT_YET,
        message=("PyTorch's pluggable allocator raises 'does not yet support getMemoryFraction' (PyTorch 2.9); "
                 "hoff's budget is in hoff.memory_stats() (budget_bytes)"),
        who="jobs that share a GPU",
        refs=("torch.cuda.get_per_process_memory_fraction", "torch.cuda.memory.get_per_process_memory_fraction"),
    ),
    Seam(
        id="compile_cudagraphs",
        what="torch.compile with CUDA graphs (cudagraph trees)",
        names=('torch.compile(mode="reduce-overhead")', 'torch.compile(mode="max-autotune")',
               'torch.compile(backend="cudagraphs")', "torch._inductor.config.triton.cudagraphs"),
        verdict=NOT_YET,
        message=("cudagraph trees call PyTorch's getCheckpointState and checkPoolLiveAllocations, which raise "
                 "'does not yet support' under the pluggable allocator; under hoff compile without CUDA graphs "
                 "(mode=\"default\" or \"max-autotune-no-cudagraphs\")"),
        who="anyone after speed (HF TrainingArguments(torch_compile_mode=...))",
        settings=("torch._inductor.config.triton.cudagraphs",),
    ),
    Seam(
        id="compile",
        what="torch.compile without CUDA graphs (a whole model, or a function)",
        names=("torch.compile", "torch.nn.Module.compile"),
        verdict=WORKS,
        message=("it runs, but inside hoff's steps the compiled code runs eagerly (hoff's op marks are a "
                 "TorchDispatchMode, and TorchDynamo runs no compiled frame under one; code outside the steps, "
                 "such as the first iteration, runs compiled); OffloadConfig(op_marks=False) in the script's own "
                 "session keeps it compiled, a whole compiled call then being one op to hoff"),
        who="nanoGPT-style training scripts, HF TrainingArguments(torch_compile=True)",
    ),
    Seam(
        id="cuda_graphs",
        what="CUDA graph capture",
        names=("torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.make_graphed_callables",
               "torch.cuda.graph_pool_handle"),
        verdict=NOT_YET,
        message=("no error, but PyTorch's graph-pool calls (begin, end, release) do not reach hoff: hoff's own "
                 "capture detection gives the capture's allocations graph-private device memory (never "
                 "offloaded), and what is freed after the capture stays with hoff until shutdown "
                 "(hoff-config(7), CUDA graphs); not tried on a GPU"),
        who="Megatron-style graphing",
        refs=tuple(p + n for p in ("torch.cuda.", "torch.cuda.graphs.")
                   for n in ("graph", "CUDAGraph", "make_graphed_callables", "graph_pool_handle")),
    ),
    Seam(
        id="record_stream",
        what="a tensor used on another stream",
        names=("Tensor.record_stream",),
        verdict=NOT_YET,
        message=("dropped by PyTorch's pluggable allocator without a word: the block can be handed out again "
                 "while the other stream still uses it; call hoff.record_stream(tensor, stream) there instead, or "
                 "run with HOFF_FREE_FENCE=device (hoff-config(7))"),
        who="side-stream code, FSDP1, older DDP, activation-offload code",
        refs=("torch.Tensor.record_stream",),
        methods=("record_stream",),
    ),
    Seam(
        id="empty_cache",
        what="emptying the allocator's cache",
        names=("torch.cuda.empty_cache",),
        verdict=NOT_YET,
        message=("dropped by PyTorch's pluggable allocator without a word; call hoff.empty_cache() (returns "
                 "hoff's cached, unused blocks of every device)"),
        who="HF TrainingArguments(torch_empty_cache_steps=...), Lightning's CUDA set-up and teardown, "
            "torchtitan's memory monitor",
        refs=("torch.cuda.empty_cache", "torch.cuda.memory.empty_cache"),
    ),
    Seam(
        id="accelerator_memory",
        what="torch.accelerator's memory calls on CUDA",
        names=tuple("torch.accelerator." + n for n in _ACCEL_CALLS),
        verdict=NOT_YET,
        message=("they go to the allocator PyTorch registered for CUDA at start-up (its own caching allocator), "
                 "which change_current_allocator does not replace (PyTorch 2.9.1, read from its headers and "
                 "library, not run on a GPU): they never reach hoff, and what they return, or the error they "
                 "raise, is not about hoff's memory; use hoff.memory_stats() and hoff.empty_cache()"),
        who="device-generic training code (PyTorch 2.6 and later)",
        refs=tuple(p + n for p in ("torch.accelerator.", "torch.accelerator.memory.") for n in _ACCEL_CALLS),
    ),
    Seam(
        id="memory_fraction",
        what="capping the process's share of device memory",
        names=("torch.cuda.set_per_process_memory_fraction",),
        verdict=NOT_YET,
        message=("dropped by PyTorch's pluggable allocator without a word; hoff.set_memory_fraction(f) makes "
                 "hoff's activation budget f of the device's memory instead (a budget for activations, not a cap "
                 "on all of the process's allocations)"),
        who="jobs that share a GPU",
        refs=("torch.cuda.set_per_process_memory_fraction", "torch.cuda.memory.set_per_process_memory_fraction"),
    ),
    Seam(
        id="oom",
        what="handling an out-of-memory error",
        names=("torch.cuda.OutOfMemoryError", "torch.OutOfMemoryError"),
        verdict=NOT_YET,
        message=("a failed hoff allocation does not reach the script as torch.cuda.OutOfMemoryError, so this "
                 "handler does not see it and batch-size finders do not shrink the batch; find the batch size "
                 "without hoff, then let hoff's budget (--budget, max_resident_activation_mb) keep the "
                 "activations in memory"),
        who="accelerate's find_executable_batch_size, Lightning's batch-size tuner, HF auto_find_batch_size",
        refs=("torch.cuda.OutOfMemoryError", "torch.OutOfMemoryError", "torch.cuda.memory.OutOfMemoryError"),
    ),
    Seam(
        id="memory_history",
        what="recording the allocator's history and snapshots",
        names=("torch.cuda.memory._record_memory_history", "torch.cuda.memory._snapshot",
               "torch.cuda.memory._dump_snapshot", "torch.cuda.memory_snapshot"),
        verdict=NOT_YET,
        message=("PyTorch's pluggable allocator raises 'does not yet support recordHistory' ('snapshot' for a "
                 "snapshot); record the memory history in a run without hoff"),
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
        verdict=NOT_YET,
        message=("a CUDA tensor sent to or received from another process raises PyTorch's 'does not yet support' "
                 "(shareIpcHandle, getIpcDevPtr) under the pluggable allocator; CPU tensors are not affected: "
                 "send CPU tensors, or run that process without hoff"),
        who="RL and data pipelines",
        refs=("torch.multiprocessing.Queue", "torch.multiprocessing.SimpleQueue", "torch.multiprocessing.Pipe",
              "torch.multiprocessing.JoinableQueue", "torch.multiprocessing.reductions.reduce_tensor",
              "torch.multiprocessing.reductions.reduce_storage"),
        methods=("_share_cuda_",),
    ),
    Seam(
        id="nccl_register_hook",
        what="NCCL buffer registration through the allocator",
        names=("TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK",),
        verdict=NOT_YET,
        message=("ProcessGroupNCCL then attaches an allocator trace tracker, which PyTorch's pluggable allocator "
                 "refuses ('does not support attachAllocatorTraceTracker'); unset it, or set it to 0, under hoff"),
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
