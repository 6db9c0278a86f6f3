"""standalone: a training step (AdamW) of the same MLP, CNN and small GPT in the standalone
mytorch framework vs torch eager, both on the selected device (CPU, CUDA, or the mytorch
device, where torch's ATen ops also run on mytorch's kernels: the comparison then isolates
the framework). Both sides start from the same weights and data, and their first losses must
agree before anything is timed; the two sides' steps alternate, and each figure is the median.

The module also runs on its own, with a cProfile summary of the mytorch steps:

    python -m benchmarks.suites.standalone [--device cpu] [--steps 30] [--warmup 5] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics

import numpy as np
import torch
import torch.nn as tnn
import torch.nn.functional as TF

from ..common import Table, device_skip_reason, has_cuda_kernel
from ..timing import sample_times


def skip_reason(device: str) -> str | None:
    reason = device_skip_reason(device)
    if reason:
        return reason
    if device == "cuda" and not has_cuda_kernel("mm"):
        return "mytorch_ext is built without its CUDA kernels, which standalone mytorch needs on CUDA"
    return None


# ---- the same three models on both sides ----
def mlp_pair():
    import mytorch.nn as nn

    m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                      nn.Linear(512, 10))
    t = tnn.Sequential(tnn.Linear(784, 512), tnn.ReLU(), tnn.Linear(512, 512), tnn.ReLU(),
                       tnn.Linear(512, 10))
    g = np.random.default_rng(0)
    x = g.standard_normal((128, 784)).astype(np.float32)
    y = g.integers(0, 10, 128)
    return m, t, x, y


def cnn_pair():
    import mytorch.nn as nn

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
    import mytorch
    import mytorch.nn as nn

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


PAIRS = (("MLP 784-512-512-10, b128", mlp_pair), ("CNN 2 conv+BN 32x32, b32", cnn_pair),
         ("GPT 2 layers d128 ctx64, b16", gpt_pair))


# ---- one step on each side ----
def _step(cross_entropy, model, opt, x, y):
    logits = model(x)
    loss = cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def mytorch_step(model, opt, x, y):
    import mytorch.functional as F

    return _step(F.cross_entropy, model, opt, x, y)


def torch_step(model, opt, x, y):
    return _step(TF.cross_entropy, model, opt, x, y)


def run(device: str, mode: str, progress) -> list[Table]:
    steps, warmup = {"smoke": (1, 0), "quick": (5, 2), "full": (30, 5)}[mode]
    return [_table(device, steps, warmup, progress)]


def _table(device: str, steps: int, warmup: int, progress, profiles: list | None = None) -> Table:
    """The table; with `profiles`, also appends (name, cProfile text) of each model's mytorch
    steps to it."""
    import mytorch

    t = Table(f"training step (AdamW) on {device}, standalone mytorch vs torch eager", "ms",
              "median step time", ["mytorch", "torch"], higher_is_better=False)
    bar = progress(len(PAIRS), f"standalone ({device})")
    for name, make in PAIRS:
        mytorch.manual_seed(0)
        m, tm, x, y = make()
        tm.load_state_dict({k: v.data.clone() for k, v in m.state_dict().items()})
        m.to(device)
        tm.to(device)
        mx, my = mytorch.tensor(x, device=device), mytorch.tensor(y, device=device)
        tx, ty = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)
        mopt = mytorch.optim.AdamW(m.parameters(), lr=1e-3)
        topt = torch.optim.AdamW(tm.parameters(), lr=1e-3, foreach=False)
        lm, lt = mytorch_step(m, mopt, mx, my).item(), torch_step(tm, topt, tx, ty).item()
        if abs(lm - lt) > 1e-4 * max(1.0, abs(lt)):
            raise RuntimeError(f"standalone {name}: first losses differ ({lm} vs {lt})")
        times = sample_times({"torch": lambda: torch_step(tm, topt, tx, ty),
                              "mytorch": lambda: mytorch_step(m, mopt, mx, my)},
                             device, samples=steps, warmup=warmup, batch=1)
        t.add(name, {k: statistics.median(v) * 1e3 for k, v in times.items()})
        if profiles is not None:
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(steps):
                mytorch_step(m, mopt, mx, my)
            pr.disable()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
            profiles.append((name, s.getvalue()))
        bar.step(name)
    bar.close()
    return t


def main(argv=None):
    from ..cli import Progress

    ap = argparse.ArgumentParser(prog="python -m benchmarks.suites.standalone",
                                 description="a training step: standalone mytorch vs torch eager")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "mytorch"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="print a cProfile summary per model")
    args = ap.parse_args(argv)
    reason = skip_reason(args.device)
    if reason:
        raise SystemExit(f"{ap.prog.split()[-1]}: {reason}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; median of {args.steps} "
          "training steps (AdamW), forward + backward + update")
    profiles = [] if args.profile else None
    print(_table(args.device, args.steps, args.warmup, Progress, profiles).format())
    for name, text in profiles or ():
        print(f"\n== cProfile, mytorch, {name} ({args.steps} steps), by own time ==")
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        print("\n".join(lines[start - 2:start + 14]))


if __name__ == "__main__":
    main()
