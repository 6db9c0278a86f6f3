"""Train a small character-level GPT on six Shakespeare plays with standalone mytorch.

Flash attention (mytorch::flash_attn) does the attention; the script prints the loss against
the unigram entropy of the text, a sample, and writes a loss curve.

    PYTHONPATH=.:python python examples/standalone_char_gpt.py
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _standalone_common import (DEFAULT_OUT, add_out_argument, optimizer_step,  # noqa: E402
                                plot_losses, progress)

import mytorch  # noqa: E402
import mytorch.functional as F  # noqa: E402
import mytorch.nn as nn  # noqa: E402

TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "shakespeare_six_plays.txt")


class GPT(nn.Module):
    def __init__(self, vocab: int, context: int, dim: int = 128, heads: int = 4, layers: int = 3):
        super().__init__()
        self.context = context
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList([nn.TransformerBlock(dim, heads, causal=True)
                                     for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        for emb in (self.tok, self.pos):  # small embeddings, as GPT-2
            emb.weight.data = (mytorch.randn(*emb.weight.shape) * 0.02).data

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(mytorch.arange(t))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def load_text():
    with open(TEXT, encoding="ascii") as f:
        text = f.read()
    chars = sorted(set(text))
    data = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    lookup = np.zeros(256, dtype=np.int64)
    lookup[[ord(c) for c in chars]] = np.arange(len(chars))
    return chars, lookup[data]


def unigram_entropy(tokens: np.ndarray, vocab: int) -> float:
    """Entropy of the character frequencies, in nats: the loss of the best context-free model."""
    p = np.bincount(tokens, minlength=vocab) / len(tokens)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def batch(tokens, n, context, gen):
    starts = gen.integers(0, len(tokens) - context - 1, n)
    rows = starts[:, None] + np.arange(context + 1)
    win = tokens[rows]
    return mytorch.tensor(win[:, :-1]), mytorch.tensor(win[:, 1:])


def sample(model, chars, prompt: str, n: int, gen, temperature: float = 0.8) -> str:
    model.eval()
    ids = [chars.index(c) for c in prompt]
    with mytorch.no_grad():
        for _ in range(n):
            window = mytorch.tensor(np.array([ids[-model.context:]]))
            logits = model(window)[0, -1] / temperature
            p = F.softmax(logits, -1).numpy().astype(np.float64)
            ids.append(int(gen.choice(len(p), p=p / p.sum())))
    model.train()
    return "".join(chars[i] for i in ids)


def train(steps: int = 600, batch_size: int = 32, context: int = 64, dim: int = 128,
          layers: int = 3, lr: float = 3e-3, seed: int = 0, sample_chars: int = 300,
          quiet: bool = False, plot: bool = True, out: str | None = None) -> dict:
    mytorch.manual_seed(seed)
    gen = np.random.default_rng(seed)
    chars, tokens = load_text()
    split = int(0.9 * len(tokens))
    train_tok, val_tok = tokens[:split], tokens[split:]
    model = GPT(len(chars), context, dim, max(1, dim // 32), layers)
    opt = mytorch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    sched = mytorch.optim.CosineWithWarmup(opt, warmup_steps=min(50, steps // 10),
                                           total_steps=steps, min_ratio=0.1)
    losses, t0 = [], time.perf_counter()
    bar = progress(steps, "char GPT", quiet)
    for _ in range(steps):
        x, y = batch(train_tok, batch_size, context, gen)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
        optimizer_step(loss, opt, sched, losses, bar, clip=1.0)
    bar.close()
    seconds = time.perf_counter() - t0
    model.eval()
    with mytorch.no_grad():
        val = []
        for _ in range(8):
            x, y = batch(val_tok, batch_size, context, gen)
            val.append(F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1)).item())
    model.train()
    h = unigram_entropy(train_tok, len(chars))
    text = sample(model, chars, "KING LEAR:\n", sample_chars, gen) if sample_chars else ""
    png = plot_losses(losses, os.path.join(out or DEFAULT_OUT, "standalone_char_gpt.png"),
                      f"char GPT: val loss {np.mean(val):.2f} nats",
                      {f"unigram entropy {h:.2f}": h}) if plot else None
    return {"train_loss": float(np.mean(losses[-20:])), "val_loss": float(np.mean(val)),
            "unigram_entropy": h, "seconds": seconds, "sample": text, "plot": png,
            "losses": losses}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dim", type=int, default=128)
    add_out_argument(ap, "the loss-curve PNG")
    args = ap.parse_args()
    r = train(args.steps, dim=args.dim, layers=args.layers, out=args.out)
    print(f"char GPT: {args.steps} steps in {r['seconds']:.1f} s; loss {r['train_loss']:.3f} "
          f"(train), {r['val_loss']:.3f} (validation) vs unigram entropy "
          f"{r['unigram_entropy']:.3f} nats; loss curve: {r['plot']}")
    print("sample:\n" + r["sample"])


if __name__ == "__main__":
    main()
