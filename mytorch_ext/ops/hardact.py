"""mytorch::hardswish / hardsigmoid: fake kernels, autograd, wrappers."""
from __future__ import annotations

import torch

from ._autograd import register_autograd

for _name in ("hardswish", "hardsigmoid"):
    torch.library.register_fake(f"mytorch::{_name}")(
        lambda x: torch.empty_like(x, memory_format=torch.contiguous_format))
    torch.library.register_fake(f"mytorch::{_name}_backward")(
        lambda grad, x: torch.empty_like(x, memory_format=torch.contiguous_format))


def _setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _hardswish_backward(ctx, grad):
    return torch.ops.mytorch.hardswish_backward(grad, ctx.saved_tensors[0])


def _hardsigmoid_backward(ctx, grad):
    return torch.ops.mytorch.hardsigmoid_backward(grad, ctx.saved_tensors[0])


register_autograd("mytorch::hardswish", _hardswish_backward, setup_context=_setup)
register_autograd("mytorch::hardsigmoid", _hardsigmoid_backward, setup_context=_setup)


def hardswish(x):
    """As torch.nn.functional.hardswish, through mytorch's kernels."""
    return torch.ops.mytorch.hardswish(x)


def hardsigmoid(x):
    """As torch.nn.functional.hardsigmoid, through mytorch's kernels."""
    return torch.ops.mytorch.hardsigmoid(x)
