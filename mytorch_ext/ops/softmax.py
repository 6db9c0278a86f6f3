"""mytorch::softmax / log_softmax and their backwards: fake kernels, autograd, wrappers."""
from __future__ import annotations

import torch

from ._autograd import register_autograd
from ._inductor import acc_dtype, inductor_decomposition

_ops = torch.ops.mytorch


def _fake_like(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


for _name in ("softmax", "log_softmax"):
    torch.library.register_fake(f"mytorch::{_name}")(lambda x, dim: _fake_like(x))


def _bwd_fake(grad_output, output, dim):
    torch._check(grad_output.shape == output.shape,
                 lambda: f"grad_output {tuple(grad_output.shape)} vs output {tuple(output.shape)}")
    return _fake_like(grad_output)


torch.library.register_fake("mytorch::softmax_backward")(_bwd_fake)
torch.library.register_fake("mytorch::log_softmax_backward")(_bwd_fake)


def _setup(ctx, inputs, output):
    ctx.dim = inputs[1]
    ctx.save_for_backward(output)


def _softmax_bwd(ctx, g):
    (y,) = ctx.saved_tensors
    return _ops.softmax_backward(g, y, ctx.dim), None


def _log_softmax_bwd(ctx, g):
    (y,) = ctx.saved_tensors
    return _ops.log_softmax_backward(g, y, ctx.dim), None


register_autograd("mytorch::softmax", _softmax_bwd, setup_context=_setup)
register_autograd("mytorch::log_softmax", _log_softmax_bwd, setup_context=_setup)


# Under Inductor (mytorch_ext/ops/_inductor.py): in float32 for 16-bit inputs, as the kernels.
@inductor_decomposition("mytorch::softmax")
def _softmax_decomposition(x, dim):
    return torch.softmax(x.to(acc_dtype(x.dtype)), dim).to(x.dtype)


@inductor_decomposition("mytorch::log_softmax")
def _log_softmax_decomposition(x, dim):
    return torch.log_softmax(x.to(acc_dtype(x.dtype)), dim).to(x.dtype)


@inductor_decomposition("mytorch::softmax_backward")
def _softmax_backward_decomposition(grad_output, output, dim):
    acc = acc_dtype(output.dtype)
    g, y = grad_output.to(acc), output.to(acc)
    return (y * (g - (g * y).sum(dim, keepdim=True))).to(grad_output.dtype)


@inductor_decomposition("mytorch::log_softmax_backward")
def _log_softmax_backward_decomposition(grad_output, output, dim):
    acc = acc_dtype(output.dtype)
    g = grad_output.to(acc)
    return (g - torch.exp(output.to(acc)) * g.sum(dim, keepdim=True)).to(grad_output.dtype)


# Double backward: both backward kernels are differentiable compositions of mytorch ops.
def _sb_setup(ctx, inputs, output):
    g, y, dim = inputs
    ctx.dim = dim
    ctx.save_for_backward(g, y)


def _softmax_bwd_bwd(ctx, gg):
    # gx = y * (g - s), s = sum(g * y)
    g, y = ctx.saved_tensors
    d = ctx.dim
    s = (g * y).sum(d, keepdim=True)
    ggy = (gg * y).sum(d, keepdim=True)
    d_g = y * gg - y * ggy
    d_y = gg * (g - s) - g * ggy
    return d_g, d_y, None


def _log_softmax_bwd_bwd(ctx, gg):
    # gx = g - exp(y) * sum(g)
    g, y = ctx.saved_tensors
    d = ctx.dim
    p = y.exp()
    d_g = gg - (gg * p).sum(d, keepdim=True)
    d_y = -gg * p * g.sum(d, keepdim=True)
    return d_g, d_y, None


register_autograd("mytorch::softmax_backward", _softmax_bwd_bwd, setup_context=_sb_setup)
register_autograd("mytorch::log_softmax_backward", _log_softmax_bwd_bwd,
                                setup_context=_sb_setup)


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """softmax along dim, as torch.softmax."""
    return _ops.softmax(x, dim)


def log_softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    """log-softmax along dim, as torch.log_softmax."""
    return _ops.log_softmax(x, dim)
