"""CPU FlashAttention: mytorch::flash_attn against ATen's CPU SDPA, fp32, in one run.

  python -m mytorch_ext.bench.cpu_attention [--sizes 1024 4096] [--rounds 3] [--head-dims 64 80]

Peers: ATen's SDPA with each CPU backend (its flash kernel and the math path), in the
(batch, heads, seqlen, head_dim) layout they prefer; mytorch gets (batch, seqlen, heads,
head_dim), its own. Every configuration is checked against a float64 reference before it
is timed; inputs are rotated when they would fit in cache.
Timing: each round takes the median of many calls per implementation, rounds interleave
the implementations, and the table shows the median over rounds (the cores are shared).
FLOP convention (flash-attention's): forward = 4*B*H*N^2*D, halved for causal;
forward+backward = 3.5 x forward.

Memory: peak bytes allocated beyond the inputs by one forward+backward on the mytorch
device (its allocator's statistics), through F.scaled_dot_product_attention, which the
device routes to mytorch's kernel, and the same call with SDPA's math path.
"""
from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import mytorch_ext  # noqa: F401
from mytorch_ext.bench.common import Table, check_close, time_ms


def flops(B, H, N, D, causal, mode):
    f = 4 * B * H * N * N * D / (2 if causal else 1)
    return f * 3.5 if mode == "fwd+bwd" else f


def make(B, H, N, D, causal, mode, device="cpu"):
    """{impl: (fn, inputs)} for one configuration, after checking every impl against the
    float64 reference. mytorch takes (B, N, H, D) tensors on `device`; SDPA's backends take
    (B, H, N, D) CPU tensors, the layout they prefer."""
    bwd = mode == "fwd+bwd"
    q, k, v, g = (torch.randn(B, H, N, D) for _ in range(4))
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)

    def sdpa(backend):
        def fn(qa, ka, va, ga):
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(qa, ka, va, is_causal=causal)
            return (o,) + (torch.autograd.grad(o, (qa, ka, va), ga) if bwd else ())
        return fn

    def mine(qm, km, vm, gm):
        o, _ = torch.ops.mytorch.flash_attn(qm, km, vm, causal=causal)
        return (o,) + (torch.autograd.grad(o, (qm, km, vm), gm) if bwd else ())

    cpu_in = tuple(t.clone().requires_grad_(bwd) for t in (q, k, v)) + (g,)
    dev_in = tuple(t.transpose(1, 2).contiguous().to(device).requires_grad_(bwd) for t in (q, k, v))
    dev_in += (g.transpose(1, 2).contiguous().to(device),)
    impls = {"mytorch": (mine, dev_in), "aten_flash": (sdpa(SDPBackend.FLASH_ATTENTION), cpu_in),
             "aten_math": (sdpa(SDPBackend.MATH), cpu_in)}
    for name, (fn, inputs) in impls.items():
        out = fn(*inputs)[0]
        out = out.transpose(1, 2) if name == "mytorch" else out
        check_close(f"attention {name} N={N} D={D} causal={causal}", out, ref, 1e-4)
    return impls


def time_tables(sizes, rounds, B=1, H=8, D=64, device="cpu", reps=None, min_time_s=0.3, on_step=None):
    configs = [(N, causal, mode) for N in sizes for mode in ("fwd", "fwd+bwd") for causal in (False, True)]
    fns = {(N, c, m): make(B, H, N, D, c, m, device) for N, c, m in configs}
    samples = {key: {impl: [] for impl in impls} for key, impls in fns.items()}
    for _ in range(rounds):
        for key, impls in fns.items():
            n_reps = reps or (5 if key[0] <= 2048 else 3)  # a 4096 fwd+bwd call takes seconds here
            for impl, (fn, inputs) in impls.items():
                samples[key][impl].append(time_ms(fn, device if impl == "mytorch" else "cpu", warmup=1,
                                                  reps=n_reps, min_time_s=min_time_s, inputs=inputs))
            if on_step is not None:
                on_step(f"N={key[0]} {key[2]}{' causal' if key[1] else ''}")
    where = "" if device == "cpu" else f", mytorch on the {device} device, SDPA on the CPU"
    tables = []
    for mode in ("fwd", "fwd+bwd"):
        t = Table(f"CPU attention {mode}, fp32, B={B} H={H} D={D}{where}", "GFLOP/s",
                  "4*B*H*N^2*D, /2 causal" + (", x3.5" if mode == "fwd+bwd" else ""),
                  ["mytorch", "aten_flash", "aten_math"])
        for (N, causal, m), s in samples.items():
            if m != mode:
                continue
            f = flops(B, H, N, D, causal, mode)
            t.add(f"N={N}{' causal' if causal else ''}",
                  {impl: f / (statistics.median(ms) * 1e-3) / 1e9 for impl, ms in s.items()})
        tables.append(t)
    return tables


def memory_table(sizes, B=1, H=2, D=64):
    if not hasattr(torch, "mytorch") or not hasattr(torch.mytorch, "max_memory_allocated"):
        print("memory: the mytorch device (torch.mytorch memory statistics) is not available")
        return None
    t = Table(f"Peak extra memory, fwd+bwd via F.scaled_dot_product_attention on the mytorch device, "
              f"fp32, B={B} H={H} D={D}", "MiB", "peak allocated - inputs", ["mytorch", "aten_math"],
              higher_is_better=False)
    for N in sizes:
        row = {}
        for impl in ("mytorch", "aten_math"):
            if impl == "aten_math" and B * H * N * N * 4 * 3 > 6 * 2**30:
                row[impl] = None  # the math path would need more memory than this machine has
                continue
            q, k, v = (torch.randn(B, H, N, D, device="mytorch", requires_grad=True) for _ in range(3))
            g = torch.randn(B, H, N, D, device="mytorch")
            torch.mytorch.synchronize()
            base = torch.mytorch.memory_allocated()
            torch.mytorch.reset_peak_memory_stats()
            backends = [SDPBackend.OVERRIDEABLE] if impl == "mytorch" else [SDPBackend.MATH]
            with sdpa_kernel(backends):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                torch.autograd.grad(o, (q, k, v), g)
            row[impl] = (torch.mytorch.max_memory_allocated() - base) / 2**20
            del o
        t.add(f"N={N}  (N^2*4 = {N * N * 4 / 2**20:.0f} MiB)", row)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--mem-sizes", type=int, nargs="+", default=[1024, 4096, 8192])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--head-dims", type=int, nargs="+", default=[64],
                    help="head_dim of each pair of tables, any in [1, 256]")
    args = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"mytorch {mytorch_ext.build_info()['cpu_flags']}")
    for D in args.head_dims:
        for t in time_tables(args.sizes, args.rounds, D=D):
            print(t.format())
            print()
    mt = memory_table(args.mem_sizes, D=args.head_dims[0])
    if mt is not None:
        print(mt.format())


if __name__ == "__main__":
    main()
