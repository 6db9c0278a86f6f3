"""mytorch::rope (rotary position embedding): fake kernels, autograd (in C++ too:
csrc/autograd/rope.cpp, which this registration then leaves in place) and the public wrapper."""
from __future__ import annotations

import torch

from ._autograd import register_autograd
from ._inductor import acc_dtype, inductor_decomposition

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


def _rotate(x, cos, sin, interleaved, sign):
    """x rotated by the angles of cos, sin (sign -1: by their negatives), as the kernels: the
    first 2 * half features of each (token, head) row in the accumulation dtype, the rest
    passed through."""
    half, acc = cos.shape[-1], acc_dtype(x.dtype)
    c = cos.to(acc)[:, None, :]  # (seq, 1, half) against x's (..., seq, heads, half)
    s = sin.to(acc)[:, None, :] * sign
    if interleaved:
        pairs = x[..., :2 * half].to(acc).unflatten(-1, (half, 2))
        x1, x2 = pairs[..., 0], pairs[..., 1]
        out = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), -1).flatten(-2)
    else:
        x1, x2 = x[..., :half].to(acc), x[..., half:2 * half].to(acc)
        out = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)
    out = out.to(x.dtype)
    if 2 * half < x.shape[-1]:
        out = torch.cat((out, x[..., 2 * half:]), -1)
    return out


# Under Inductor (mytorch_ext/ops/_inductor.py)
@inductor_decomposition("mytorch::rope")
def _rope_decomposition(x, cos, sin, interleaved=False):
    return _rotate(x, cos, sin, interleaved, 1.0)


@inductor_decomposition("mytorch::rope_backward")
def _rope_backward_decomposition(grad, cos, sin, interleaved=False):
    return _rotate(grad, cos, sin, interleaved, -1.0)


def rope(x, cos, sin, interleaved: bool = False, inplace: bool = False):
    """Rotary embedding of x (..., seq, heads, head_dim) by cos, sin (seq, rotary_dim / 2).

    Pairs are (i, i + rotary_dim/2) (GPT-NeoX / Llama), or (2i, 2i+1) when interleaved (GPT-J).
    Features past rotary_dim pass through. inplace=True overwrites x (no autograd).
    """
    if inplace:
        _ops.rope_(x, cos, sin, interleaved)
        return x
    return _ops.rope(x, cos, sin, interleaved)
