"""norms: mytorch's fused kernels (norms, softmax, bias-GELU, SwiGLU, RoPE) vs ATen eager vs
torch.compile, as GB/s and % of the copy bandwidth measured in the same run.

CUDA: bf16 forward, timed with do_bench. CPU and the mytorch device: fp32 forward; ATen runs
on the CPU; torch.compile only in full runs (compiling takes tens of seconds per op on the
CPU). GB/s count the minimum bytes: each input read once, each output written once. Every
mytorch result is checked against the reference before it is timed.

On a GPU the module also runs on its own, for the whole set of fused training kernels:

    python -m benchmarks.suites.norms [--quick] [--no-compile] [--sweep-compile] [--sizes 4096x24576,...]
        [--only ops,sweep,ce,flce,optim] [--ops rms_norm,...] [--timing graph,call] [--json out.json]

It prints, per op, forward and forward+backward GB/s, % of copy and the speed-up over eager
and torch.compile, then the cross-entropy ops (with peak extra memory) and the optimizer
steps. Timing "graph" replays the calls from a CUDA graph: GPU time alone, the measure for
the bandwidth targets. "call" times a Python loop of calls (L2 flushed between them), so host
overhead shows wherever it exceeds the GPU time.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch
import torch.nn.functional as F

from ..common import Table, check_close, device_skip_reason, has_cuda_kernel, rel_err
from ..timing import cuda_graph_ms, cuda_ms, time_ms

BF16 = torch.bfloat16


def skip_reason(device: str) -> str | None:
    reason = device_skip_reason(device, triton=True)  # do_bench times the CUDA runs
    if reason or device != "cuda":
        return reason
    return None if has_cuda_kernel("rms_norm") else "mytorch_ext is built without its CUDA kernels"


def run(device: str, mode: str, progress) -> list[Table]:
    return _cuda(mode, progress) if device == "cuda" else _cpu(device, mode, progress)


def copy_bandwidth(device: str, n: int, dtype=torch.float32) -> float:
    """GB/s of dst.copy_(src), n elements each (read once, written once)."""
    src = torch.empty(n, dtype=dtype, device=device).normal_()
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), device, reps=5, min_time_s=0.1)
    return 2 * n * src.element_size() / ms / 1e6


def _cuda(mode: str, progress) -> list[Table]:
    copy_bw = copy_bandwidth("cuda", 1 << 29, BF16)  # 1 GiB
    rows: list[dict] = []
    shapes = {"smoke": [(1024, 1024)], "quick": [(16384, 4096)], "full": [(16384, 4096), (32768, 8192)]}[mode]
    all_cases = cases()
    bar = progress(len(all_cases) * len(shapes), "norms (cuda)")
    for n, d in shapes:
        for c in all_cases:
            run_case(*c, n, d, copy_bw, True, rows, ["call"])
            r = rows[-1]
            if not (r["err"] <= 2e-2 and r["grad_err"] <= 2e-2):
                raise RuntimeError(f"norms: {c[0]} {n}x{d} differs from ATen (relative error "
                                   f"{r['err']:.3g}, gradients {r['grad_err']:.3g})")
            bar.step(f"{c[0]} {n}x{d}")
    bar.close()
    t = Table(f"fused kernels, bf16, forward, {torch.cuda.get_device_name()}", "GB/s",
              "min bytes (inputs read once, outputs written once) / time", ["mytorch", "aten_eager", "torch_compile"])
    for r in rows:
        t.add(f"{r['op']} {r['shape']} ({r['fwd_pct_copy']:.0f}% of copy, {copy_bw:.0f} GB/s)",
              {"mytorch": r["fwd_gbs"], "aten_eager": r["eager_fwd_gbs"], "torch_compile": r["compile_fwd_gbs"]})
    return [t]


def _cpu(device: str, mode: str, progress) -> list[Table]:
    n, d = {"smoke": (64, 256), "quick": (4096, 1024), "full": (16384, 4096)}[mode]
    use_compile = mode == "full"
    copy_bw = copy_bandwidth(device, max(n * d, 1 << 24) if mode != "smoke" else n * d)
    all_cases = cases("cpu", torch.float32)
    impls = ["mytorch", "aten_eager"] + (["torch_compile"] if use_compile else [])
    where = "" if device == "cpu" else f", mytorch on the {device} device, ATen on the CPU"
    t = Table(f"fused kernels, fp32, forward, {n}x{d}{where}", "GB/s",
              "min bytes (inputs read once, outputs written once) / time", impls)
    timing = {"smoke": dict(warmup=0, reps=1, min_time_s=0.0), "quick": dict(reps=5, min_time_s=0.05),
              "full": dict(reps=10, min_time_s=0.3)}[mode]
    bar = progress(len(all_cases), f"norms ({device})")
    for name, make, mine, ref, fbytes, _bbytes, _grads in all_cases:
        torch.manual_seed(0)
        inputs = make(n, d)
        dev_inputs = tuple(x.to(device) for x in inputs)
        with torch.no_grad():
            check_close(f"norms {name}", mine(*dev_inputs), ref(*(x.double() for x in inputs)), 1e-5)
            nbytes = fbytes(n, d)
            vals = {"mytorch": nbytes / time_ms(mine, device, inputs=dev_inputs, **timing) / 1e6,
                    "aten_eager": nbytes / time_ms(ref, "cpu", inputs=inputs, **timing) / 1e6}
            if use_compile:
                comp = torch.compile(ref, dynamic=False)
                comp(*inputs)
                vals["torch_compile"] = nbytes / time_ms(comp, "cpu", inputs=inputs, **timing) / 1e6
        t.add(f"{name} ({100 * vals['mytorch'] / copy_bw:.0f}% of copy, {copy_bw:.0f} GB/s)", vals)
        bar.step(name)
    bar.close()
    return [t]


# Each case: name, make_inputs(rows, cols) -> tuple, mytorch fn, reference fn,
# bytes of the forward, bytes of the backward (functions of rows, cols), the inputs with grads.
def cases(dev="cuda", dtype=BF16):
    from mytorch_ext.ops import activation, norm, rope, softmax

    def norm_inputs(n, d):
        return (torch.randn(n, d, device=dev, dtype=dtype), torch.randn(d, device=dev, dtype=dtype),
                torch.randn(d, device=dev, dtype=dtype))

    def two(n, d):
        return (torch.randn(n, d, device=dev, dtype=dtype), torch.randn(n, d, device=dev, dtype=dtype))

    def one(n, d):
        return (torch.randn(n, d, device=dev, dtype=dtype) * 3,)

    def bias_in(n, d):
        return (torch.randn(n, d, device=dev, dtype=dtype), torch.randn(d, device=dev, dtype=dtype))

    half = 64  # RoPE: (n, d) read as n tokens x (d / 128) heads x head_dim 128, fully rotated

    def rope_in(n, d):
        heads = d // 128
        x = torch.randn(1, n, heads, 128, device=dev, dtype=dtype)
        inv = 1.0 / (10000 ** (torch.arange(half, device=dev, dtype=torch.float32) / half))
        ang = torch.arange(n, device=dev, dtype=torch.float32)[:, None] * inv[None]
        return x, ang.cos(), ang.sin()

    def rope_eager(x, cos, sin):
        c, s = cos[:, None, :].to(x.dtype), sin[:, None, :].to(x.dtype)
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    E = torch.empty(0, dtype=dtype).element_size()  # bytes per element
    return [
        ("rms_norm", norm_inputs, lambda x, w, b: norm.rms_norm(x, x.shape[-1], w, 1e-6),
         lambda x, w, b: F.rms_norm(x, (x.shape[-1],), w, 1e-6), lambda n, d: 2 * n * d * E, lambda n, d: 3 * n * d * E,
         (0, 1)),
        ("layer_norm", norm_inputs, lambda x, w, b: norm.layer_norm(x, x.shape[-1], w, b),
         lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), lambda n, d: 2 * n * d * E,
         lambda n, d: 3 * n * d * E, (0, 1, 2)),
        ("softmax", one, lambda x: softmax.softmax(x, -1), lambda x: F.softmax(x, -1), lambda n, d: 2 * n * d * E,
         lambda n, d: 3 * n * d * E, (0,)),
        ("log_softmax", one, lambda x: softmax.log_softmax(x, -1), lambda x: F.log_softmax(x, -1),
         lambda n, d: 2 * n * d * E, lambda n, d: 3 * n * d * E, (0,)),
        ("bias_gelu", bias_in, lambda x, b: activation.bias_gelu(x, b, "tanh"),
         lambda x, b: F.gelu(x + b, approximate="tanh"), lambda n, d: 2 * n * d * E, lambda n, d: 3 * n * d * E,
         (0, 1)),
        ("swiglu", two, activation.swiglu, lambda a, b: F.silu(a) * b, lambda n, d: 3 * n * d * E,
         lambda n, d: 5 * n * d * E, (0, 1)),
        # RoPE also reads cos and sin (fp32, one row of `half` each per token)
        ("rope", rope_in, lambda x, c, s: rope.rope(x, c, s), rope_eager, lambda n, d: 2 * n * d * E + 8 * n * half,
         lambda n, d: 2 * n * d * E + 8 * n * half, (0,)),
    ]


# ------------------------------------------------------------------- CUDA, on its own

def _timer(timing: str):
    """graph: a CUDA graph replay of make_fn()'s calls; call: do_bench of a loop of calls."""
    return cuda_graph_ms if timing == "graph" else (lambda make_fn, rep=100: cuda_ms(make_fn(), rep=rep))


def _compiled(fn, enabled):
    return torch.compile(fn, dynamic=False) if enabled else None


def run_case(name, make, mine, ref, fbytes, bbytes, grads, n, d, copy_bw, use_compile, rows_out, timings):
    """One op at n x d on CUDA: errors of the output and gradients against the reference, then
    forward and forward+backward times of mytorch, eager and (use_compile) torch.compile with
    each timing; appends a row per timing to rows_out and prints it."""
    torch.manual_seed(0)
    inputs = make(n, d)
    with torch.no_grad():
        err = rel_err(mine(*inputs), ref(*[t.float() if t.dtype == BF16 else t for t in inputs]))
    comp = _compiled(ref, use_compile)
    req = [t.detach().requires_grad_(i in grads) for i, t in enumerate(inputs)]
    g = torch.randn(mine(*inputs).shape, device="cuda", dtype=BF16)
    leaves = [req[i] for i in grads]

    def fb(fn):  # fresh leaves per timer (made on its stream); autograd.grad, no accumulation
        def make():
            xs = [t.detach().requires_grad_(i in grads) for i, t in enumerate(inputs)]
            return lambda: torch.autograd.grad(fn(*xs), [xs[i] for i in grads], g)
        return make

    def fwd(fn):
        return lambda: (lambda: fn(*inputs))

    y1 = mine(*req)
    y1.backward(g)
    gm = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    ref(*req).backward(g)
    gerr = max(rel_err(a, t.grad) for a, t in zip(gm, leaves))
    for timing in timings:
        timer = _timer(timing)
        t_mine = timer(fwd(mine))
        t_eager = timer(fwd(ref))
        t_comp = timer(fwd(comp)) if comp else float("nan")
        tb_mine = timer(fb(mine))
        tb_eager = timer(fb(ref))
        tb_comp = timer(fb(comp)) if comp else float("nan")
        gbs = fbytes(n, d) / t_mine / 1e6
        row = dict(op=name, shape=f"{n}x{d}", timing=timing, fwd_ms=t_mine, fwd_gbs=gbs,
                   fwd_pct_copy=100 * gbs / copy_bw, fwd_vs_eager=t_eager / t_mine, fwd_vs_compile=t_comp / t_mine,
                   fb_ms=tb_mine, fb_gbs=(fbytes(n, d) + bbytes(n, d)) / tb_mine / 1e6,
                   fb_vs_eager=tb_eager / tb_mine, fb_vs_compile=tb_comp / tb_mine,
                   eager_fwd_gbs=fbytes(n, d) / t_eager / 1e6, compile_fwd_gbs=fbytes(n, d) / t_comp / 1e6,
                   err=err, grad_err=gerr)
        row["fb_pct_copy"] = 100 * row["fb_gbs"] / copy_bw
        rows_out.append(row)
        print(f"  {name:12s} {n:6d}x{d:<6d} {timing:5s} fwd {gbs:7.0f} GB/s ({row['fwd_pct_copy']:5.1f}% copy) "
              f"x{row['fwd_vs_eager']:.2f} eager x{row['fwd_vs_compile']:.2f} compile | fwd+bwd {tb_mine:.3f} ms "
              f"({row['fb_pct_copy']:5.1f}% copy) x{row['fb_vs_eager']:.2f} eager x{row['fb_vs_compile']:.2f} "
              f"compile | err {err:.1e} grad {gerr:.1e}", flush=True)
    del inputs, req, g


def peak_extra(fn, base):
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**30


def cross_entropy_rows(use_compile, copy_bw, timings, n=8192, v=131072, n_items=None):
    """fused_cross_entropy fwd+bwd against eager and compile. n_items: the loss is the sum over
    tokens / n_items (Hugging Face's Trainer), a loss gradient other than 1: mytorch takes it
    as `divisor` (the same pass), and "mytorch, / after" divides the loss afterwards (one more
    pass over the gradient in backward)."""
    from mytorch_ext.ops.loss import fused_cross_entropy

    out = []
    x = (torch.randn(n, v, device="cuda", dtype=BF16) * 2).requires_grad_()
    t = torch.randint(0, v, (n,), device="cuda")
    t[::17] = -100
    if n_items is None:
        def ref(x, t):
            return F.cross_entropy(x, t)
        variants = {"mytorch": lambda x: fused_cross_entropy(x, t)}
    else:
        d = torch.tensor(float(n_items), device="cuda")

        def ref(x, t):
            return F.cross_entropy(x, t, reduction="sum") / d
        variants = {"mytorch": lambda x: fused_cross_entropy(x, t, reduction="sum", divisor=d),
                    "mytorch, / after": lambda x: fused_cross_entropy(x, t, reduction="sum") / d}
    comp_fn = _compiled(ref, use_compile)
    fns = {k: (lambda x, f=f: f(x).backward()) for k, f in variants.items()}
    fns["eager"] = lambda x: ref(x, t).backward()
    if comp_fn:
        fns["compile"] = lambda x: comp_fn(x, t).backward()

    l1 = variants["mytorch"](x)
    l1.backward()
    g1 = x.grad.clone()
    x.grad = None
    l2 = ref(x.float(), t)
    err = abs(l1.item() - l2.item()) / abs(l2.item())
    ref(x, t).backward()
    gerr = rel_err(g1, x.grad)
    del g1
    for name, fn in fns.items():
        fn(x)  # warm up (compile)
        x.grad = None
        base = torch.cuda.memory_allocated()
        mem = peak_extra(lambda: fn(x), base)
        x.grad = None
        for timing in timings:
            if timing == "graph":
                def make(fn=fn):
                    leaf = x.detach().requires_grad_()  # made on the capture stream (autograd streams)

                    def step():
                        leaf.grad = None
                        fn(leaf)
                    return step
                ms = cuda_graph_ms(make, rep=50)
            else:  # a Python loop of calls: eager mytorch includes the host check of the targets (a sync)
                ms = cuda_ms(lambda: fn(x), grad_to_none=[x], rep=50)
            x.grad = None
            out.append(dict(impl=name, timing=timing, ms=ms, peak_extra_gib=mem))
    bytes_min = 2 * n * v * 2  # read the logits once, write dlogits once
    what = "mean" if n_items is None else f"sum / n_items ({n_items})"
    print(f"fused_cross_entropy {n}x{v} bf16, {what}, fwd+bwd: loss rel err {err:.1e}, grad rel err {gerr:.1e}")
    print(f"  {'impl':16s} {'timing':>6s} {'ms':>8s} {'GB/s':>7s} {'%copy':>6s} {'speedup':>8s} {'peak extra GiB':>15s} "
          f"{'mem ratio':>10s}")
    for r in out:
        mine = next(m for m in out if m["timing"] == r["timing"])
        gbs = bytes_min / r["ms"] / 1e6
        print(f"  {r['impl']:16s} {r['timing']:>6s} {r['ms']:8.3f} {gbs:7.0f} {100 * gbs / copy_bw:6.1f} "
              f"{r['ms'] / mine['ms']:8.2f} {r['peak_extra_gib']:15.2f} {out[0]['peak_extra_gib'] / r['peak_extra_gib']:10.2f}")
    del x
    return out


def fused_linear_ce_rows(use_compile, n=8192, h=4096, v=131072):
    from mytorch_ext.ops.loss import fused_linear_cross_entropy

    out = []
    x = (torch.randn(n, h, device="cuda", dtype=BF16)).requires_grad_()
    w = (torch.randn(v, h, device="cuda", dtype=BF16) / 64).requires_grad_()
    t = torch.randint(0, v, (n,), device="cuda")

    def mine():
        fused_linear_cross_entropy(x, w, t).backward()

    def ref(x, w, t):
        return F.cross_entropy(x @ w.t(), t)

    comp_fn = _compiled(ref, use_compile)
    l1 = fused_linear_cross_entropy(x, w, t)
    l2 = ref(x.float(), w.float(), t)
    err = abs(l1.item() - l2.item()) / abs(l2.item())
    del l2
    for name, fn in (("mytorch", mine), ("eager", lambda: ref(x, w, t).backward()),
                     ("compile", (lambda: comp_fn(x, w, t).backward()) if comp_fn else None)):
        if fn is None:
            continue
        fn()
        x.grad = w.grad = None
        base = torch.cuda.memory_allocated()
        mem = peak_extra(fn, base)
        x.grad = w.grad = None
        ms = cuda_ms(fn, grad_to_none=[x, w], rep=300)
        out.append(dict(impl=name, ms=ms, peak_extra_gib=mem))
    print(f"fused_linear_cross_entropy N={n} H={h} V={v} bf16, fwd+bwd: loss rel err {err:.1e} (vs fp32)")
    print(f"  {'impl':8s} {'ms':>8s} {'TFLOP/s':>8s} {'speedup':>8s} {'peak extra GiB':>15s} {'mem ratio':>10s}")
    flop = 3 * 2 * n * h * v
    for r in out:
        print(f"  {r['impl']:8s} {r['ms']:8.3f} {flop / r['ms'] / 1e9:8.0f} {r['ms'] / out[0]['ms']:8.2f} "
              f"{r['peak_extra_gib']:15.2f} {out[0]['peak_extra_gib'] / r['peak_extra_gib']:10.2f}")
    del x, w
    return out


def optimizer_rows(copy_bw, use_compile):
    """One AdamW step and one SGD-with-momentum step over a LLaMA-like list of fp32 parameters:
    mytorch's one-launch kernels against torch.optim's foreach and fused implementations and
    torch.compile of the foreach step, each checked against torch.optim (for-loop) first."""
    from mytorch_ext.ops.optim import adam_step_, sgd_step_

    torch.manual_seed(0)
    sizes = [4096 * 4096] * 8 + [4096 * 11008] * 8 + [4096] * 64 + [1000 + i for i in range(64)]
    ps = [torch.randn(s, device="cuda") for s in sizes]
    gs = [torch.randn_like(p) for p in ps]
    numel = sum(sizes)
    kinds = {
        # name: (torch.optim class, kwargs, bytes moved: read p, g and states, write p and states)
        "adamw": (torch.optim.AdamW, dict(lr=1e-4, weight_decay=0.01), numel * 4 * 7),
        "sgd": (torch.optim.SGD, dict(lr=1e-3, momentum=0.9, weight_decay=0.01), numel * 4 * 5),
    }
    out = []
    for kind, (cls, kw, nbytes) in kinds.items():
        states = [[torch.zeros_like(p) for p in ps] for _ in range(2 if kind == "adamw" else 1)]
        step = [0]
        step_t = torch.zeros((), device="cuda")  # the step count every param reads on the device

        def mine(ps=ps, states=states, kind=kind, kw=kw, step_t=step_t):
            step[0] += 1
            if kind == "adamw":
                step_t.add_(1)
                adam_step_(ps, gs, states[0], states[1], [step_t] * len(ps), decoupled_weight_decay=True, **kw)
            else:  # torch's first step copies the gradient into the buffer
                sgd_step_(ps, gs, states[0], first_step=step[0] == 1, **kw)

        # check: three steps on the small tensors against torch.optim's for-loop implementation
        few = slice(len(sizes) - 70, len(sizes))
        mine_p = [p.clone() for p in ps[few]]
        mine_s = [[torch.zeros_like(p) for p in mine_p] for _ in states]
        ref = [torch.nn.Parameter(p.clone()) for p in ps[few]]
        opt = cls(ref, foreach=False, **kw)
        for k in range(1, 4):
            for p, g in zip(ref, gs[few]):
                p.grad = g
            opt.step()
            if kind == "adamw":
                steps = [torch.full((), float(k), device="cuda")] * len(mine_p)
                adam_step_(mine_p, gs[few], mine_s[0], mine_s[1], steps, decoupled_weight_decay=True, **kw)
            else:
                sgd_step_(mine_p, gs[few], mine_s[0], first_step=k == 1, **kw)
        err = max(rel_err(a, b.detach()) for a, b in zip(mine_p, ref))
        del mine_p, mine_s, ref, opt
        res = {"mytorch": cuda_ms(mine, rep=200)}
        params = [torch.nn.Parameter(p.clone()) for p in ps]
        for p, g in zip(params, gs):
            p.grad = g
        impls = [("foreach", dict(foreach=True)), ("fused", dict(fused=True))]
        if use_compile:
            impls.append(("compile", dict(foreach=True)))
        for impl, flags in impls:
            opt = cls(params, **kw, **flags)
            fn = opt.step
            if impl == "compile":
                fn = torch.compile(lambda opt=opt: opt.step())
            fn()
            fn()
            res[impl] = cuda_ms(fn, rep=200)
            del opt, fn
        del params, states
        torch._dynamo.reset()
        print(f"{kind} step, {len(sizes)} fp32 tensors, {numel / 1e6:.0f}M elements "
              f"({nbytes // numel // 4} x 4 bytes each), rel err vs torch.optim after 3 steps {err:.1e}:")
        print(f"  {'impl':16s} {'ms':>8s} {'GB/s':>7s} {'% copy':>7s} {'speedup':>8s}")
        for k, ms_ in res.items():
            gbs = nbytes / ms_ / 1e6
            print(f"  {k:16s} {ms_:8.3f} {gbs:7.0f} {100 * gbs / copy_bw:7.1f} {ms_ / res['mytorch']:8.2f}")
            out.append(dict(kind=kind, impl=k, ms=ms_, gbs=gbs))
        print()
    return out


# The sweep's bf16 sizes: 4k-32k rows x 1k-16k columns.
SWEEP_SIZES = ((4096, 1024), (4096, 16384), (32768, 1024), (32768, 8192), (8192, 16384))
SECTIONS = ("ops", "sweep", "ce", "flce", "optim")
TIMINGS = ("graph", "call")
_ME = "benchmarks.suites.norms"


def parse_args(argv=None):
    """The command line, checked before any GPU work (bad values: one line naming what is accepted)."""
    ap = argparse.ArgumentParser(prog=f"python -m {_ME}")
    ap.add_argument("--quick", action="store_true", help="only 16384x4096")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--sweep-compile", action="store_true", help="also time torch.compile at the sweep's sizes")
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", default="", help="comma list: " + ",".join(SECTIONS))
    ap.add_argument("--ops", default="", help="comma list of the ops/sweep sections' ops (default: all)")
    ap.add_argument("--sizes", default="",
                    help="comma list of ROWSxCOLS for the sweep (default: "
                         + ",".join(f"{n}x{d}" for n, d in SWEEP_SIZES) + ")")
    ap.add_argument("--timing", default="graph,call",
                    help="comma list of graph (GPU time, CUDA graph replay) and call (Python loop of calls)")
    args = ap.parse_args(argv)
    args.only = [o for o in args.only.split(",") if o] or list(SECTIONS)
    for o in args.only:
        if o not in SECTIONS:
            sys.exit(f"{_ME}: --only takes {', '.join(SECTIONS)}, got {o!r}")
    args.timing = [t for t in args.timing.split(",") if t]
    for t in args.timing:
        if t not in TIMINGS:
            sys.exit(f"{_ME}: --timing takes graph and/or call, got {t!r}")
    names = [n for n, *_ in cases(dev="meta")]
    args.ops = [o for o in args.ops.split(",") if o]
    for o in args.ops:
        if o not in names:
            sys.exit(f"{_ME}: --ops takes {', '.join(names)}, got {o!r}")
    text = args.sizes
    try:
        args.sizes = [tuple(int(v) for v in s.split("x")) for s in text.split(",") if s] or list(SWEEP_SIZES)
        if not all(len(s) == 2 and min(s) > 0 for s in args.sizes):
            raise ValueError
    except ValueError:
        sys.exit(f"{_ME}: --sizes takes positive ROWSxCOLS pairs separated by commas, got {text!r}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit(f"{_ME} needs a CUDA GPU")
    only, timings, picked, sweep_sizes = set(args.only), args.timing, args.ops, args.sizes
    use_compile = not args.no_compile

    def chosen_cases():
        return [c for c in cases() if not picked or c[0] in picked]

    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    copy_bw = copy_bandwidth("cuda", 1 << 29, BF16)
    print(f"device-to-device copy: {copy_bw:.0f} GB/s (read + write)")
    result = dict(device=torch.cuda.get_device_name(), copy_gbs=copy_bw, ops=[])
    if "ops" in only:
        print("\n== 16384x4096 bf16: mytorch vs ATen eager vs torch.compile ==")
        for c in chosen_cases():
            run_case(*c, 16384, 4096, copy_bw, use_compile, result["ops"], timings)
    if "sweep" in only and not args.quick:
        sweep_compile = use_compile and args.sweep_compile
        print(f"\n== size sweep, bf16 (torch.compile {'at each size' if sweep_compile else 'only at 16384x4096 above'}) ==")
        for n, d in sweep_sizes:
            for c in chosen_cases():
                run_case(*c, n, d, copy_bw, sweep_compile, result["ops"], timings[:1])
            torch._dynamo.reset()
    if "ce" in only:
        print()
        result["cross_entropy"] = cross_entropy_rows(use_compile, copy_bw, timings)
        print()
        result["cross_entropy_n_items"] = cross_entropy_rows(use_compile, copy_bw, timings, n_items=5000)
    if "flce" in only:
        print()
        result["fused_linear_ce"] = fused_linear_ce_rows(use_compile)
    if "optim" in only:
        print()
        result["optim"] = optimizer_rows(copy_bw, use_compile)
    # summary table
    print("\n== summary: forward GB/s as % of copy; speedups (time ratio, >1 = mytorch faster) ==")
    print(f"{'op':12s} {'shape':>12s} {'timing':>6s} {'fwd GB/s':>9s} {'%copy':>6s} {'eager%':>7s} {'comp%':>6s} "
          f"{'x eager':>8s} {'x comp':>7s} {'f+b ms':>7s} {'f+b %copy':>9s} {'f+b x eager':>11s} {'f+b x comp':>10s}")
    for r in result["ops"]:
        print(f"{r['op']:12s} {r['shape']:>12s} {r['timing']:>6s} {r['fwd_gbs']:9.0f} {r['fwd_pct_copy']:6.1f} "
              f"{100 * r['eager_fwd_gbs'] / copy_bw:7.1f} {100 * r['compile_fwd_gbs'] / copy_bw:6.1f} "
              f"{r['fwd_vs_eager']:8.2f} {r['fwd_vs_compile']:7.2f} {r['fb_ms']:7.3f} {r['fb_pct_copy']:9.1f} "
              f"{r['fb_vs_eager']:11.2f} {r['fb_vs_compile']:10.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
