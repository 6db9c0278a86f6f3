"""cpu: mytorch's OpenMP kernels vs ATen CPU, kernel by kernel (the same inputs, one run)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .common import Table, time_ms


def skip_reason(device: str) -> str | None:
    return None  # the OpenMP kernels run wherever there is a CPU


def _check(name, ours, ref, tol):
    err = ((ours.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()
    if not err <= tol:
        raise RuntimeError(f"cpu suite: {name} differs from ATen (relative error {err:.3g})")


def _memory_table(quick: bool) -> Table:
    mt = torch.ops.mytorch
    n = 1 << (22 if quick else 24)
    x, y = torch.randn(n), torch.randn(n)
    rows, cols = 4096, 1024
    xr = torch.randn(rows, cols)
    w, b = torch.randn(cols), torch.randn(cols)
    gb = lambda nbytes, ms: nbytes / ms / 1e6  # noqa: E731
    cases = [
        ("add", lambda: mt.add(x, y), lambda: x + y, 12 * n),
        ("mul", lambda: mt.mul(x, y), lambda: x * y, 12 * n),
        ("exp", lambda: mt.exp(x), lambda: torch.exp(x), 8 * n),
        ("sigmoid", lambda: mt.sigmoid(x), lambda: torch.sigmoid(x), 8 * n),
        ("gelu", lambda: mt.gelu(x), lambda: F.gelu(x), 8 * n),
        ("sum (all)", lambda: mt.sum(x), lambda: x.sum(), 4 * n),
        ("softmax 4096x1024", lambda: mt.softmax(xr, -1), lambda: torch.softmax(xr, -1), 8 * rows * cols),
        ("layer_norm 4096x1024", lambda: mt.layer_norm(xr, [cols], w, b, 1e-5)[0],
         lambda: F.layer_norm(xr, [cols], w, b, 1e-5), 8 * rows * cols),
    ]
    t = Table(f"memory-bound kernels, fp32, {n} elements (rows: 4096x1024)", "GB/s",
              "min bytes (inputs read once, output written once) / median time", ["mytorch", "aten"])
    reps = 5 if quick else 15
    for name, ours, ref, nbytes in cases:
        _check(name, ours(), ref(), 1e-5)
        t.add(name, {"mytorch": gb(nbytes, time_ms(ours, reps=reps)), "aten": gb(nbytes, time_ms(ref, reps=reps))})
    return t


def _gemm_table(quick: bool) -> Table:
    t = Table("sgemm (mm), fp32", "GFLOP/s", "2*M*N*K / median time", ["mytorch", "aten"])
    for n in ([512, 1024] if quick else [512, 1024, 2048]):
        a, b = torch.randn(n, n), torch.randn(n, n)
        _check(f"mm {n}", torch.ops.mytorch.mm(a, b), a @ b, 1e-5)
        fl = 2 * n ** 3
        reps = 3 if quick else 10
        t.add(f"{n}x{n}x{n}", {"mytorch": fl / time_ms(lambda: torch.ops.mytorch.mm(a, b), reps=reps) / 1e6,
                               "aten": fl / time_ms(lambda: a @ b, reps=reps) / 1e6})
    return t


def run(device: str, quick: bool, progress) -> list[Table]:
    from . import cpu_vision

    bar = progress(3, "cpu kernels")
    tables = [_gemm_table(quick)]
    bar.step("gemm")
    tables.append(_memory_table(quick))
    bar.step("memory-bound")
    tables += list(cpu_vision.conv_tables(batch=2 if quick else 8, quick=quick))
    bar.step("conv2d")
    bar.close()
    return tables
