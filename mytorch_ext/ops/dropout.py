"""mytorch::dropout (+ backward): fake kernels, autograd, wrapper."""
from __future__ import annotations

import torch

_ops = torch.ops.mytorch


@torch.library.register_fake("mytorch::dropout")
def _dropout_fake(x, p, train=True, generator=None):
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            torch.empty_like(x, dtype=torch.bool, memory_format=torch.contiguous_format))


@torch.library.register_fake("mytorch::dropout_backward")
def _dropout_bwd_fake(grad, mask, scale):
    return torch.empty_like(grad, memory_format=torch.contiguous_format)


def _setup(ctx, inputs, output):
    x, p, train, generator = inputs
    ctx.scale = 0.0 if p >= 1 else (1.0 / (1.0 - p) if train and p > 0 else 1.0)
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(output[1])


def _backward(ctx, g, _gmask):
    (mask,) = ctx.saved_tensors
    return _ops.dropout_backward(g, mask, ctx.scale), None, None, None


torch.library.register_autograd("mytorch::dropout", _backward, setup_context=_setup)


def dropout(x, p=0.5, training=True, generator=None):
    """As torch.nn.functional.dropout; the mask comes from the device generator."""
    return _ops.dropout(x, p, training, generator)[0]
