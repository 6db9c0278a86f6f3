"""cpu: mytorch's OpenMP kernels vs ATen CPU (oneDNN for convolutions), kernel by kernel (the
same inputs, one run): sgemm, memory-bound kernels, conv2d forward and backward on ResNet-18
layer shapes, max_pool2d at CNN shapes.

On the mytorch device the mytorch ops take device tensors (the same kernels, through the
device's allocator); ATen runs on the CPU. Every case is checked against ATen before it is
timed. Conv FLOP convention: forward = 2 * N * O * OH * OW * (C / groups) * kH * kW;
backward (input + weight grads) = 2 x forward.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common import Table, check_close, device_skip_reason
from ..timing import time_ms


def skip_reason(device: str) -> str | None:
    if device == "cuda":
        return "the cpu suite times the OpenMP CPU kernels (use --device cpu or mytorch)"
    return device_skip_reason(device)


_TIMING = {"smoke": dict(warmup=0, reps=1, min_time_s=0.0), "quick": dict(reps=5, min_time_s=0.05),
           "full": dict(reps=15, min_time_s=0.3)}
# the conv2d and max_pool2d tables
_VISION_TIMING = {"smoke": dict(warmup=0, reps=1, min_time_s=0.0), "quick": dict(reps=3, min_time_s=0.05),
                  "full": dict(reps=5, min_time_s=0.5)}


def _where(device: str) -> str:
    return "" if device == "cpu" else f", mytorch on the {device} device"


def _memory_table(device: str, mode: str) -> Table:
    mt = torch.ops.mytorch
    n = {"smoke": 1 << 12, "quick": 1 << 22, "full": 1 << 24}[mode]
    rows, cols = {"smoke": (64, 128), "quick": (4096, 1024), "full": (4096, 1024)}[mode]
    x, y, xr = torch.randn(n), torch.randn(n), torch.randn(rows, cols)
    w, b = torch.randn(cols), torch.randn(cols)
    # (name, mytorch fn, ATen fn, inputs, bytes)
    cases = [
        ("add", mt.add, torch.add, (x, y), 12 * n),
        ("mul", mt.mul, torch.mul, (x, y), 12 * n),
        ("exp", mt.exp, torch.exp, (x,), 8 * n),
        ("sigmoid", mt.sigmoid, torch.sigmoid, (x,), 8 * n),
        ("gelu", mt.gelu, F.gelu, (x,), 8 * n),
        ("sum (all)", mt.sum, torch.sum, (x,), 4 * n),
        (f"softmax {rows}x{cols}", lambda a: mt.softmax(a, -1), lambda a: torch.softmax(a, -1), (xr,),
         8 * rows * cols),
        (f"layer_norm {rows}x{cols}", lambda a, w, b: mt.layer_norm(a, [cols], w, b, 1e-5)[0],
         lambda a, w, b: F.layer_norm(a, [cols], w, b, 1e-5), (xr, w, b), 8 * rows * cols),
    ]
    t = Table(f"memory-bound kernels, fp32, {n} elements{_where(device)}", "GB/s",
              "min bytes (inputs read once, output written once) / median time", ["mytorch", "aten"])
    for name, ours, ref, inputs, nbytes in cases:
        dev_inputs = tuple(a.to(device) for a in inputs)
        check_close(f"cpu suite {name}", ours(*dev_inputs), ref(*inputs), 1e-5)
        t.add(name, {"mytorch": nbytes / time_ms(ours, device, inputs=dev_inputs, **_TIMING[mode]) / 1e6,
                     "aten": nbytes / time_ms(ref, "cpu", inputs=inputs, **_TIMING[mode]) / 1e6})
    return t


def _gemm_table(device: str, mode: str) -> Table:
    t = Table(f"sgemm (mm), fp32{_where(device)}", "GFLOP/s", "2*M*N*K / median time", ["mytorch", "aten"])
    timing = dict(_TIMING[mode], reps=3) if mode == "quick" else _TIMING[mode]
    for n in {"smoke": [64], "quick": [512, 1024], "full": [512, 1024, 2048]}[mode]:
        a, b = torch.randn(n, n), torch.randn(n, n)
        ad, bd = a.to(device), b.to(device)
        check_close(f"cpu suite mm {n}", torch.ops.mytorch.mm(ad, bd), a @ b, 1e-5)
        fl = 2 * n ** 3
        ms_ours = time_ms(torch.ops.mytorch.mm, device, inputs=(ad, bd), **timing)
        ms_aten = time_ms(torch.mm, "cpu", inputs=(a, b), **timing)
        t.add(f"{n}x{n}x{n}", {"mytorch": fl / ms_ours / 1e6, "aten": fl / ms_aten / 1e6})
    return t


# ResNet-18 convolutions at a 224x224 input: (name, C, H, O, kernel, stride, padding)
RESNET18_CONVS = [
    ("conv1 7x7/2", 3, 224, 64, 7, 2, 3),
    ("layer1 3x3", 64, 56, 64, 3, 1, 1),
    ("layer2 3x3/2", 64, 56, 128, 3, 2, 1),
    ("layer2 1x1/2", 64, 56, 128, 1, 2, 0),
    ("layer2 3x3", 128, 28, 128, 3, 1, 1),
    ("layer3 3x3/2", 128, 28, 256, 3, 2, 1),
    ("layer3 3x3", 256, 14, 256, 3, 1, 1),
    ("layer4 3x3/2", 256, 14, 512, 3, 2, 1),
    ("layer4 3x3", 512, 7, 512, 3, 1, 1),
]


def conv_tables(batch: int, mode: str, device: str = "cpu") -> tuple[Table, Table]:
    """Forward and backward tables; mytorch's kernels take `device` tensors, ATen CPU ones.
    mode: smoke (one tiny layer), quick (three layers) or full."""
    fwd = Table(f"conv2d forward, ResNet-18 layers, N={batch}{_where(device)}", "GFLOP/s",
                "2*N*O*OH*OW*C*kH*kW / t", ["mytorch", "aten"])
    bwd = Table(f"conv2d backward (grad input + weight), N={batch}{_where(device)}", "GFLOP/s",
                "2 x forward FLOP / t", ["mytorch", "aten"])
    convs = {"smoke": [("tiny 3x3", 8, 16, 8, 3, 1, 1)], "quick": RESNET18_CONVS[1:4],
             "full": RESNET18_CONVS}[mode]
    timing = _VISION_TIMING[mode]
    for name, c, h, o, k, s, p in convs:
        x = torch.randn(batch, c, h, h)
        w = torch.randn(o, c, k, k) * (1.0 / (c * k * k)) ** 0.5
        y = F.conv2d(x, w, None, s, p)
        gy = torch.randn_like(y)
        xd, wd, gyd = x.to(device), w.to(device), gy.to(device)
        flop = 2.0 * y.numel() * c * k * k
        st, pd = [s, s], [p, p]

        def ours_f(x, w):
            return torch.ops.mytorch.conv2d(x, w, None, st, pd, [1, 1], 1)

        def aten_f(x, w):
            return F.conv2d(x, w, None, s, p)

        def ours_b(gy, x, w):
            return torch.ops.mytorch.conv2d_backward(gy, x, w, st, pd, [1, 1], 1, [True, True, False])

        def aten_b(gy, x, w):
            return torch.ops.aten.convolution_backward(gy, x, w, None, st, pd, [1, 1], False, [0, 0], 1,
                                                       [True, True, False])[:2]

        check_close(name + " forward", ours_f(xd, wd), aten_f(x, w), 1e-4)
        check_close(name + " backward", ours_b(gyd, xd, wd)[:2], aten_b(gy, x, w), 1e-4)
        label = f"{name} {c}x{h}x{h}->{o}"
        fwd.add(label, {"mytorch": flop / time_ms(ours_f, device, inputs=(xd, wd), **timing) / 1e6,
                        "aten": flop / time_ms(aten_f, inputs=(x, w), **timing) / 1e6})
        bwd.add(label, {"mytorch": 2 * flop / time_ms(ours_b, device, inputs=(gyd, xd, wd), **timing) / 1e6,
                        "aten": 2 * flop / time_ms(aten_b, inputs=(gy, x, w), **timing) / 1e6})
    return fwd, bwd


# Max pooling at CNN shapes: (label, C, H, kernel, stride, padding)
POOLS = [
    ("2x2/2", 64, 112, 2, 2, 0),
    ("ResNet stem 3x3/2", 64, 112, 3, 2, 1),
    ("2x2/2", 128, 56, 2, 2, 0),
]


def pool_table(batch: int, mode: str, device: str = "cpu") -> Table:
    """max_pool2d forward (values and indices); GB/s counts x read once, y and the int64
    indices written once."""
    t = Table(f"max_pool2d forward, N={batch}{_where(device)}", "GB/s",
              "bytes of x, y and the indices / t", ["mytorch", "aten"])
    pools = {"smoke": [("tiny 2x2/2", 8, 16, 2, 2, 0)], "quick": POOLS[:2], "full": POOLS}[mode]
    timing = _VISION_TIMING[mode]
    for name, c, h, k, s, p in pools:
        x = torch.randn(batch, c, h, h)
        xd = x.to(device)

        def ours(x):
            return torch.ops.mytorch.max_pool2d(x, [k, k], [s, s], [p, p], [1, 1], False)

        def aten(x):
            return F.max_pool2d_with_indices(x, k, s, p)

        y, idx = ours(xd)
        ry, ridx = aten(x)
        if not (torch.equal(y.cpu(), ry) and torch.equal(idx.cpu(), ridx)):
            raise RuntimeError(f"max_pool2d {name}: mytorch differs from ATen")
        nbytes = x.numel() * 4 + ry.numel() * (4 + 8)
        t.add(f"{name} {c}x{h}x{h}", {"mytorch": nbytes / time_ms(ours, device, inputs=(xd,), **timing) / 1e6,
                                     "aten": nbytes / time_ms(aten, inputs=(x,), **timing) / 1e6})
    return t


def run(device: str, mode: str, progress) -> list[Table]:
    bar = progress(4, f"cpu kernels ({device})")
    batch = {"smoke": 1, "quick": 2, "full": 8}[mode]
    tables = [_gemm_table(device, mode)]
    bar.step("gemm")
    tables.append(_memory_table(device, mode))
    bar.step("memory-bound")
    tables += list(conv_tables(batch, mode, device))
    bar.step("conv2d")
    tables.append(pool_table(batch, mode, device))
    bar.step("max_pool2d")
    bar.close()
    return tables
