"""The bfloat16 CPU attention forward against ATen's SDPA (which runs bfloat16 on AMX tiles
through oneDNN where the CPU has them), interleaved in one process at (1, 1024, 8, head_dim),
causal and not. Each cell is the median of 3 rounds, each round the median of 10 calls;
ratio = ATen / mytorch (> 1: mytorch faster). Run it twice to set mytorch's AMX kernel
against its AVX-512 one: MYTORCH_CPU_AMX=0 turns the AMX kernel off.

    python -m benchmarks.cpu_attention_bf16 [--threads N]
    MYTORCH_CPU_AMX=0 python -m benchmarks.cpu_attention_bf16
"""
from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F

import mytorch_ext
from benchmarks.cpu_attention_check import _ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    mytorch_ext._C.set_num_threads(args.threads)
    print(f"threads {args.threads}; mytorch on AMX tiles: {mytorch_ext._C._attention.cpu_amx()}")
    for d in (64, 128, 256):
        for causal in (False, True):
            q, k, v = (torch.randn(1, 1024, 8, d).bfloat16() for _ in range(3))
            qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
            ours, aten = [], []
            for _ in range(3):
                ours.append(_ms(lambda: torch.ops.mytorch.flash_attn(q, k, v, 0.0, None, causal), 10))
                aten.append(_ms(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), 10))
            a, b = statistics.median(ours), statistics.median(aten)
            print(f"bfloat16 (1,1024,8,{d}) causal={causal}: mytorch {a:.2f} ms ATen {b:.2f} ms "
                  f"ratio {b / a:.2f}", flush=True)


if __name__ == "__main__":
    main()
