"""mytorch::upsample_nearest2d / upsample_bilinear2d: fake kernels, autograd, wrappers."""
from __future__ import annotations

import math

import torch

from ._autograd import register_autograd


@torch.library.register_fake("mytorch::upsample_nearest2d")
def _nearest_fake(x, output_size, scale_h=None, scale_w=None):
    return x.new_empty((x.shape[0], x.shape[1], *output_size))


@torch.library.register_fake("mytorch::upsample_nearest2d_backward")
def _nearest_backward_fake(grad, input_size, scale_h=None, scale_w=None):
    return grad.new_empty(input_size)


@torch.library.register_fake("mytorch::upsample_bilinear2d")
def _bilinear_fake(x, output_size, align_corners=False, scale_h=None, scale_w=None):
    return x.new_empty((x.shape[0], x.shape[1], *output_size))


@torch.library.register_fake("mytorch::upsample_bilinear2d_backward")
def _bilinear_backward_fake(grad, input_size, align_corners=False, scale_h=None, scale_w=None):
    return grad.new_empty(input_size)


def _nearest_setup(ctx, inputs, output):
    x, _, scale_h, scale_w = inputs
    ctx.input_size, ctx.scales = list(x.shape), (scale_h, scale_w)


def _nearest_backward(ctx, grad):
    gx = torch.ops.mytorch.upsample_nearest2d_backward(grad, ctx.input_size, *ctx.scales)
    return gx, None, None, None


def _bilinear_setup(ctx, inputs, output):
    x, _, align_corners, scale_h, scale_w = inputs
    ctx.input_size, ctx.rest = list(x.shape), (align_corners, scale_h, scale_w)


def _bilinear_backward(ctx, grad):
    gx = torch.ops.mytorch.upsample_bilinear2d_backward(grad, ctx.input_size, *ctx.rest)
    return gx, None, None, None, None


register_autograd("mytorch::upsample_nearest2d", _nearest_backward,
                                setup_context=_nearest_setup)
register_autograd("mytorch::upsample_bilinear2d", _bilinear_backward,
                                setup_context=_bilinear_setup)


def _size_and_scales(x, size, scale_factor):
    if (size is None) == (scale_factor is None):
        raise ValueError("mytorch upsample: expected exactly one of size and scale_factor")
    if size is not None:
        size = [size, size] if isinstance(size, int) else list(size)
        return size, None, None
    sf = [scale_factor, scale_factor] if isinstance(scale_factor, (int, float)) else list(scale_factor)
    size = [math.floor(x.shape[2 + i] * float(sf[i])) for i in range(2)]
    return size, float(sf[0]), float(sf[1])


def upsample_nearest2d(x, size=None, scale_factor=None):
    """As F.interpolate(x, size, scale_factor, mode='nearest'), through mytorch's kernels."""
    size, sh, sw = _size_and_scales(x, size, scale_factor)
    return torch.ops.mytorch.upsample_nearest2d(x, size, sh, sw)


def upsample_bilinear2d(x, size=None, scale_factor=None, align_corners=False):
    """As F.interpolate(x, size, scale_factor, mode='bilinear'), through mytorch's kernels."""
    size, sh, sw = _size_and_scales(x, size, scale_factor)
    return torch.ops.mytorch.upsample_bilinear2d(x, size, align_corners, sh, sw)
