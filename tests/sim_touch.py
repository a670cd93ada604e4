# sim_touch.py — run by tests/sim.sh under `python -m hoff --sim`: a CPU tensor that is a hoff block is evicted or
# released behind PyTorch's back, then touched, raw (a page fault: the SIGSEGV handler pages it in) or through an
# aten op (an access mark).  Threading: the raw touch runs on a second thread (faults on any thread are paged in).
"""usage: sim_touch.py evict|discard-raw|discard-op"""

import ctypes
import sys
import threading

import torch
import hoff
from hoff import _lib

case = sys.argv[1]
lib = _lib.load()
ctx = lib.hoff_torch_context(0)
for name in ("hoff_evict", "hoff_discard"):
    getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
RES = {0: "device", 1: "evicting", 2: "host", 3: "prefetching", 4: "discarded"}

hoff.step()                                   # inside a step: 4 MiB is an offload candidate
x = torch.arange(1 << 20, dtype=torch.float32)
want = bytes(range(0))  # filled below, before any move
p = hoff.storage_ptr(x)
want = ctypes.string_at(p, 64)
print("residency at alloc:", RES.get(lib.hoff_residency(ctx, p)))

if case == "evict":
    assert lib.hoff_evict(ctx, p, None) == 0
    lib.hoff_sync(ctx)
    print("residency after evict:", RES.get(lib.hoff_residency(ctx, p)))
    got = []
    t = threading.Thread(target=lambda: got.append(ctypes.string_at(p + 4096, 64)))  # a raw read: a page fault
    t.start()
    t.join()
    print("paged in on a thread:", got[0] == ctypes.string_at(p + 4096, 64), "residency:",
          RES.get(lib.hoff_residency(ctx, p)))
    print("bytes intact:", ctypes.string_at(p, 64) == want and bool((x == torch.arange(1 << 20)).all()))
elif case in ("discard-raw", "discard-op"):
    assert lib.hoff_discard(ctx, p, None) == 0
    lib.hoff_sync(ctx)
    print("residency after discard:", RES.get(lib.hoff_residency(ctx, p)))
    if case == "discard-raw":
        print("read:", ctypes.string_at(p, 4) == want[:4])
    else:
        print("sum:", float(x.sum()))
else:
    sys.exit("usage: sim_touch.py evict|discard-raw|discard-op")
