"""Helpers of the elementwise families (elementwise_unary.py, elementwise_binary.py,
elementwise_ternary.py): fake kernels from the ATen op, autograd setup, broadcasting undone.

Results follow ATen's broadcasting and type promotion and are contiguous, so each fake kernel is
the ATen op on fake tensors, laid out contiguously.
"""
from __future__ import annotations

import torch

from ._autograd import register_autograd

_m = torch.ops.mytorch


def contig(ref):
    return torch.empty(ref.shape, dtype=ref.dtype, device=ref.device)


def reg_fake(name, aten_fn):
    torch.library.register_fake(f"mytorch::{name}")(lambda *a, **k: contig(aten_fn(*a, **k)))


def sum_to(g: torch.Tensor, shape) -> torch.Tensor:
    """Sum g down to `shape` (undo broadcasting) with mytorch's reduction."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.dim() - len(shape)
    dims = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1]
    r = _m.sum(g, dims, True) if dims else g
    if lead:
        r = r.reshape(shape)
    return r


def _save_all(ctx, inputs, output):
    tensors = [t if isinstance(t, torch.Tensor) else None for t in inputs]
    ctx.save_for_backward(*tensors, output)
    ctx.args = [None if isinstance(t, torch.Tensor) else t for t in inputs]


def reg_grad(name, bwd):
    """Autograd for mytorch::name: bwd(ctx, grad), with ctx.saved_tensors = the tensor inputs
    (None for the others) and the output, ctx.args = the non-tensor inputs (None for tensors)."""
    register_autograd(f"mytorch::{name}", bwd, setup_context=_save_all)


def scaled(t, value):
    return t if value == 1 else _m.mul(t, torch.tensor(value, dtype=t.dtype))
