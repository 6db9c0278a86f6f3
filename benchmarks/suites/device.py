"""device: the same model's training step on the mytorch device vs on the CPU (ATen), and
``torch.compile`` against eager on the device.

Runs for --device mytorch and --device cpu alike: the comparisons are always these.

The compiled table times the MLP, the CNN and the GPT of the device tests (tests/device/
test_compile.py builds its models from this module) at sizes where the kernels, not Python,
set the time. A compiled training step is PyTorch's recipe: ``torch.compile`` of the model
and its loss (one graph), ``backward()``, and ``torch.compile`` of ``optimizer.step``; an
eager step runs the same code uncompiled. Inference is ``model(x)`` under ``no_grad`` in eval
mode. Eager and compiled samples alternate, so that a change in the machine's load falls on
both; each cell is the median (min..max) over the samples, and the first losses of the two
must agree before anything is timed.
"""
from __future__ import annotations

import copy
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F

import mytorch_ext

from ..common import SpreadTable, Table, device_skip_reason, fallback_note
from ..timing import sample_times, time_ms


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


class Block(nn.Module):
    """A pre-norm transformer block: causal SDPA attention and a GELU MLP."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, -1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """The device tests' GPT: token and position embeddings, Blocks, a final norm and head."""

    def __init__(self, vocab=64, d=32, heads=4, layers=2, ctx=32):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        self.blocks = nn.Sequential(*[Block(d, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        return self.head(self.ln(self.blocks(x)))


def mlp(d_in=16, hidden=32, d_out=4):
    """The device tests' MLP: Linear, GELU, LayerNorm, Linear."""
    return nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.LayerNorm(hidden),
                         nn.Linear(hidden, d_out))


def cnn(c=8, hw=8, classes=10, blocks=1):
    """The device tests' CNN: (Conv2d 3x3, BatchNorm2d, ReLU, MaxPool2d 2) x blocks, then a
    Linear head; channels double each block."""
    layers, c_in = [], 3
    for i in range(blocks):
        c_out = c * 2 ** i
        layers += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(),
                   nn.MaxPool2d(2)]
        c_in = c_out
    side = hw // 2 ** blocks
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(c_in * side * side, classes))


def _compiled_cases(mode: str):
    """(label, model, input, target) for the compiled-vs-eager table."""
    g = torch.Generator().manual_seed(0)
    if mode == "smoke":
        return [("MLP 16-32-4, b8", mlp(), torch.randn(8, 16, generator=g),
                 torch.randint(0, 4, (8,), generator=g)),
                ("CNN 3x8x8 c8, b4", cnn(), torch.randn(4, 3, 8, 8, generator=g),
                 torch.randint(0, 10, (4,), generator=g)),
                ("GPT d32 2 layers ctx16, b2", GPT(), torch.randint(0, 64, (2, 16), generator=g),
                 torch.randint(0, 64, (2, 16), generator=g))]
    return [("MLP 256-512-10, b256", mlp(256, 512, 10), torch.randn(256, 256, generator=g),
             torch.randint(0, 10, (256,), generator=g)),
            ("CNN 3x32x32 c16-32, b32", cnn(16, 32, 10, 2), torch.randn(32, 3, 32, 32, generator=g),
             torch.randint(0, 10, (32,), generator=g)),
            ("GPT d128 2 layers ctx64, b8", GPT(256, 128, 4, 2, 64),
             torch.randint(0, 256, (8, 64), generator=g), torch.randint(0, 256, (8, 64), generator=g))]


def _loss(model):
    def loss(x, y):
        out = model(x)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
    return loss


def compiled_table(mode: str, progress) -> SpreadTable:
    """torch.compile vs eager on the mytorch device: training steps and inference."""
    table = SpreadTable("torch.compile on the mytorch device vs eager on the device, fp32", "ms",
                        "median (min..max) time per call; training: AdamW step, compiled = "
                        "model+loss and optimizer.step compiled", ["compiled", "eager"],
                        higher_is_better=False)
    table.spread = {}
    samples, warmup = {"smoke": (1, 1), "quick": (7, 3), "full": (15, 5)}[mode]
    cases = _compiled_cases(mode)
    bar = progress(2 * len(cases), "device (compiled vs eager)")
    dev = "mytorch"
    for label, model, x, y in cases:
        torch.manual_seed(0)
        x, y = x.to(dev), y.to(dev)
        eager = copy.deepcopy(model).to(dev)
        comp = copy.deepcopy(eager)
        opt_e = torch.optim.AdamW(eager.parameters(), lr=1e-3)
        opt_c = torch.optim.AdamW(comp.parameters(), lr=1e-3)
        loss_e, loss_c = _loss(eager), torch.compile(_loss(comp))
        step_c = torch.compile(opt_c.step)

        def train(loss_fn, opt, step):
            def one():
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(x, y)
                loss.backward()
                step()
                return loss
            return one

        train_e, train_c = train(loss_e, opt_e, opt_e.step), train(loss_c, opt_c, step_c)
        first_e, first_c = train_e().item(), train_c().item()
        if abs(first_e - first_c) > 1e-4 * max(1.0, abs(first_e)):
            raise RuntimeError(f"device compiled {label}: first losses differ "
                               f"(compiled {first_c}, eager {first_e})")
        times = _alternating_ms({"compiled": train_c, "eager": train_e}, samples, warmup)
        _add(table, f"{label}, train", times)
        bar.step(label + " train")

        inf_e = copy.deepcopy(eager).eval()
        inf_c = torch.compile(copy.deepcopy(eager).eval())

        def infer(m):
            def one():
                with torch.no_grad():
                    return m(x)
            return one

        out_e, out_c = infer(inf_e)(), infer(inf_c)()
        torch.testing.assert_close(out_c.cpu(), out_e.cpu(), rtol=1e-3, atol=1e-4)
        times = _alternating_ms({"compiled": infer(inf_c), "eager": infer(inf_e)}, samples, warmup)
        _add(table, f"{label}, inference", times)
        bar.step(label + " inference")
    bar.close()
    return table


def _alternating_ms(fns: dict, samples: int, warmup: int) -> dict:
    """{name: [ms per call]} on the mytorch device, the fns taking turns sample by sample."""
    times = sample_times(fns, "mytorch", samples=samples, warmup=warmup)
    return {name: [t * 1e3 for t in ts] for name, ts in times.items()}


def _add(table: SpreadTable, label: str, times: dict) -> None:
    table.add(label, {k: statistics.median(v) for k, v in times.items()})
    table.spread[label] = {k: (min(v), max(v)) for k, v in times.items()}


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
    return [t, compiled_table(mode, progress)]
