"""The differentiable ops behind Tensor's methods: elementwise, reductions, matmul, views.

Each op is a Function whose forward and backward call mytorch kernels (``K.<name>``) on
torch buffers; views, allocation and copies are the only torch calls.
"""
from __future__ import annotations

import builtins
import math

import torch

from ._kernels import K
from .autograd import Function
from .tensor import Tensor

# ---- helpers ----
_scalars: dict = {}


def _scalar(value, like: torch.Tensor) -> torch.Tensor:
    """A 0-d buffer holding value, with like's dtype and device (cached: never written to)."""
    key = (value, type(value), like.dtype, like.device)
    t = _scalars.get(key)
    if t is None:
        if len(_scalars) > 4096:
            _scalars.clear()
        t = _scalars[key] = torch.full((), value, dtype=like.dtype, device=like.device)
    return t


def _operand(x, like: Tensor):
    """A Tensor stays; a Python number becomes a 0-d buffer of like's dtype."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, int | float | bool):
        return _scalar(x, like.data)
    if isinstance(x, torch.Tensor):
        return Tensor(x)
    raise TypeError(f"unsupported operand type {type(x).__name__} for a mytorch Tensor")


def _reduce_to(g: torch.Tensor, shape) -> torch.Tensor:
    """Sum a broadcast gradient back to the shape of the input it came from."""
    if g.shape == shape:
        return g
    lead = g.dim() - len(shape)
    dims = [i for i in range(g.dim()) if i < lead or (shape[i - lead] == 1 and g.shape[i] != 1)]
    if dims:
        g = K.sum(g, dims, True)
    return g.reshape(shape)


def _dims(dim, ndim: int) -> list[int]:
    if dim is None:
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    return [d % ndim if ndim else 0 for d in dim]


def _keep_shape(shape, dims) -> list[int]:
    return [1 if i in dims else s for i, s in enumerate(shape)]


def _shape_arg(shape):
    """reshape(2, 3) and reshape((2, 3)) alike."""
    if len(shape) == 1 and isinstance(shape[0], tuple | list | torch.Size):
        return tuple(shape[0])
    return shape


# ---- elementwise, binary ----
class Add(Function):
    """a + b; its subclass Sub: a - b."""
    subtract = False

    @staticmethod
    def forward(ctx, a, b):
        ctx.shapes = a.shape, b.shape
        return K.sub(a, b) if ctx.subtract else K.add(a, b)

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        return (_reduce_to(g, ctx.shapes[0]) if na else None,
                _reduce_to(K.neg(g) if ctx.subtract else g, ctx.shapes[1]) if nb else None)


class Sub(Add):
    subtract = True


class Mul(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b
        return K.mul(a, b)

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        a, b = ctx.a, ctx.b
        return (_reduce_to(K.mul(g, b), a.shape) if na else None,
                _reduce_to(K.mul(g, a), b.shape) if nb else None)


class Div(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = K.div(a, b)
        ctx.a_shape, ctx.b, ctx.out = a.shape, b, out
        return out

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        ga = K.div(g, ctx.b)
        return (_reduce_to(ga, ctx.a_shape) if na else None,
                _reduce_to(K.neg(K.mul(ga, ctx.out)), ctx.b.shape) if nb else None)


class Pow(Function):
    @staticmethod
    def forward(ctx, a, b):
        out = K.pow(a, b)
        ctx.a, ctx.b, ctx.out = a, b, out
        return out

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad
        a, b = ctx.a, ctx.b
        ga = gb = None
        if na:  # b * a^(b-1)
            ga = _reduce_to(K.mul(g, K.mul(b, K.pow(a, K.sub(b, _scalar(1, b))))), a.shape)
        if nb:  # a^b * log(a)
            gb = _reduce_to(K.mul(g, K.mul(ctx.out, K.log(a))), b.shape)
        return ga, gb


class Maximum(Function):
    """max(a, b); where they tie, each gets half the gradient (as torch)."""
    cmp = "gt"

    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b
        return K.maximum(a, b) if ctx.cmp == "gt" else K.minimum(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.a, ctx.b
        wins = getattr(K, ctx.cmp)(a, b)
        ties = K.eq(a, b)
        half = K.mul(g, _scalar(0.5, g))
        zero = _scalar(0, g)
        ga = K.where(wins, g, K.where(ties, half, zero))
        gb = K.sub(g, ga)
        na, nb = ctx.needs_input_grad
        return (_reduce_to(ga, a.shape) if na else None, _reduce_to(gb, b.shape) if nb else None)


class Minimum(Maximum):
    cmp = "lt"


class Where(Function):
    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.cond, ctx.shapes = cond, (a.shape, b.shape)
        return K.where(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        _, na, nb = ctx.needs_input_grad
        zero = _scalar(0, g)
        return (None,
                _reduce_to(K.where(ctx.cond, g, zero), ctx.shapes[0]) if na else None,
                _reduce_to(K.where(ctx.cond, zero, g), ctx.shapes[1]) if nb else None)


def _binary(fn: type[Function], swap: bool = False):
    """op(a, b) = fn(a, b) (fn(b, a) with swap), b a Tensor or a Python number."""
    def op(a, b):
        b = _operand(b, a)
        return fn.apply(b, a) if swap else fn.apply(a, b)
    return op


add, sub, mul, div = _binary(Add), _binary(Sub), _binary(Mul), _binary(Div)
rsub, rdiv = _binary(Sub, swap=True), _binary(Div, swap=True)  # 2 - x, 2 / x
maximum, minimum = _binary(Maximum), _binary(Minimum)


def pow(a, b):  # noqa: A001
    if isinstance(b, int | float) and b == 2:
        return Mul.apply(a, a)
    return Pow.apply(a, _operand(b, a))


def where(cond, a, b):
    like = a if isinstance(a, Tensor) else b
    return Where.apply(cond.data if isinstance(cond, Tensor) else cond,
                       _operand(a, like), _operand(b, like))


def compare(op: str, a, b):
    """eq, ne, lt, le, gt, ge: a bool Tensor, no gradient."""
    b = _operand(b, a)
    return Tensor(getattr(K, op)(a.data, b.data if isinstance(b, Tensor) else b))


# ---- elementwise, unary ----
def _abs_grad(g, x):
    zero = _scalar(0, g)
    return K.where(K.gt(x, zero), g, K.where(K.lt(x, zero), K.neg(g), zero))


# out = K.<name>(x, *args). Each op keeps the one buffer its gradient needs ("x", "out" or
# None) and gets the gradient from (g, that buffer, *args).
_UNARY = {
    "neg": (None, lambda g, _: K.neg(g)),
    "exp": ("out", lambda g, out: K.mul(g, out)),
    "log": ("x", lambda g, x: K.div(g, x)),
    "sqrt": ("out", lambda g, out: K.div(K.mul(g, _scalar(0.5, g)), out)),
    "abs": ("x", _abs_grad),
    "tanh": ("out", lambda g, out: K.tanh_backward(g, out)),
    "sigmoid": ("out", lambda g, out: K.sigmoid_backward(g, out)),
    "relu": ("out", lambda g, out: K.threshold_backward(g, out, 0)),
    "silu": ("x", lambda g, x: K.silu_backward(g, x)),
    "gelu": ("x", lambda g, x, approximate: K.gelu_backward(g, x, approximate)),
}


class Unary(Function):
    """One op of the _UNARY table, named by its kernel."""

    @staticmethod
    def forward(ctx, x, name, *args):
        out = getattr(K, name)(x, *args)
        keep = _UNARY[name][0]
        ctx.name, ctx.args = name, args
        ctx.saved = x if keep == "x" else out if keep == "out" else None
        return out

    @staticmethod
    def backward(ctx, g):
        grad = _UNARY[ctx.name][1](g, ctx.saved, *ctx.args)
        return (grad, None) + (None,) * len(ctx.args)

    def release(self):
        name = self.name
        super().release()
        self.name = name

    def __repr__(self):
        return f"<{self.name.capitalize()}Backward>"


def _unary(name: str):
    def op(x, *args):
        return Unary.apply(x, name, *args)
    op.__name__ = op.__qualname__ = name
    return op


# the table's ops, in its order, as functions of a Tensor (and the op's arguments)
neg, exp, log, sqrt, abs, tanh, sigmoid, relu, silu, gelu = map(_unary, _UNARY)  # noqa: A001


class Clamp(Function):
    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.x, ctx.lo, ctx.hi = x, lo, hi
        return K.clamp(x, lo, hi)

    @staticmethod
    def backward(ctx, g):
        x, zero = ctx.x, _scalar(0, g)
        if ctx.lo is not None:
            g = K.where(K.lt(x, _scalar(ctx.lo, x)), zero, g)
        if ctx.hi is not None:
            g = K.where(K.gt(x, _scalar(ctx.hi, x)), zero, g)
        return g, None, None


class MaskedFill(Function):
    @staticmethod
    def forward(ctx, x, mask, value):
        ctx.mask = mask
        return K.masked_fill(x, mask, value)

    @staticmethod
    def backward(ctx, g):
        return K.masked_fill(g, ctx.mask, 0.0), None, None


def clamp(x, min=None, max=None):  # noqa: A002
    return Clamp.apply(x, min, max)


def masked_fill(x, mask, value):
    return MaskedFill.apply(x, mask.data if isinstance(mask, Tensor) else mask, value)


# ---- reductions ----
class Sum(Function):
    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.shape, ctx.keep = x.shape, _keep_shape(x.shape, dims)
        return K.sum(x, dims, keepdim)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.keep).expand(ctx.shape), None, None


class Mean(Function):
    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.shape, ctx.keep = x.shape, _keep_shape(x.shape, dims)
        ctx.n = math.prod(x.shape[d] for d in dims)
        return K.mean(x, dims, keepdim)

    @staticmethod
    def backward(ctx, g):
        g = K.mul(g, _scalar(1.0 / builtins.max(ctx.n, 1), g))
        return g.reshape(ctx.keep).expand(ctx.shape), None, None


class Var(Function):
    @staticmethod
    def forward(ctx, x, dims, keepdim, correction):
        ctx.x, ctx.dims = x, dims
        ctx.n = math.prod(x.shape[d] for d in dims) - correction
        return K.var(x, dims, correction, keepdim)

    @staticmethod
    def backward(ctx, g):  # 2 (x - mean) / (n - correction) * g
        x = ctx.x
        centered = K.sub(x, K.mean(x, ctx.dims, True))
        scale = K.mul(g.reshape(_keep_shape(x.shape, ctx.dims)), _scalar(2.0 / ctx.n, g))
        return K.mul(centered, scale), None, None, None


class LogSumExp(Function):
    @staticmethod
    def forward(ctx, x, dims, keepdim):
        out = K.logsumexp(x, dims, keepdim)
        ctx.x, ctx.out, ctx.keep = x, out, _keep_shape(x.shape, dims)
        return out

    @staticmethod
    def backward(ctx, g):
        p = K.exp(K.sub(ctx.x, ctx.out.reshape(ctx.keep)))
        return K.mul(p, g.reshape(ctx.keep)), None, None


class MaxDim(Function):
    """Values of max/min along one dim; the gradient goes to the index that won."""

    @staticmethod
    def forward(ctx, x, dim, keepdim, largest):
        values = (K.amax if largest else K.amin)(x, [dim], True)
        idx = (K.argmax if largest else K.argmin)(x, dim, True)
        ctx.shape, ctx.dim, ctx.idx = x.shape, dim, idx
        return values if keepdim else values.squeeze(dim)

    @staticmethod
    def backward(ctx, g):
        g = g.reshape(ctx.idx.shape)
        zeros = torch.zeros(ctx.shape, dtype=g.dtype, device=g.device)
        return K.scatter_add(zeros, ctx.dim, ctx.idx, g), None, None, None


class MaxAll(Function):
    """max/min of all elements; ties share the gradient evenly (as torch)."""

    @staticmethod
    def forward(ctx, x, largest):
        out = (K.amax if largest else K.amin)(x, [], False)
        ctx.x, ctx.out = x, out
        return out

    @staticmethod
    def backward(ctx, g):
        mask = K.eq(ctx.x, ctx.out)
        count = K.sum(K.cast(mask, g.dtype), None, False)
        zero = _scalar(0, g)
        return K.where(mask, K.div(g, count), zero), None


def sum(x, dim=None, keepdim=False):  # noqa: A001
    return Sum.apply(x, _dims(dim, x.ndim), keepdim)


def mean(x, dim=None, keepdim=False):
    return Mean.apply(x, _dims(dim, x.ndim), keepdim)


def var(x, dim=None, keepdim=False, correction=1):
    return Var.apply(x, _dims(dim, x.ndim), keepdim, correction)


def logsumexp(x, dim, keepdim=False):
    return LogSumExp.apply(x, _dims(dim, x.ndim), keepdim)


def max(x, dim=None, keepdim=False):  # noqa: A001
    """max() -> Tensor; max(dim) -> (values, indices), as torch."""
    return _extreme(x, dim, keepdim, True)


def min(x, dim=None, keepdim=False):  # noqa: A001
    return _extreme(x, dim, keepdim, False)


def _extreme(x, dim, keepdim, largest):
    if dim is None:
        return MaxAll.apply(x, largest)
    dim = dim % x.ndim
    values = MaxDim.apply(x, dim, keepdim, largest)
    if values._ctx is not None:
        idx = values._ctx.idx
    else:
        idx = (K.argmax if largest else K.argmin)(x.data, dim, True)
    return values, Tensor(idx if keepdim else idx.squeeze(dim))


def argmax(x, dim=None, keepdim=False):
    return Tensor(K.argmax(x.data, dim, keepdim))


# ---- matmul ----
class MatMul(Function):
    """a @ b for 2-D operands (K.mm); batched operands go through K.bmm."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.a, ctx.b = a, b
        return K.mm(a, b) if a.dim() == 2 else K.bmm(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.a, ctx.b
        na, nb = ctx.needs_input_grad
        mm = K.mm if a.dim() == 2 else K.bmm
        return (mm(g, b.transpose(-1, -2)) if na else None,
                mm(a.transpose(-1, -2), g) if nb else None)


def matmul(a, b):
    if not isinstance(b, Tensor) or not isinstance(a, Tensor):
        raise TypeError("matmul: both operands must be mytorch Tensors")
    da, db = a.ndim, b.ndim
    if da == 0 or db == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{da}D and {db}D")
    if a.shape[-1] != b.shape[-2 if db > 1 else 0]:
        raise RuntimeError(f"matmul: shapes {a.shape} and {b.shape} cannot be multiplied "
                           f"({a.shape[-1]} != {b.shape[-2 if db > 1 else 0]})")
    if a.dtype != b.dtype:
        raise RuntimeError(f"matmul: expected both operands to have the same dtype, got "
                           f"{a.dtype} and {b.dtype} (shapes {a.shape} and {b.shape})")
    if da == 1:
        return matmul(a.unsqueeze(0), b).squeeze(-2)
    if db == 1:
        return matmul(a, b.unsqueeze(-1)).squeeze(-1)
    if da == 2 and db == 2:
        return MatMul.apply(a, b)
    if db == 2:  # (..., m, k) @ (k, n): one big mm
        return MatMul.apply(a.reshape(-1, a.shape[-1]), b).reshape(*a.shape[:-1], b.shape[-1])
    batch = tuple(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    a3 = a.expand(*batch, *a.shape[-2:]).reshape(-1, *a.shape[-2:])
    b3 = b.expand(*batch, *b.shape[-2:]).reshape(-1, *b.shape[-2:])
    return MatMul.apply(a3, b3).reshape(*batch, a.shape[-2], b.shape[-1])


# ---- views and copies (torch buffer ops only) ----
class Reshape(Function):
    """x.reshape(shape); the subclasses call x.view or x.expand instead."""
    method = "reshape"

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        return getattr(x, ctx.method)(shape)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape), None


class View(Reshape):
    method = "view"


class Expand(Reshape):
    method = "expand"

    @staticmethod
    def backward(ctx, g):
        return _reduce_to(g, ctx.shape), None


class Permute(Function):
    @staticmethod
    def forward(ctx, x, dims):
        ctx.inverse = [0] * len(dims)
        for i, d in enumerate(dims):
            ctx.inverse[d % len(dims)] = i
        return x.permute(dims)

    @staticmethod
    def backward(ctx, g):
        return g.permute(ctx.inverse), None


class Contiguous(Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone(memory_format=torch.contiguous_format)

    @staticmethod
    def backward(ctx, g):
        return g


class ToCopy(Function):
    @staticmethod
    def forward(ctx, x, device, dtype):
        ctx.device, ctx.dtype = x.device, x.dtype
        return x.to(device=device, dtype=dtype)

    @staticmethod
    def backward(ctx, g):
        return g.to(device=ctx.device, dtype=ctx.dtype), None, None


class GetItem(Function):
    """Basic indexing (ints, slices, None, ...): a view; the gradient lands in zeros."""

    @staticmethod
    def forward(ctx, x, index):
        ctx.shape, ctx.index = x.shape, index
        return x[index]

    @staticmethod
    def backward(ctx, g):
        out = torch.zeros(ctx.shape, dtype=g.dtype, device=g.device)
        out[ctx.index].copy_(g)
        return out, None


class IndexSelect(Function):
    @staticmethod
    def forward(ctx, x, dim, idx):
        ctx.shape, ctx.dim, ctx.idx = x.shape, dim, idx
        return K.index_select(x, dim, idx)

    @staticmethod
    def backward(ctx, g):
        zeros = torch.zeros(ctx.shape, dtype=g.dtype, device=g.device)
        idx = ctx.idx.view([-1 if d == ctx.dim else 1 for d in range(g.dim())]).expand(g.shape)
        return K.scatter_add(zeros, ctx.dim, idx.contiguous(), g), None, None


def reshape(x, *shape):
    return Reshape.apply(x, _shape_arg(shape))


def view(x, *shape):
    return View.apply(x, _shape_arg(shape))


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return x.reshape(1)
    start, end = start_dim % x.ndim, end_dim % x.ndim
    return Reshape.apply(x, x.shape[:start] + (-1,) + x.shape[end + 1:])


def permute(x, *dims):
    return Permute.apply(x, list(_shape_arg(dims)))


def transpose(x, dim0, dim1):
    dims = list(range(x.ndim))
    dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
    return Permute.apply(x, dims)


def expand(x, *shape):
    return Expand.apply(x, _shape_arg(shape))


def squeeze(x, dim=None):
    if dim is None:
        shape = tuple(s for s in x.shape if s != 1)
    else:
        dims = _dims(dim, x.ndim)
        shape = tuple(s for i, s in enumerate(x.shape) if not (i in dims and s == 1))
    return Reshape.apply(x, shape)


def unsqueeze(x, dim):
    dim = dim % (x.ndim + 1)
    return Reshape.apply(x, x.shape[:dim] + (1,) + x.shape[dim:])


def contiguous(x, force=False):
    return Contiguous.apply(x)


def to_copy(x, device, dtype):
    if (device is None or torch.device(device) == x.data.device) and dtype in (None, x.dtype):
        return x
    return ToCopy.apply(x, device, dtype)


def _is_index_tensor(i) -> bool:
    return isinstance(i, Tensor | torch.Tensor | list)


def getitem(x, index):
    items = index if isinstance(index, tuple) else (index,)
    tensors = [i for i in items if _is_index_tensor(i)]
    if not tensors:
        return GetItem.apply(x, index)
    if len(items) == 1:  # x[idx]: rows by an integer tensor or list
        idx = index.data if isinstance(index, Tensor) else torch.as_tensor(index)
        if idx.dtype == torch.bool:
            raise NotImplementedError("mytorch: boolean-mask indexing is not supported; "
                                      "use mytorch.where or masked_fill")
        flat = idx.reshape(-1).to(torch.int64)
        out = IndexSelect.apply(x, 0, flat)
        return out.reshape(*idx.shape, *x.shape[1:])
    raise NotImplementedError(f"mytorch: unsupported index {index!r}: use ints, slices, None, "
                              "... or a single integer tensor")


def setitem(x, index, value):
    target = x.data[index]
    if isinstance(value, Tensor):
        target.copy_(value.data)
    else:
        target.fill_(value)


class Cat(Function):
    @staticmethod
    def forward(ctx, dim, *xs):
        ctx.dim, ctx.sizes = dim, [x.shape[dim] for x in xs]
        return K.cat(list(xs), dim)

    @staticmethod
    def backward(ctx, g):
        out, start = [None], 0
        for n in ctx.sizes:
            out.append(g.narrow(ctx.dim, start, n))
            start += n
        return tuple(out)


def cat(tensors, dim=0):
    tensors = list(tensors)
    return Cat.apply(dim % tensors[0].ndim, *tensors)


def stack(tensors, dim=0):
    tensors = list(tensors)
    dim = dim % (tensors[0].ndim + 1)
    return Cat.apply(dim, *[t.unsqueeze(dim) for t in tensors])
