"""mytorch.Tensor: a torch buffer plus what autograd needs (requires_grad, grad, the node).

The buffer (``.data``) is a plain torch.Tensor used only for storage: allocation, views and
copies. Every computation goes through a mytorch kernel (see ``mytorch.ops``).

This module is the bottom of the package: autograd, ops and functional import Tensor, and
Tensor's methods reach them through handles that import them on first use.
"""
from __future__ import annotations

import importlib

import numpy as np
import torch


class _Later:
    """A module of this package, imported when first used; its attributes are cached here
    after their first lookup, so a method call costs what a module attribute lookup does."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        value = getattr(importlib.import_module(self._name, __package__), attr)
        setattr(self, attr, value)
        return value


autograd, ops, functional = _Later(".autograd"), _Later(".ops"), _Later(".functional")
float16, bfloat16, float32, float64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
int32, int64, bool_ = torch.int32, torch.int64, torch.bool



class Tensor:
    __slots__ = ("data", "requires_grad", "grad", "_ctx", "__weakref__")
    __hash__ = object.__hash__  # == is elementwise, identity still hashes

    def __init__(self, data, dtype=None, device=None, requires_grad: bool = False):
        if isinstance(data, Tensor):
            data = data.data
        elif isinstance(data, np.ndarray):
            data = torch.from_numpy(data)
        elif not isinstance(data, torch.Tensor):
            data = torch.tensor(data, dtype=dtype)
        if dtype is not None or device is not None:
            data = data.to(device=device, dtype=dtype)
        if data.requires_grad:  # a torch parameter: keep its storage, not torch's graph
            data = data.detach()
        if requires_grad and not (data.dtype.is_floating_point or data.dtype.is_complex):
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self.data = data
        self.requires_grad = requires_grad
        self.grad = None
        self._ctx = None

    # ---- attributes ----
    @property
    def shape(self) -> tuple:
        return tuple(self.data.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.data.dtype

    @property
    def device(self) -> str:
        """"cpu", "cuda:0", "mytorch:0", ..."""
        return str(self.data.device)

    @property
    def ndim(self) -> int:
        return self.data.dim()

    @property
    def is_leaf(self) -> bool:
        return self._ctx is None

    @property
    def grad_fn(self):
        return self._ctx

    @property
    def T(self):
        return self.permute(*range(self.ndim - 1, -1, -1))

    def dim(self) -> int:
        return self.data.dim()

    def numel(self) -> int:
        return self.data.numel()

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.data.shape[dim]

    def __len__(self):
        if self.data.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.data.shape[0]

    # ---- conversions ----
    def item(self):
        if self.data.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.data.numel()} elements cannot be converted "
                               "to Scalar")
        return self.data.item()

    def numpy(self) -> np.ndarray:
        if self.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        data = self.data if self.data.device.type == "cpu" else self.data.cpu()
        if data.dtype in (torch.bfloat16,):
            data = data.to(torch.float32)
        return data.numpy()

    def tolist(self):
        return self.data.tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        if self.data.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.data.item())

    def detach(self) -> Tensor:
        """The same buffer, cut from the graph."""
        return Tensor(self.data)

    def to(self, *args, dtype=None, device=None) -> Tensor:
        """to("cuda"), to(mytorch.float64), to(device, dtype). Differentiable."""
        for a in args:
            if isinstance(a, torch.dtype):
                dtype = a
            else:
                device = a
        return ops.to_copy(self, device, dtype)

    def cpu(self):
        return self.to("cpu")

    def cuda(self):
        return self.to("cuda")

    def float(self):
        return self.to(dtype=torch.float32)

    def double(self):
        return self.to(dtype=torch.float64)

    def long(self):
        return self.to(dtype=torch.int64)

    def half(self):
        return self.to(dtype=torch.float16)

    def bfloat16(self):
        return self.to(dtype=torch.bfloat16)

    # ---- autograd ----
    def backward(self, gradient=None, retain_graph: bool = False) -> None:
        autograd.backward(self, gradient, retain_graph)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if not self.is_leaf:
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        self.requires_grad = requires_grad
        return self

    # ---- printing ----
    def __repr__(self):
        data = self.data
        if data.device.type != "cpu" or data.dtype in (torch.bfloat16, torch.float16):
            data = data.to("cpu", torch.float32 if data.dtype.is_floating_point else data.dtype)
        arr = data.numpy()
        kind = "float" if self.data.dtype.is_floating_point else ""
        body = np.array2string(arr, separator=", ", prefix="tensor(", threshold=200, edgeitems=3,
                               precision=4, floatmode="fixed" if kind else "maxprec",
                               suppress_small=True)
        extras = []
        if arr.size == 0 or arr.ndim == 0 and False:
            pass
        if arr.size == 0:
            extras.append(f"size={self.shape}")
        if self.data.dtype not in (torch.float32, torch.int64, torch.bool):
            extras.append(f"dtype={str(self.data.dtype).removeprefix('torch.')}")
        if self.data.device.type != "cpu":
            extras.append(f"device='{self.device}'")
        if self._ctx is not None:
            extras.append(f"grad_fn={self._ctx!r}")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body] + extras) + ")"

    # ---- shape and indexing (views where torch gives views) ----
    def __getitem__(self, index):
        return ops.getitem(self, index)

    def __setitem__(self, index, value):
        if self.requires_grad and autograd.is_grad_enabled():
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
        ops.setitem(self, index, value)

    def reshape(self, *shape):
        return ops.reshape(self, _shape_arg(shape))

    def view(self, *shape):
        return ops.view(self, _shape_arg(shape))

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        return ops.flatten(self, start_dim, end_dim)

    def permute(self, *dims):
        return ops.permute(self, _shape_arg(dims))

    def transpose(self, dim0: int, dim1: int):
        return ops.transpose(self, dim0, dim1)

    def t(self):
        return ops.transpose(self, 0, 1)

    def expand(self, *shape):
        return ops.expand(self, _shape_arg(shape))

    def squeeze(self, dim=None):
        return ops.squeeze(self, dim)

    def unsqueeze(self, dim: int):
        return ops.unsqueeze(self, dim)

    def contiguous(self):
        return self if self.data.is_contiguous() else ops.contiguous(self)

    def clone(self):
        return ops.contiguous(self, force=True)

    def chunk(self, chunks: int, dim: int = 0):
        n = self.data.shape[dim]
        step = -(-n // chunks)
        return self.split(step, dim)

    def split(self, size: int, dim: int = 0):
        dim = dim % self.ndim
        n = self.data.shape[dim]
        pre = (slice(None),) * dim
        return tuple(self[pre + (slice(s, min(s + size, n)),)] for s in range(0, n, size))

    # ---- arithmetic ----
    def __add__(self, o):
        return ops.add(self, o)

    def __radd__(self, o):
        return ops.add(self, o)

    def __sub__(self, o):
        return ops.sub(self, o)

    def __rsub__(self, o):
        return ops.rsub(self, o)

    def __mul__(self, o):
        return ops.mul(self, o)

    def __rmul__(self, o):
        return ops.mul(self, o)

    def __truediv__(self, o):
        return ops.div(self, o)

    def __rtruediv__(self, o):
        return ops.rdiv(self, o)

    def __neg__(self):
        return ops.neg(self)

    def __pow__(self, o):
        return ops.pow(self, o)

    def __matmul__(self, o):
        return ops.matmul(self, o)

    def __rmatmul__(self, o):
        return ops.matmul(o, self)

    def __iadd__(self, o):
        return self._inplace(ops.add(self, o))

    def __isub__(self, o):
        return self._inplace(ops.sub(self, o))

    def __imul__(self, o):
        return self._inplace(ops.mul(self, o))

    def __itruediv__(self, o):
        return self._inplace(ops.div(self, o))

    def _inplace(self, result):
        """x += y: out of place on the graph, written back into x's buffer when x is a leaf
        that needs no grad (so that views of x see it)."""
        if self.requires_grad or result.requires_grad:
            return result
        if result.data.shape != self.data.shape:
            raise RuntimeError(f"output with shape {list(self.data.shape)} doesn't match the "
                               f"broadcast shape {list(result.data.shape)}")
        self.data.copy_(result.data)
        return self

    def __eq__(self, o):
        return ops.compare("eq", self, o)

    def __ne__(self, o):
        return ops.compare("ne", self, o)

    def __lt__(self, o):
        return ops.compare("lt", self, o)

    def __le__(self, o):
        return ops.compare("le", self, o)

    def __gt__(self, o):
        return ops.compare("gt", self, o)

    def __ge__(self, o):
        return ops.compare("ge", self, o)

    def exp(self):
        return ops.exp(self)

    def log(self):
        return ops.log(self)

    def sqrt(self):
        return ops.sqrt(self)

    def abs(self):
        return ops.abs(self)

    def tanh(self):
        return ops.tanh(self)

    def sigmoid(self):
        return ops.sigmoid(self)

    def relu(self):
        return ops.relu(self)

    def maximum(self, o):
        return ops.maximum(self, o)

    def minimum(self, o):
        return ops.minimum(self, o)

    def clamp(self, min=None, max=None):  # noqa: A002
        return ops.clamp(self, min, max)

    def masked_fill(self, mask, value):
        return ops.masked_fill(self, mask, value)

    # ---- reductions ----
    def sum(self, dim=None, keepdim: bool = False):
        return ops.sum(self, dim, keepdim)

    def mean(self, dim=None, keepdim: bool = False):
        return ops.mean(self, dim, keepdim)

    def var(self, dim=None, keepdim: bool = False, correction: int = 1):
        return ops.var(self, dim, keepdim, correction)

    def max(self, dim=None, keepdim: bool = False):
        return ops.max(self, dim, keepdim)

    def min(self, dim=None, keepdim: bool = False):
        return ops.min(self, dim, keepdim)

    def argmax(self, dim=None, keepdim: bool = False):
        return ops.argmax(self, dim, keepdim)

    def logsumexp(self, dim, keepdim: bool = False):
        return ops.logsumexp(self, dim, keepdim)

    def softmax(self, dim: int):
        return functional.softmax(self, dim)

    def log_softmax(self, dim: int):
        return functional.log_softmax(self, dim)


def _shape_arg(shape):
    """reshape(2, 3) and reshape((2, 3)) alike."""
    if len(shape) == 1 and isinstance(shape[0], tuple | list | torch.Size):
        return tuple(shape[0])
    return shape
