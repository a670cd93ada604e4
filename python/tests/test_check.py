# test_check.py — python -m hoff --check: on scripts written in the style of public reference scripts (torchvision's
# classification train.py and its utils.py, a Lightning script, an HF Trainer script, a torchtitan-style loop,
# nanoGPT's compile, side-stream code, aliases) it finds exactly the calls and settings of hoff's seam table, with
# their lines and verdicts, nothing on a script that uses none, and exits 0 (2 on a usage error).  It needs no torch.
# Threading: single-threaded; the scripts are written to tmp_path; a few cases run the launcher as a child process.
import json
import os
import subprocess
import sys
import textwrap

from conftest import EXTRA_PATH
from hoff import check, seams

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(os.path.dirname(HERE), "README.md")

THROUGH = "works through hoff"
OFF = "turned off with a warning"
REFUSED = "refused"
WORKS = "works"


def write(tmp_path, name, src):
    src = textwrap.dedent(src).lstrip("\n")
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(src)
    return src


def at(src, snippet):
    """The 1-based line of the one line of src that holds snippet."""
    lines = [i + 1 for i, line in enumerate(src.splitlines()) if snippet in line]
    assert len(lines) == 1, "%r is on lines %s" % (snippet, lines)
    return lines[0]


def found(tmp_path, script="train.py", args=(), environ=None):
    run = check.check(str(tmp_path / script), args, environ={} if environ is None else environ)
    return {(os.path.basename(f.file), f.line, f.name, f.verdict) for f in run.findings}, run


def child(*args, env_extra=None):
    """python -m hoff ARGS in a child where import torch fails: --check must not need it."""
    env = dict(os.environ)
    env.pop("TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", None)
    if EXTRA_PATH:
        env["PYTHONPATH"] = EXTRA_PATH + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    code = ("import sys; sys.modules['torch'] = None\n"
            "from hoff.__main__ import main\n"
            "rc = main(sys.argv[1:])\n"
            "assert 'torch' not in sys.modules or sys.modules['torch'] is None\n"
            "sys.exit(rc)\n")
    return subprocess.run([sys.executable, "-c", code] + list(args), env=env, capture_output=True, text=True,
                          timeout=120)


# --- torchvision's references/classification/train.py, with its utils.py next to it -------------------------------

TV_TRAIN = '''
    import datetime
    import os
    import time
    import warnings

    import torch
    import torch.utils.data
    import torchvision
    import utils
    from torch import nn


    def train_one_epoch(model, criterion, optimizer, data_loader, device, epoch, args, model_ema=None, scaler=None):
        model.train()
        metric_logger = utils.MetricLogger(delimiter="  ")
        for i, (image, target) in enumerate(metric_logger.log_every(data_loader, args.print_freq, "Epoch: [0]")):
            image, target = image.to(device), target.to(device)
            with torch.cuda.amp.autocast(enabled=scaler is not None):
                output = model(image)
                loss = criterion(output, target)
            optimizer.zero_grad()
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()


    def main(args):
        utils.init_distributed_mode(args)
        device = torch.device(args.device)
        if args.use_deterministic_algorithms:
            torch.backends.cudnn.benchmark = False
            torch.use_deterministic_algorithms(True)
        else:
            torch.backends.cudnn.benchmark = True
        model = torchvision.models.get_model(args.model, weights=args.weights, num_classes=1000)
        model.to(device)
        criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
        scaler = torch.cuda.amp.GradScaler() if args.amp else None
        start_time = time.time()
        for epoch in range(args.start_epoch, args.epochs):
            train_one_epoch(model, criterion, optimizer, None, device, epoch, args, None, scaler)
        print(f"Training time {datetime.timedelta(seconds=int(time.time() - start_time))}")


    if __name__ == "__main__":
        main(utils.get_args_parser().parse_args())
'''

TV_UTILS = '''
    import datetime
    import time
    from collections import defaultdict, deque

    import torch
    import torch.distributed as dist


    class MetricLogger:
        def __init__(self, delimiter="\\t"):
            self.meters = defaultdict(deque)
            self.delimiter = delimiter

        def log_every(self, iterable, print_freq, header=None):
            MB = 1024.0 * 1024.0
            for i, obj in enumerate(iterable):
                yield obj
                if i % print_freq == 0 and torch.cuda.is_available():
                    print(self.delimiter.join([header, "max mem: {memory:.0f}"]).format(
                        memory=torch.cuda.max_memory_allocated() / MB))


    def init_distributed_mode(args):
        if not dist.is_available():
            args.distributed = False
            return
        torch.cuda.set_device(args.gpu)
'''


def test_torchvision_reference(tmp_path):
    src = write(tmp_path, "train.py", TV_TRAIN)
    utils = write(tmp_path, "utils.py", TV_UTILS)
    got, run = found(tmp_path)
    assert got == {
        ("train.py", at(src, "cudnn.benchmark = True"), "torch.backends.cudnn.benchmark", OFF),
        ("utils.py", at(utils, "max_memory_allocated"), "torch.cuda.max_memory_allocated", THROUGH),
    }
    assert run.files == [str(tmp_path / "train.py"), str(tmp_path / "utils.py")]


def test_follows_local_imports_once(tmp_path):
    """A package next to the script, its relative imports, an import cycle: each file read once, all of them."""
    src = write(tmp_path, "train.py", '''
        import torch
        from helpers.loop import run
        run()
    ''')
    write(tmp_path, "helpers/__init__.py", "")
    mem = write(tmp_path, "helpers/memory.py", '''
        import torch
        from . import loop

        def peak():
            return torch.cuda.max_memory_allocated()
    ''')
    loop = write(tmp_path, "helpers/loop.py", '''
        from torch.cuda import empty_cache
        from .memory import peak

        def run():
            empty_cache()
            return peak()
    ''')
    got, run = found(tmp_path)
    assert got == {
        ("memory.py", at(mem, "max_memory_allocated"), "torch.cuda.max_memory_allocated", THROUGH),
        ("loop.py", at(loop, "empty_cache()"), "torch.cuda.empty_cache", THROUGH),
    }
    assert sorted(os.path.relpath(f, str(tmp_path)) for f in run.files) == sorted(
        ["train.py", os.path.join("helpers", "__init__.py"), os.path.join("helpers", "memory.py"),
         os.path.join("helpers", "loop.py")])
    assert src


def test_local_module_depth_and_bad_module(tmp_path):
    """Imports are followed MAX_DEPTH levels deep; a module that is not Python is a note, not a failure."""
    n = check.MAX_DEPTH + 2
    write(tmp_path, "train.py", "import m0\nimport broken\n")
    for i in range(n):
        write(tmp_path, "m%d.py" % i, "import torch\nimport m%d\ntorch.cuda.empty_cache()\n" % (i + 1))
    write(tmp_path, "broken.py", "def f(:\n")
    got, run = found(tmp_path)
    assert got == {("m%d.py" % i, 3, "torch.cuda.empty_cache", THROUGH) for i in range(check.MAX_DEPTH)}
    assert run.notes == ["%s: not read (SyntaxError at line 1: invalid syntax)" % str(tmp_path / "broken.py")]


# --- a Lightning script -------------------------------------------------------------------------------------------

LIGHTNING = '''
    import lightning as L
    import torch
    import torch.nn.functional as F
    from lightning.pytorch.callbacks import DeviceStatsMonitor
    from torch import nn


    class LitAutoEncoder(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Sequential(nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 3))

        def training_step(self, batch, batch_idx):
            x, _ = batch
            loss = F.mse_loss(self.encoder(x.view(x.size(0), -1)), x)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)


    def main(loader, deterministic):
        trainer = L.Trainer(
            max_epochs=1,
            benchmark=True,
            callbacks=[DeviceStatsMonitor()],
        )
        trainer.fit(LitAutoEncoder(), loader)
        quiet = L.Trainer(benchmark=False, deterministic=deterministic)
        quiet.fit(LitAutoEncoder(), loader)
        tuned = L.Trainer(benchmark=not deterministic)
'''


def test_lightning(tmp_path):
    src = write(tmp_path, "train.py", LIGHTNING)
    got, run = found(tmp_path)
    first, quiet, tuned = at(src, "trainer = L.Trainer("), at(src, "quiet = "), at(src, "tuned = ")
    assert got == {
        ("train.py", first, "torch.backends.cudnn.benchmark", OFF),
        ("train.py", first, "torch.cuda.empty_cache", THROUGH),
        ("train.py", at(src, "DeviceStatsMonitor()]"), "torch.cuda.memory_stats", THROUGH),
        ("train.py", quiet, "torch.cuda.empty_cache", THROUGH),
        ("train.py", tuned, "torch.cuda.empty_cache", THROUGH),
        ("train.py", tuned, "torch.backends.cudnn.benchmark", OFF),
    }
    by = {(f.line, f.name): f for f in run.findings}
    assert by[(first, "torch.backends.cudnn.benchmark")].via.startswith("through Lightning Trainer(benchmark=True)")
    assert by[(tuned, "torch.backends.cudnn.benchmark")].condition == \
        "when `not deterministic` is true at run time"
    assert by[(first, "torch.backends.cudnn.benchmark")].condition is None
    assert sorted(run.libraries) == ["lightning"]


# --- an HF Trainer script -----------------------------------------------------------------------------------------

HF = '''
    from dataclasses import dataclass, field

    from transformers import (
        AutoConfig,
        AutoModelForCausalLM,
        HfArgumentParser,
        Trainer,
        TrainingArguments,
        default_data_collator,
    )


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default="gpt2")


    def main(ds):
        config = AutoConfig.from_pretrained("gpt2")
        model = AutoModelForCausalLM.from_config(config)
        training_args = TrainingArguments(
            output_dir="out",
            per_device_train_batch_size=8,
            torch_empty_cache_steps=4,
            skip_memory_metrics=False,
        )
        trainer = Trainer(model=model, args=training_args, train_dataset=ds, data_collator=default_data_collator)
        trainer.train()


    def from_command_line():
        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
'''

HF_MEMORY = ("torch.cuda.reset_peak_memory_stats", "torch.cuda.memory_allocated", "torch.cuda.max_memory_allocated",
             "torch.cuda.empty_cache")


def test_hf_trainer(tmp_path):
    src = write(tmp_path, "run_clm.py", HF)
    line = at(src, "training_args = TrainingArguments(")
    got, run = found(tmp_path, "run_clm.py")
    assert got == {("run_clm.py", line, n, THROUGH) for n in HF_MEMORY}
    # two settings make empty_cache: one line each, each saying which
    vias = sorted(f.via for f in run.findings if f.name == "torch.cuda.empty_cache")
    assert [v.split(" (")[0] for v in vias] == ["through HF TrainingArguments(skip_memory_metrics=False)",
                                               "through HF TrainingArguments(torch_empty_cache_steps=N)"]


def test_hf_args_on_the_command_line(tmp_path):
    """The same settings made in ARGS, which HfArgumentParser reads: reported at the parser's line."""
    src = write(tmp_path, "run_clm.py", HF.replace("torch_empty_cache_steps=4,", "").replace(
        "skip_memory_metrics=False,", ""))
    parser = at(src, "HfArgumentParser((")
    got, _ = found(tmp_path, "run_clm.py", ["--output_dir", "out", "--torch_empty_cache_steps", "4",
                                            "--skip_memory_metrics", "False", "--torch_compile_mode=max-autotune"])
    assert got == {("run_clm.py", parser, n, THROUGH) for n in HF_MEMORY} | {
        ("run_clm.py", parser, 'torch.compile(mode="max-autotune")', OFF)}
    got, _ = found(tmp_path, "run_clm.py", ["--output_dir", "out", "--skip_memory_metrics", "--torch_compile"])
    assert got == {("run_clm.py", parser, "torch.compile", WORKS)}
    (tmp_path / "args.json").write_text(json.dumps({"output_dir": "out", "skip_memory_metrics": False}))
    got, _ = found(tmp_path, "run_clm.py", [str(tmp_path / "args.json")])
    assert got == {("run_clm.py", parser, n, THROUGH) for n in HF_MEMORY}


# --- torchtitan ---------------------------------------------------------------------------------------------------

TITAN_LOOP = '''
    import torch

    device_type = "cuda"
    device_module = getattr(torch, device_type)


    class DeviceMemoryMonitor:
        def __init__(self, device: str = f"{device_type}:0"):
            self.device = torch.device(device)
            self.device_capacity = device_module.get_device_properties(self.device).total_memory
            device_module.reset_peak_memory_stats()
            device_module.empty_cache()

        def get_peak_stats(self):
            device_info = device_module.memory_stats(self.device)
            return device_info.get("active_bytes.all.peak", -1), device_info.get("num_ooms", 0)

        def reset_peak_stats(self):
            torch.cuda.reset_peak_memory_stats()


    def train(model, optimizer, batches):
        monitor = DeviceMemoryMonitor()
        for step, (x, y) in enumerate(batches):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step % 10 == 0:
                print(step, loss.item(), monitor.get_peak_stats())
                monitor.reset_peak_stats()
'''


def test_torchtitan_style_monitor(tmp_path):
    src = write(tmp_path, "train.py", TITAN_LOOP)
    got, _ = found(tmp_path)
    assert got == {
        ("train.py", at(src, "device_module.reset_peak_memory_stats()"), "torch.cuda.reset_peak_memory_stats",
         THROUGH),
        ("train.py", at(src, "device_module.empty_cache()"), "torch.cuda.empty_cache", THROUGH),
        ("train.py", at(src, "device_module.memory_stats("), "torch.cuda.memory_stats", THROUGH),
        ("train.py", at(src, "torch.cuda.reset_peak_memory_stats()"), "torch.cuda.reset_peak_memory_stats",
         THROUGH),
    }


def test_torchtitan_library_monitor(tmp_path):
    """torchtitan's own monitor and device_module, and its memory-snapshot option in ARGS."""
    src = write(tmp_path, "train.py", '''
        import torch
        from torchtitan.components.metrics import build_device_memory_monitor
        from torchtitan.tools.utils import device_module

        monitor = build_device_memory_monitor()
        device_module.empty_cache()
    ''')
    line = at(src, "monitor = ")
    want = {("train.py", line, n, THROUGH) for n in ("torch.cuda.reset_peak_memory_stats", "torch.cuda.empty_cache",
                                                       "torch.cuda.memory_stats")}
    want.add(("train.py", at(src, "device_module.empty_cache()"), "torch.cuda.empty_cache", THROUGH))
    got, _ = found(tmp_path)
    assert got == want
    got, _ = found(tmp_path, args=["--job.config_file", "x.toml", "--profiling.enable_memory_snapshot"])
    assert got == want | {("train.py", at(src, "from torchtitan.components"),
                           "torch.cuda.memory._record_memory_history", REFUSED)}


# --- nanoGPT's compile, side streams, the rest of the table --------------------------------------------------------

NANOGPT = '''
    import os
    from contextlib import nullcontext

    import torch

    compile = True
    dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
    torch.backends.cuda.matmul.allow_tf32 = True  # allow tf32 on matmul
    torch.backends.cudnn.allow_tf32 = True  # allow tf32 on cudnn
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    ctx = nullcontext() if not torch.cuda.is_available() else torch.amp.autocast(device_type="cuda", dtype=ptdtype)
    scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
    model = torch.nn.Linear(8, 8).cuda()
    if compile:
        print("compiling the model... (takes a ~minute)")
        unoptimized_model = model
        model = torch.compile(model)  # requires PyTorch 2.0
    fast = torch.compile(unoptimized_model, mode="max-autotune")
    slow = torch.compile(unoptimized_model, mode="max-autotune-no-cudagraphs")
    graphs = torch.compile(unoptimized_model, options={"triton.cudagraphs": True})
    unoptimized_model.compile(mode="reduce-overhead")


    @torch.compile
    def gelu(x):
        return x * 0.5 * (1.0 + torch.tanh(0.79788456 * (x + 0.044715 * x ** 3)))
'''


def test_nanogpt_compile(tmp_path):
    src = write(tmp_path, "train.py", NANOGPT)
    got, run = found(tmp_path)
    assert got == {
        ("train.py", at(src, "model = torch.compile(model)"), "torch.compile", WORKS),
        ("train.py", at(src, 'mode="max-autotune")'), 'torch.compile(mode="max-autotune")', OFF),
        ("train.py", at(src, "max-autotune-no-cudagraphs"), "torch.compile", WORKS),
        ("train.py", at(src, "triton.cudagraphs"), 'torch.compile(options={"triton.cudagraphs": True})', OFF),
        ("train.py", at(src, "unoptimized_model.compile("), 'torch.nn.Module.compile(mode="reduce-overhead")',
         OFF),
        ("train.py", at(src, "@torch.compile"), "torch.compile", WORKS),
    }
    plain = [f for f in run.findings if f.name == "torch.compile"][0]
    assert "one op to hoff" in plain.message() and "compile per block" in plain.message()


SIDE = '''
    import os

    import hoff
    import torch
    import torch.multiprocessing as mp

    os.environ["TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK"] = "1"


    def prefetch(batch, side):
        with torch.cuda.stream(side):
            gpu = batch.to("cuda", non_blocking=True)
        gpu.record_stream(torch.cuda.current_stream())
        hoff.record_stream(gpu, side)
        return gpu


    def step(model, batch, side):
        torch.cuda.set_per_process_memory_fraction(0.5)
        try:
            out = model(prefetch(batch, side))
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            return None
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = model(batch)
        return out


    def debug():
        torch.cuda.memory._record_memory_history(max_entries=100000)
        torch.cuda.memory._dump_snapshot("snapshot.pickle")
        torch.cuda.memory._record_memory_history(enabled=None)
        queue = mp.Queue()
        queue.put(torch.zeros(4))
        hoff.empty_cache()
        print(hoff.memory_stats())
'''


def test_side_streams_and_the_rest(tmp_path):
    src = write(tmp_path, "train.py", SIDE)
    got, _ = found(tmp_path)
    hist = [i + 1 for i, line in enumerate(src.splitlines()) if "_record_memory_history" in line]
    assert got == {
        ("train.py", at(src, "TORCH_NCCL"), "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", REFUSED),
        ("train.py", at(src, "gpu.record_stream"), "Tensor.record_stream", THROUGH),
        ("train.py", at(src, "set_per_process_memory_fraction"), "torch.cuda.set_per_process_memory_fraction",
         THROUGH),
        ("train.py", at(src, "OutOfMemoryError"), "torch.cuda.OutOfMemoryError", THROUGH),
        ("train.py", at(src, "torch.cuda.empty_cache()"), "torch.cuda.empty_cache", THROUGH),
        ("train.py", at(src, "CUDAGraph()"), "torch.cuda.CUDAGraph", THROUGH),
        ("train.py", at(src, "torch.cuda.graph(g)"), "torch.cuda.graph", THROUGH),
        ("train.py", hist[0], "torch.cuda.memory._record_memory_history", REFUSED),
        ("train.py", hist[1], "torch.cuda.memory._record_memory_history", REFUSED),
        ("train.py", at(src, "_dump_snapshot"), "torch.cuda.memory._dump_snapshot", REFUSED),
        ("train.py", at(src, "mp.Queue()"), "torch.multiprocessing.Queue", REFUSED),
    }


def test_aliases(tmp_path):
    src = write(tmp_path, "train.py", '''
        import os
        import torch as t
        import torch.cuda as tc
        from torch.cuda import memory_stats, empty_cache as ec
        from torch.cuda.memory import *
        from torch.backends import cudnn
        import torch.backends.cudnn as cudnn2

        cuda = t.cuda
        t.cuda.memory.memory_stats()
        memory_stats()
        ec()
        tc.reset_peak_memory_stats()
        cudnn.benchmark = True
        setattr(cudnn2, "benchmark", True)
        with t.backends.cudnn.flags(enabled=True, benchmark=True):
            pass
        max_memory_reserved()
        cuda.memory_summary()
        model = t.compile(model, mode="reduce-overhead")
        os.environ.setdefault("TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", "1")
        t.accelerator.memory_allocated()
        t._inductor.config.triton.cudagraphs = True
    ''')
    got, _ = found(tmp_path)
    assert got == {
        ("train.py", at(src, "t.cuda.memory.memory_stats()"), "torch.cuda.memory.memory_stats", THROUGH),
        ("train.py", src.splitlines().index("memory_stats()") + 1, "torch.cuda.memory_stats", THROUGH),
        ("train.py", at(src, "ec()"), "torch.cuda.empty_cache", THROUGH),
        ("train.py", at(src, "tc.reset_peak"), "torch.cuda.reset_peak_memory_stats", THROUGH),
        ("train.py", at(src, "cudnn.benchmark = True"), "torch.backends.cudnn.benchmark", OFF),
        ("train.py", at(src, "setattr("), "torch.backends.cudnn.benchmark", OFF),
        ("train.py", at(src, "flags("), "torch.backends.cudnn.benchmark", OFF),
        ("train.py", at(src, "max_memory_reserved()"), "torch.cuda.memory.max_memory_reserved", THROUGH),
        ("train.py", at(src, "cuda.memory_summary()"), "torch.cuda.memory_summary", THROUGH),
        ("train.py", at(src, "t.compile("), 'torch.compile(mode="reduce-overhead")', OFF),
        ("train.py", at(src, "setdefault"), "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", REFUSED),
        ("train.py", at(src, "t.accelerator"), "torch.accelerator.memory_allocated", THROUGH),
        ("train.py", at(src, "triton.cudagraphs"), "torch._inductor.config.triton.cudagraphs", OFF),
    }


CPU_ONLY = '''
    """A CPU training loop that uses none of the table: names that look alike must not be reported."""
    import os
    import re

    import hoff
    import torch
    import torch.multiprocessing as mp
    from lightning.pytorch import LightningModule, Trainer as LightningTrainer
    from transformers import Trainer, TrainingArguments

    os.environ["TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK"] = "0"
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.matmul.allow_tf32 = True
    PATTERN = re.compile(r"step (\\d+)")
    memory_stats = {"steps": 0}


    def empty_cache():
        memory_stats.clear()


    class Meter:
        def record_stream(self):
            return None


    def train(model, data, steps):
        # torch.cuda.empty_cache() in a comment, and "torch.cuda.memory_stats()" in a string
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i, (x, y) in zip(range(steps), data):
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            memory_stats["steps"] += 1
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            torch.cuda.synchronize()
        empty_cache()
        hoff.empty_cache()
        hoff.set_memory_fraction(0.5)
        print(hoff.memory_stats(), torch.get_num_threads(), PATTERN.pattern)
        args = TrainingArguments(output_dir="out", skip_memory_metrics=True, torch_compile=False)
        return Trainer(model=model, args=args)


    def launch(fn):
        mp.spawn(fn, nprocs=2)


    def fit(trainer: LightningTrainer, module: LightningModule) -> LightningTrainer:
        x: LightningTrainer = trainer
        return x
'''


def test_no_false_positives(tmp_path):
    write(tmp_path, "train.py", CPU_ONLY)
    got, run = found(tmp_path)
    assert got == set()
    assert check.summary(run) == ("hoff --check: nothing from hoff's table in %s; libraries not read (their "
                                  "settings come from hoff's table): lightning, transformers" % (tmp_path / "train.py"))


def test_environment(tmp_path):
    write(tmp_path, "train.py", "print('hello')\n")
    got, _ = found(tmp_path, environ={"TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK": "1"})
    assert got == {("<environment>", 0, "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", REFUSED)}
    got, _ = found(tmp_path, environ={"TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK": "0"})
    assert got == set()


# --- the command line ---------------------------------------------------------------------------------------------

def test_command_line_lines_and_exit_status(tmp_path):
    src = write(tmp_path, "train.py", TV_TRAIN)
    utils = write(tmp_path, "utils.py", TV_UTILS)
    script = str(tmp_path / "train.py")
    r = child("--check", "--sim", "--budget", "50%", script, "--model", "resnet50")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = r.stdout.splitlines()
    bench = seams.BY_ID["cudnn_benchmark"].message
    mem = seams.BY_ID["memory_stats"].message
    assert lines == [
        "%s:%d: torch.backends.cudnn.benchmark: turned off with a warning: %s" % (
            script, at(src, "benchmark = True"), bench),
        "%s:%d: torch.cuda.max_memory_allocated: works through hoff: %s" % (
            str(tmp_path / "utils.py"), at(utils, "max_memory_allocated"), mem),
        "hoff --check: 2 findings (1 works through hoff, 1 turned off with a warning) in %s and 1 local module"
        % script,
    ]


def test_mem_pool_is_refused(tmp_path):
    src = write(tmp_path, "train.py", """
        import torch
        from torch.cuda import use_mem_pool
        pool = torch.cuda.MemPool()
        with use_mem_pool(pool):
            x = torch.empty(4, device="cuda")
    """)
    got, _ = found(tmp_path)
    assert got == {("train.py", at(src, "torch.cuda.MemPool()"), "torch.cuda.MemPool", REFUSED),
                   ("train.py", at(src, "with use_mem_pool"), "torch.cuda.use_mem_pool", REFUSED)}


def test_exit_zero_with_a_refused_row(tmp_path, monkeypatch, capsys):
    """A report is a report: exit 0 whatever the verdicts, refused ones too."""
    import dataclasses
    monkeypatch.delenv("TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", raising=False)
    write(tmp_path, "train.py", "import torch\ntorch.cuda.empty_cache()\n")
    monkeypatch.setitem(seams.BY_ID, "empty_cache", dataclasses.replace(seams.BY_ID["empty_cache"],
                                                                        verdict=seams.REFUSED))
    assert check.main(["--check", str(tmp_path / "train.py")]) == 0
    out = capsys.readouterr().out
    assert ":2: torch.cuda.empty_cache: refused: " in out
    assert out.splitlines()[-1] == "hoff --check: 1 finding (1 refused) in %s" % (tmp_path / "train.py")


def test_json(tmp_path):
    write(tmp_path, "train.py", LIGHTNING)
    r = child("--check", "--json", str(tmp_path / "train.py"))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert isinstance(data, list)
    got, run = found(tmp_path)
    assert {(os.path.basename(d["file"]), d["line"], d["name"], d["verdict"]) for d in data} == got
    assert len(data) == len(run.findings)
    first = data[0]
    assert sorted(first) == ["condition", "file", "line", "message", "name", "seam", "verdict", "via"]
    assert first["seam"] in seams.BY_ID and first["message"].endswith(seams.BY_ID[first["seam"]].message)


def test_usage_errors(tmp_path):
    r = child("--check")
    assert r.returncode == 2 and r.stderr.startswith("hoff --check: no script to check\nusage:"), r.stderr
    r = child("--check", str(tmp_path / "missing.py"))
    assert (r.returncode, r.stderr) == (2, "hoff --check: %s: no such file\n" % (tmp_path / "missing.py"))
    r = child("--check", str(tmp_path))
    assert (r.returncode, r.stderr) == (2, "hoff --check: %s: is a directory, not a Python script\n" % tmp_path)
    r = child("--check", "-m", "train")
    assert r.returncode == 2 and "give its path, not -m MODULE" in r.stderr
    r = child("--check", "--frobnicate", "x.py")
    assert r.returncode == 2 and "unknown option '--frobnicate'" in r.stderr
    (tmp_path / "data.bin").write_bytes(b"\x00\x01\x02torch")
    r = child("--check", str(tmp_path / "data.bin"))
    assert r.returncode == 2 and "not Python" in r.stderr and r.stdout == ""


def test_syntax_error(tmp_path):
    (tmp_path / "train.py").write_text("import torch\n\nfor x in range(3)\n    torch.cuda.empty_cache()\n")
    r = child("--check", str(tmp_path / "train.py"))
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.startswith("hoff --check: %s:3:" % (tmp_path / "train.py")), r.stderr
    assert "not Python (SyntaxError: " in r.stderr and "--check reads a Python script" in r.stderr
    assert "for x in range(3)" in r.stderr


def test_requested_only_before_the_script():
    assert check.requested(["--check", "train.py"])
    assert check.requested(["--sim", "--budget", "50%", "--check", "train.py"])
    assert check.requested(["--step-mark", "none", "--check", "train.py"])
    assert not check.requested(["train.py", "--check"])
    assert not check.requested(["--budget", "--check", "train.py"])  # --check is --budget's value here
    assert not check.requested(["--", "--check"])
    assert not check.requested(["-m", "mod", "--check"])


# --- the table ----------------------------------------------------------------------------------------------------

def test_table_is_whole():
    ids = [s.id for s in seams.SEAMS]
    assert len(ids) == len(set(ids))
    for s in seams.SEAMS:
        assert s.verdict in seams.VERDICTS, s.id
        assert s.names and s.message and s.who and s.what, s.id
    for st in seams.LIBRARY_SETTINGS + seams.ARGS_SETTINGS:
        assert st.library in seams.LIBRARIES
        for name in st.calls:
            seams.seam_of(name)  # KeyError: a library setting names a call no row holds
    rows = {"cudnn_benchmark", "memory_stats", "stats_reset", "compile_cudagraphs", "cuda_graphs", "record_stream",
            "empty_cache", "memory_fraction", "oom", "memory_history", "cuda_ipc", "nccl_register_hook"}
    assert rows <= set(ids)  # every row of issue 26's table


def test_readme_table_is_generated():
    """python/README.md holds `python -m hoff --check --table` as it is: the docs cannot disagree with seams.py."""
    with open(README) as f:
        text = f.read()
    begin = "<!-- check-table: python -m hoff --check --table -->\n"
    end = "<!-- end check-table -->"
    assert begin in text and end in text
    block = text.split(begin, 1)[1].split(end, 1)[0]
    assert block == check.table_markdown(), "regenerate the table: python -m hoff --check --table"
    r = child("--check", "--table")
    assert r.returncode == 0 and r.stdout == check.table_markdown()
    r = child("--check", "--table", "--json")
    assert r.returncode == 0 and [s["id"] for s in json.loads(r.stdout)["seams"]] == [s.id for s in seams.SEAMS]
