"""mytorch::conv2d / conv1d: fake kernels, autograd, public wrappers."""
from __future__ import annotations

import torch

from ._autograd import register_autograd


def _pair(v, n):
    v = [v] if isinstance(v, int) else list(v)
    return v * n if len(v) == 1 else v


def _out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _conv_out_shape(input, weight, stride, padding, dilation, n):
    st, pd, dl = _pair(stride, n), _pair(padding, n), _pair(dilation, n)
    spatial = [_out_size(input.shape[2 + i], weight.shape[2 + i], st[i], pd[i], dl[i]) for i in range(n)]
    return (input.shape[0], weight.shape[0], *spatial)


def _fake_forward(n):
    def fake(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        torch._check(input.dim() == n + 2 and weight.dim() == n + 2,
                     lambda: f"mytorch::conv{n}d: expected {n + 2}-D input and weight")
        torch._check(input.shape[1] == weight.shape[1] * groups,
                     lambda: f"mytorch::conv{n}d: input channels {input.shape[1]} vs weight {tuple(weight.shape)}")
        return input.new_empty(_conv_out_shape(input, weight, stride, padding, dilation, n))
    return fake


def _fake_backward(grad, input, weight, stride, padding, dilation, groups, output_mask):
    return (input.new_empty(input.shape) if output_mask[0] else None,
            weight.new_empty(weight.shape) if output_mask[1] else None,
            weight.new_empty(weight.shape[0]) if output_mask[2] else None)


torch.library.register_fake("mytorch::conv2d")(_fake_forward(2))
torch.library.register_fake("mytorch::conv1d")(_fake_forward(1))
torch.library.register_fake("mytorch::conv2d_backward")(_fake_backward)
torch.library.register_fake("mytorch::conv1d_backward")(_fake_backward)


def _setup(ctx, inputs, output):
    input, weight, bias, stride, padding, dilation, groups = inputs
    ctx.save_for_backward(input, weight)
    ctx.params = (stride, padding, dilation, groups)
    ctx.has_bias = bias is not None


def _make_backward(backward_op):
    def backward(ctx, grad):
        input, weight = ctx.saved_tensors
        mask = [ctx.needs_input_grad[0], ctx.needs_input_grad[1],
                ctx.has_bias and ctx.needs_input_grad[2]]
        gx, gw, gb = backward_op(grad, input, weight, *ctx.params, mask)
        return gx, gw, gb, None, None, None, None
    return backward


register_autograd("mytorch::conv2d", _make_backward(torch.ops.mytorch.conv2d_backward),
                                setup_context=_setup)
register_autograd("mytorch::conv1d", _make_backward(torch.ops.mytorch.conv1d_backward),
                                setup_context=_setup)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """As torch.nn.functional.conv2d (numeric padding), through mytorch's kernels."""
    return torch.ops.mytorch.conv2d(input, weight, bias, _pair(stride, 2), _pair(padding, 2),
                                    _pair(dilation, 2), groups)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """As torch.nn.functional.conv1d (numeric padding), through mytorch's kernels."""
    return torch.ops.mytorch.conv1d(input, weight, bias, _pair(stride, 1), _pair(padding, 1),
                                    _pair(dilation, 1), groups)
