# sim_zoo.py — training scripts that know nothing of hoff, around models nobody on the project wrote, for
# tests/sim_torch2.sh: a Hugging Face transformers GPT-2 or Llama built from a small config and a torchvision
# ResNet-18, random init (HF_HUB_OFFLINE=1: nothing is downloaded), 4 steps of AdamW (SGD with momentum for the ResNet); writes digests of every step's
# loss and gradients and of the final parameters (as bench/models/common.py --digest does).  --compile runs the
# model through torch.compile (the default inductor backend, on CPU).  --recompute ADVICE applies hoff-plan advise's
# advice (hoff.recompute.apply_recompute, on a batch of its own) before the first step and prints what it wrapped.
# The launcher's optimizer marks make the steps.
# Threading: single-threaded; PyTorch's intra-op threads (OMP_NUM_THREADS) run inside the ops.
"""usage: sim_zoo.py gpt2|llama|resnet DIGEST [--steps N] [--compile] [--json] [--recompute ADVICE.json]"""

import argparse
import hashlib
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # random init from a config: never a download
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402


def sha(ts):
    h = hashlib.sha256()
    for t in ts:
        h.update(b"none" if t is None else t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=1024, n_positions=256, n_embd=128, n_layer=4, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg)
    gen = torch.Generator().manual_seed(1)

    def batch(g=gen):
        ids = torch.randint(0, cfg.vocab_size, (4, 256), generator=g)
        return {"input_ids": ids, "labels": ids}
    return model, batch, lambda out, _: out.loss


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=1024, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    model = LlamaForCausalLM(cfg)
    gen = torch.Generator().manual_seed(1)

    def batch(g=gen):
        ids = torch.randint(0, cfg.vocab_size, (4, 256), generator=g)
        return {"input_ids": ids, "labels": ids}
    return model, batch, lambda out, _: out.loss


def resnet():
    import torchvision
    model = torchvision.models.resnet18(weights=None, num_classes=10)
    gen = torch.Generator().manual_seed(1)

    def batch(g=gen):
        return {"x": torch.randn(8, 3, 128, 128, generator=g),
                "target": torch.randint(0, 10, (8,), generator=g)}
    return model, batch, lambda out, b: torch.nn.functional.cross_entropy(out, b["target"])


def optimizer(name, params):
    """AdamW for the transformers, SGD with momentum for the ResNet (its usual recipe; AdamW's two states per
    parameter would make the optimizer step, not the activations, the floor of a 50% budget)."""
    if name == "resnet":
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-3)


MODELS = {"gpt2": gpt2, "llama": llama, "resnet": resnet}


def main():
    ap = argparse.ArgumentParser(description="a PyPI model's training steps, digested")
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("digest", help="the digests' file; 'none': no digests (timing alone)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (inductor, CPU)")
    ap.add_argument("--json", action="store_true",
                    help="end with one JSON line of per-step times (bench/sim_overhead.py reads it)")
    ap.add_argument("--recompute", metavar="ADVICE",
                    help="hoff-plan advise --json's output: checkpoint the leaf modules running its ops")
    a = ap.parse_args()
    torch.manual_seed(0)
    model, batch, loss_fn = MODELS[a.model]()
    model.train()
    if a.recompute:
        import hoff.recompute
        example = batch(torch.Generator().manual_seed(2))  # a batch of its own: the training batches stay as they are
        args = (example["x"],) if "x" in example else ()
        kwargs = {} if "x" in example else example
        handle = hoff.recompute.apply_recompute(model, a.recompute, *args, **kwargs)
        print(handle.summary(), flush=True)
        print("recompute: " + json.dumps(handle.as_dict()), flush=True)
    run = torch.compile(model) if a.compile else model
    opt = optimizer(a.model, model.parameters())
    digest = {"loss": [], "grads": []}
    times = []
    for i in range(a.steps):
        b = batch()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = run(b["x"]) if "x" in b else run(**b)
        loss = loss_fn(out, b)
        loss.backward()
        if a.digest != "none":
            digest["loss"].append(sha([loss]))
            digest["grads"].append(sha([p.grad for p in model.parameters()]))
        opt.step()
        times.append(time.perf_counter() - t0)
        print("%s step %d: loss %.4f" % (a.model, i, loss.item()), flush=True)
    if a.digest != "none":
        digest["params"] = sha(list(model.parameters()))
        with open(a.digest, "w") as f:
            json.dump(digest, f, indent=1)
    if a.json:
        print(json.dumps({"step_s": times}), flush=True)


if __name__ == "__main__":
    main()
