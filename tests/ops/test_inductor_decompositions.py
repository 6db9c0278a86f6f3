"""The decompositions Inductor uses for mytorch's norms, RoPE and activations
(mytorch_ext/ops/_inductor.py), checked as the kernels are.

- Each forward and backward decomposition runs the drawn calls of its tests/opinfo.py entry
  against the same float64 reference and tolerances as the op; the backward ops without drawn
  calls of their own (the norms', softmax's) are compared with the op on the drawn calls of
  their forward.
- Under torch.compile, the generated code calls no decomposed op, and values and gradients
  match eager; attention and the fused losses stay mytorch calls.
- MYTORCH_INDUCTOR_DECOMPOSE=0 keeps every op an opaque call.
"""
import dataclasses
import os
import re
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings, strategies as st

from opinfo import OPS
from oracle import fuzz_against_reference
from strategies import realize

import mytorch_ext  # noqa: F401
from mytorch_ext.ops import _inductor

M = torch.ops.mytorch
DECOMPOSED = ("gelu", "gelu_backward", "swiglu", "swiglu_backward", "rope", "rope_backward",
              "rms_norm", "rms_norm_backward", "layer_norm", "layer_norm_backward",
              "bias_gelu", "bias_gelu_backward", "hardswish", "hardswish_backward", "hardsigmoid",
              "hardsigmoid_backward", "softmax", "softmax_backward", "log_softmax", "log_softmax_backward")
KEPT = ("flash_attn", "flash_attn_backward", "fused_linear_cross_entropy")


def _table():
    """Inductor's decomposition table, loaded (which installs mytorch's entries)."""
    import torch._inductor.decomposition as d

    return d.decompositions


def _decomposition(name):
    _table()
    return _inductor.installed()[f"mytorch::{name}"]


def test_the_decomposed_ops_are_in_inductors_table():
    table = _table()
    assert sorted(_inductor.installed()) == sorted(f"mytorch::{n}" for n in DECOMPOSED)
    for n in DECOMPOSED:
        assert table[getattr(M, n).default] is _decomposition(n)
    for n in KEPT:
        assert getattr(M, n).default not in table


@pytest.mark.parametrize("name", [n for n in DECOMPOSED if OPS[n].sample is not None])
def test_decomposition_matches_the_reference(name):
    spec = dataclasses.replace(OPS[name], call=_decomposition(name), backward_of=None)
    fuzz_against_reference(spec, ["cpu"])


def _norm_backward_args(name, g, args, kwargs):
    x, shape, w = args[0], args[1], args[2]
    stats = getattr(M, name)(x, *args[1:], **kwargs)[1:]
    return (g, x, shape, *stats, w)


def _softmax_backward_args(name, g, args, kwargs):
    return (g, getattr(M, name)(*args), args[1])


# backward ops with no drawn calls of their own: (forward, its backward's arguments from a
# forward call and a gradient)
BACKWARD_FROM_FORWARD = {"rms_norm_backward": ("rms_norm", _norm_backward_args),
                         "layer_norm_backward": ("layer_norm", _norm_backward_args),
                         "softmax_backward": ("softmax", _softmax_backward_args),
                         "log_softmax_backward": ("log_softmax", _softmax_backward_args)}


def test_every_decomposed_op_is_checked():
    unchecked = [n for n in DECOMPOSED if OPS[n].sample is None and n not in BACKWARD_FROM_FORWARD]
    assert not unchecked, unchecked


@pytest.mark.parametrize("name", sorted(BACKWARD_FROM_FORWARD))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_backward_decomposition_matches_the_op(name, data):
    forward, make_args = BACKWARD_FROM_FORWARD[name]
    spec = OPS[forward]
    dtype = data.draw(st.sampled_from(spec.dtypes), label="dtype")
    args, kwargs = spec.sample(data.draw, dtype)
    args, kwargs = realize(args, "cpu"), realize(kwargs, "cpu")
    args = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    bwd_args = make_args(forward, torch.randn_like(args[0]), args, kwargs)
    got = _decomposition(name)(*bwd_args)
    want = getattr(M, name)(*bwd_args)
    got, want = ((got,), (want,)) if isinstance(want, torch.Tensor) else (got, want)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype in (torch.bfloat16, torch.float16) else dict(rtol=1e-4, atol=1e-5)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape and a.dtype == b.dtype, (name, i, a.shape, b.shape, a.dtype, b.dtype)
        torch.testing.assert_close(a, b, **tol, msg=lambda m: f"{name} output {i} ({dtype}): {m}")


def _block(x, w, ln_w, ln_b, cos, sin, gate, up):
    """Norms, RoPE, activations and softmax between plain ATen ops."""
    h = M.rms_norm(x, [x.shape[-1]], w, None)[0] + x
    h = M.layer_norm(h, [x.shape[-1]], ln_w, ln_b, 1e-5)[0]
    q = M.rope(h.view(2, 8, 4, 16), cos, sin, False)
    qi = M.rope(h.view(2, 8, 4, 16), cos[:, :6], sin[:, :6], True)  # interleaved, partial rotary
    a = M.swiglu(gate, up) * M.gelu(gate, "tanh") + M.bias_gelu(up, w[:32], "tanh")
    a = a + M.softmax(gate, -1) * M.log_softmax(up, 0) + M.hardswish(up) * M.hardsigmoid(gate)
    return q.float().square().sum() + 0.3 * qi.float().sum() + a.float().sum()


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_code_fuses_the_decomposed_ops(dtype, device):
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    ang = torch.randn(8, 8, device=device)
    leaves = [torch.randn(s, dtype=dtype, device=device) for s in ((2, 8, 64), (64,), (64,), (64,))]
    gate, up = (torch.randn(4, 32, dtype=dtype, device=device) for _ in range(2))
    leaves += [gate, up]
    for t in leaves:
        t.requires_grad_(True)
    x, w, ln_w, ln_b = leaves[:4]
    args = (x, w, ln_w, ln_b, ang.cos().to(dtype), ang.sin().to(dtype), gate, up)

    want = _block(*args)
    want_grads = torch.autograd.grad(want, leaves)
    torch._dynamo.reset()
    compiled = torch.compile(_block, fullgraph=True)

    def run():
        out = compiled(*args)
        return out, torch.autograd.grad(out, leaves)

    (got, grads), codes = run_and_get_code(run)
    calls = set(re.findall(r"torch\.ops\.mytorch\.(\w+)", "\n".join(codes)))
    assert not calls, f"mytorch ops left opaque in Inductor's code: {sorted(calls)}"
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        for a, b in zip(grads, want_grads):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        return
    # bfloat16: eager rounds at every op boundary, the fused code less often. Both against
    # float64: the compiled error within twice eager's (plus a little).
    exact = [t.detach().cpu().double().requires_grad_(True) for t in leaves]  # float64 on the CPU kernels
    ref = _block(*exact[:4], *(t.cpu().double() for t in args[4:6]), *exact[4:])
    ref_grads = torch.autograd.grad(ref, exact)
    for what, a, b, r in zip(["value"] + [f"grad {i}" for i in range(len(leaves))],
                             [got, *grads], [want, *want_grads], [ref, *ref_grads]):
        err_compiled = (a.cpu().double() - r).abs().max().item()
        err_eager = (b.cpu().double() - r).abs().max().item()
        assert err_compiled <= 2 * err_eager + 1e-2 * r.abs().max().item(), (what, err_compiled, err_eager)


def test_attention_and_the_fused_loss_stay_mytorch_calls():
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 16, 2, 32, requires_grad=True) for _ in range(3))
    wt = torch.randn(50, 64, requires_grad=True)
    target = torch.randint(0, 50, (16,))

    def f(q, k, v, wt):
        o = mytorch_ext.flash_attn(q, k, v, causal=True)
        h = M.rms_norm(o.reshape(16, 64), [64], None, None)[0]
        return mytorch_ext.ops.loss.fused_linear_cross_entropy(h, wt, target)

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)
    _, codes = run_and_get_code(lambda: compiled(q, k, v, wt).backward())
    calls = set(re.findall(r"torch\.ops\.mytorch\.(\w+)", "\n".join(codes)))
    assert {"flash_attn", "fused_linear_cross_entropy"} <= calls, calls
    assert "rms_norm" not in calls and "rms_norm_backward" not in calls, calls


def test_the_opt_out_keeps_every_op_opaque():
    code = ("import re, torch, mytorch_ext\n"
            "from torch._inductor.utils import run_and_get_code\n"
            "from mytorch_ext.ops import _inductor\n"
            "f = torch.compile(lambda x: torch.ops.mytorch.rms_norm(x, [8], None, None)[0] * 2)\n"
            "_, codes = run_and_get_code(f, torch.randn(4, 8))\n"
            "print(sorted(_inductor.installed()), sorted(set(re.findall(r'mytorch\\.(\\w+)', codes[0]))),\n"
            "      torch._inductor.config.fx_graph_cache)\n")
    env = {**os.environ, "MYTORCH_INDUCTOR_DECOMPOSE": "0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[] ['rms_norm'] False", out.stdout


def test_inductor_imported_before_mytorch_ext_gets_them_too():
    code = ("import torch, torch._inductor.decomposition as d\n"
            "import mytorch_ext\n"
            "from mytorch_ext.ops import _inductor\n"
            "print(len(_inductor.installed()), torch.ops.mytorch.rms_norm.default in d.decompositions)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == f"{len(DECOMPOSED)} True", out.stdout
