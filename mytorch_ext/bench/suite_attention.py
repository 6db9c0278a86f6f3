"""attention: mytorch flash_attn vs each SDPA backend (CUDA: FA2, cuDNN, efficient; CPU:
ATen's flash kernel and the math path). On the mytorch device, mytorch's kernel runs on
device tensors and SDPA on the CPU."""
from __future__ import annotations

import argparse

import torch

from .common import Table, device_skip_reason


def skip_reason(device: str) -> str | None:
    reason = device_skip_reason(device, native=device != "cuda")  # CUDA: Triton kernels only
    if reason or device != "cuda":
        return reason
    from .._info import triton_available

    return None if triton_available() else "Triton is not installed (pip install triton)"


def run(device: str, mode: str, progress) -> list[Table]:
    if device == "cuda":
        return _gpu(mode)
    from . import cpu_attention

    sizes = {"smoke": [64], "quick": [512, 1024], "full": [1024, 4096]}[mode]
    rounds = 3 if mode == "full" else 1
    bar = progress(4 * len(sizes) * rounds, f"attention ({device})")
    opts = {"smoke": dict(H=2, D=32, reps=1, min_time_s=0.0), "quick": dict(H=4, reps=3, min_time_s=0.05),
            "full": dict()}[mode]
    tables = cpu_attention.time_tables(sizes, rounds, device=device, on_step=bar.step, **opts)
    bar.close()
    return tables


def _gpu(mode: str) -> list[Table]:
    from . import gpu_attention

    peers = ["flash", "cudnn", "efficient"]
    args = argparse.Namespace(dims=[128] if mode != "full" else [64, 128],
                              seqlens={"smoke": [1024], "quick": [4096], "full": [1024, 4096, 16384]}[mode],
                              causal=[False, True], modes=["fwd", "fwd+bwd"], variants=False, json=None,
                              peers=peers)
    rows = gpu_attention.run(args)
    tables = []
    for m in ("fwd", "fwd+bwd"):
        t = Table(f"flash attention {m}, bf16, {torch.cuda.get_device_name()}", "TFLOP/s",
                  "4*B*H*N^2*D, /2 causal" + (", x3.5" if m == "fwd+bwd" else "") + "; B*N=16384, H*D=2048",
                  ["mytorch"] + peers)
        for r in rows:
            if r["mode"] == m:
                t.add(f"D={r['D']} N={r['N']}{' causal' if r['causal'] else ''}",
                      {k: r[f"tflops_{k}"] for k in ["mytorch"] + peers})
        tables.append(t)
    return tables
