"""mytorch:: unary elementwise ops (neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, silu,
reciprocal, clamp) and cast: fake kernels, autograd, public wrappers.
"""
from __future__ import annotations

import torch

from ._elementwise import _m, reg_fake, reg_grad

for _name, _fn in {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
    "silu": torch.nn.functional.silu, "reciprocal": torch.reciprocal,
    "clamp": lambda x, min=None, max=None: torch.clamp(x, min, max),
    "cast": lambda x, dtype: x.to(dtype),
}.items():
    reg_fake(_name, _fn)


# ---- autograd ----
def _unary(fn):
    def bwd(ctx, g):
        x, y = ctx.saved_tensors
        return fn(g, x, y)
    return bwd


def _clamp_bwd(ctx, g):
    x, _, _, _ = ctx.saved_tensors
    lo, hi = ctx.args[1], ctx.args[2]
    keep = torch.ones((), dtype=torch.bool)
    if lo is not None:
        keep = _m.ge(x, torch.tensor(lo, dtype=x.dtype))
    if hi is not None:
        le = _m.le(x, torch.tensor(hi, dtype=x.dtype))
        keep = _m.where(keep, le, torch.zeros((), dtype=torch.bool))
    return _m.where(keep, g, torch.zeros((), dtype=g.dtype)), None, None


def _cast_bwd(ctx, g):
    x = ctx.saved_tensors[0]
    return _m.cast(g, x.dtype), None


reg_grad("neg", _unary(lambda g, x, y: _m.neg(g)))
# At most one CPU scalar per call: a 0-dim x on another device allows no more.
reg_grad("abs", _unary(lambda g, x, y: _m.where(_m.lt(x, torch.zeros((), dtype=x.dtype)), _m.neg(g),
                                                _m.where(_m.eq(x, torch.zeros((), dtype=x.dtype)),
                                                         torch.zeros((), dtype=g.dtype), g))))
reg_grad("exp", _unary(lambda g, x, y: _m.mul(g, y)))
reg_grad("log", _unary(lambda g, x, y: _m.div(g, x)))
reg_grad("sqrt", _unary(lambda g, x, y: _m.div(g, _m.mul(y, torch.tensor(2.0, dtype=y.dtype)))))
reg_grad("rsqrt", _unary(lambda g, x, y: _m.mul(g, _m.mul(_m.pow(y, torch.tensor(3.0, dtype=y.dtype)),
                                                          torch.tensor(-0.5, dtype=y.dtype)))))
reg_grad("tanh", _unary(lambda g, x, y: _m.tanh_backward(g, y)))
reg_grad("sigmoid", _unary(lambda g, x, y: _m.sigmoid_backward(g, y)))
reg_grad("relu", _unary(lambda g, x, y: _m.threshold_backward(g, y, 0)))
reg_grad("silu", _unary(lambda g, x, y: _m.silu_backward(g, x)))
reg_grad("reciprocal", _unary(lambda g, x, y: _m.neg(_m.mul(g, _m.mul(y, y)))))
reg_grad("clamp", _clamp_bwd)
reg_grad("cast", _cast_bwd)


# ---- public wrappers ----
def cast(x, dtype):
    return _m.cast(x, dtype)
