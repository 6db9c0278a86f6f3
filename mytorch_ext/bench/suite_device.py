"""device: the same model's training step on the mytorch device vs on the CPU (ATen).

Runs for --device mytorch and --device cpu alike: the comparison is always these two.
"""
from __future__ import annotations

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

import mytorch_ext

from .common import Table, device_skip_reason, fallback_note, time_ms


def skip_reason(device: str) -> str | None:
    if device == "cuda":
        return "the device suite compares the mytorch device with the CPU (use --device mytorch)"
    return device_skip_reason("mytorch")


class _GPT(nn.Module):
    def __init__(self, vocab=256, dim=128, heads=4, layers=2, ctx=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(ctx, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True,
                                           norm_first=True, activation="gelu")
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)
        self.ctx = ctx

    def forward(self, idx):
        x = self.emb(idx) + self.pos[: idx.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(idx.shape[1], device=idx.device)
        return self.head(self.blocks(x, mask=mask, is_causal=True))


def _models(mode: str):
    if mode == "smoke":
        mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 10))
        return [("MLP 16-32-10, b8", mlp, lambda: torch.randn(8, 16), lambda: torch.randint(0, 10, (8,))),
                ("GPT 1 layer d32 ctx16, b2", _GPT(64, 32, 2, 1, 16), lambda: torch.randint(0, 64, (2, 16)),
                 lambda: torch.randint(0, 64, (2, 16)))]
    mlp = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10))
    return [("MLP 256-512-512-10, b256", mlp, lambda: torch.randn(256, 256), lambda: torch.randint(0, 10, (256,))),
            ("GPT 2 layers d128 ctx64, b8", _GPT(), lambda: torch.randint(0, 256, (8, 64)),
             lambda: torch.randint(0, 256, (8, 64)))]


def _step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    out = model(x)
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    loss.backward()
    opt.step()
    return loss


def run(device: str, mode: str, progress) -> list[Table]:
    t = Table("training step (AdamW): mytorch device vs CPU", "ms", "median step time",
              ["mytorch_device", "cpu"], higher_is_better=False)
    models = _models(mode)
    bar = progress(len(models), "device (mytorch vs cpu)")
    for name, model, make_x, make_y in models:
        torch.manual_seed(0)
        x, y = make_x(), make_y()
        cpu_m = model
        dev_m = copy.deepcopy(model).to("mytorch")
        cpu_opt = torch.optim.AdamW(cpu_m.parameters(), lr=1e-3)
        dev_opt = torch.optim.AdamW(dev_m.parameters(), lr=1e-3)
        xd, yd = x.to("mytorch"), y.to("mytorch")
        before = dict(mytorch_ext.fallback_counts())
        l_cpu, l_dev = _step(cpu_m, cpu_opt, x, y).item(), _step(dev_m, dev_opt, xd, yd).item()
        if abs(l_cpu - l_dev) > 1e-3 * max(1.0, abs(l_cpu)):
            raise RuntimeError(f"device {name}: first losses differ ({l_dev} vs {l_cpu})")
        timing = {"smoke": dict(warmup=0, reps=1, min_time_s=0.0), "quick": dict(reps=3),
                  "full": dict(reps=10)}[mode]
        vals = {"cpu": time_ms(lambda: _step(cpu_m, cpu_opt, x, y), "cpu", **timing),
                "mytorch_device": time_ms(lambda: _step(dev_m, dev_opt, xd, yd), "mytorch", **timing)}
        t.add(name + fallback_note(before), vals)
        bar.step(name)
    bar.close()
    return [t]
