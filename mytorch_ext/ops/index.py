"""mytorch:: indexing ops: fake kernels, autograd."""
from __future__ import annotations

import torch

from ._autograd import register_autograd

_m = torch.ops.mytorch


@torch.library.register_fake("mytorch::index_select")
def _index_select_fake(x, dim, index):
    shape = list(x.shape) or [1]
    shape[dim % len(shape)] = index.numel()
    return x.new_empty(shape if x.dim() else [])


torch.library.register_fake("mytorch::gather")(lambda x, dim, index: x.new_empty(index.shape))
torch.library.register_fake("mytorch::scatter_add")(lambda x, dim, index, src: torch.empty_like(
    x, memory_format=torch.contiguous_format))
torch.library.register_fake("mytorch::index")(lambda x, indices: torch.empty_like(
    torch.ops.aten.index.Tensor(x, indices), memory_format=torch.contiguous_format))
torch.library.register_fake("mytorch::index_put")(lambda x, indices, values, accumulate=False: torch.empty_like(
    x, memory_format=torch.contiguous_format))
torch.library.register_fake("mytorch::cat")(lambda tensors, dim=0: torch.empty_like(
    torch.cat(tensors, dim), memory_format=torch.contiguous_format))


@torch.library.register_fake("mytorch::nonzero")
def _nonzero_fake(x):
    n = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty((n, x.dim()), dtype=torch.int64)


def _zeros(x):
    # Not x * 0: that is NaN where x holds NaN or Inf.
    return torch.zeros_like(x, memory_format=torch.contiguous_format)


def _save(ctx, inputs, output):
    ctx.save_for_backward(*[t for t in inputs if isinstance(t, torch.Tensor)])
    ctx.args = inputs


def _index_select_bwd(ctx, g):
    x, index = ctx.saved_tensors
    dim = ctx.args[1]
    if x.dim() == 0:
        return g, None, None
    d = dim % x.dim()
    idx = index.reshape(-1)
    shape = [1] * x.dim()
    shape[d] = idx.numel()
    full = list(g.shape)
    idx = idx.reshape(shape).expand(full)
    return _m.scatter_add(_zeros(x), d, idx.contiguous(), g), None, None


def _gather_bwd(ctx, g):
    x, index = ctx.saved_tensors
    return _m.scatter_add(_zeros(x), ctx.args[1], index, g), None, None


def _scatter_add_bwd(ctx, g):
    x, index, src = ctx.saved_tensors
    gsrc = _m.gather(g, ctx.args[1], index)
    if gsrc.shape != src.shape:  # src may be larger than index: its other entries get 0
        full = torch.zeros(src.shape, dtype=gsrc.dtype, device=gsrc.device)
        full[tuple(slice(0, n) for n in index.shape)] = gsrc
        gsrc = full
    return g, None, None, gsrc


def _cat_setup(ctx, inputs, output):
    tensors, dim = inputs
    ctx.sizes = [t.shape[dim] if t.dim() else 0 for t in tensors]
    ctx.shapes = [t.shape for t in tensors]
    ctx.dim = dim


def _cat_bwd(ctx, g):
    out, off = [], 0
    for n, shape in zip(ctx.sizes, ctx.shapes):
        if len(shape) == 1 and shape[0] == 0:
            out.append(g.new_zeros(shape))
            continue
        out.append(g.narrow(ctx.dim, off, n).contiguous())
        off += n
    # One entry per input the op received: the dispatcher drops dim when it equals its
    # default, and older torch.library wrappers want exactly that many.
    return (out, None)[:max(1, len(ctx.needs_input_grad))]


def _index_bwd(ctx, g):
    x = ctx.saved_tensors[0]
    indices = ctx.args[1]
    # Autograd matches the inputs' structure: a list holding a None is one leaf (one None),
    # a list of tensors is a list (one None each).
    none = None if any(i is None for i in indices) else [None] * len(indices)
    return _m.index_put(_zeros(x), indices, g, True), none


def _index_put_bwd(ctx, g):
    x, values = ctx.saved_tensors
    indices, accumulate = ctx.args[1], ctx.args[3]
    gx = g if accumulate else _m.index_put(g, indices, _zeros(values), False)
    gv = _m.index(g, indices)
    none = None if any(i is None for i in indices) else [None] * len(indices)
    return gx, none, _sum_to_shape(gv, values.shape), None


def _sum_to_shape(g, shape):
    from ._elementwise import sum_to
    return sum_to(g, shape)


register_autograd("mytorch::cat", _cat_bwd, setup_context=_cat_setup)
for _n, _bwd in {"index_select": _index_select_bwd, "gather": _gather_bwd,
                 "scatter_add": _scatter_add_bwd, "index": _index_bwd,
                 "index_put": _index_put_bwd}.items():  # each saves its inputs (_save)
    register_autograd(f"mytorch::{_n}", _bwd, setup_context=_save)
