"""flash_attn's CPU forward with a few queries (decode steps, short chunks) against ATen's SDPA
and against the dense kernel (the same build with MYTORCH_CPU_FEW_QUERIES=0, in a subprocess),
on 2 threads. Each cell is the median of 3 rounds of the median of 10 calls; ratio = other
time / mytorch time (> 1: mytorch faster).

    python -m benchmarks.cpu_attention_few_queries [--threads N]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F

import mytorch_ext  # noqa: F401
from benchmarks.cpu_attention_check import _ms

SHAPES = [(1, 2048, 32, 8, 128), (8, 1024, 32, 8, 128), (4, 1024, 8, 8, 64)]  # (batch, keys, heads, kv heads, D)
QUERIES = (1, 4, 16)


def _cells(dtype):
    fa = torch.ops.mytorch.flash_attn
    for b, n, hq, hk, d in SHAPES:
        for nq in QUERIES:
            g = torch.Generator().manual_seed(0)
            q, k, v = (torch.randn(b, s, h, d, generator=g).to(dtype) for s, h in ((nq, hq), (n, hk), (n, hk)))
            qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
            ours = lambda: fa(q, k, v, 0.0, None, True, -1, -1, 0.0, None, None, None, 0, 0, 0, None, False, None)  # noqa: E731
            # SDPA's is_causal is top-left: with one query it sees one key, so the causal
            # mask is given as a tensor (bottom-right, as flash_attn's)
            mask = torch.ones(nq, n, dtype=torch.bool).tril(n - nq)
            aten = lambda: F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, enable_gqa=True)  # noqa: E731
            err = (ours()[0].float() - aten().transpose(1, 2).float()).abs().max().item()
            assert err < (1e-4 if dtype == torch.float32 else 3e-2), err
            o, a = [], []
            for _ in range(3):
                o.append(_ms(ours, 10))
                a.append(_ms(aten, 10))
            yield f"{str(dtype)[6:]} b{b} keys {n} heads {hq}:{hk} D{d} queries {nq} causal", \
                statistics.median(o), statistics.median(a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="print the cells as JSON (the subprocess's output)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cells = [c for dt in (torch.float32, torch.bfloat16) for c in _cells(dt)]
    if args.json:
        print(json.dumps(cells))
        return
    env = dict(os.environ, MYTORCH_CPU_FEW_QUERIES="0")
    dense = json.loads(subprocess.run([sys.executable, "-m", "benchmarks.cpu_attention_few_queries", "--json",
                                       "--threads", str(args.threads)], env=env, check=True, capture_output=True,
                                      text=True).stdout.strip().splitlines()[-1])
    print(f"flash_attn forward, few queries, {args.threads} threads: ms (ratio = other / mytorch)")
    for (label, ours, aten), (_, dense_ms, _) in zip(cells, dense):
        print(f"{label}: mytorch {ours:.3f}, dense kernel {dense_ms:.3f} ({dense_ms / ours:.2f}x), "
              f"ATen {aten:.3f} ({aten / ours:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
