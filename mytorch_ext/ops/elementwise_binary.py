"""mytorch:: binary elementwise ops (add, sub, mul, div, maximum, minimum, pow, comparisons,
clamp_tensor, the activation backwards autograd uses) and scale_: fake kernels, autograd, public
wrappers.
"""
from __future__ import annotations

import torch

from ._elementwise import _m, contig, reg_fake, reg_grad, sum_to

_ROUNDING = (None, "trunc", "floor")


def _div_fake(a, b, rounding_mode=None):
    torch._check(rounding_mode in _ROUNDING,
                 lambda: f"mytorch::div: expected rounding_mode to be None, 'trunc' or 'floor', got '{rounding_mode}'")
    return contig(torch.div(a, b, rounding_mode=rounding_mode))


torch.library.register_fake("mytorch::div")(_div_fake)

for _name, _fn in {
    "add": lambda a, b, alpha=1: torch.add(a, b, alpha=alpha),
    "sub": lambda a, b, alpha=1: torch.sub(a, b, alpha=alpha),
    "mul": torch.mul, "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "sigmoid_backward": torch.ops.aten.sigmoid_backward,
    "tanh_backward": torch.ops.aten.tanh_backward,
    "silu_backward": torch.ops.aten.silu_backward,
    "threshold_backward": torch.ops.aten.threshold_backward,
    "clamp_tensor": lambda x, min=None, max=None: torch.clamp(x, min, max),
}.items():
    reg_fake(_name, _fn)


@torch.library.register_fake("mytorch::scale_")
def _scale_fake(self, scale):
    torch._check(scale.numel() == 1, lambda: f"mytorch::scale_: expected a one-element scale, got shape {tuple(scale.shape)}")
    return None


# ---- autograd ----
def _add_bwd(ctx, g):
    a, b, _, _ = ctx.saved_tensors
    alpha = ctx.args[2]
    gb = g if alpha == 1 else _m.mul(g, torch.tensor(alpha, dtype=g.dtype))
    return sum_to(g, a.shape), sum_to(gb, b.shape), None


def _sub_bwd(ctx, g):
    a, b, _, _ = ctx.saved_tensors
    gb = _m.mul(g, torch.tensor(-ctx.args[2], dtype=g.dtype))
    return sum_to(g, a.shape), sum_to(gb, b.shape), None


def _mul_bwd(ctx, g):
    a, b, _ = ctx.saved_tensors
    return sum_to(_m.mul(g, b), a.shape), sum_to(_m.mul(g, a), b.shape)


def _div_bwd(ctx, g):
    a, b, _, y = ctx.saved_tensors
    if ctx.args[2] is not None:  # rounding: piecewise constant
        return sum_to(_m.mul(g, torch.zeros((), dtype=g.dtype)), a.shape), \
            sum_to(_m.mul(g, torch.zeros((), dtype=g.dtype)), b.shape), None
    ga = _m.div(g, b)
    gb = _m.neg(_m.mul(ga, y))
    return sum_to(ga, a.shape), sum_to(gb, b.shape), None


def _minmax_bwd(pick):
    def bwd(ctx, g):
        a, b, _ = ctx.saved_tensors
        half = _m.mul(g, torch.tensor(0.5, dtype=g.dtype))
        zero = torch.zeros((), dtype=g.dtype)
        tie = _m.eq(a, b)
        ga = _m.where(tie, half, _m.where(pick(a, b), g, zero))
        gb = _m.where(tie, half, _m.where(pick(b, a), g, zero))
        return sum_to(ga, a.shape), sum_to(gb, b.shape)
    return bwd


def _pow_bwd(ctx, g):
    a, b, y = ctx.saved_tensors
    one = torch.ones((), dtype=b.dtype)
    ga = _m.mul(_m.mul(g, b), _m.pow(a, _m.sub(b, one)))
    # d/db a^b = a^b log a, taken as 0 where a == 0 and b >= 0 (as ATen does)
    mask = _m.eq(a, torch.zeros((), dtype=a.dtype))
    loga = _m.where(mask, torch.zeros((), dtype=a.dtype), _m.log(a))
    gb = _m.mul(_m.mul(g, y), loga)
    return sum_to(ga, a.shape), sum_to(gb, b.shape)


def _no_grad_formula(name):
    def bwd(ctx, *grads):
        raise NotImplementedError(f"mytorch::{name}: no gradient formula yet; "
                                  "call it under torch.no_grad() or use the ATen op for training")
    return bwd


reg_grad("add", _add_bwd)
reg_grad("sub", _sub_bwd)
reg_grad("mul", _mul_bwd)
reg_grad("div", _div_bwd)
reg_grad("maximum", _minmax_bwd(lambda p, q: _m.gt(p, q)))
reg_grad("minimum", _minmax_bwd(lambda p, q: _m.lt(p, q)))
reg_grad("pow", _pow_bwd)
reg_grad("clamp_tensor", _no_grad_formula("clamp_tensor"))


# ---- public wrappers ----
def add(a, b, alpha=1):
    return _m.add(a, b, alpha)


def div(a, b, rounding_mode=None):
    return _m.div(a, b, rounding_mode)
