"""The CPU attention kernels against ATen's SDPA, interleaved in one process: flash_attn's
forward at training shapes and the decode step of flash_attn_with_kvcache at every shape of
`bench kvcache` (quick and full). Each cell is the median of 3 rounds, each round the median
of its repeats; ratio = ATen / mytorch (> 1: mytorch faster). ATen's decode figure is the
faster of enable_gqa and a cache with the kv heads repeated, as in `bench kvcache`.

    python -m benchmarks.cpu_attention_check [--threads N] [--skip-decode] [--skip-train]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import mytorch_ext
from benchmarks.suites.kvcache import SHAPES, _inputs, _sdpa


def _ms(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def _pair(ours, aten, reps, rounds=3):
    o, a = [], []
    for _ in range(rounds):
        o.append(_ms(ours, reps))
        a.append(aten())
    return statistics.median(o), statistics.median(a)


def train_rows(reps):
    for b, n, h, d in ((1, 1024, 8, 64), (1, 1024, 8, 128), (1, 1024, 8, 256), (1, 2048, 8, 64)):
        for causal in (False, True):
            g = torch.Generator().manual_seed(0)
            q, k, v = (torch.randn(b, n, h, d, generator=g) for _ in range(3))
            qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
            want = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)
            err = (mytorch_ext.flash_attn(q, k, v, causal=causal) - want).abs().max().item()
            assert err < 1e-4, err
            o, a = _pair(lambda: mytorch_ext.flash_attn(q, k, v, causal=causal),
                         lambda: _ms(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), reps), reps)
            print(f"flash_attn fwd fp32 ({b}, {n}, {h}, {d}){' causal' if causal else ''}: "
                  f"mytorch {o:.3f} ms, ATen {a:.3f} ms, ratio {a / o:.2f}", flush=True)


def decode_rows(reps):
    for dt in (torch.bfloat16, torch.float32):
        for shape in SHAPES["cpu"]["quick"] + SHAPES["cpu"]["full"]:
            q, kc, vc, kn, vn, sl = _inputs(*shape, dt, "cpu")
            g = shape[2] // shape[3]
            ke, ve = kc.repeat_interleave(g, 2), vc.repeat_interleave(g, 2)

            def ours():
                return mytorch_ext.flash_attn_with_kvcache(q, kc, vc, kn, vn, cache_seqlens=sl)

            err = (ours().float() - _sdpa(q.float(), kc.float(), vc.float())).abs().max().item()
            assert err < 2e-2, err
            o, a = _pair(ours, lambda: min(_ms(lambda: _sdpa(q, kc, vc), reps), _ms(lambda: _sdpa(q, ke, ve), reps)),
                         reps)
            b, n, hq, hk, d = shape
            print(f"decode {str(dt)[6:]} B={b} cache={n} {hq}:{hk} D={d}: mytorch {o:.3f} ms, ATen {a:.3f} ms, "
                  f"ratio {a / o:.2f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--skip-decode", action="store_true")
    p.add_argument("--skip-train", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads={args.threads}, torch {torch.__version__}, mytorch_ext at {mytorch_ext.__file__}", flush=True)
    if not args.skip_train:
        train_rows(args.reps)
    if not args.skip_decode:
        decode_rows(args.reps)


if __name__ == "__main__":
    main()
