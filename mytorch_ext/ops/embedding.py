"""mytorch::embedding (+ backward): fake kernels, autograd, wrapper."""
from __future__ import annotations

import torch

_ops = torch.ops.mytorch


@torch.library.register_fake("mytorch::embedding")
def _emb_fake(weight, indices, padding_idx=-1):
    return weight.new_empty((*indices.shape, weight.shape[1]))


@torch.library.register_fake("mytorch::embedding_backward")
def _emb_bwd_fake(grad, indices, num_weights, padding_idx=-1, scale_grad_by_freq=False):
    return grad.new_empty((num_weights, grad.shape[-1]))


def _setup(ctx, inputs, output):
    weight, indices, padding_idx = inputs
    ctx.num_weights = weight.shape[0]
    ctx.padding_idx = padding_idx
    ctx.save_for_backward(indices)


def _backward(ctx, g):
    (indices,) = ctx.saved_tensors
    return _ops.embedding_backward(g, indices, ctx.num_weights, ctx.padding_idx, False), None, None


torch.library.register_autograd("mytorch::embedding", _backward, setup_context=_setup)


def embedding(indices, weight, padding_idx=None):
    """As torch.nn.functional.embedding (argument order included); padding_idx rows get no gradient."""
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        padding_idx += weight.shape[0]
    return _ops.embedding(weight, indices, padding_idx)
