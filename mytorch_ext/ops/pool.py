"""mytorch::max_pool2d / avg_pool2d / adaptive_avg_pool2d: fake kernels, autograd, wrappers."""
from __future__ import annotations

import torch

from ._autograd import register_autograd


def _pair(v):
    v = [v] if isinstance(v, int) else list(v)
    return v * 2 if len(v) == 1 else v


def _pool_out(size, k, p, s, d, ceil_mode):
    num = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_shape(x, kernel_size, stride, padding, dilation, ceil_mode):
    k = _pair(kernel_size)
    s = _pair(stride) if len(_pair(stride) if not isinstance(stride, int) else [stride]) else k
    p, d = _pair(padding), _pair(dilation)
    oh = _pool_out(x.shape[-2], k[0], p[0], s[0], d[0], ceil_mode)
    ow = _pool_out(x.shape[-1], k[1], p[1], s[1], d[1], ceil_mode)
    return (*x.shape[:-2], oh, ow)


@torch.library.register_fake("mytorch::max_pool2d")
def _max_pool_fake(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    shape = _pool_shape(x, kernel_size, stride, padding, dilation, ceil_mode)
    return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)


@torch.library.register_fake("mytorch::max_pool2d_backward")
def _max_pool_backward_fake(grad, x, indices):
    return x.new_empty(x.shape)


@torch.library.register_fake("mytorch::avg_pool2d")
def _avg_pool_fake(x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                   divisor_override=None):
    return x.new_empty(_pool_shape(x, kernel_size, stride, padding, 1, ceil_mode))


@torch.library.register_fake("mytorch::avg_pool2d_backward")
def _avg_pool_backward_fake(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                            divisor_override):
    return x.new_empty(x.shape)


@torch.library.register_fake("mytorch::adaptive_avg_pool2d")
def _adaptive_fake(x, output_size):
    return x.new_empty((*x.shape[:-2], *_pair(output_size)))


@torch.library.register_fake("mytorch::adaptive_avg_pool2d_backward")
def _adaptive_backward_fake(grad, x):
    return x.new_empty(x.shape)


def _max_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], output[1])
    ctx.mark_non_differentiable(output[1])


def _max_backward(ctx, grad, _grad_indices):
    x, indices = ctx.saved_tensors
    return torch.ops.mytorch.max_pool2d_backward(grad, x, indices), None, None, None, None, None


def _avg_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.params = inputs[1:]


def _avg_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return (torch.ops.mytorch.avg_pool2d_backward(grad, x, *ctx.params),) + (None,) * 6


def _adaptive_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _adaptive_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return torch.ops.mytorch.adaptive_avg_pool2d_backward(grad, x), None


register_autograd("mytorch::max_pool2d", _max_backward, setup_context=_max_setup)
register_autograd("mytorch::avg_pool2d", _avg_backward, setup_context=_avg_setup)
register_autograd("mytorch::adaptive_avg_pool2d", _adaptive_backward,
                                setup_context=_adaptive_setup)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """As torch.nn.functional.max_pool2d, through mytorch's kernels."""
    out, idx = torch.ops.mytorch.max_pool2d(x, _pair(kernel_size), [] if stride is None else _pair(stride),
                                            _pair(padding), _pair(dilation), ceil_mode)
    return (out, idx) if return_indices else out


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """As torch.nn.functional.avg_pool2d, through mytorch's kernels."""
    return torch.ops.mytorch.avg_pool2d(x, _pair(kernel_size), [] if stride is None else _pair(stride),
                                        _pair(padding), ceil_mode, count_include_pad, divisor_override)


def adaptive_avg_pool2d(x, output_size):
    """As torch.nn.functional.adaptive_avg_pool2d (integer sizes), through mytorch's kernels."""
    return torch.ops.mytorch.adaptive_avg_pool2d(x, _pair(output_size))
