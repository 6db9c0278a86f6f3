"""mytorch::layer_norm / rms_norm (+ backward): fake kernels, autograd, wrappers."""
from __future__ import annotations

import torch

from ._autograd import register_autograd
from ._inductor import acc_dtype, inductor_decomposition, sum_over

_ops = torch.ops.mytorch


def _stat_shape(x, normalized_shape):
    k = len(normalized_shape)
    torch._check(k >= 1 and tuple(x.shape[x.dim() - k:]) == tuple(normalized_shape),
                 lambda: f"expected input with trailing shape {list(normalized_shape)}, got {list(x.shape)}")
    return (*x.shape[:x.dim() - k], *([1] * k))


@torch.library.register_fake("mytorch::layer_norm")
def _ln_fake(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    s = _stat_shape(x, normalized_shape)
    acc = acc_dtype(x.dtype)
    return (torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(s, dtype=acc),
            x.new_empty(s, dtype=acc))


@torch.library.register_fake("mytorch::layer_norm_backward")
def _ln_bwd_fake(g, x, normalized_shape, mean, rstd, weight):
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            x.new_empty(normalized_shape), x.new_empty(normalized_shape))


@torch.library.register_fake("mytorch::rms_norm")
def _rms_fake(x, normalized_shape, weight=None, eps=None):
    s = _stat_shape(x, normalized_shape)
    acc = acc_dtype(x.dtype)
    return torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(s, dtype=acc)


@torch.library.register_fake("mytorch::rms_norm_backward")
def _rms_bwd_fake(g, x, normalized_shape, rstd, weight):
    return torch.empty_like(x, memory_format=torch.contiguous_format), x.new_empty(normalized_shape)


def _ln_setup(ctx, inputs, output):
    x, normalized_shape, weight, bias, eps = inputs
    _, mean, rstd = output
    ctx.normalized_shape = normalized_shape
    ctx.has = (weight is not None, bias is not None)
    ctx.mark_non_differentiable(mean, rstd)
    ctx.save_for_backward(x, mean, rstd, weight)


def _ln_backward(ctx, g, _gmean, _grstd):
    x, mean, rstd, weight = ctx.saved_tensors
    dx, dw, db = _ops.layer_norm_backward(g, x, ctx.normalized_shape, mean, rstd, weight)
    return (dx, None, dw if ctx.has[0] else None, db if ctx.has[1] else None, None)


def _rms_setup(ctx, inputs, output):
    x, normalized_shape, weight, eps = inputs
    ctx.normalized_shape = normalized_shape
    ctx.has_weight = weight is not None
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(x, output[1], weight)


def _rms_backward(ctx, g, _grstd):
    x, rstd, weight = ctx.saved_tensors
    dx, dw = _ops.rms_norm_backward(g, x, ctx.normalized_shape, rstd, weight)
    return dx, None, dw if ctx.has_weight else None, None


register_autograd("mytorch::layer_norm", _ln_backward, setup_context=_ln_setup)
register_autograd("mytorch::rms_norm", _rms_backward, setup_context=_rms_setup)


# ---- under Inductor (mytorch_ext/ops/_inductor.py): the kernels' math in ATen ops ----
# Statistics over the normalized dims in the accumulation dtype, kept as (..., 1, ...) as
# the kernels return them; y = xhat * w (+ b) in that dtype, cast once.
def _dims(x, normalized_shape):
    return tuple(range(x.dim() - len(normalized_shape), x.dim()))


def _affine(xhat, weight, bias, dtype):
    if weight is not None:
        xhat = xhat * weight.to(xhat.dtype)
    if bias is not None:
        xhat = xhat + bias.to(xhat.dtype)
    return xhat.to(dtype)


@inductor_decomposition("mytorch::rms_norm")
def _rms_decomposition(x, normalized_shape, weight=None, eps=None):
    xa = x.to(acc_dtype(x.dtype))
    if eps is None:
        eps = torch.finfo(x.dtype).eps  # as the kernels' default (kernels/norm.h)
    rstd = torch.rsqrt(xa.square().mean(_dims(x, normalized_shape), keepdim=True) + eps)
    return _affine(xa * rstd, weight, None, x.dtype), rstd


@inductor_decomposition("mytorch::layer_norm")
def _ln_decomposition(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    xa = x.to(acc_dtype(x.dtype))
    dims = _dims(x, normalized_shape)
    mean = xa.mean(dims, keepdim=True)
    centred = xa - mean
    rstd = torch.rsqrt(centred.square().mean(dims, keepdim=True) + eps)
    return _affine(centred * rstd, weight, bias, x.dtype), mean, rstd


def _norm_grads(g, x, normalized_shape, mean, rstd, weight):
    """dx, dw, db of y = xhat * w + b, xhat = (x - mean) * rstd (mean None: RMS)."""
    dims, acc = _dims(x, normalized_shape), acc_dtype(x.dtype)
    ga, xa = g.to(acc), x.to(acc)
    xhat = (xa if mean is None else xa - mean) * rstd
    gw = ga if weight is None else ga * weight.to(acc)
    inner = gw - xhat * (gw * xhat).mean(dims, keepdim=True)
    if mean is not None:
        inner = inner - gw.mean(dims, keepdim=True)
    rows = tuple(range(x.dim() - len(normalized_shape)))
    return ((rstd * inner).to(x.dtype), sum_over(ga * xhat, rows).to(x.dtype),
            sum_over(ga, rows).to(x.dtype))


@inductor_decomposition("mytorch::rms_norm_backward")
def _rms_backward_decomposition(g, x, normalized_shape, rstd, weight):
    return _norm_grads(g, x, normalized_shape, None, rstd, weight)[:2]


@inductor_decomposition("mytorch::layer_norm_backward")
def _ln_backward_decomposition(g, x, normalized_shape, mean, rstd, weight):
    return _norm_grads(g, x, normalized_shape, mean, rstd, weight)


def _shape(normalized_shape):
    return [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """As torch.nn.functional.layer_norm."""
    return _ops.layer_norm(x, _shape(normalized_shape), weight, bias, eps)[0]


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """As torch.nn.functional.rms_norm (eps=None: finfo(x.dtype).eps)."""
    return _ops.rms_norm(x, _shape(normalized_shape), weight, eps)[0]
