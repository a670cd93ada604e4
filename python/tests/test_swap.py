# test_swap.py — hoff.swap's SwapManager on hoff's simulated device with CPU tensors over hoff blocks: the
# storage-granular acceptance of issue 19 (duplicates, views, transposes and narrows copied once, aliases kept),
# with and without grouping (the seed's group_swap), a model bitwise equal to the plain run, abort, misuse, and
# the seed's SwapManager scenarios, and groups filled outside a step (issue 25: what a group keeps is said once
# per use, with its bytes and why).  Threading: single-threaded; each test uses its own device (own context),
# but the issue 25 tests share one.
import ctypes
import itertools
import warnings
import weakref

import pytest

import hoff
from hoff.swap import KeptWarning, SwapManager

MiB = 1 << 20
BLOCK = 2 * MiB  # a 1 MiB storage is one managed block of hoff's 2 MiB grain
POISON = b"\xdb" * 64  # what the sim leaves in a block that is away
_devices = itertools.count(40)
GROUP_SWAP = [pytest.param(True, id="group_swap"), pytest.param(False, id="no_group_swap")]


class Dev:
    """A device's hoff context on the sim, its steps, and CPU tensors over its blocks."""

    def __init__(self, lib, torch):
        self.lib, self.torch = lib, torch
        self.dev = next(_devices)
        self.ctx = lib.hoff_torch_context(self.dev)
        assert self.ctx, hoff._lib.last_error()

    def step_begin(self):
        assert self.lib.hoff_step_begin(self.ctx) == 0, hoff._lib.last_error()

    def step_end(self):
        assert self.lib.hoff_step_end(self.ctx) == 0, hoff._lib.last_error()

    def empty(self, *shape, dtype=None):
        """A tensor whose storage is a fresh hoff block (an offload block inside a step)."""
        torch = self.torch
        dtype = dtype or torch.float32
        numel = 1
        for s in shape:
            numel *= s
        n = numel * torch.tensor([], dtype=dtype).element_size()
        p = self.lib.hoff_torch_alloc(n, self.dev, None)
        assert p, hoff._lib.last_error()
        buf = (ctypes.c_char * n).from_address(p)
        weakref.finalize(buf, self.lib.hoff_torch_free, p, n, self.dev, None)
        return torch.frombuffer(buf, dtype=dtype, count=numel).view(*shape)

    def copy(self, x):
        """x copied into a hoff block, differentiably (the block is what autograd saves)."""
        return self.empty(*x.shape, dtype=x.dtype).copy_(x)

    def residency(self, t):
        return self.lib.hoff_residency(self.ctx, hoff.storage_ptr(t))

    def stats(self):
        return hoff._targets.AllocatorTarget(self.dev).stats()


def raw(t, n=64):
    """The first n bytes of t's block, read without telling hoff (the sim's poison when it is away)."""
    return ctypes.string_at(hoff.storage_ptr(t), n)


@pytest.fixture
def dev(libhoff, torch):
    return Dev(libhoff, torch)


class Probe:
    """A custom autograd function saving the given tensors; its backward records what it gets back
    (storage, shape, stride, offset, dtype, values) and whether writing through one is seen through the
    others of the same storage."""

    def __init__(self, torch):
        self.torch = torch
        self.forward_meta = None
        self.backward_meta = None
        self.aliases_hold = None
        probe = self

        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *ts):
                ctx.save_for_backward(*ts)
                probe.forward_meta = [probe.meta(t) for t in ts]
                return sum(t.sum() for t in ts)

            @staticmethod
            def backward(ctx, g):
                ts = ctx.saved_tensors
                probe.backward_meta = [probe.meta(t) for t in ts]
                probe.aliases_hold = probe.check_aliases(ts)
                return tuple(g * torch.ones_like(t) for t in ts)

        self.fn = Fn

    def meta(self, t):
        return (hoff.storage_ptr(t), tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype,
                t.detach().clone())

    def check_aliases(self, ts):
        """Write through each tensor in turn (its element [0, ..., 0], poked at its address so that no
        version counter moves); every tensor over the same storage that holds that element must see it, the
        others must not change.  The value is put back."""
        torch = self.torch
        for t in ts:
            before = [u.detach().clone() for u in ts]
            addr, n = t.data_ptr(), t.element_size()
            old = ctypes.string_at(addr, n)
            ctypes.memmove(addr, torch.tensor([12345.0], dtype=t.dtype).numpy().tobytes(), n)
            try:
                for j, u in enumerate(ts):
                    changed = not torch.equal(u.detach(), before[j])
                    shares = hoff.storage_ptr(u) == hoff.storage_ptr(t) and self.same_element(t, u)
                    if changed != shares:
                        return False
            finally:
                ctypes.memmove(addr, old, n)
        return True

    @staticmethod
    def same_element(t, u):
        """Does u hold the element t[0,...,0] (an offset into the shared storage)?"""
        off = t.storage_offset()
        rel = off - u.storage_offset()
        if rel < 0:
            return False
        # every element offset of u
        import itertools as it
        for idx in it.product(*[range(s) for s in u.shape]):
            if sum(i * s for i, s in zip(idx, u.stride())) == rel:
                return True
        return False

    def __call__(self, *ts):
        return self.fn.apply(*ts)


class Plain:
    """Dev's interface with plain CPU tensors: the run without hoff."""

    def __init__(self, torch):
        self.torch = torch

    def copy(self, x):
        return self.torch.empty_like(x).copy_(x)


def plain_grad(torch, build, x):
    """The gradient of build's loss at x without hoff (the same ops, plain tensors): the bitwise reference."""
    x2 = x.detach().clone().requires_grad_(True)
    loss, _ = build(Plain(torch), x2, Probe(torch))
    loss.backward()
    return loss.detach(), x2.grad


def round_trip(dev, mgr, name, build, check_away=True):
    """Run build() inside group(name), offload, check every block is away, load, backward; the loss and the
    gradient must be bitwise those of the run without hoff.  Returns (the stats of the group, the probe)."""
    torch = dev.torch
    dev.step_begin()
    x = torch.randn(256, 1024, requires_grad=True)
    ref_loss, ref_grad = plain_grad(torch, build, x)
    probe = Probe(torch)
    with mgr.group(name):
        loss, blocks = build(dev, x, probe)
    mgr.launch_offload(name)
    mgr.wait_offload(name)
    hoff._lib.load().hoff_sync(dev.ctx)
    if check_away:
        for b in blocks:
            assert dev.residency(b) == 2, "block not on the host after the offload"  # HOFF_RES_HOST
            assert raw(b) == POISON
    mgr.launch_load(name)
    mgr.wait_load(name)
    loss.backward()
    assert torch.equal(loss.detach(), ref_loss)
    assert torch.equal(x.grad, ref_grad)
    st = mgr.stats(name)
    # one backend call per block without grouping; with it, neighbours in one mapping share one (these
    # blocks are separate mappings: test_swap.c's colocated case has them in a planner region)
    if mgr.group_swap:
        assert st["calls"] <= st["d2h_copies"] + st["h2d_copies"]
    else:
        assert st["calls"] == st["d2h_copies"] + st["h2d_copies"]
    dev.step_end()
    return st, probe


def assert_restored(probe):
    assert probe.backward_meta is not None
    for f, b in zip(probe.forward_meta, probe.backward_meta):
        assert f[:5] == b[:5]  # same storage, shape, stride, offset, dtype
        assert probe.torch.equal(f[5], b[5])  # same values
    assert probe.aliases_hold


# --- the seed's acceptance cases, each with and without grouping -----------------------------------------------

@pytest.mark.parametrize("group_swap", GROUP_SWAP)
def test_duplicates_copied_once(dev, group_swap):
    """1. The same storage and the same view saved several times: one D2H and one H2D copy."""
    mgr = SwapManager(device=dev.dev, group_swap=group_swap)

    def build(dev, x, probe):
        h = dev.copy(x * 2)
        y = h * h                      # mul saves h twice
        v = h.view(-1)
        loss = (y * h).sum() + probe(v, v, h.view(-1))   # the same view three times more
        return loss, [h]

    st, probe = round_trip(dev, mgr, "dup", build)
    assert st["storages"] == 1 and st["members"] == 0  # wait_load emptied it
    assert st["d2h_copies"] == 1 and st["h2d_copies"] == 1
    assert st["d2h_bytes"] == st["h2d_bytes"] == BLOCK
    assert st["saved_tensors"] >= 6 and st["duplicates"] == st["saved_tensors"] - st["kept"] - 1
    assert st["demand_loads"] == 0
    assert_restored(probe)


def torch_grad(torch, x, f):
    x2 = x.detach().clone().requires_grad_(True)
    f(x2).backward()
    return x2.grad


@pytest.mark.parametrize("group_swap", GROUP_SWAP)
def test_reshape_view_aliases(dev, group_swap):
    """2. reshape/view sharing a storage: no duplicate copy; after load every alias still aliases."""
    mgr = SwapManager(device=dev.dev, group_swap=group_swap)

    def build(dev, x, probe):
        h = dev.copy(x)
        r = h.reshape(1024, 256)
        v = h.view(64, 4, 1024)
        loss = torch_sin_sum(r) + torch_sin_sum(v) + probe(r, v, h)
        return loss, [h]

    st, probe = round_trip(dev, mgr, "reshape", build)
    assert st["storages"] == 1 and st["d2h_copies"] == 1 and st["h2d_copies"] == 1
    assert st["duplicates"] >= 4
    assert_restored(probe)


def torch_sin_sum(t):
    return t.sin().sum()


@pytest.mark.parametrize("group_swap", GROUP_SWAP)
def test_transpose_narrow_aliases(dev, group_swap):
    """3. transpose/narrow (different stride and offset): one copy each way, aliases hold."""
    mgr = SwapManager(device=dev.dev, group_swap=group_swap)

    def build(dev, x, probe):
        h = dev.copy(x)
        t = h.t()
        n = h.narrow(1, 100, 300)
        n2 = h.narrow(0, 7, 5)[:, 3:900:3]
        loss = (t.cos().sum() + n.sin().sum() + probe(t, n, n2))
        return loss, [h]

    st, probe = round_trip(dev, mgr, "transpose", build)
    assert st["storages"] == 1 and st["d2h_copies"] == 1 and st["h2d_copies"] == 1
    assert [m[3] for m in probe.backward_meta] == [0, 100, 7 * 1024 + 3]
    assert_restored(probe)


@pytest.mark.parametrize("group_swap", GROUP_SWAP)
def test_mixed_group_never_splits_aliases(dev, group_swap):
    """4. Some storages aliased, some not: each storage is one member, aliases never split."""
    mgr = SwapManager(device=dev.dev, group_swap=group_swap)

    def build(dev, x, probe):
        a = dev.copy(x)                 # aliased three ways
        b = dev.copy(x * 3)             # alone
        c = dev.copy(x + 1)             # aliased twice
        loss = probe(a, a.t(), a.narrow(1, 5, 10), b, c.view(-1), c.reshape(512, 512)[1:])
        return loss, [a, b, c]

    st, probe = round_trip(dev, mgr, "mixed", build)
    assert st["storages"] == 3 and st["d2h_copies"] == 3 and st["h2d_copies"] == 3
    assert st["d2h_bytes"] == 3 * BLOCK
    assert_restored(probe)
    ptrs = [m[0] for m in probe.backward_meta]
    assert ptrs[0] == ptrs[1] == ptrs[2] and ptrs[4] == ptrs[5] and len({ptrs[0], ptrs[3], ptrs[4]}) == 3


# --- a model: every layer a manual group, bitwise equal to the plain run ---------------------------------------

def make_model(torch, n_layers=4, d=512):
    torch.manual_seed(1234)
    return torch.nn.ModuleList([torch.nn.Linear(d, d) for _ in range(n_layers)])


class Layer:
    """A layer whose activations are copied into blocks from alloc (hoff blocks, or plain tensors for the
    plain run) and saved as views, transposes and narrows of them."""

    def __init__(self, torch, lin, copy):
        self.torch, self.lin, self.copy = torch, lin, copy

    def __call__(self, x):
        h = self.copy(self.lin(x))                 # Linear saved x: the previous layer's output block
        t = h.t()
        n = h.narrow(1, 0, h.shape[1] // 2)
        y = self.torch.tanh(h) + (t.sin().t() * h)  # h saved (tanh), t and h saved (mul)
        y = self.torch.cat([y[:, : h.shape[1] // 2] + n.cos(), y[:, h.shape[1] // 2:]], 1)
        return self.copy(y)


def run_model(torch, lins, copy, mgr=None, steps=2, dev=None, session=None):
    """Loss and gradients of `steps` training steps (plain SGD); steps marked by dev, or by session (an
    OffloadSession: its access and op marks too)."""
    modules = []
    for lin in lins:
        m = torch.nn.Module()
        layer = Layer(torch, lin, copy)
        m.forward = layer
        modules.append(m)
    if mgr is not None:
        for i in range(len(modules) - 1):
            mgr.set_forward_prefetch_layer(modules[i], modules[i + 1])
            mgr.set_forward_prefetch_layer(modules[i], modules[i + 1])  # idempotent
    out = []
    opt = torch.optim.SGD(lins.parameters(), lr=0.01)
    for s in range(steps):
        if session is not None:
            session.__enter__()
        elif dev:
            dev.step_begin()
        torch.manual_seed(s)
        x = torch.randn(512, 512)
        for m in modules:
            x = m(x)
        loss = (x * x).mean()
        opt.zero_grad(set_to_none=True)  # every step the same ops (no accumulation into old grads)
        loss.backward()
        out.append((loss.detach().clone(), [p.grad.clone() for p in lins.parameters()]))
        opt.step()
        del x, loss
        if session is not None:
            session.__exit__(None, None, None)
        elif dev:
            dev.step_end()
    return out, modules


@pytest.mark.parametrize("group_swap", GROUP_SWAP)
def test_model_bitwise(dev, group_swap):
    torch = dev.torch
    plain, _ = run_model(torch, make_model(torch), lambda y: torch.empty_like(y).copy_(y))
    mgr = SwapManager(device=dev.dev, group_swap=group_swap)
    swapped, modules = run_model(torch, make_model(torch), dev.copy, mgr=mgr, dev=dev)
    for (l1, g1), (l2, g2) in zip(plain, swapped):
        assert torch.equal(l1, l2)
        for a, b in zip(g1, g2):
            assert torch.equal(a, b)
    names = [mgr.layer_group_name(m) for m in modules]
    for i, name in enumerate(names):
        st = mgr.stats(name)
        assert st["demand_loads"] == 0 and st["state"] == "collecting" and st["members"] == 0
        per_step = 1 if i == 0 else 2  # its h, and its input (the previous layer's output block)
        if i < len(names) - 1:  # offloaded while the next layer ran, loaded when its backward started
            assert st["d2h_copies"] == st["h2d_copies"] == 2 * per_step  # 2 steps
            assert st["d2h_bytes"] == st["h2d_bytes"] == 2 * per_step * BLOCK
        else:  # the last layer is never offloaded
            assert st["d2h_copies"] == st["h2d_copies"] == 0
    # each layer's pre-hooks were installed once (idempotent)
    assert len(modules[1]._forward_pre_hooks) == 2  # its group, and the offload of layer 0
    assert dev.stats()["manual_blocks"] == 0


def test_model_in_session(libhoff, torch):
    """The same model inside OffloadSession steps with a 10 MiB budget (access and op marks, warmup then
    replay): bitwise equal with and without the manager.  With it, the plan leaves the groups' blocks alone
    (recorded as pinned: only the last layer's output, in no group, is left to plan), the groups move
    them, and nothing is paged in on demand."""
    plain, _ = run_model(torch, make_model(torch), lambda y: torch.empty_like(y).copy_(y), steps=3)
    runs = {}
    for use_mgr in (False, True):
        dev = Dev(libhoff, torch)
        mgr = SwapManager(device=dev.dev) if use_mgr else None
        session = hoff.OffloadSession(hoff.OffloadConfig(max_resident_activation_mb=10), mode="allocator",
                                      device=dev.dev)
        swapped, modules = run_model(torch, make_model(torch), dev.copy, mgr=mgr, steps=3, session=session)
        for (l1, g1), (l2, g2) in zip(plain, swapped):
            assert torch.equal(l1, l2) and all(torch.equal(a, b) for a, b in zip(g1, g2))
        st = runs[use_mgr] = dev.stats()
        assert st["steps"] == 3 and st["plans"] == 1 and st["divergent_steps"] == 0 and st["replans"] == 0
        assert st["actions_skipped"] == 0 and st["budget_overruns"] == 0 and st["manual_blocks"] == 0
    assert runs[False]["plan_actions"] > 4 * runs[True]["plan_actions"]  # 14 against 1 here
    assert runs[True]["faults"] == 0
    assert [mgr.stats(mgr.layer_group_name(m))["d2h_copies"] for m in modules] == [3, 6, 6, 0]
    assert all(mgr.stats(mgr.layer_group_name(m))["demand_loads"] == 0 for m in modules)


# --- abort, misuse ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("group_swap", GROUP_SWAP)
def test_abort_during_offload_loses_nothing(libhoff, torch, group_swap):
    dev = Dev(libhoff, torch)  # the sim's clock moves only when compute runs or waits: the copy is in flight
    mgr = SwapManager(device=dev.dev, group_swap=group_swap)
    dev.step_begin()
    x = torch.randn(256, 1024, requires_grad=True)
    with mgr.group("a"):
        h = dev.copy(x)
        loss = (h.t().sin().t() * h.narrow(1, 0, 1024)).sum()
    mgr.launch_offload("a")
    assert mgr.stats("a")["in_flight"] == 1
    assert mgr.abort_group("a") is True
    assert mgr.active_group_count() == 0 and dev.stats()["manual_aborts"] == 1
    assert dev.residency(h) in (0, 2)  # device or host: one valid place
    loss.backward()  # the unpack pages it in
    ref = torch_grad(torch, x, lambda x: (x.t().sin().t() * x).sum())
    assert torch.equal(x.grad, ref)
    assert dev.stats()["transfer_errors"] == 0
    dev.step_end()
    assert mgr.abort_group("a") is False  # gone: a second abort is a no-op


def test_misuse(dev):
    torch = dev.torch
    mgr = SwapManager(device=dev.dev)
    # an unknown group
    for call in (mgr.launch_offload, mgr.wait_offload, mgr.launch_load, mgr.wait_load,
                 mgr.release_group_storage, mgr.stats):
        with pytest.raises(hoff.HoffError, match="no group named 'nope'"):
            call("nope")
    with pytest.raises(hoff.HoffError, match="no group named 'nope'"):
        mgr.protect_alias_tensors("nope", [])
    with pytest.raises(ValueError, match="non-empty str"):
        mgr.ensure_group("")
    # a wait without a launch (RuntimeError, as the seed's)
    mgr.ensure_group("g")
    with pytest.raises(RuntimeError, match=r"wait_offload\(\) called before launch_offload\(\)"):
        mgr.wait_offload("g")
    with pytest.raises(RuntimeError, match=r"wait_load\(\) called before launch_load\(\)"):
        mgr.wait_load("g")
    # a tensor with no storage
    sparse = torch.eye(4).to_sparse()
    with pytest.raises(hoff.HoffError, match="no storage"):
        mgr.protect_alias_tensors("g", [sparse])
    with pytest.raises(hoff.HoffError, match="no storage"):
        mgr.add_tensors("g", {"x": torch.empty(4, device="meta")})
    # a launch while one is in flight
    dev.step_begin()
    x = torch.randn(256, 1024, requires_grad=True)
    with mgr.group("g"):
        h = dev.copy(x)
        loss = (h * h).sum()
    mgr.launch_offload("g")
    with pytest.raises(hoff.HoffError, match="not collecting"):
        mgr.launch_offload("g")
    with pytest.raises(hoff.HoffError, match="wait_offload first"):
        mgr.launch_load("g")
    mgr.wait_offload("g")
    # a group used across two steps: its offload was never loaded
    dev.step_end()
    dev.step_begin()
    with pytest.raises(hoff.HoffError, match="across two steps"):
        with mgr.group("g"):
            pass
    # ...nothing lost: the first step's backward still gets its bytes (paged in)
    loss.backward()
    assert torch.equal(x.grad, 2 * x.detach())
    assert mgr.stats("g")["demand_loads"] == 1  # h saved twice: one block, paged in once
    mgr.release_group_storage("g")
    dev.step_end()


def test_across_steps_without_launch(dev):
    """A group filled in one step and filled again in the next without a release: a clear error at the
    first save of the second step, and the first step loses nothing."""
    torch = dev.torch
    mgr = SwapManager(device=dev.dev)
    dev.step_begin()
    x = torch.randn(256, 1024, requires_grad=True)
    with mgr.group("s"):
        h = dev.copy(x)
        loss = (h * h).sum()
    dev.step_end()
    dev.step_begin()
    x2 = torch.randn(256, 1024, requires_grad=True)
    # raised in autograd's pack hook: PyTorch passes it on as a RuntimeError with hoff's message
    with pytest.raises(RuntimeError, match="group 's' is used across two steps.*added in step 1"):
        with mgr.group("s"):
            h2 = dev.copy(x2)
            (h2 * h2).sum()
    loss.backward()
    assert torch.equal(x.grad, 2 * x.detach())
    mgr.release_group_storage("s")
    with mgr.group("s"):  # released: usable again
        (dev.copy(x2) * 2).sum()
    mgr.release_group_storage("s")
    dev.step_end()


def test_budget_refusal_is_clear(dev):
    torch = dev.torch
    mgr = SwapManager(device=dev.dev)
    err = ctypes.create_string_buffer(256)
    # budget is a live option (hoff_torch(3)); hoff_torch_configure also keeps it for contexts created later,
    # so it is put back at the end
    assert dev.lib.hoff_torch_configure(dev.dev, b"budget", b"2M", err, len(err)) == 0, err.value
    try:
        budget_refusal(dev, mgr, torch)
    finally:
        assert dev.lib.hoff_torch_configure(dev.dev, b"budget", b"0", err, len(err)) == 0, err.value


def budget_refusal(dev, mgr, torch):
    dev.step_begin()
    x = torch.randn(256, 1024, requires_grad=True)
    with mgr.group("b"):
        a, b = dev.copy(x), dev.copy(x * 2)
        loss = (a * b).sum()
    mgr.launch_offload("b")
    mgr.wait_offload("b")
    keep = dev.copy(x.detach())  # 2 MiB resident: the budget is full, and keep is in use
    with pytest.raises(hoff.HoffError, match="budget") as e:
        mgr.launch_load("b")
    assert e.value.errno == 10001  # HOFF_EBUDGET
    assert mgr.stats("b")["on_host"] == 2 and mgr.stats("b")["state"] == "offloaded"
    assert dev.stats()["manual_refusals"] == 1
    del keep
    loss.backward()  # nothing lost: paged in at its use
    assert torch.equal(x.grad, 4 * x.detach())  # b + 2a, a = x, b = 2x
    mgr.release_group_storage("b")
    dev.step_end()


# --- the seed's SwapManager scenarios (its file is a coverage listing) -----------------------------------------

def test_seed_singleton_and_bookkeeping(dev):
    a = SwapManager(device=dev.dev)
    b = SwapManager(device=dev.dev)
    assert a is b
    n = a.active_group_count()
    a.ensure_group("x")
    a.ensure_group("x")
    assert a.active_group_count() == n + 1
    assert a.get_current_group_name() == ""
    with a.group_context("x"):
        assert a.get_current_group_name() == "x"
        with a.group("y"):
            assert a.get_current_group_name() == "y"
        assert a.get_current_group_name() == "x"
    assert a.get_current_group_name() == ""
    assert a.is_last_group("x") is False and a.is_last_group("unknown") is False
    assert a.abort_group("x") and a.abort_group("y")
    assert a.active_group_count() == n


def test_seed_protect_alias_tensors(dev):
    """protect_alias_tensors keeps an externally owned storage on the device; the others go."""
    torch = dev.torch
    mgr = SwapManager(device=dev.dev)
    dev.step_begin()
    x = torch.randn(256, 1024, requires_grad=True)
    with mgr.group("p"):
        a = dev.copy(x)
        b = dev.copy(x * 2)
        loss = (a.sin() * b.t().t()).sum()
    mgr.protect_alias_tensors("p", [a.view(-1)])  # a view names the whole storage
    mgr.launch_offload("p")
    mgr.wait_offload("p")
    hoff._lib.load().hoff_sync(dev.ctx)
    assert dev.residency(a) == 0 and dev.residency(b) == 2
    st = mgr.stats("p")
    assert st["d2h_copies"] == 1
    mgr.launch_load("p")
    mgr.wait_load("p")
    loss.backward()
    assert torch.equal(x.grad, torch_grad(torch, x, lambda x: (x.sin() * (x * 2)).sum()))
    dev.step_end()


def test_seed_release_and_reuse(dev):
    torch = dev.torch
    mgr = SwapManager(device=dev.dev)
    for step in range(3):
        dev.step_begin()
        x = torch.randn(256, 1024, requires_grad=True)
        with mgr.group("r"):
            h = dev.copy(x)
            loss = (h * h).sum()
        mgr.launch_offload("r")
        mgr.wait_offload("r")
        mgr.launch_load("r")
        mgr.wait_load("r")  # empties it: the next step fills it again
        loss.backward()
        assert torch.equal(x.grad, 2 * x.detach())
        dev.step_end()
    st = mgr.stats("r")
    assert st["d2h_copies"] == st["h2d_copies"] == 3 and st["storages"] == 3


def test_seed_inplace_after_save_is_an_error(dev):
    """The seed refuses a saved tensor modified in place ("In-place modification happened"); autograd does
    not check versions under saved_tensors_hooks, so the manager does, at unpack, for kept storages too."""
    torch = dev.torch
    mgr = SwapManager(device=dev.dev)
    dev.step_begin()
    x = torch.randn(256, 1024, requires_grad=True)
    with mgr.group("inplace"):
        h = dev.copy(x)
        w = torch.randn(4, 4, requires_grad=True)
        loss = h.sin().sum() + (w * w).sum()
    with torch.no_grad():
        h.add_(1)
    with pytest.raises(RuntimeError, match="group 'inplace' was modified in place after it was saved"):
        loss.backward()
    mgr.release_group_storage("inplace")
    dev.step_end()


def test_seed_release_drops_host_copies(dev):
    torch = dev.torch
    mgr = SwapManager(device=dev.dev)
    dev.step_begin()
    with mgr.group("d"):
        h = dev.copy(torch.randn(256, 1024, requires_grad=True))
        (h * h).sum()
    mgr.launch_offload("d")
    mgr.wait_offload("d")
    before = dev.stats()
    mgr.release_group_storage("d")
    after = dev.stats()
    assert after["discards"] - before["discards"] == 1 and after["host_bytes"] == 0
    assert mgr.stats("d")["state"] == "collecting"
    dev.step_end()


# --- groups outside a step (issue 25): a storage allocated outside a step is no offload block -----------------

@pytest.fixture(scope="module")
def odev(libhoff, torch):
    """One device for these tests: this file's devices (40 up) would otherwise pass hoff's last (63).  Each
    test has its own group names."""
    return Dev(libhoff, torch)


def kept_warnings(records):
    return [w for w in records if issubclass(w.category, KeptWarning)]


def test_group_outside_a_step_warns_once(odev):
    """A group filled outside any step keeps its storages (they are device-pool blocks, never offload blocks)
    and says so once per use of the group, naming the bytes and why; filled inside a step, the same group
    moves them and says nothing."""
    dev = odev
    torch = dev.torch
    mgr = SwapManager(device=dev.dev)
    x = torch.randn(256, 1024, requires_grad=True)  # 1 MiB: at managed_min, an offload block inside a step
    x2 = x * 2  # outside the group: x * 2 saves its scalar (a CPU tensor of 8 bytes) on PyTorch 1.13
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with mgr.group("o"):
            a, b = dev.copy(x), dev.copy(x2)
            loss = (a * b).sum()              # saves a and b: two storages of 1 MiB, kept
        with mgr.group("o"):                  # the same use of the group: no second warning
            loss = loss + a.sin().sum()       # a again (counted once), x is not saved by sin of a copy
        mgr.launch_offload("o")               # moves nothing, quietly: said at the group's end already
        mgr.wait_offload("o")
        mgr.launch_load("o")
        mgr.wait_load("o")                    # a new use of the group
        loss.backward()
    kept = kept_warnings(rec)
    assert len(kept) == 1, [str(w.message) for w in rec]
    msg = str(kept[0].message)
    assert issubclass(kept[0].category, RuntimeWarning)
    assert "group 'o' keeps 2 storages (%d bytes, 2.0 MiB) on device %d" % (2 * MiB, dev.dev) in msg
    assert "and has nothing to move. 2 storages (%d bytes, 2.0 MiB): allocated outside a training step" \
        % (2 * MiB) in msg
    assert kept[0].filename == __file__  # points at the caller's with statement, not at hoff
    st = mgr.stats("o")
    assert st["kept_storages"] == 2 and st["kept_bytes"] == 2 * MiB and st["kept_protected"] == 0
    assert st["storages"] == 0 and st["d2h_bytes"] == 0 and st["h2d_bytes"] == 0
    assert torch.equal(x.grad, torch_grad(torch, x, lambda x: (x * (x * 2)).sum() + x.sin().sum()))

    # the next use of the group, inside a step: its storages are offload blocks, they move, no warning
    x.grad = None
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        dev.step_begin()
        x2 = x * 2
        with mgr.group("o"):
            a, b = dev.copy(x), dev.copy(x2)
            loss = (a * b).sum()
        mgr.launch_offload("o")
        mgr.wait_offload("o")
        mgr.launch_load("o")
        mgr.wait_load("o")
        loss.backward()
        dev.step_end()
    assert kept_warnings(rec) == [], [str(w.message) for w in rec]
    st = mgr.stats("o")
    assert st["d2h_bytes"] == st["h2d_bytes"] == 2 * BLOCK
    assert st["kept_storages"] == 2 and st["kept_bytes"] == 2 * MiB  # the first use's, nothing more
    assert torch.equal(x.grad, torch_grad(torch, x, lambda x: (x * (x * 2)).sum()))


def test_group_outside_a_step_names_each_cause(odev):
    """The warning breaks the kept bytes down by cause; storages kept by protect_alias_tensors (the caller's
    own request) are counted apart and never warned about; a group that moves its other storages warns only
    for a storage allocated outside a step, one with nothing to move only for a storage worth moving."""
    dev = odev
    torch = dev.torch
    mgr = SwapManager(device=dev.dev)
    x = torch.randn(256, 1024, requires_grad=True)
    big = dev.copy(x)                               # 1 MiB hoff block outside a step: kept, "outside"
    small = dev.copy(torch.randn(64, 64, requires_grad=True))   # 16 KiB: below managed_min
    cpu = x * 3                                     # plain CPU memory: not a hoff block
    with pytest.warns(KeptWarning) as rec:
        with mgr.group("c"):
            loss = (big * big).sum() + (small * small).sum() + (cpu * cpu).sum()
    assert len(kept_warnings(rec)) == 1
    msg = str(kept_warnings(rec)[0].message)
    assert "keeps 3 storages (%d bytes" % (2 * MiB + 64 * 64 * 4) in msg
    assert "1 storage (%d bytes, 1.0 MiB): allocated outside a training step" % MiB in msg
    assert "1 storage (%d bytes, 16.0 KiB): smaller than managed_min (%d bytes" % (64 * 64 * 4, MiB) in msg
    assert "1 storage (%d bytes, 1.0 MiB): not hoff blocks of device %d" % (MiB, dev.dev) in msg
    loss.backward()
    mgr.release_group_storage("c")

    # only protected storages kept: nothing to say
    mgr.protect_alias_tensors("c", [big])
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with mgr.group("c"):
            (big.sin()).sum()
    assert kept_warnings(rec) == []
    assert mgr.stats("c")["kept_protected"] == 1
    mgr.release_group_storage("c")

    # inside a step: the group moves h; a small tensor and plain CPU memory kept beside it are normal...
    dev.step_begin()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with mgr.group("c"):
            h = dev.copy(x)
            loss = (h * h).sum() + (small * small).sum() + (cpu * cpu).sum()
    assert kept_warnings(rec) == []
    mgr.release_group_storage("c")
    # ...so is a group that keeps only what is never a candidate: a small storage
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with mgr.group("c"):
            loss = (small * small).sum()
    assert kept_warnings(rec) == []
    mgr.release_group_storage("c")
    # a group that moves nothing and keeps 1 MiB of plain CPU memory is said
    with pytest.warns(KeptWarning, match=r"has nothing to move\. 1 storage \(%d bytes, 1\.0 MiB\): not hoff "
                      "blocks of device %d" % (MiB, dev.dev)):
        with mgr.group("c"):
            loss = (cpu * cpu).sum()
    mgr.release_group_storage("c")
    # ...and a storage allocated before the step began, with what the group still moves
    with pytest.warns(KeptWarning, match=r"keeps 1 storage \(%d bytes.*beside the 1 storage it moves.*"
                      "outside a training step" % MiB):
        with mgr.group("c"):
            h = dev.copy(x)
            loss = (h * big).sum()
    mgr.release_group_storage("c")
    dev.step_end()


def test_layers_without_steps_warn_once_per_group(odev):
    """The seed's layer-to-layer hooks in a custom loop with no step marks: every layer's group moves
    nothing, and each says so once; the model is still bitwise the plain one."""
    dev = odev
    torch = dev.torch
    plain, _ = run_model(torch, make_model(torch), lambda y: torch.empty_like(y).copy_(y), steps=1)
    mgr = SwapManager(device=dev.dev)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        swapped, modules = run_model(torch, make_model(torch), dev.copy, mgr=mgr, steps=1)  # no dev: no steps
    names = [mgr.layer_group_name(m) for m in modules]
    said = sorted(str(w.message).split("'")[1] for w in kept_warnings(rec))
    assert said == sorted(names), [str(w.message) for w in rec]
    for (l1, g1), (l2, g2) in zip(plain, swapped):
        assert torch.equal(l1, l2) and all(torch.equal(a, b) for a, b in zip(g1, g2))
    assert all(mgr.stats(n)["d2h_copies"] == 0 and mgr.stats(n)["kept_bytes"] > 0 for n in names)
