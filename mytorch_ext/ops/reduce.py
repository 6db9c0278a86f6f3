"""mytorch:: reductions: fake kernels, autograd, public wrappers."""
from __future__ import annotations

import functools

import torch

from ._autograd import register_autograd

_m = torch.ops.mytorch


def _dims(x, dim):
    if dim is None or len(dim) == 0:
        return list(range(x.dim()))
    return [d % max(x.dim(), 1) for d in dim]


def _shape(x, dim, keepdim):
    ds = set(_dims(x, dim))
    return [1 if i in ds else s for i, s in enumerate(x.shape) if keepdim or i not in ds]


def _empty(x, dim, keepdim, dtype=None):
    return x.new_empty(_shape(x, dim, keepdim), dtype=dtype or x.dtype)


def _int_to_long(x):
    return torch.int64 if not x.is_floating_point() else x.dtype


torch.library.register_fake("mytorch::sum")(
    lambda x, dim=None, keepdim=False, dtype=None: _empty(x, dim, keepdim, dtype or _int_to_long(x)))
torch.library.register_fake("mytorch::mean")(
    lambda x, dim=None, keepdim=False, dtype=None: _empty(x, dim, keepdim, dtype))
torch.library.register_fake("mytorch::prod")(
    lambda x, dim=None, keepdim=False: _empty(x, dim, keepdim, _int_to_long(x)))
torch.library.register_fake("mytorch::amax")(lambda x, dim=(), keepdim=False: _empty(x, dim, keepdim))
torch.library.register_fake("mytorch::amin")(lambda x, dim=(), keepdim=False: _empty(x, dim, keepdim))
for _n in ("max_dim", "min_dim"):
    torch.library.register_fake(f"mytorch::{_n}")(
        lambda x, dim, keepdim=False: (_empty(x, [dim], keepdim), _empty(x, [dim], keepdim, torch.int64)))
for _n in ("argmax", "argmin"):
    torch.library.register_fake(f"mytorch::{_n}")(
        lambda x, dim=None, keepdim=False: _empty(x, None if dim is None else [dim], keepdim and dim is not None,
                                                  torch.int64) if (dim is not None or not keepdim)
        else x.new_empty([1] * x.dim(), dtype=torch.int64))
for _n in ("var", "std"):
    torch.library.register_fake(f"mytorch::{_n}")(
        lambda x, dim=None, correction=1.0, keepdim=False: _empty(x, dim, keepdim))
torch.library.register_fake("mytorch::logsumexp")(
    lambda x, dim, keepdim=False: _empty(x, dim, keepdim,
                                         x.dtype if x.is_floating_point() else torch.get_default_dtype()))


# ---- autograd ----
def _expand_back(g, x, dim, keepdim):
    """Reshape a reduced gradient so that it broadcasts against x."""
    if not keepdim and x.dim() > 0:
        g = g.reshape(_shape(x, dim, True))
    return g


def _zeros_like(x):
    # Not x * 0: that is NaN where x holds NaN or Inf.
    return torch.zeros_like(x, memory_format=torch.contiguous_format)


def _sum_setup(ctx, inputs, output):
    x, dim, keepdim = inputs[0], inputs[1], inputs[2]
    ctx.save_for_backward(x)
    ctx.dim, ctx.keepdim = dim, keepdim


def _sum_bwd(ctx, g):
    (x,) = ctx.saved_tensors
    g = _expand_back(g, x, ctx.dim, ctx.keepdim)
    return _m.add(_zeros_like(x), _m.cast(g, x.dtype)), None, None, None


def _mean_bwd(ctx, g):
    (x,) = ctx.saved_tensors
    n = 1
    for d in _dims(x, ctx.dim):
        n *= x.shape[d] if x.dim() else 1
    g = _expand_back(g, x, ctx.dim, ctx.keepdim)
    return _m.add(_zeros_like(x), _m.div(_m.cast(g, x.dtype), torch.tensor(float(n), dtype=x.dtype))), \
        None, None, None


def _save_x_out(ctx, inputs, output):
    """setup_context of amax, amin and logsumexp: x, the output, dim and keepdim."""
    x, dim, keepdim = inputs
    ctx.save_for_backward(x, output)
    ctx.dim, ctx.keepdim = dim, keepdim


def _x_out_g(ctx, g):
    """x, and the output and its gradient reshaped to broadcast against x."""
    x, y = ctx.saved_tensors
    return x, _expand_back(y, x, ctx.dim, ctx.keepdim), _expand_back(g, x, ctx.dim, ctx.keepdim)


def _amax_bwd(ctx, g):
    x, y, g = _x_out_g(ctx, g)
    hit = _m.cast(_m.eq(x, y), x.dtype)
    count = _m.sum(hit, ctx.dim, True)
    return _m.div(_m.mul(hit, g), count), None, None


def _max_dim_setup(ctx, inputs, output):
    x, dim, keepdim = inputs
    ctx.save_for_backward(x, output[1])
    ctx.dim, ctx.keepdim = dim, keepdim


def _max_dim_bwd(ctx, g, gi):
    x, idx = ctx.saved_tensors
    d = ctx.dim % max(x.dim(), 1)
    if not ctx.keepdim and x.dim() > 0:
        g = g.unsqueeze(d)
        idx = idx.unsqueeze(d)
    return _m.scatter_add(_zeros_like(x), d, idx, g) if x.dim() else g, None, None


def _var_setup(ctx, inputs, output):
    x, dim, correction, keepdim = inputs
    ctx.save_for_backward(x, output)
    ctx.dim, ctx.correction, ctx.keepdim = dim, correction, keepdim


def _var_grad(ctx, g, is_std):
    x, y = ctx.saved_tensors
    n = 1
    for d in _dims(x, ctx.dim):
        n *= x.shape[d] if x.dim() else 1
    g = _expand_back(g, x, ctx.dim, ctx.keepdim)
    mu = _m.mean(x, ctx.dim, True)
    dof = n - ctx.correction  # no degrees of freedom left: an infinite scale, as ATen
    scale = torch.tensor(2.0 / dof if dof != 0 else float("inf"), dtype=x.dtype)
    if is_std:  # d std = d var / (2 std), taken as 0 where std is 0 (as ATen)
        yb = _expand_back(y, x, ctx.dim, ctx.keepdim)
        zero = torch.zeros((), dtype=x.dtype)
        g = _m.where(_m.eq(yb, zero), zero, _m.div(g, _m.mul(yb, torch.tensor(2.0, dtype=x.dtype))))
    if dof <= 0 and (ctx.dim is None or x.dim() == 0):
        # a full reduction with no degrees of freedom: NaN where x equals its mean, else
        # Inf (as ATen's var_backward; a negative dof must not flip the sign)
        nan, inf = (torch.tensor(float(v), dtype=x.dtype) for v in ("nan", "inf"))
        return _m.mul(g, _m.where(_m.eq(x, mu), nan, inf)), None, None, None
    return _m.mul(_m.mul(_m.sub(x, mu), g), scale), None, None, None


def _lse_bwd(ctx, g):
    x, y, g = _x_out_g(ctx, g)
    return _m.mul(g, _m.exp(_m.sub(x, y))), None, None


register_autograd("mytorch::sum", _sum_bwd, setup_context=_sum_setup)
register_autograd("mytorch::mean", _mean_bwd, setup_context=_sum_setup)
register_autograd("mytorch::logsumexp", _lse_bwd, setup_context=_save_x_out)
for _n in ("amax", "amin"):
    register_autograd(f"mytorch::{_n}", _amax_bwd, setup_context=_save_x_out)
for _n in ("max_dim", "min_dim"):
    register_autograd(f"mytorch::{_n}", _max_dim_bwd, setup_context=_max_dim_setup)
for _n, _is_std in (("var", False), ("std", True)):
    register_autograd(f"mytorch::{_n}", functools.partial(_var_grad, is_std=_is_std),
                      setup_context=_var_setup)


def _prod_bwd(ctx, g):
    raise NotImplementedError("mytorch::prod: no gradient formula yet; call it under torch.no_grad() "
                              "or use torch.prod for training")


register_autograd("mytorch::prod", _prod_bwd, setup_context=lambda ctx, inputs, output: None)
