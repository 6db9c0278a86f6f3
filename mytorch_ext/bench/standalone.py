"""One training step of the same MLP, CNN and small GPT: standalone mytorch vs torch eager.

Both sides start from the same weights and data; the script checks that their losses agree
before timing. Each figure is the median over many steps (after warm-up), in one run.
Then a cProfile summary of the mytorch steps shows where the time goes.

    python -m mytorch_ext.bench.standalone [--steps 30] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as TF

import mytorch
import mytorch.functional as F
import mytorch.nn as nn


# ---- the same three models on both sides ----
def mlp_pair():
    m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                      nn.Linear(512, 10))
    t = tnn.Sequential(tnn.Linear(784, 512), tnn.ReLU(), tnn.Linear(512, 512), tnn.ReLU(),
                       tnn.Linear(512, 10))
    g = np.random.default_rng(0)
    x = g.standard_normal((128, 784)).astype(np.float32)
    y = g.integers(0, 10, 128)
    return m, t, x, y


def cnn_pair():
    def layers(lib):
        return [lib.Conv2d(3, 32, 3, padding=1), lib.BatchNorm2d(32), lib.ReLU(), lib.MaxPool2d(2),
                lib.Conv2d(32, 64, 3, padding=1), lib.BatchNorm2d(64), lib.ReLU(), lib.MaxPool2d(2),
                lib.Flatten(), lib.Linear(64 * 8 * 8, 10)]
    g = np.random.default_rng(0)
    x = g.standard_normal((32, 3, 32, 32)).astype(np.float32)
    y = g.integers(0, 10, 32)
    return nn.Sequential(*layers(nn)), tnn.Sequential(*layers(tnn)), x, y


class TorchAttention(tnn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = tnn.Linear(dim, 3 * dim), tnn.Linear(dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, c // self.heads)
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        a = TF.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(a.transpose(1, 2).reshape(b, t, c))


class TorchBlock(tnn.Module):
    """torch twin of mytorch.nn.TransformerBlock (the same parameter names)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = tnn.LayerNorm(dim)
        self.attn = TorchAttention(dim, heads)
        self.ln2 = tnn.LayerNorm(dim)
        self.mlp = tnn.Sequential(tnn.Linear(dim, 4 * dim), tnn.GELU(), tnn.Linear(4 * dim, dim),
                                  tnn.Dropout(0.0))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def gpt_pair(vocab=65, context=64, dim=128, heads=4, layers=2):
    class MyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
            self.blocks = nn.ModuleList([nn.TransformerBlock(dim, heads) for _ in range(layers)])
            self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)
            self.register_buffer("arange", mytorch.arange(context))

        def forward(self, idx):
            x = self.tok(idx) + self.pos(self.arange)
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln(x))

    class TorchGPT(tnn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = tnn.Embedding(vocab, dim), tnn.Embedding(context, dim)
            self.blocks = tnn.ModuleList([TorchBlock(dim, heads) for _ in range(layers)])
            self.ln, self.head = tnn.LayerNorm(dim), tnn.Linear(dim, vocab)
            self.register_buffer("arange", torch.arange(context))  # the same state_dict keys

        def forward(self, idx):
            x = self.tok(idx) + self.pos(self.arange)
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln(x))

    g = np.random.default_rng(0)
    x = g.integers(0, vocab, (16, context))
    y = g.integers(0, vocab, (16, context))
    return MyGPT(), TorchGPT(), x, y


# ---- one step on each side ----
def mytorch_step(model, opt, x, y):
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def torch_step(model, opt, x, y):
    logits = model(x)
    loss = TF.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def timed(fn, steps):
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="print a cProfile summary per model")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"median of {args.steps} training steps (AdamW), forward + backward + update\n")
    rows, profiles = [], []
    for name, make, target in (("MLP 784-512-512-10, batch 128", mlp_pair, 1.5),
                               ("CNN 2 conv+BN, 32x32, batch 32", cnn_pair, 1.2),
                               ("GPT 2 layers, dim 128, ctx 64, batch 16", gpt_pair, 1.2)):
        mytorch.manual_seed(0)
        m, t, x, y = make()
        t.load_state_dict({k: v.data.clone() for k, v in m.state_dict().items()})
        mx, my = mytorch.tensor(x), mytorch.tensor(y)
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        mopt = mytorch.optim.AdamW(m.parameters(), lr=1e-3)
        topt = torch.optim.AdamW(t.parameters(), lr=1e-3, foreach=False)
        # correctness first: the first losses and updated weights agree
        lm, lt = mytorch_step(m, mopt, mx, my).item(), torch_step(t, topt, tx, ty).item()
        assert abs(lm - lt) < 1e-4 * max(1, abs(lt)), (name, lm, lt)
        tgrads, tstate = {k: p.grad for k, p in t.named_parameters()}, t.state_dict()
        for k, v in m.state_dict().items():
            tv, g = tstate[k], tgrads.get(k)
            if g is not None and g.abs().max() < 1e-6:
                continue  # a zero gradient (a conv bias before BatchNorm): Adam's step is sign(noise)
            torch.testing.assert_close(v.data, tv, rtol=1e-3, atol=1e-4, msg=f"{name}: {k}")
        for _ in range(args.warmup):
            mytorch_step(m, mopt, mx, my)
            torch_step(t, topt, tx, ty)
        t_torch = timed(lambda: torch_step(t, topt, tx, ty), args.steps)
        t_my = timed(lambda: mytorch_step(m, mopt, mx, my), args.steps)
        rows.append((name, t_my * 1e3, t_torch * 1e3, t_torch / t_my, 1 / target))
        if args.profile:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(args.steps):
                mytorch_step(m, mopt, mx, my)
            pr.disable()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
            profiles.append((name, s.getvalue()))
    w = max(len(r[0]) for r in rows)
    print("x torch = torch ms / mytorch ms, mytorch's speed-up (>1: mytorch faster)")
    print(f"{'model':<{w}} | mytorch ms | torch ms | x torch | target")
    print(f"{'-' * w}-|------------|----------|---------|-------")
    for name, a, b, r, tgt in rows:
        ok = "ok" if r >= tgt else "MISS"
        print(f"{name:<{w}} | {a:10.2f} | {b:8.2f} | {r:6.2f}x | >= {tgt:.2f} {ok}")
    for name, text in profiles:
        print(f"\n== cProfile, mytorch, {name} ({args.steps} steps), by own time ==")
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        print("\n".join(lines[start - 2:start + 14]))


if __name__ == "__main__":
    main()
