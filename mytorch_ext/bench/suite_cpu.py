"""cpu: mytorch's OpenMP kernels vs ATen CPU, kernel by kernel (the same inputs, one run).

On the mytorch device the mytorch ops take device tensors (the same kernels, through the
device's allocator); ATen runs on the CPU.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .common import Table, check_close, device_skip_reason, time_ms


def skip_reason(device: str) -> str | None:
    if device == "cuda":
        return "the cpu suite times the OpenMP CPU kernels (use --device cpu or mytorch)"
    return device_skip_reason(device)


_TIMING = {"smoke": dict(warmup=0, reps=1, min_time_s=0.0), "quick": dict(reps=5, min_time_s=0.05),
           "full": dict(reps=15, min_time_s=0.3)}


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
    where = "" if device == "cpu" else f", mytorch on the {device} device"
    t = Table(f"memory-bound kernels, fp32, {n} elements{where}", "GB/s",
              "min bytes (inputs read once, output written once) / median time", ["mytorch", "aten"])
    for name, ours, ref, inputs, nbytes in cases:
        dev_inputs = tuple(a.to(device) for a in inputs)
        check_close(f"cpu suite {name}", ours(*dev_inputs), ref(*inputs), 1e-5)
        t.add(name, {"mytorch": nbytes / time_ms(ours, device, inputs=dev_inputs, **_TIMING[mode]) / 1e6,
                     "aten": nbytes / time_ms(ref, "cpu", inputs=inputs, **_TIMING[mode]) / 1e6})
    return t


def _gemm_table(device: str, mode: str) -> Table:
    where = "" if device == "cpu" else f", mytorch on the {device} device"
    t = Table(f"sgemm (mm), fp32{where}", "GFLOP/s", "2*M*N*K / median time", ["mytorch", "aten"])
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


def run(device: str, mode: str, progress) -> list[Table]:
    from . import cpu_vision

    bar = progress(4, f"cpu kernels ({device})")
    tables = [_gemm_table(device, mode)]
    bar.step("gemm")
    tables.append(_memory_table(device, mode))
    bar.step("memory-bound")
    tables += list(cpu_vision.conv_tables(batch={"smoke": 1, "quick": 2, "full": 8}[mode], mode=mode,
                                          device=device))
    bar.step("conv2d")
    tables.append(cpu_vision.pool_table(batch={"smoke": 1, "quick": 2, "full": 8}[mode], mode=mode, device=device))
    bar.step("max_pool2d")
    bar.close()
    return tables
