"""FlashAttention speed: mytorch's Triton kernels next to SDPA's flash (FA2) and cuDNN backends.

TFLOP/s by the convention of the FlashAttention papers: forward = 4*B*H*N^2*D, halved for
causal; forward+backward = 3.5x forward. B*N = 16384 tokens, H*D = 2048. bf16.
Every row is checked against SDPA's flash output before it is timed.

    python -m mytorch_ext.bench.gpu_attention                 # the full table
    python -m mytorch_ext.bench.gpu_attention --tune          # tune each shape family first, save the cache
    python -m mytorch_ext.bench.gpu_attention --dims 128 --seqlens 4096 --modes fwd

Runs without mytorch's native library: it then calls the Triton launchers directly.
"""
from __future__ import annotations

import argparse
import json
import os

import torch


def _ours():
    """(fwd, fwd+bwd) callables over (B, N, H, D) tensors."""
    from mytorch_ext.triton.flash_attn import flash_attn_backward, flash_attn_forward

    def fwd(q, k, v, causal):
        return flash_attn_forward(q, k, v, softmax_scale=q.shape[-1] ** -0.5, causal=causal)[0]

    def fwd_bwd(q, k, v, causal, g, atomic=False):
        scale = q.shape[-1] ** -0.5
        out, lse = flash_attn_forward(q, k, v, softmax_scale=scale, causal=causal)
        return flash_attn_backward(g, q, k, v, out, lse, softmax_scale=scale, causal=causal,
                                   atomic_dq=atomic)

    return fwd, fwd_bwd


def _sdpa(backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
          "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]
    F = torch.nn.functional

    def fwd(qt, kt, vt, causal):
        with sdpa_kernel([be]):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    def fwd_bwd(qt, kt, vt, causal, gt):
        with sdpa_kernel([be]):
            out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        return torch.autograd.grad(out, (qt, kt, vt), gt)

    return fwd, fwd_bwd


def flops(B, H, N, D, causal, mode):
    f = 4 * B * H * N * N * D / (2 if causal else 1)
    return f * (3.5 if mode == "fwd+bwd" else 1.0)


def bench(fn):
    from triton.testing import do_bench

    fn()  # compile (and tune) outside the timed region
    torch.cuda.synchronize()
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def run(args):
    from triton.testing import do_bench  # noqa: F401

    dev = torch.device("cuda")
    fwd, fwd_bwd = _ours()
    peers = {name: _sdpa(name) for name in getattr(args, "peers", ("flash", "cudnn"))}
    rows = []
    hdr = (f"{'D':>4} {'N':>6} {'causal':>6} {'mode':>8} | {'mytorch':>8} {'FA2':>8} {'cuDNN':>8}"
           f" | {'x FA2':>6} {'x cuDNN':>7}")
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {__import__('triton').__version__}; TFLOP/s, median of do_bench", flush=True)
    print(hdr)
    print("-" * len(hdr), flush=True)
    for D in args.dims:
        for N in args.seqlens:
            B, H = max(16384 // N, 1), 2048 // D
            for causal in args.causal:
                torch.manual_seed(0)
                q, k, v, g = (torch.randn(B, N, H, D, device=dev, dtype=torch.bfloat16)
                              for _ in range(4))
                qt, kt, vt, gt = (x.transpose(1, 2) for x in (q, k, v, g))
                qt, kt, vt = (x.detach().requires_grad_() for x in (qt, kt, vt))
                # correctness before timing
                ref = peers["flash"][0](qt, kt, vt, causal).transpose(1, 2)
                mine = fwd(q, k, v, causal)
                err = ((mine.float() - ref.float()).norm() / ref.float().norm()).item()
                if err > 1e-2:
                    raise SystemExit(f"mismatch D={D} N={N} causal={causal}: rel err {err:.3g}")
                for mode in args.modes:
                    if mode == "fwd":
                        t = {"mytorch": bench(lambda: fwd(q, k, v, causal))}
                        for name, (pf, _) in peers.items():
                            t[name] = bench(lambda pf=pf: pf(qt, kt, vt, causal))
                    else:
                        t = {"mytorch": bench(lambda: fwd_bwd(q, k, v, causal, g))}
                        if args.variants:
                            t["atomic"] = bench(lambda: fwd_bwd(q, k, v, causal, g, True))
                        for name, (_, pb) in peers.items():
                            t[name] = bench(lambda pb=pb: pb(qt, kt, vt, causal, gt))
                    fl = flops(B, H, N, D, causal, mode)
                    tf = {kk: fl / (ms * 1e-3) / 1e12 for kk, ms in t.items()}
                    row = dict(D=D, N=N, causal=causal, mode=mode, **{f"tflops_{kk}": round(vv, 1)
                                                                       for kk, vv in tf.items()})
                    rows.append(row)
                    extra = f"  (dQ by atomics: {tf['atomic']:.0f})" if "atomic" in tf else ""
                    print(f"{D:>4} {N:>6} {str(causal):>6} {mode:>8} | {tf['mytorch']:>8.0f} "
                          f"{tf['flash']:>8.0f} {tf['cudnn']:>8.0f} | "
                          f"{tf['mytorch'] / tf['flash']:>6.2f} {tf['mytorch'] / tf['cudnn']:>7.2f}"
                          f"{extra}", flush=True)
                del q, k, v, g, qt, kt, vt, gt
                torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    p.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 16384])
    p.add_argument("--causal", type=lambda s: s.lower() in ("1", "true", "yes"), nargs="+",
                   default=[False, True])
    p.add_argument("--modes", nargs="+", default=["fwd", "fwd+bwd"], choices=["fwd", "fwd+bwd"])
    p.add_argument("--tune", action="store_true",
                   help="tune each shape family not in the cache/table first (MYTORCH_FA_AUTOTUNE=1)")
    p.add_argument("--variants", action="store_true",
                   help="also time the backward that adds dQ with float32 atomics")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    if args.tune:
        os.environ["MYTORCH_FA_AUTOTUNE"] = "1"
    if not torch.cuda.is_available():
        raise SystemExit("mytorch_ext.bench.gpu_attention needs a CUDA GPU")
    run(args)
    if args.tune:
        from mytorch_ext.triton import flash_attn_config as cfg

        print("tuned configs in", cfg.cache_path())


if __name__ == "__main__":
    main()
