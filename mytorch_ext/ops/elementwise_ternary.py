"""mytorch:: ternary elementwise ops (where, addcmul, addcdiv, lerp) and masked_fill: fake kernels and
autograd.
"""
from __future__ import annotations

import torch

from ._elementwise import _m, reg_fake, reg_grad, scaled, sum_to

for _name, _fn in {
    "where": torch.where,
    "masked_fill": torch.masked_fill,
    "addcmul": lambda x, t1, t2, value=1: torch.addcmul(x, t1, t2, value=value),
    "addcdiv": lambda x, t1, t2, value=1: torch.addcdiv(x, t1, t2, value=value),
    "lerp": torch.lerp,
}.items():
    reg_fake(_name, _fn)


# ---- autograd ----
def _where_bwd(ctx, g):
    c, a, b, _ = ctx.saved_tensors
    zero = torch.zeros((), dtype=g.dtype)
    return None, sum_to(_m.where(c, g, zero), a.shape), sum_to(_m.where(c, zero, g), b.shape)


def _masked_fill_bwd(ctx, g):
    x, mask, _ = ctx.saved_tensors[:3]
    return _m.masked_fill(g, mask, 0.0), None, None


def _addcmul_bwd(ctx, g):
    x, t1, t2 = ctx.saved_tensors[:3]
    gv = scaled(g, ctx.args[3])
    return sum_to(g, x.shape), sum_to(_m.mul(gv, t2), t1.shape), sum_to(_m.mul(gv, t1), t2.shape), None


def _addcdiv_bwd(ctx, g):
    x, t1, t2 = ctx.saved_tensors[:3]
    g1 = _m.div(scaled(g, ctx.args[3]), t2)
    g2 = _m.neg(_m.div(_m.mul(g1, t1), t2))
    return sum_to(g, x.shape), sum_to(g1, t1.shape), sum_to(g2, t2.shape), None


def _lerp_bwd(ctx, g):
    x, end, w = ctx.saved_tensors[:3]
    gend = _m.mul(g, w)
    return sum_to(_m.sub(g, gend), x.shape), sum_to(gend, end.shape), sum_to(_m.mul(g, _m.sub(end, x)), w.shape)


reg_grad("where", _where_bwd)
reg_grad("masked_fill", _masked_fill_bwd)
reg_grad("addcmul", _addcmul_bwd)
reg_grad("addcdiv", _addcdiv_bwd)
reg_grad("lerp", _lerp_bwd)
