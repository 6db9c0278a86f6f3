"""A/B of a Hopper (Gluon) attention kernel file against another version of the same file, in
one process on one GPU (H100/H200): the checks first, then the timings, each variant timed in
turn and its best kept, cuDNN beside them.

    git show HEAD~1:mytorch_ext/triton/flash_attn_hopper.py > /tmp/base.py
    python benchmarks/hopper_ab.py fwd /tmp/base.py        # the forward: flash_attn_hopper.py
    python benchmarks/hopper_ab.py bwd /tmp/base_bwd.py    # the backward: flash_attn_hopper_bwd.py
        [--dims 128] [--gqa] [--reps 2] [--skip-check] [--same-bits] [--out DIR]
        [--also FILE ...]   # more versions, checked and timed beside the current one

fwd: out and lse of both against float64 (20 cases at head_dim 128, 20 at 64: GQA/MQA,
causal, windows, softcap, odd lengths), within twice the base's error (+1e-3); then forward
TFLOP/s. bwd: dq, dk, dv of both against float64 (30 cases), within twice the base's error,
or bit-identical to the base's with --same-bits; then forward+backward TFLOP/s (3.5 x the
forward's count). Timings: bf16, B*N = 16k tokens, H*D = 2048 (--gqa adds rows with 4 and 8
query heads per KV head). Run from the checkout root; the kernels load without mytorch's
native library. The base file is imported as a sibling module of the current one, so its
relative imports resolve to the current package.
"""
import argparse
import importlib.util
import json
import os
import sys
import types

sys.path.insert(0, os.getcwd())
for _name in ("mytorch_ext", "mytorch_ext.triton"):  # the kernel files without the native library
    _m = types.ModuleType(_name)
    _m.__path__ = [os.path.join(os.getcwd(), *_name.split("."))]
    sys.modules[_name] = _m

import torch  # noqa: E402

from benchmarks.attention_ref import attention_reference  # noqa: E402
from benchmarks.gpu_timing import gpu_seconds  # noqa: E402


def load_base(path, which, suffix="base"):
    """The file at path as mytorch_ext.triton.<current module>_<suffix>."""
    cur = "flash_attn_hopper" if which == "fwd" else "flash_attn_hopper_bwd"
    spec = importlib.util.spec_from_file_location(f"mytorch_ext.triton.{cur}_{suffix}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def reference(q, k, v, causal, wl, wr, softcap=0.0):
    """float64 (out, lse) of (B, N, H, D) inputs: the reference every attention check uses."""
    return attention_reference(q, k, v, q.shape[-1] ** -0.5, causal, wl, wr, softcap)[:2]


CHECK_SHAPES = ((2, 1000, 1000, 4, 2), (1, 384, 1024, 8, 1), (1, 1024, 384, 2, 2), (3, 77, 200, 2, 1),
                (1, 4096, 4096, 2, 2))
FWD_MASKS = ((False, -1, -1, 0.0), (True, -1, -1, 0.0), (False, 100, 37, 0.0), (True, -1, -1, 30.0))
BWD_SHAPES = ((2, 1024, 1024, 4, 4), (2, 1000, 1000, 4, 2), (1, 384, 1024, 8, 1), (1, 1024, 384, 2, 2),
              (3, 77, 200, 2, 1))
BWD_MASKS = ((False, -1, -1), (True, -1, -1), (False, 100, 37))


def forward_of(mod, q, k, v, causal, wl, wr, softcap=0.0):
    """The forward launcher of a kernel module: (out, lse)."""
    B, n, H, D = q.shape
    out = torch.empty_like(q)
    lse = torch.empty(B, H, n, device=q.device, dtype=torch.float32)
    mod.forward(q, k, v, out, lse, softmax_scale=D ** -0.5, softcap=softcap, group=H // k.shape[2],
                left=wl >= 0, right=causal or wr >= 0, wl=wl, wr=0 if causal else wr)
    return out, lse


class Backward:
    """flash_attn_forward + flash_attn_backward with a chosen dK/dV/dQ kernel module."""

    def __init__(self, fa, pkg, current):
        self.fa, self.pkg, self.current = fa, pkg, current

    def __call__(self, mod, q, k, v, g, causal, wl, wr):
        sys.modules["mytorch_ext.triton.flash_attn_hopper_bwd"] = mod
        self.pkg.flash_attn_hopper_bwd = mod
        try:
            fa = self.fa
            fa._HOPPER_DISABLED = None
            scale = q.shape[-1] ** -0.5
            out, lse = fa.flash_attn_forward(q, k, v, softmax_scale=scale, causal=causal,
                                             window_left=wl, window_right=wr)
            grads = fa.flash_attn_backward(g, q, k, v, out, lse, softmax_scale=scale, causal=causal,
                                           window_left=wl, window_right=wr)
            if fa._HOPPER_DISABLED is not None:  # a kernel failed and the call fell back
                raise RuntimeError(f"hopper_ab.py: the Hopper kernels turned off: {fa._HOPPER_DISABLED}")
            return grads
        finally:
            sys.modules["mytorch_ext.triton.flash_attn_hopper_bwd"] = self.current
            self.pkg.flash_attn_hopper_bwd = self.current


def check_fwd(base, new, dims):
    fails = 0
    for D in dims:
        for B, n_q, n_k, H, HK in CHECK_SHAPES:
            for causal, wl, wr, sc in FWD_MASKS:
                q = torch.randn(B, n_q, H, D, device="cuda", dtype=torch.bfloat16)
                k, v = (torch.randn(B, n_k, HK, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
                ro, rl = reference(q, k, v, causal, wl, wr, sc)
                seen = torch.isfinite(rl)
                errs = []
                for mod in (base, new):
                    o, lse = forward_of(mod, q, k, v, causal, wl, wr, sc)
                    el = (lse.double() - rl)[seen].abs().max().item() if seen.any() else 0.0
                    errs.append(((o.double() - ro).abs().max().item(), el))
                ok = errs[1][0] <= 2 * errs[0][0] + 1e-3 and errs[1][1] <= 2 * errs[0][1] + 1e-3
                fails += not ok
                print("ok  " if ok else "FAIL", f"D{D} B{B} q{n_q} k{n_k} H{H}/{HK} causal={causal} "
                      f"win=({wl},{wr}) softcap={sc}: out {errs[1][0]:.2e} (base {errs[0][0]:.2e}), "
                      f"lse {errs[1][1]:.2e} (base {errs[0][1]:.2e})", flush=True)
    return fails


def check_bwd(base, new, run, dims, same_bits):
    fails = 0
    n = 0
    for D in dims:
        for B, n_q, n_k, H, HK in BWD_SHAPES:
            for causal, wl, wr in BWD_MASKS:
                dt = (torch.bfloat16, torch.float16)[n % 2]
                n += 1
                q = torch.randn(B, n_q, H, D, device="cuda", dtype=dt)
                k, v = (torch.randn(B, n_k, HK, D, device="cuda", dtype=dt) for _ in range(2))
                g = torch.randn(B, n_q, H, D, device="cuda", dtype=dt)
                qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
                reference(qd, kd, vd, causal, wl, wr)[0].backward(g.double())
                got, was = run(new, q, k, v, g, causal, wl, wr), run(base, q, k, v, g, causal, wl, wr)
                ok, errs = True, []
                for name, x, t, r in zip("qkv", got, was, (qd.grad, kd.grad, vd.grad)):
                    e, eb = (x.double() - r).abs().max().item(), (t.double() - r).abs().max().item()
                    same = torch.equal(x, t)
                    ok = ok and (same if same_bits else e <= 2 * eb + 1e-3)
                    errs.append(f"d{name} {e:.2e} (base {eb:.2e}) same-bits={same}")
                fails += not ok
                print("ok  " if ok else "FAIL", f"D{D} {str(dt)[6:]} B{B} q{n_q} k{n_k} H{H}/{HK} "
                      f"causal={causal} win=({wl},{wr}): " + ", ".join(errs), flush=True)
    return fails


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("which", choices=("fwd", "bwd"))
    p.add_argument("base", help="the other version of the kernel file")
    p.add_argument("--dims", default="64,128")
    p.add_argument("--gqa", action="store_true", help="also time 4 and 8 query heads per KV head")
    p.add_argument("--reps", type=int, default=2, help="turns per variant; the best is kept")
    p.add_argument("--skip-check", action="store_true")
    p.add_argument("--same-bits", action="store_true", help="bwd: gradients must equal the base's")
    p.add_argument("--out", default=os.environ.get("OUT", "."))
    p.add_argument("--also", nargs="*", default=[], metavar="FILE",
                   help="more versions of the file, each checked against the base's error and "
                        "timed in the same turns, named by their file name")
    args = p.parse_args(argv)
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        sys.exit(print("hopper_ab.py: needs a Hopper (sm90) GPU; none here"))
    import torch.nn.functional as F
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import mytorch_ext.triton.flash_attn as fa
    import mytorch_ext.triton.flash_attn_hopper as fwd_new
    import mytorch_ext.triton.flash_attn_hopper_bwd as bwd_new

    base = load_base(args.base, args.which)
    new = fwd_new if args.which == "fwd" else bwd_new
    variants = [("base", base), ("new", new)] + [
        (os.path.splitext(os.path.basename(f))[0], load_base(f, args.which, f"v{i}"))
        for i, f in enumerate(args.also)]
    run = Backward(fa, sys.modules["mytorch_ext.triton"], bwd_new)
    dims = [int(d) for d in args.dims.split(",")]
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    torch.manual_seed(0)
    if not args.skip_check:
        fails = 0
        for name, mod in variants[1:]:
            print(f"-- {name} against base", flush=True)
            fails += (check_fwd(base, mod, dims) if args.which == "fwd"
                      else check_bwd(base, mod, run, dims, args.same_bits))
        print(f"{args.which.upper()} CHECK", "FAILED" if fails else "PASSED", fails, flush=True)
        if fails:
            sys.exit(1)

    def bench(fn):
        return gpu_seconds(fn, 60)

    cases = [(D, N, c, 1) for D in dims for N in (1024, 4096, 16384) for c in (False, True)]
    if args.gqa:
        cases += [(D, 4096, c, 4) for D in dims for c in (False, True)]
        cases += [(D, 16384, True, 8) for D in dims] + [(D, 1024, True, 4) for D in dims]
    rows = []
    for D, N, causal, grp in cases:
        B, H = 16384 // N, 2048 // D
        q, g = (torch.randn(B, N, H, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        k, v = (torch.randn(B, N, H // grp, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        flops = 4 * B * H * N * N * D / (2 if causal else 1) * (1 if args.which == "fwd" else 3.5)
        r = {"D": D, "N": N, "causal": causal, "group": grp, **{name: 0.0 for name, _ in variants}}
        for _ in range(args.reps):
            for name, mod in variants:
                fn = ((lambda: forward_of(mod, q, k, v, causal, -1, -1)) if args.which == "fwd"
                      else (lambda: run(mod, q, k, v, g, causal, -1, -1)))
                r[name] = max(r[name], flops / bench(fn) / 1e12)
        qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_(args.which == "bwd") for t in (q, k, v))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            def sdpa():
                o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, enable_gqa=grp > 1)
                return o if args.which == "fwd" else torch.autograd.grad(o, (qt, kt, vt), g.transpose(1, 2))
            r["cudnn"] = flops / bench(sdpa) / 1e12
        rows.append(r)
        times = "  ".join(f"{name} {r[name]:6.1f}" for name, _ in variants)
        ratios = "  ".join(f"{name}/base {r[name] / r['base']:.3f}" for name, _ in variants[1:])
        print(f"{args.which} D{D} N{N:6d} causal={causal!s:5} group={grp}: {times}  "
              f"cudnn {r['cudnn']:6.1f} | {ratios}  new/cudnn {r['new'] / r['cudnn']:.3f}",
              flush=True)
    with open(os.path.join(args.out, f"hopper_ab_{args.which}.json"), "w") as f:
        json.dump(rows, f)


if __name__ == "__main__":
    main()
