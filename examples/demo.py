"""`make demo`: a short showcase of mytorch on whatever hardware is present."""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

import mytorch_ext


def main() -> None:
    info = mytorch_ext.build_info()
    print("mytorch build")
    for key in ("version", "torch", "cuda", "cuda_archs", "cpu_flags", "omp_max_threads", "triton", "cpu"):
        print(f"  {key:>16}: {info.get(key)}")
    print(f"  {'gpu':>16}: {info.get('gpu', 'none')}")

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print("\nmytorch::gelu vs ATen (16M floats)")
    print(f"  {'device':>6} | {'max |diff|':>10} | {'mytorch ms':>10} | {'ATen ms':>8} | ratio")
    for dev in devices:
        x = torch.randn(1 << 24, device=dev)
        diff = (mytorch_ext.gelu(x) - F.gelu(x)).abs().max().item()
        t_my, t_aten = _time(lambda: mytorch_ext.gelu(x), dev), _time(lambda: F.gelu(x), dev)
        print(f"  {dev:>6} | {diff:10.2e} | {t_my:10.3f} | {t_aten:8.3f} | {t_aten / t_my:.2f}x")


def _time(fn, device, reps=10) -> float:
    fn()
    times = []
    for _ in range(reps):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3


if __name__ == "__main__":
    main()
