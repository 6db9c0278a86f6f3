"""mytorch::gelu: the template op. Fake kernel, autograd and a public wrapper."""
from __future__ import annotations

import torch

from ._autograd import register_autograd

_APPROX = ("none", "tanh")


@torch.library.register_fake("mytorch::gelu")
def _gelu_fake(x, approximate="none"):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("mytorch::gelu_backward")
def _gelu_backward_fake(grad, x, approximate="none"):
    torch._check(grad.shape == x.shape,
                 lambda: f"mytorch::gelu_backward: grad {tuple(grad.shape)} vs x {tuple(x.shape)}")
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _gelu_setup(ctx, inputs, output):
    x, approximate = inputs
    ctx.save_for_backward(x)
    ctx.approximate = approximate


def _gelu_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return torch.ops.mytorch.gelu_backward(grad, x, ctx.approximate), None


register_autograd("mytorch::gelu", _gelu_backward, setup_context=_gelu_setup)


def gelu(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """GELU, as torch.nn.functional.gelu, through mytorch's kernels."""
    return torch.ops.mytorch.gelu(x, approximate)
