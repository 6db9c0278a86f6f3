"""norms: mytorch's fused kernels (norms, softmax, bias-GELU, SwiGLU, RoPE) vs ATen eager vs
torch.compile, as GB/s and % of the copy bandwidth measured in the same run.

CUDA: bf16 forward, timed with do_bench (cuda_fused). CPU and the mytorch device: fp32
forward; ATen runs on the CPU; torch.compile only in full runs (compiling takes tens of
seconds per op on the CPU).
"""
from __future__ import annotations

import torch

from .common import Table, check_close, device_skip_reason, has_cuda_kernel, time_ms


def skip_reason(device: str) -> str | None:
    reason = device_skip_reason(device)
    if reason or device != "cuda":
        return reason
    from .._info import triton_available

    if not triton_available():
        return "Triton is not installed (pip install triton)"  # do_bench times the CUDA runs
    return None if has_cuda_kernel("rms_norm") else "mytorch_ext is built without its CUDA kernels"


def run(device: str, mode: str, progress) -> list[Table]:
    return _cuda(mode, progress) if device == "cuda" else _cpu(device, mode, progress)


def _cuda(mode: str, progress) -> list[Table]:
    from . import cuda_fused

    copy_bw = cuda_fused.copy_bandwidth()
    rows: list[dict] = []
    shapes = {"smoke": [(1024, 1024)], "quick": [(16384, 4096)], "full": [(16384, 4096), (32768, 8192)]}[mode]
    cases = cuda_fused.cases()
    bar = progress(len(cases) * len(shapes), "norms (cuda)")
    for n, d in shapes:
        for c in cases:
            cuda_fused.run_case(*c, n, d, copy_bw, True, rows)
            r = rows[-1]
            if not (r["err"] <= 2e-2 and r["grad_err"] <= 2e-2):
                raise RuntimeError(f"norms: {c[0]} {n}x{d} differs from ATen (relative error "
                                   f"{r['err']:.3g}, gradients {r['grad_err']:.3g})")
            bar.step(f"{c[0]} {n}x{d}")
    bar.close()
    t = Table(f"fused kernels, bf16, forward, {torch.cuda.get_device_name()}", "GB/s",
              "min bytes (inputs read once, outputs written once) / time", ["mytorch", "aten_eager", "torch_compile"])
    for r in rows:
        t.add(f"{r['op']} {r['shape']} ({r['fwd_pct_copy']:.0f}% of copy, {copy_bw:.0f} GB/s)",
              {"mytorch": r["fwd_gbs"], "aten_eager": r["eager_fwd_gbs"], "torch_compile": r["compile_fwd_gbs"]})
    return [t]


def copy_bandwidth(device: str, n: int) -> float:
    """GB/s of dst.copy_(src), n floats each (read once, written once)."""
    src = torch.randn(n, device=device)
    dst = torch.empty_like(src)
    return 8 * n / time_ms(lambda: dst.copy_(src), device, reps=5, min_time_s=0.1) / 1e6


def _cpu(device: str, mode: str, progress) -> list[Table]:
    from . import cuda_fused

    n, d = {"smoke": (64, 256), "quick": (4096, 1024), "full": (16384, 4096)}[mode]
    use_compile = mode == "full"
    copy_bw = copy_bandwidth(device, max(n * d, 1 << 24) if mode != "smoke" else n * d)
    cases = cuda_fused.cases("cpu", torch.float32)
    impls = ["mytorch", "aten_eager"] + (["torch_compile"] if use_compile else [])
    where = "" if device == "cpu" else f", mytorch on the {device} device, ATen on the CPU"
    t = Table(f"fused kernels, fp32, forward, {n}x{d}{where}", "GB/s",
              "min bytes (inputs read once, outputs written once) / time", impls)
    timing = {"smoke": dict(warmup=0, reps=1, min_time_s=0.0), "quick": dict(reps=5, min_time_s=0.05),
              "full": dict(reps=10, min_time_s=0.3)}[mode]
    bar = progress(len(cases), f"norms ({device})")
    for name, make, mine, ref, fbytes, _bbytes, _grads in cases:
        torch.manual_seed(0)
        inputs = make(n, d)
        dev_inputs = tuple(x.to(device) for x in inputs)
        with torch.no_grad():
            check_close(f"norms {name}", mine(*dev_inputs), ref(*(x.double() for x in inputs)), 1e-5)
            nbytes = fbytes(n, d)
            vals = {"mytorch": nbytes / time_ms(mine, device, inputs=dev_inputs, **timing) / 1e6,
                    "aten_eager": nbytes / time_ms(ref, "cpu", inputs=inputs, **timing) / 1e6}
            if use_compile:
                comp = torch.compile(ref, dynamic=False)
                comp(*inputs)
                vals["torch_compile"] = nbytes / time_ms(comp, "cpu", inputs=inputs, **timing) / 1e6
        t.add(f"{name} ({100 * vals['mytorch'] / copy_bw:.0f}% of copy, {copy_bw:.0f} GB/s)", vals)
        bar.step(name)
    bar.close()
    return [t]
