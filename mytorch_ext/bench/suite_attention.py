"""attention: mytorch flash_attn vs SDPA's backends (FA2, cuDNN on CUDA; ATen's flash kernel on CPU)."""
from __future__ import annotations

import argparse

import torch

from .common import Table


def skip_reason(device: str) -> str | None:
    if device == "cuda":
        from .._info import triton_available

        return None if triton_available() else "Triton is not installed (pip install triton)"
    return None


def run(device: str, quick: bool, progress) -> list[Table]:
    if device == "cuda":
        return _gpu(quick)
    from . import cpu_attention

    sizes = [512, 1024] if quick else [1024, 4096]
    bar = progress(1, "attention (cpu)")
    tables = cpu_attention.time_tables(sizes, rounds=1 if quick else 3)
    bar.step("done")
    bar.close()
    return tables


def _gpu(quick: bool) -> list[Table]:
    from . import gpu_attention

    args = argparse.Namespace(dims=[128] if quick else [64, 128],
                              seqlens=[4096] if quick else [1024, 4096, 16384],
                              causal=[False, True], modes=["fwd", "fwd+bwd"], variants=False, json=None)
    rows = gpu_attention.run(args)
    tables = []
    for mode in ("fwd", "fwd+bwd"):
        t = Table(f"flash attention {mode}, bf16, {torch.cuda.get_device_name()}", "TFLOP/s",
                  "4*B*H*N^2*D, /2 causal" + (", x3.5" if mode == "fwd+bwd" else "") + "; B*N=16384, H*D=2048",
                  ["mytorch", "flash", "cudnn"])
        for r in rows:
            if r["mode"] == mode:
                t.add(f"D={r['D']} N={r['N']}{' causal' if r['causal'] else ''}",
                      {k: r[f"tflops_{k}"] for k in ("mytorch", "flash", "cudnn")})
        tables.append(t)
    return tables
