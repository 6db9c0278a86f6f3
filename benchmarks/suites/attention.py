"""attention: mytorch flash_attn vs each SDPA backend (CUDA: FA2, cuDNN, efficient; CPU:
ATen's flash kernel and the math path). On the mytorch device, mytorch's kernel runs on
device tensors and SDPA on the CPU.

FLOP convention (flash-attention's): forward = 4*B*H*N^2*D, halved for causal;
forward+backward = 3.5 x forward. Every configuration is checked against a reference before
it is timed. CPU: fp32, mytorch in its own (batch, seqlen, heads, head_dim) layout, SDPA in
the (batch, heads, seqlen, head_dim) layout it prefers; each round takes the median of many
calls per implementation, rounds interleave the implementations, and the table shows the
median over rounds. CUDA: bf16, B*N = 16384 tokens, H*D = 2048, median of do_bench.

On a GPU the module also runs on its own, without mytorch's native library (it then calls
the Triton launchers directly):

    python -m benchmarks.suites.attention [--dims 128] [--seqlens 4096] [--modes fwd] [--tune]
        [--variants] [--json OUT]
    python -m benchmarks.suites.attention --configs [--dims 64 128] [--seqlens ...] [-v] [--json OUT]

--configs forces every forward launch configuration of flash_attn_config.fwd_configs in turn
(pointer loads vs TMA loads), prints the best of each next to FA2 and cuDNN, and writes the
winners per shape family in the tuned-table format, ready to merge into flash_attn_tuned.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics

import torch
import torch.nn.functional as F

from ..common import Table, check_close, device_skip_reason
from ..timing import cuda_ms, time_ms


def skip_reason(device: str) -> str | None:
    return device_skip_reason(device, native=device != "cuda", triton=True)  # CUDA: Triton kernels only


def flops(B, H, N, D, causal, mode):
    f = 4 * B * H * N * N * D / (2 if causal else 1)
    return f * (3.5 if mode == "fwd+bwd" else 1.0)


def run(device: str, mode: str, progress) -> list[Table]:
    if device == "cuda":
        return _gpu_tables(mode)
    sizes = {"smoke": [64], "quick": [512, 1024], "full": [1024, 4096]}[mode]
    rounds = 3 if mode == "full" else 1
    bar = progress(4 * len(sizes) * rounds, f"attention ({device})")
    opts = {"smoke": dict(H=2, D=32, reps=1, min_time_s=0.0), "quick": dict(H=4, reps=3, min_time_s=0.05),
            "full": dict()}[mode]
    tables = cpu_tables(sizes, rounds, device=device, on_step=bar.step, **opts)
    bar.close()
    return tables


# ------------------------------------------------------------------------------------ CPU

def _cpu_impls(B, H, N, D, causal, mode, device="cpu"):
    """{impl: (fn, inputs)} for one configuration, after checking every impl against the
    float64 reference. mytorch takes (B, N, H, D) tensors on `device`; SDPA's backends take
    (B, H, N, D) CPU tensors."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

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


def cpu_tables(sizes, rounds, B=1, H=8, D=64, device="cpu", reps=None, min_time_s=0.3, on_step=None):
    """The fwd and fwd+bwd tables in GFLOP/s, the median over `rounds` interleaved rounds."""
    configs = [(N, causal, mode) for N in sizes for mode in ("fwd", "fwd+bwd") for causal in (False, True)]
    fns = {(N, c, m): _cpu_impls(B, H, N, D, c, m, device) for N, c, m in configs}
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


# ----------------------------------------------------------------------------------- CUDA

def _gpu_tables(mode: str) -> list[Table]:
    peers = ["flash", "cudnn", "efficient"]
    args = argparse.Namespace(dims=[128] if mode != "full" else [64, 128],
                              seqlens={"smoke": [1024], "quick": [4096], "full": [1024, 4096, 16384]}[mode],
                              causal=[False, True], modes=["fwd", "fwd+bwd"], variants=False, json=None,
                              peers=peers)
    rows = gpu_rows(args)
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


def _ours():
    """(fwd, fwd+bwd) callables over (B, N, H, D) tensors: the Triton launchers."""
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
    """(fwd, fwd+bwd) callables of one SDPA backend over (B, H, N, D) tensors."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
          "efficient": SDPBackend.EFFICIENT_ATTENTION}[backend]

    def fwd(qt, kt, vt, causal):
        with sdpa_kernel([be]):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)

    def fwd_bwd(qt, kt, vt, causal, gt):
        with sdpa_kernel([be]):
            out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        return torch.autograd.grad(out, (qt, kt, vt), gt)

    return fwd, fwd_bwd


def _shapes(args):
    """(D, N, B, H) of each row: B*N = 16384 tokens, H*D = 2048."""
    for D in args.dims:
        for N in args.seqlens:
            yield D, N, max(16384 // N, 1), 2048 // D


def _header(cols: str) -> None:
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"triton {__import__('triton').__version__}; TFLOP/s, median of do_bench", flush=True)
    print(cols)
    print("-" * len(cols), flush=True)


def gpu_rows(args) -> list[dict]:
    """TFLOP/s of mytorch and each peer, a row per (D, N, causal, mode); printed as they come."""
    dev = torch.device("cuda")
    fwd, fwd_bwd = _ours()
    peers = {name: _sdpa(name) for name in getattr(args, "peers", ("flash", "cudnn"))}
    rows = []
    _header(f"{'D':>4} {'N':>6} {'causal':>6} {'mode':>8} | {'mytorch':>8} {'FA2':>8} {'cuDNN':>8}"
            f" | {'x FA2':>6} {'x cuDNN':>7}")
    for D, N, B, H in _shapes(args):
        for causal in args.causal:
            torch.manual_seed(0)
            q, k, v, g = (torch.randn(B, N, H, D, device=dev, dtype=torch.bfloat16) for _ in range(4))
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
                    t = {"mytorch": cuda_ms(lambda: fwd(q, k, v, causal))}
                    for name, (pf, _) in peers.items():
                        t[name] = cuda_ms(lambda pf=pf: pf(qt, kt, vt, causal))
                else:
                    t = {"mytorch": cuda_ms(lambda: fwd_bwd(q, k, v, causal, g))}
                    if args.variants:
                        t["atomic"] = cuda_ms(lambda: fwd_bwd(q, k, v, causal, g, True))
                    for name, (_, pb) in peers.items():
                        t[name] = cuda_ms(lambda pb=pb: pb(qt, kt, vt, causal, gt))
                fl = flops(B, H, N, D, causal, mode)
                tf = {kk: fl / (ms * 1e-3) / 1e12 for kk, ms in t.items()}
                rows.append(dict(D=D, N=N, causal=causal, mode=mode,
                                 **{f"tflops_{kk}": round(vv, 1) for kk, vv in tf.items()}))
                extra = f"  (dQ by atomics: {tf['atomic']:.0f})" if "atomic" in tf else ""
                print(f"{D:>4} {N:>6} {str(causal):>6} {mode:>8} | {tf['mytorch']:>8.0f} "
                      f"{tf['flash']:>8.0f} {tf['cudnn']:>8.0f} | "
                      f"{tf['mytorch'] / tf['flash']:>6.2f} {tf['mytorch'] / tf['cudnn']:>7.2f}"
                      f"{extra}", flush=True)
            del q, k, v, g, qt, kt, vt, gt
            torch.cuda.empty_cache()
    return rows


def config_rows(args) -> tuple[list[dict], dict]:
    """Every forward launch configuration, forced in turn and checked against SDPA's flash
    output: (rows with the best pointer and TMA TFLOP/s next to FA2 and cuDNN, the winning
    config per shape family in the tuned-table format)."""
    from mytorch_ext.triton import flash_attn as fa
    from mytorch_ext.triton import flash_attn_config as fc

    dev = torch.device("cuda")
    arch = fc.arch(dev)
    candidates, chosen = fc.fwd_configs, fc.chosen
    peers = {name: _sdpa(name)[0] for name in ("flash", "cudnn")}
    winners, rows = {}, []
    _header(f"{'D':>4} {'N':>6} {'causal':>6} | {'pointer':>8} {'TMA':>8} {'FA2':>8} {'cuDNN':>8}"
            f" | {'TMA/ptr':>7} {'best/FA2':>8} {'best/cuDNN':>10}")
    for D, N, B, H in _shapes(args):
        for causal in (False, True):
            torch.manual_seed(0)
            q, k, v = (torch.randn(B, N, H, D, device=dev, dtype=torch.bfloat16) for _ in range(3))
            qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
            ref = peers["flash"](qt, kt, vt, causal).transpose(1, 2).float()
            fl = flops(B, H, N, D, causal, "fwd")
            best = {False: (0.0, None), True: (0.0, None)}
            for cfg in candidates(dev, D)[:-1]:
                fa.fwd_configs = lambda device, head_dim, cfg=cfg: [cfg]  # exactly cfg: no table,
                fc.chosen = lambda *a, **k: None                          # no fallback
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
                tf = fl / (cuda_ms(fn) * 1e-3) / 1e12
                if args.verbose:
                    print(f"   {cfg}: {tf:.0f}", flush=True)
                if tf > best[tma][0]:
                    best[tma] = (tf, cfg)
            fa.fwd_configs, fc.chosen = candidates, chosen
            t = {name: fl / (cuda_ms(lambda pf=pf: pf(qt, kt, vt, causal)) * 1e-3) / 1e12
                 for name, pf in peers.items()}
            ptr, tma = best[False][0], best[True][0]
            top = max(best.values(), key=lambda x: x[0])
            if top[1] is not None:
                winners[fc._key_str(arch, fa._key("fwd", q, D, causal, N))] = top[1]
            rows.append(dict(D=D, N=N, causal=causal, pointer=round(ptr, 1), tma=round(tma, 1),
                             fa2=round(t["flash"], 1), cudnn=round(t["cudnn"], 1), best_cfg=top[1]))
            print(f"{D:>4} {N:>6} {str(causal):>6} | {ptr:>8.0f} {tma:>8.0f} {t['flash']:>8.0f} "
                  f"{t['cudnn']:>8.0f} | {tma / max(ptr, 1e-9):>7.2f} "
                  f"{top[0] / t['flash']:>8.2f} {top[0] / t['cudnn']:>10.2f}", flush=True)
            del q, k, v, qt, kt, vt, ref
            torch.cuda.empty_cache()
    return rows, winners


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.suites.attention",
                                description="FlashAttention on CUDA: mytorch's Triton kernels next to "
                                            "SDPA's flash (FA2) and cuDNN backends")
    p.add_argument("--dims", type=int, nargs="+", default=[64, 128])
    p.add_argument("--seqlens", type=int, nargs="+", default=[1024, 4096, 16384])
    p.add_argument("--causal", type=lambda s: s.lower() in ("1", "true", "yes"), nargs="+",
                   default=[False, True])
    p.add_argument("--modes", nargs="+", default=["fwd", "fwd+bwd"], choices=["fwd", "fwd+bwd"])
    p.add_argument("--tune", action="store_true",
                   help="tune each shape family not in the cache/table first (MYTORCH_FA_AUTOTUNE=1)")
    p.add_argument("--variants", action="store_true",
                   help="also time the backward that adds dQ with float32 atomics")
    p.add_argument("--configs", action="store_true",
                   help="time every forward launch configuration (pointer vs TMA loads) instead")
    p.add_argument("-v", "--verbose", action="store_true", help="--configs: print every config's speed")
    p.add_argument("--json", help="write the rows (--configs: and the winning configs) here")
    args = p.parse_args(argv)
    if args.tune:
        os.environ["MYTORCH_FA_AUTOTUNE"] = "1"
    if not torch.cuda.is_available():
        raise SystemExit(f"{p.prog.split()[-1]} needs a CUDA GPU")
    if args.configs:
        rows, winners = config_rows(args)
        result = {"rows": rows, "table": winners}
    else:
        result = gpu_rows(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, sort_keys=args.configs)
    if args.tune:
        from mytorch_ext.triton import flash_attn_config as cfg

        print("tuned configs in", cfg.cache_path())


if __name__ == "__main__":
    main()
