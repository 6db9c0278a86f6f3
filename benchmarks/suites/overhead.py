"""overhead: host microseconds per call of every op that patch() / apply_to /
attn_implementation="mytorch" routes to mytorch, next to the ATen op it replaces, forward and
forward+backward, at shapes so small that the kernels' own time is negligible.

Each row calls what a patched model calls: the ATen function with patch() on (the
torch.library kernel, then the mytorch op), or the function apply_to installs (the module
forward, the RoPE function, transformers' attention function). The ATen column calls the
stock function: SDPA (on CUDA with its cuDNN and its flash backend, one row each), F.rms_norm,
F.layer_norm, F.gelu, softmax, F.cross_entropy, LlamaMLP.forward (silu(gate) * up), Llama's
rotate_half RoPE, ...

Timing: R repeats of N calls in a Python loop (garbage collector off), the mytorch and the ATen
repeats interleaved; a repeat's time / N is one sample, the table shows the median and the
min..max over the repeats. On CUDA the host time of enqueueing is timed: the queue is drained
(synchronize) before a repeat and the clock stops after the N-th call returns, before the
synchronize, with N small enough (a few hundred kernel launches) that the launch queue never
fills and blocks the host. On the CPU the kernels run on the host and count in: the shapes
are tiny so that what is left is mostly dispatch and Python, and the suite runs on one thread
(torch.set_num_threads(1), restored after): at these sizes a parallel region only adds the
wake-up of idle worker threads, which on a loaded machine costs milliseconds and would
drown the dispatch cost this suite is about.
Forward runs with inputs that require grad (as in training: the autograd graph is recorded);
forward+backward adds torch.autograd.grad of the outputs (no .grad accumulation).
Every row's outputs are checked against the ATen ones, and the patch() and apply_to rows
check through patch_stats() that the mytorch kernel ran (attention rows run with
set_attention_backend("mytorch"), so that they time mytorch's kernel on every GPU).
"""
from __future__ import annotations

import contextlib
import importlib.util
import statistics
import types
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from ..common import SpreadTable, Table, check_close, device_skip_reason
from ..timing import sample_times

# (repeats, calls per repeat) per device kind and mode
REPEATS = {"cpu": {"smoke": (3, 5), "quick": (7, 100), "full": (15, 300)},
           "cuda": {"smoke": (3, 5), "quick": (11, 20), "full": (31, 20)}}


def skip_reason(device: str) -> str | None:
    if device == "mytorch":
        return ("the overhead suite times the routes of patch() / apply_to on CPU and CUDA "
                "tensors (use --device cpu or cuda)")
    return device_skip_reason(device)


@dataclass
class Case:
    op: str                     # what is routed
    route: str                  # patch() / apply_to / attn_implementation="mytorch" / op
    aten: str                   # what the ATen column calls
    make: Callable              # () -> (inputs tuple, mytorch fn, aten fn, aten context or None)
    stat: str | None = None     # patch_stats key the mytorch call must count under

    @property
    def label(self) -> str:
        return f"{self.op} [{self.route}] vs {self.aten}"


# ------------------------------------------------------------------------------- timing

def _leaves(inputs):
    return [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]


def _outputs(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]


def _caller(fn, inputs, backward):
    if not backward:
        return lambda: fn(*inputs)
    leaves = _leaves(inputs)
    outs = _outputs(fn(*inputs))
    grads = [torch.ones_like(o) for o in outs]

    def call():
        torch.autograd.grad(_outputs(fn(*inputs)), leaves, grads)
    return call


def measure(calls: dict, device: str, repeats: int, n: int) -> dict:
    """{name: (median, min, max) host us per call}; calls: {name: (fn, context factory)}.
    The names' repeats are interleaved, so that a drift of the machine hits all alike."""
    times = sample_times({k: fn for k, (fn, _) in calls.items()}, device, samples=repeats, warmup=3,
                         batch=n, host_only=True, contexts={k: ctx for k, (_, ctx) in calls.items()},
                         gc_off=True)
    return {k: (statistics.median(v) * 1e6, min(v) * 1e6, max(v) * 1e6) for k, v in times.items()}


# ------------------------------------------------------------------------------- cases

def _t(shape, device, dtype, grad=True, scale=1.0):
    return (torch.randn(shape, device=device, dtype=torch.float32) * scale).to(dtype).requires_grad_(grad)


def _patched(op):
    import mytorch_ext

    return lambda: mytorch_ext.patched((op,))


def _sdpa_backends(device):
    """(name, context factory) of the ATen SDPA backends the attention rows compare with."""
    if device != "cuda":
        return [("SDPA", None)]
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return [("SDPA cuDNN", lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)),
            ("SDPA flash", lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION))]


class _Norm(torch.nn.Module):
    """The attributes apply_to's RMSNorm forward reads (a Llama-style RMSNorm)."""

    def __init__(self, d, device, dtype):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d, device=device, dtype=dtype))
        self.variance_epsilon = 1e-6

    def forward(self, x):  # what apply_to falls back to: Llama's formula
        v = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(v + self.variance_epsilon)).to(x.dtype)


class _MLP(torch.nn.Module):
    """A Llama MLP with identity projections, so that a row times the gate product alone:
    down(act(gate(x)) * up(x)) with gate = up = down = identity."""

    def __init__(self):
        super().__init__()
        self.gate_proj = self.up_proj = self.down_proj = torch.nn.Identity()
        self.act_fn = torch.nn.SiLU()


def _rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _llama_rope(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    """transformers' Llama apply_rotary_pos_emb (used where transformers is missing)."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def cases(device: str) -> list[Case]:
    from mytorch_ext.ops import attention as attn_ops
    from mytorch_ext.ops import loss
    from mytorch_ext.patching import hf

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    b, h, n, d = 1, 2, 16, 32        # attention: (batch, heads, seqlen, head_dim)
    rows, cols, vocab = 8, 64, 128   # norms, activations; cross-entropy over vocab classes
    out: list[Case] = []
    have_hf = importlib.util.find_spec("transformers") is not None

    for aten_name, ctx in _sdpa_backends(device):
        def sdpa(ctx=ctx):
            q, k, v = (_t((b, h, n, d), device, dtype) for _ in range(3))
            fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
            return (q, k, v), fn, fn, ctx
        out.append(Case("sdpa", "patch()", aten_name, sdpa, "sdpa"))

        def flash(ctx=ctx):
            q, k, v = (_t((b, n, h, d), device, dtype) for _ in range(3))

            def aten(q, k, v):  # the same (batch, seqlen, heads, head_dim) layout in and out
                o = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)
                return o.transpose(1, 2)
            return (q, k, v), lambda q, k, v: attn_ops.flash_attn(q, k, v, causal=True), aten, ctx
        out.append(Case("flash_attn", "op", aten_name, flash))

        if have_hf:
            def hf_attn(ctx=ctx):
                from transformers.integrations.sdpa_attention import sdpa_attention_forward

                hf.register_hf()
                module = types.SimpleNamespace(is_causal=True, num_key_value_groups=1, training=False)
                q, k, v = (_t((b, h, n, d), device, dtype) for _ in range(3))

                def mine(q, k, v):
                    return hf.mytorch_attention_forward(module, q, k, v, None, dropout=0.0)[0]

                def stock(q, k, v):
                    return sdpa_attention_forward(module, q, k, v, None, dropout=0.0)[0]
                return (q, k, v), mine, stock, ctx
            out.append(Case("attention", 'attn_implementation="mytorch"', f"transformers {aten_name}",
                            hf_attn, "hf_attention"))

    def norm_inputs():
        return _t((rows, cols), device, dtype), _t((cols,), device, dtype), _t((cols,), device, dtype)

    def rms_patch():
        x, w, _ = norm_inputs()
        fn = lambda x, w: F.rms_norm(x, (cols,), w, 1e-6)  # noqa: E731
        return (x, w), fn, fn, None
    out.append(Case("rms_norm", "patch()", "F.rms_norm", rms_patch, "rms_norm"))

    def rms_apply():
        x, _, _ = norm_inputs()
        m = _Norm(cols, device, dtype)
        swapped = types.MethodType(hf._rms_forward, m)
        return (x, m.weight), lambda x, w: swapped(x), lambda x, w: F.rms_norm(x, (cols,), w, 1e-6), None
    out.append(Case("rms_norm", "apply_to", "F.rms_norm", rms_apply, "rms_norm"))

    def ln_patch():
        x, w, bias = norm_inputs()
        fn = lambda x, w, bias: F.layer_norm(x, (cols,), w, bias)  # noqa: E731
        return (x, w, bias), fn, fn, None
    out.append(Case("layer_norm", "patch()", "F.layer_norm", ln_patch, "layer_norm"))

    def ln_apply():
        x = norm_inputs()[0]
        m = torch.nn.LayerNorm(cols, device=device, dtype=dtype)
        swapped = types.MethodType(hf._layer_norm_forward, m)
        return ((x, m.weight, m.bias), lambda x, w, bias: swapped(x),
                lambda x, w, bias: F.layer_norm(x, (cols,), w, bias), None)
    out.append(Case("layer_norm", "apply_to", "F.layer_norm", ln_apply, "layer_norm"))

    for name, fn in (("softmax", lambda x: torch.softmax(x, -1)),
                     ("log_softmax", lambda x: torch.log_softmax(x, -1)),
                     ("gelu", lambda x: F.gelu(x))):
        def sm(fn=fn):
            return (_t((rows, cols), device, dtype),), fn, fn, None
        aten_name = {"gelu": "F.gelu"}.get(name, f"torch.{name}")
        out.append(Case(name, "patch()", aten_name, sm, name))

    def gelu_tanh():
        x = _t((rows, cols), device, dtype)
        swapped = types.MethodType(hf._gelu_tanh_forward, torch.nn.GELU("tanh"))
        return (x,), swapped, lambda x: F.gelu(x, approximate="tanh"), None
    out.append(Case("gelu tanh", "apply_to", 'F.gelu(approximate="tanh")', gelu_tanh, "gelu"))

    def swiglu():
        a = _t((rows, cols), device, dtype)
        m = _MLP()
        swapped = types.MethodType(hf._swiglu_forward, m)
        # the peer is the forward apply_to replaces (LlamaMLP.forward), through the same
        # identity projections, so both sides pay for the three module calls
        return (a,), swapped, lambda a: m.down_proj(m.act_fn(m.gate_proj(a)) * m.up_proj(a)), None
    out.append(Case("swiglu", "apply_to", "LlamaMLP.forward: silu(gate) * up", swiglu, "swiglu"))

    def rope():
        original = hf._llama()[1] if hf._llama() is not None else _llama_rope
        q, k = _t((b, h, n, d), device, dtype), _t((b, h, n, d), device, dtype)
        ang = torch.outer(torch.arange(n, device=device, dtype=torch.float32),
                          torch.arange(d // 2, device=device, dtype=torch.float32))
        ang = torch.cat((ang, ang), -1)[None]
        cos, sin = ang.cos().to(dtype), ang.sin().to(dtype)
        return (q, k, cos, sin), hf._make_rope(original), original, None
    out.append(Case("rope", "apply_to", "rotate_half formula", rope, "rope"))

    def ce_patch():
        x = _t((rows, vocab), device, dtype)
        t = torch.randint(0, vocab, (rows,), device=device)
        fn = lambda x: F.cross_entropy(x, t)  # noqa: E731
        return (x,), fn, fn, None
    out.append(Case("cross_entropy", "patch()", "F.cross_entropy", ce_patch, "cross_entropy"))

    def flce():
        x, w = _t((rows, cols), device, dtype), _t((vocab, cols), device, dtype, scale=0.1)
        t = torch.randint(0, vocab, (rows,), device=device)
        mine = lambda x, w: loss.fused_linear_cross_entropy(x, w, t, -100, 0.0, "mean", 0)  # noqa: E731
        stock = lambda x, w: F.cross_entropy(F.linear(x, w).float(), t)  # noqa: E731
        return (x, w), mine, stock, None
    out.append(Case("fused_linear_cross_entropy", "apply_to loss", "linear + F.cross_entropy", flce))

    def fce():
        x = _t((rows, vocab), device, dtype)
        t = torch.randint(0, vocab, (rows,), device=device)
        return (x,), lambda x: loss.fused_cross_entropy(x, t), lambda x: F.cross_entropy(x.float(), t), None
    out.append(Case("fused_cross_entropy", 'apply_to loss "fused"', "F.cross_entropy", fce))
    return out


# ---------------------------------------------------------------------------------- table

class OverheadTable(SpreadTable):
    """Median host us per call with the min..max over the repeats, and the ratio of mytorch's
    time to ATen's (< 1: mytorch costs the host less). The JSON keeps Table's fields (x_aten
    is the speed-up aten / mytorch, as in every suite) plus the spreads and mytorch/aten."""

    digits = 1
    cell_width = 26
    ratio_width = 14

    def ratio_note(self) -> str:
        return f"{self.impls[0]}/PEER = host-time ratio, <1: {self.impls[0]} cheaper"

    def impl_head(self, impl: str) -> str:
        return impl + " us (min..max)"

    def ratio_head(self, peer: str) -> str:
        return f"{self.impls[0]}/{peer}"

    def ratio_cell(self, vals: dict, peer: str) -> float:
        return vals[self.impls[0]] / vals[peer]

    def to_json(self) -> dict:
        out = super().to_json()
        for row, (_, vals) in zip(out["rows"], self.rows):
            for peer in self.impls[1:]:
                row[f"{self.impls[0]}_over_{peer}"] = self.ratio_cell(vals, peer)
        return out


def _table(title, repeats, n):
    t = OverheadTable(title, "us", f"host time per call, median of {repeats} repeats of {n} calls",
                      ["mytorch", "aten"], higher_is_better=False)
    t.spread = {}
    return t


def _check_route(case, device, fn, inputs):
    """The mytorch call runs the mytorch kernel (patch_stats), in the patch() state it is timed in."""
    import mytorch_ext

    if case.stat is None:
        return
    mytorch_ext.patch_stats(reset=True)
    with torch.no_grad():
        fn(*inputs)
    got = mytorch_ext.patch_stats(reset=True).get(case.stat, {})
    if got.get("mytorch", 0) < 1 or got.get("fallthrough", 0):
        raise RuntimeError(f"overhead: {case.label} did not run the mytorch kernel on {device} "
                           f"(patch_stats {case.stat}: {got})")


def run(device: str, mode: str, progress) -> list[Table]:
    import mytorch_ext
    from mytorch_ext.patching.aten import attention_backend

    threads, backend = torch.get_num_threads(), attention_backend()
    if device == "cpu":
        torch.set_num_threads(1)
    # every attention row times mytorch's kernel, also where plain calls would go to
    # PyTorch's SDPA by default (set_attention_backend)
    mytorch_ext.set_attention_backend("mytorch")
    try:
        return _run(device, mode, progress)
    finally:
        torch.set_num_threads(threads)
        mytorch_ext.set_attention_backend(backend)


def _run(device: str, mode: str, progress) -> list[Table]:
    import mytorch_ext

    repeats, n = REPEATS["cuda" if device == "cuda" else "cpu"][mode]
    all_cases = cases(device)
    dtype = "bf16" if device == "cuda" else "fp32"
    where = torch.cuda.get_device_name() if device == "cuda" else "cpu, 1 thread"
    fwd = _table(f"host time per call, forward, {dtype}, tiny shapes, {where}", repeats, n)
    both = _table(f"host time per call, forward+backward, {dtype}, tiny shapes, {where}", repeats, n)
    bar = progress(len(all_cases), f"overhead ({device})")
    tol = 3e-2 if device == "cuda" else 1e-3
    for case in all_cases:
        inputs, mine, stock, aten_ctx = case.make()
        mine_ctx = _patched(case.stat) if case.route == "patch()" else contextlib.nullcontext
        stock_ctx = aten_ctx or contextlib.nullcontext
        with mine_ctx():
            _check_route(case, device, mine, inputs)
            ours = mine(*inputs)
        with stock_ctx():
            ref = stock(*inputs)
        check_close(f"overhead: {case.label}", ours, ref, tol)
        for table, backward in ((fwd, False), (both, True)):
            with mine_ctx():
                mine_call = _caller(mine, inputs, backward)
            with stock_ctx():
                stock_call = _caller(stock, inputs, backward)
            got = measure({"mytorch": (mine_call, mine_ctx), "aten": (stock_call, stock_ctx)},
                          device, repeats, n)
            table.add(case.label, {k: v[0] for k, v in got.items()})
            table.spread[case.label] = {k: v[1:] for k, v in got.items()}
        bar.step(case.label)
    bar.close()
    mytorch_ext.patch_stats(reset=True)
    return [fwd, both]
