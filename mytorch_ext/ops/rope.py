"""mytorch::rope (rotary position embedding): fake kernels, autograd (in C++ too:
csrc/autograd/rope.cpp, which this registration then leaves in place) and the public wrapper."""
from __future__ import annotations

import torch

from ._autograd import register_autograd

_ops = torch.ops.mytorch


@torch.library.register_fake("mytorch::rope")
def _rope_fake(x, cos, sin, interleaved=False):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("mytorch::rope_backward")
def _rope_backward_fake(grad, cos, sin, interleaved=False):
    return torch.empty_like(grad, memory_format=torch.contiguous_format)


@torch.library.register_fake("mytorch::rope_")
def _rope_inplace_fake(x, cos, sin, interleaved=False):
    return None


def _rope_setup(ctx, inputs, output):
    _, cos, sin, interleaved = inputs[:4]
    ctx.save_for_backward(cos, sin)
    ctx.interleaved = interleaved


def _rope_backward(ctx, grad):
    cos, sin = ctx.saved_tensors
    return _ops.rope_backward(grad, cos, sin, ctx.interleaved), None, None, None


register_autograd("mytorch::rope", _rope_backward, setup_context=_rope_setup)


def rope(x, cos, sin, interleaved: bool = False, inplace: bool = False):
    """Rotary embedding of x (..., seq, heads, head_dim) by cos, sin (seq, rotary_dim / 2).

    Pairs are (i, i + rotary_dim/2) (GPT-NeoX / Llama), or (2i, 2i+1) when interleaved (GPT-J).
    Features past rotary_dim pass through. inplace=True overwrites x (no autograd).
    """
    if inplace:
        _ops.rope_(x, cos, sin, interleaved)
        return x
    return _ops.rope(x, cos, sin, interleaved)
