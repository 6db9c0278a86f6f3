"""mytorch::batch_norm: fake kernels, autograd, and a wrapper that also updates running stats."""
from __future__ import annotations

import math

import torch

from ._autograd import register_autograd


@torch.library.register_fake("mytorch::batch_norm")
def _bn_fake(x, weight, bias, running_mean, running_var, training, eps):
    c = x.shape[1]
    stat = (c,) if training else (0,)
    return x.new_empty(x.shape), x.new_empty(stat), x.new_empty(stat)


@torch.library.register_fake("mytorch::batch_norm_update_stats_")
def _bn_update_fake(running_mean, running_var, save_mean, save_invstd, momentum, eps, count):
    return None


@torch.library.register_fake("mytorch::batch_norm_backward")
def _bn_backward_fake(grad, x, weight, running_mean, running_var, save_mean, save_invstd, training,
                      eps, output_mask):
    c = x.shape[1]
    return (x.new_empty(x.shape) if output_mask[0] else None,
            x.new_empty(c) if output_mask[1] else None,
            x.new_empty(c) if output_mask[2] else None)


def _setup(ctx, inputs, output):
    x, weight, bias, running_mean, running_var, training, eps = inputs
    _, save_mean, save_invstd = output
    ctx.save_for_backward(x, weight, running_mean, running_var, save_mean, save_invstd)
    ctx.training, ctx.eps = training, eps
    ctx.has_weight, ctx.has_bias = weight is not None, bias is not None
    ctx.mark_non_differentiable(save_mean, save_invstd)


def _backward(ctx, grad, _g_mean, _g_invstd):
    x, weight, running_mean, running_var, save_mean, save_invstd = ctx.saved_tensors
    mask = [ctx.needs_input_grad[0], ctx.has_weight and ctx.needs_input_grad[1],
            ctx.has_bias and ctx.needs_input_grad[2]]
    gx, gw, gb = torch.ops.mytorch.batch_norm_backward(
        grad, x, weight, running_mean, running_var, save_mean, save_invstd, ctx.training, ctx.eps, mask)
    return gx, gw, gb, None, None, None, None


register_autograd("mytorch::batch_norm", _backward, setup_context=_setup)


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
               eps=1e-5):
    """As torch.nn.functional.batch_norm, through mytorch's kernels (running stats updated in place)."""
    out, save_mean, save_invstd = torch.ops.mytorch.batch_norm(
        x, weight, bias, running_mean, running_var, training, eps)
    if training and running_mean is not None and running_var is not None:
        count = x.numel() // x.shape[1] if x.shape[1] else 0
        with torch.no_grad():
            torch.ops.mytorch.batch_norm_update_stats_(running_mean, running_var, save_mean.detach(),
                                                       save_invstd.detach(), momentum, eps, count)
    return out
