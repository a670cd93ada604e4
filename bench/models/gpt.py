# gpt.py — a GPT-style decoder (pre-norm blocks, causal self-attention, GELU MLP, tied-free LM head) for traces:
# default d_model 256, 4 layers, 8 heads, sequence 2048, batch 1.  Threading: single-threaded.
"""GPT-style decoder training steps on CPU (bench/record-traces.sh records one)."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import common
from common import hoff


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, s, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        mask = torch.ones(s, s, dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, s, d)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, d, layers, heads, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        s = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(s))
        for i, blk in enumerate(self.blocks):
            x = hoff.mark(x, "L%d" % i)  # op boundaries: L<i>.fwd, and L<i>.bwd in backward
            x = blk(x)
        return self.head(self.ln(x))


def main(defaults=None):
    p = common.parser(__doc__)
    d = dict(vocab=8192, d_model=256, layers=4, heads=8, seq=2048, batch=1)
    d.update(defaults or {})
    p.add_argument("--vocab", type=int, default=d["vocab"])
    p.add_argument("--d-model", type=int, default=d["d_model"])
    p.add_argument("--layers", type=int, default=d["layers"])
    p.add_argument("--heads", type=int, default=d["heads"])
    p.add_argument("--seq", type=int, default=d["seq"])
    p.add_argument("--batch", type=int, default=d["batch"])
    args = p.parse_args()
    torch.manual_seed(args.seed)
    model = GPT(args.vocab, args.d_model, args.layers, args.heads, args.seq)
    print("decoder: d_model %d, %d layers, %d heads, sequence %d, batch %d, vocab %d"
          % (args.d_model, args.layers, args.heads, args.seq, args.batch, args.vocab))

    def batch():
        idx = torch.randint(0, args.vocab, (args.batch, args.seq + 1))
        return (idx[:, :-1],), idx[:, 1:]

    @hoff.skip_offload(name="loss")  # a region: its blocks are never offloaded
    def loss_fn(logits, target):
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))

    common.train(model, batch, loss_fn, args)


if __name__ == "__main__":
    main()
