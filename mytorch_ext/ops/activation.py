"""The activation family: gelu (the template op), hardswish / hardsigmoid, bias_gelu, swiglu.

Fake kernels, autograd (gelu, bias_gelu and swiglu have theirs in C++, csrc/autograd/activation.cpp;
these registrations then leave it in place) and public wrappers.
"""
from __future__ import annotations

import torch

from ._autograd import register_autograd
from ._inductor import acc_dtype, inductor_decomposition, sum_over

_ops = torch.ops.mytorch


def _empty(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


# ---- gelu ----
@torch.library.register_fake("mytorch::gelu")
def _gelu_fake(x, approximate="none"):
    return _empty(x)


@torch.library.register_fake("mytorch::gelu_backward")
def _gelu_backward_fake(grad, x, approximate="none"):
    torch._check(grad.shape == x.shape,
                 lambda: f"mytorch::gelu_backward: grad {tuple(grad.shape)} vs x {tuple(x.shape)}")
    return _empty(x)


def _gelu_setup(ctx, inputs, output):
    x, approximate = inputs
    ctx.save_for_backward(x)
    ctx.approximate = approximate


def _gelu_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return _ops.gelu_backward(grad, x, ctx.approximate), None


register_autograd("mytorch::gelu", _gelu_backward, setup_context=_gelu_setup)


# Under Inductor (mytorch_ext/ops/_inductor.py): ATen's gelu computes in float32 for 16-bit
# inputs, as the kernels do.
@inductor_decomposition("mytorch::gelu")
def _gelu_decomposition(x, approximate="none"):
    return torch.ops.aten.gelu.default(x, approximate=approximate)


@inductor_decomposition("mytorch::gelu_backward")
def _gelu_backward_decomposition(grad, x, approximate="none"):
    return torch.ops.aten.gelu_backward.default(grad, x, approximate=approximate)


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """GELU, as torch.nn.functional.gelu, through mytorch's kernels."""
    return _ops.gelu(x, approximate)


# ---- hardswish, hardsigmoid ----
for _name in ("hardswish", "hardsigmoid"):
    torch.library.register_fake(f"mytorch::{_name}")(lambda x: _empty(x))
    torch.library.register_fake(f"mytorch::{_name}_backward")(lambda grad, x: _empty(x))


def _hardact_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _hardswish_backward(ctx, grad):
    return _ops.hardswish_backward(grad, ctx.saved_tensors[0])


def _hardsigmoid_backward(ctx, grad):
    return _ops.hardsigmoid_backward(grad, ctx.saved_tensors[0])


register_autograd("mytorch::hardswish", _hardswish_backward, setup_context=_hardact_setup)
register_autograd("mytorch::hardsigmoid", _hardsigmoid_backward, setup_context=_hardact_setup)

# Under Inductor: ATen's formulas, computed in float32 for 16-bit inputs as the kernels do.
for _name in ("hardswish", "hardsigmoid"):
    inductor_decomposition(f"mytorch::{_name}")(getattr(torch.ops.aten, _name).default)
    inductor_decomposition(f"mytorch::{_name}_backward")(getattr(torch.ops.aten, f"{_name}_backward").default)


def hardswish(x):
    """As torch.nn.functional.hardswish, through mytorch's kernels."""
    return _ops.hardswish(x)


def hardsigmoid(x):
    """As torch.nn.functional.hardsigmoid, through mytorch's kernels."""
    return _ops.hardsigmoid(x)


# ---- bias + GELU, SwiGLU ----
@torch.library.register_fake("mytorch::bias_gelu")
def _bias_gelu_fake(x, bias, approximate="tanh"):
    return _empty(x)


@torch.library.register_fake("mytorch::bias_gelu_backward")
def _bias_gelu_backward_fake(grad, x, bias, approximate="tanh"):
    return _empty(x), _empty(bias)


def _bias_gelu_setup(ctx, inputs, output):
    x, bias, approximate = inputs[:3]
    ctx.save_for_backward(x, bias)
    ctx.approximate = approximate


def _bias_gelu_backward(ctx, grad):
    x, bias = ctx.saved_tensors
    dx, db = _ops.bias_gelu_backward(grad, x, bias, ctx.approximate)
    return dx, db, None


register_autograd("mytorch::bias_gelu", _bias_gelu_backward, setup_context=_bias_gelu_setup)


@inductor_decomposition("mytorch::bias_gelu")
def _bias_gelu_decomposition(x, bias, approximate="tanh"):
    acc = acc_dtype(x.dtype)
    return torch.ops.aten.gelu.default(x.to(acc) + bias.to(acc), approximate=approximate).to(x.dtype)


@inductor_decomposition("mytorch::bias_gelu_backward")
def _bias_gelu_backward_decomposition(grad, x, bias, approximate="tanh"):
    acc = acc_dtype(x.dtype)
    v = x.to(acc) + bias.to(acc)
    dx = torch.ops.aten.gelu_backward.default(grad.to(acc), v, approximate=approximate)
    return dx.to(x.dtype), sum_over(dx, tuple(range(x.dim() - 1))).to(bias.dtype)


@torch.library.register_fake("mytorch::swiglu")
def _swiglu_fake(a, b):
    return _empty(a)


@torch.library.register_fake("mytorch::swiglu_backward")
def _swiglu_backward_fake(grad, a, b):
    return _empty(a), _empty(b)


def _swiglu_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _swiglu_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return tuple(_ops.swiglu_backward(grad, a, b))


register_autograd("mytorch::swiglu", _swiglu_backward, setup_context=_swiglu_setup)


@inductor_decomposition("mytorch::swiglu")
def _swiglu_decomposition(a, b):
    acc = acc_dtype(a.dtype)
    af = a.to(acc)
    return (af * torch.sigmoid(af) * b.to(acc)).to(a.dtype)


@inductor_decomposition("mytorch::swiglu_backward")
def _swiglu_backward_decomposition(grad, a, b):
    acc = acc_dtype(a.dtype)
    af, gf = a.to(acc), grad.to(acc)
    sg = torch.sigmoid(af)
    da = gf * b.to(acc) * sg * (1 + af * (1 - sg))
    return da.to(a.dtype), (gf * af * sg).to(b.dtype)


def bias_gelu(x, bias, approximate: str = "tanh"):
    """gelu(x + bias), bias broadcast over the last dim."""
    return _ops.bias_gelu(x, bias, approximate)


def swiglu(a, b):
    """silu(a) * b."""
    return _ops.swiglu(a, b)
