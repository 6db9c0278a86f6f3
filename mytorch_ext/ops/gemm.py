"""mytorch::mm / bmm / addmm / baddbmm / linear: fake kernels, autograd, wrappers."""
from __future__ import annotations

import math

import torch

from ._autograd import register_autograd

_ops = torch.ops.mytorch


def _mm_shape(op, a, b, dim):
    torch._check(a.dim() == dim and b.dim() == dim,
                 lambda: f"mytorch::{op}: expected {dim}-D operands, got {a.dim()}-D and {b.dim()}-D")
    torch._check(a.shape[-1] == b.shape[-2],
                 lambda: f"mytorch::{op}: shapes cannot be multiplied ({list(a.shape)} and {list(b.shape)})")
    torch._check(a.dtype == b.dtype, lambda: f"mytorch::{op}: dtypes differ: {a.dtype} and {b.dtype}")
    return (*a.shape[:-1], b.shape[-1])


@torch.library.register_fake("mytorch::mm")
def _mm_fake(a, b):
    return a.new_empty(_mm_shape("mm", a, b, 2))


@torch.library.register_fake("mytorch::bmm")
def _bmm_fake(a, b):
    return a.new_empty(_mm_shape("bmm", a, b, 3))


@torch.library.register_fake("mytorch::addmm")
def _addmm_fake(self, a, b, *, beta=1, alpha=1):
    return a.new_empty(_mm_shape("addmm", a, b, 2))


@torch.library.register_fake("mytorch::baddbmm")
def _baddbmm_fake(self, a, b, *, beta=1, alpha=1):
    return a.new_empty(_mm_shape("baddbmm", a, b, 3))


@torch.library.register_fake("mytorch::linear")
def _linear_fake(x, w, bias=None):
    torch._check(x.shape[-1] == w.shape[1],
                 lambda: f"mytorch::linear: in_features {w.shape[1]} vs input {list(x.shape)}")
    return x.new_empty((*x.shape[:-1], w.shape[0]))


def _t(x):
    return x.transpose(-1, -2)


# ---- autograd ----
def _mm_setup(ctx, inputs, output):
    a, b = inputs
    ctx.save_for_backward(a, b)


def _mm_backward(ctx, g):
    a, b = ctx.saved_tensors
    ga = _ops.mm(g, _t(b)) if ctx.needs_input_grad[0] else None
    gb = _ops.mm(_t(a), g) if ctx.needs_input_grad[1] else None
    return ga, gb


def _bmm_backward(ctx, g):
    a, b = ctx.saved_tensors
    ga = _ops.bmm(g, _t(b)) if ctx.needs_input_grad[0] else None
    gb = _ops.bmm(_t(a), g) if ctx.needs_input_grad[1] else None
    return ga, gb


def _make_add_backward(mm):
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        gs = ga = gb = None
        if ctx.needs_input_grad[0]:
            gs = g.sum_to_size(ctx.self_shape) if g.shape != ctx.self_shape else g
            gs = gs * ctx.beta if ctx.beta != 1 else gs.clone()
        if ctx.needs_input_grad[1]:
            ga = mm(g, _t(b))
            ga = ga * ctx.alpha if ctx.alpha != 1 else ga
        if ctx.needs_input_grad[2]:
            gb = mm(_t(a), g)
            gb = gb * ctx.alpha if ctx.alpha != 1 else gb
        return gs, ga, gb
    return backward


def _add_setup(ctx, inputs, keyword_only_inputs, output):
    self, a, b = inputs
    ctx.save_for_backward(a, b)
    ctx.self_shape = self.shape
    ctx.beta = float(keyword_only_inputs.get("beta", 1))
    ctx.alpha = float(keyword_only_inputs.get("alpha", 1))


def _linear_setup(ctx, inputs, output):
    x, w, bias = inputs
    ctx.save_for_backward(x, w)
    ctx.has_bias = bias is not None


def _linear_backward(ctx, g):
    x, w = ctx.saved_tensors
    rows = math.prod(x.shape[:-1])  # not -1: reshape cannot infer it when a last dim is 0
    g2 = g.reshape(rows, g.shape[-1])
    gx = gw = gb = None
    if ctx.needs_input_grad[0]:
        gx = _ops.mm(g2, w).reshape(x.shape)
    if ctx.needs_input_grad[1]:
        gw = _ops.mm(_t(g2), x.reshape(rows, x.shape[-1]))
    if ctx.has_bias and ctx.needs_input_grad[2]:
        gb = g2.sum(0)
    return gx, gw, gb


register_autograd("mytorch::mm", _mm_backward, setup_context=_mm_setup)
register_autograd("mytorch::bmm", _bmm_backward, setup_context=_mm_setup)
register_autograd("mytorch::addmm", _make_add_backward(_ops.mm),
                                setup_context=_add_setup)
register_autograd("mytorch::baddbmm", _make_add_backward(_ops.bmm),
                                setup_context=_add_setup)
register_autograd("mytorch::linear", _linear_backward, setup_context=_linear_setup)


# ---- public wrappers ----
def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b for 2-D a, b (any strides), as torch.mm."""
    return _ops.mm(a, b)


def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Batched a @ b for 3-D a, b, as torch.bmm."""
    return _ops.bmm(a, b)


def addmm(self, a, b, *, beta=1, alpha=1):
    """beta * self + alpha * a @ b, as torch.addmm."""
    return _ops.addmm(self, a, b, beta=beta, alpha=alpha)


def baddbmm(self, a, b, *, beta=1, alpha=1):
    """beta * self + alpha * a @ b per batch, as torch.baddbmm."""
    return _ops.baddbmm(self, a, b, beta=beta, alpha=alpha)


def linear(x, weight, bias=None):
    """x @ weight.T + bias, as torch.nn.functional.linear."""
    return _ops.linear(x, weight, bias)
