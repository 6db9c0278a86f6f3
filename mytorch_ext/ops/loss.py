"""mytorch::nll_loss / cross_entropy / mse_loss (+ backward): fake kernels, autograd, wrappers."""
from __future__ import annotations

import torch

_ops = torch.ops.mytorch
_RED = {"none": 0, "mean": 1, "sum": 2}


def _reduction(reduction: str) -> int:
    if reduction not in _RED:
        raise ValueError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}")
    return _RED[reduction]


def _none_shape(x):
    return () if x.dim() == 1 else (x.shape[0], *x.shape[2:])


@torch.library.register_fake("mytorch::nll_loss")
def _nll_fake(x, target, weight=None, reduction=1, ignore_index=-100):
    out = x.new_empty(_none_shape(x) if reduction == 0 else ())
    return out, x.new_empty(())


@torch.library.register_fake("mytorch::nll_loss_backward")
def _nll_bwd_fake(g, x, target, weight, reduction, ignore_index, total_weight):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("mytorch::cross_entropy")
def _ce_fake(x, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
    torch._check(x.dim() in (1, 2), lambda: f"mytorch::cross_entropy: expected (C,) or (N, C), got {list(x.shape)}")
    return x.new_empty(_none_shape(x) if reduction == 0 else ())


@torch.library.register_fake("mytorch::cross_entropy_backward")
def _ce_bwd_fake(g, x, target, weight, reduction, ignore_index, label_smoothing):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("mytorch::mse_loss")
def _mse_fake(x, target, reduction=1):
    torch._check(x.shape == target.shape, lambda: "mytorch::mse_loss: shapes differ")
    return x.new_empty(x.shape if reduction == 0 else ())


@torch.library.register_fake("mytorch::mse_loss_backward")
def _mse_bwd_fake(g, x, target, reduction):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _nll_setup(ctx, inputs, output):
    x, target, weight, reduction, ignore_index = inputs
    ctx.args = (weight, reduction, ignore_index)
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(x, target, output[1])


def _nll_backward(ctx, g, _gtw):
    x, target, tw = ctx.saved_tensors
    weight, reduction, ignore_index = ctx.args
    gi = _ops.nll_loss_backward(g, x, target, weight, reduction, ignore_index, tw)
    return gi, None, None, None, None


def _ce_setup(ctx, inputs, output):
    x, target, weight, reduction, ignore_index, label_smoothing = inputs
    ctx.args = (weight, reduction, ignore_index, label_smoothing)
    ctx.save_for_backward(x, target)


def _ce_backward(ctx, g):
    x, target = ctx.saved_tensors
    gi = _ops.cross_entropy_backward(g, x, target, *ctx.args)
    return gi, None, None, None, None, None


def _mse_setup(ctx, inputs, output):
    x, target, reduction = inputs
    ctx.reduction = reduction
    ctx.save_for_backward(x, target)


def _mse_backward(ctx, g):
    x, target = ctx.saved_tensors
    gi = _ops.mse_loss_backward(g, x, target, ctx.reduction)
    return (gi if ctx.needs_input_grad[0] else None,
            -gi if ctx.needs_input_grad[1] else None, None)


torch.library.register_autograd("mytorch::nll_loss", _nll_backward, setup_context=_nll_setup)
torch.library.register_autograd("mytorch::cross_entropy", _ce_backward, setup_context=_ce_setup)
torch.library.register_autograd("mytorch::mse_loss", _mse_backward, setup_context=_mse_setup)


def nll_loss(x, target, weight=None, ignore_index=-100, reduction="mean"):
    """As torch.nn.functional.nll_loss (input (C,), (N, C) or (N, C, d1, ...))."""
    return _ops.nll_loss(x, target, weight, _reduction(reduction), ignore_index)[0]


def cross_entropy(x, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """As torch.nn.functional.cross_entropy with class-index targets; one fused kernel."""
    red = _reduction(reduction)
    if x.dim() > 2:  # (N, C, d1, ...) -> (N * d1 * ..., C)
        c = x.shape[1]
        out = _ops.cross_entropy(x.movedim(1, -1).reshape(-1, c), target.reshape(-1), weight, red,
                                 ignore_index, label_smoothing)
        return out.reshape(target.shape) if red == 0 else out
    return _ops.cross_entropy(x, target, weight, red, ignore_index, label_smoothing)


def mse_loss(x, target, reduction="mean"):
    """As torch.nn.functional.mse_loss (same shapes)."""
    return _ops.mse_loss(x, target, _reduction(reduction))
