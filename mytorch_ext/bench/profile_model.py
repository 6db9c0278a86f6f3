"""Where a Llama training step spends its time: stock vs mytorch, kernel by kernel.

    python -m mytorch_ext.bench.profile_model [--layers 4 --hidden 1024 --seq 4096] [--setups eager,mytorch]

Builds the same model as `model_train` (Hugging Face Llama from a config, bf16, AdamW), runs
a few steps per set-up, then profiles one step with torch.profiler and prints the step's
wall time, the GPU busy time and the kernels that took the most GPU time.
"""
from __future__ import annotations

import argparse
import contextlib
import time

import torch

from .model_train import add_model_args, build, token_batches


def profile_setup(name, args, data):
    import mytorch_ext

    model = build(args)
    ctx, handle = contextlib.nullcontext(), None
    if name.startswith("mytorch"):
        ctx = mytorch_ext.patched()
        handle = mytorch_ext.apply_to(model, **({"cross_entropy": args.ce} if args.ce else {}))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step(ids):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    with ctx:
        for ids in data[:-1]:
            step(ids)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step(data[0])
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step(data[-1])
            torch.cuda.synchronize()
    if handle is not None:
        handle.revert()
    events = prof.key_averages()
    gpu_us = sum(e.self_device_time_total for e in events if e.self_device_time_total > 0
                 and e.device_type == torch.autograd.DeviceType.CUDA)
    print(f"== {name}: step {wall * 1e3:.1f} ms (unprofiled), GPU kernels {gpu_us / 1e3:.1f} ms")
    print(events.table(sort_by="self_device_time_total", row_limit=args.rows, max_name_column_width=70))
    print(events.table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=70))
    del model, opt
    torch.cuda.empty_cache()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(p, layers=4, intermediate=2816, seq=4096, steps=4)
    p.add_argument("--rows", type=int, default=25)
    p.add_argument("--ce", default="", help="apply_to's cross_entropy= argument")
    p.add_argument("--setups", default="eager,mytorch")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("profile_model: needs a CUDA GPU")
    data = token_batches(args)
    for name in args.setups.split(","):
        profile_setup(name, args, data)


if __name__ == "__main__":
    main()
