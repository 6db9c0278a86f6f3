"""Every forward launch configuration of mytorch's FlashAttention, pointer loads vs TMA loads.

For each shape, each candidate of flash_attn_config.fwd_configs is forced in turn, checked
against SDPA's flash output, then timed (median of do_bench). Prints the best pointer and
the best TMA configuration next to FA2 and cuDNN, and writes the winners per shape family
in the tuned-table format (--json), ready to merge into flash_attn_tuned.json.

    python -m mytorch_ext.bench.gpu_attention_configs --dims 64 128 --seqlens 1024 4096 16384

TFLOP/s as gpu_attention.py: forward = 4*B*H*N^2*D, halved for causal; B*N = 16384, H*D = 2048.
Runs without mytorch's native library.
"""
from __future__ import annotations

import argparse
import json

import torch


def _forced(fa, fc, cfg):
    """Run the forward with exactly `cfg` (no table, no fallback)."""
    fa.fwd_configs = lambda device, head_dim: [cfg]
    fc.chosen = lambda *a, **k: None


def run(args):
    from triton.testing import do_bench

    from mytorch_ext.bench.gpu_attention import _sdpa, flops
    from mytorch_ext.triton import flash_attn as fa
    from mytorch_ext.triton import flash_attn_config as fc

    dev = torch.device("cuda")
    arch = fc.arch(dev)
    candidates = fc.fwd_configs
    chosen = fc.chosen
    peers = {name: _sdpa(name)[0] for name in ("flash", "cudnn")}
    winners, rows = {}, []
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {__import__('triton').__version__}; forward TFLOP/s, median of do_bench")
    hdr = (f"{'D':>4} {'N':>6} {'causal':>6} | {'pointer':>8} {'TMA':>8} {'FA2':>8} {'cuDNN':>8}"
           f" | {'TMA/ptr':>7} {'best/FA2':>8} {'best/cuDNN':>10}")
    print(hdr)
    print("-" * len(hdr), flush=True)
    for D in args.dims:
        for N in args.seqlens:
            B, H = max(16384 // N, 1), 2048 // D
            for causal in (False, True):
                torch.manual_seed(0)
                q, k, v = (torch.randn(B, N, H, D, device=dev, dtype=torch.bfloat16)
                           for _ in range(3))
                qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
                ref = peers["flash"](qt, kt, vt, causal).transpose(1, 2).float()
                fl = flops(B, H, N, D, causal, "fwd")
                best = {False: (0.0, None), True: (0.0, None)}
                for cfg in candidates(dev, D)[:-1]:
                    _forced(fa, fc, cfg)
                    fn = lambda: fa.flash_attn_forward(q, k, v, softmax_scale=D ** -0.5,  # noqa: E731
                                                       causal=causal)[0]
                    try:
                        out = fn()
                    except Exception as e:  # noqa: BLE001
                        print(f"   {cfg}: does not run ({type(e).__name__})", flush=True)
                        continue
                    err = ((out.float() - ref).norm() / ref.norm()).item()
                    if err > 1e-2:
                        raise SystemExit(f"mismatch {cfg} D={D} N={N} causal={causal}: {err:.3g}")
                    tma = bool(cfg.get("TMA")) and fa._TMA_DISABLED is None
                    if cfg.get("TMA") and not tma:
                        print(f"   TMA unavailable: {fa._TMA_DISABLED}", flush=True)
                        continue
                    tf = fl / (do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e-3) / 1e12
                    if args.verbose:
                        print(f"   {cfg}: {tf:.0f}", flush=True)
                    if tf > best[tma][0]:
                        best[tma] = (tf, cfg)
                fa.fwd_configs, fc.chosen = candidates, chosen
                t = {name: fl / (do_bench(lambda pf=pf: pf(qt, kt, vt, causal), warmup=25,
                                          rep=100, return_mode="median") * 1e-3) / 1e12
                     for name, pf in peers.items()}
                ptr, tma = best[False][0], best[True][0]
                top = max(best.values(), key=lambda x: x[0])
                if top[1] is not None:
                    key = fa._key("fwd", q, D, causal, N)
                    winners[fc._key_str(arch, key)] = top[1]
                rows.append(dict(D=D, N=N, causal=causal, pointer=round(ptr, 1), tma=round(tma, 1),
                                 fa2=round(t["flash"], 1), cudnn=round(t["cudnn"], 1),
                                 best_cfg=top[1]))
                print(f"{D:>4} {N:>6} {str(causal):>6} | {ptr:>8.0f} {tma:>8.0f} {t['flash']:>8.0f} "
                      f"{t['cudnn']:>8.0f} | {tma / max(ptr, 1e-9):>7.2f} "
                      f"{top[0] / t['flash']:>8.2f} {top[0] / t['cudnn']:>10.2f}", flush=True)
                del q, k, v, qt, kt, vt, ref
                torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "table": winners}, f, indent=1, sort_keys=True)
    return rows, winners


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    p.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 16384])
    p.add_argument("--json", help="write the rows and the winning configs here")
    p.add_argument("-v", "--verbose", action="store_true", help="print every config's speed")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("mytorch_ext.bench.gpu_attention_configs needs a CUDA GPU")
    run(args)


if __name__ == "__main__":
    main()
