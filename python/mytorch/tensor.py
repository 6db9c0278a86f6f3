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

    # ---- shape and indexing (views where torch gives views; more in the tables below) ----
    def __setitem__(self, index, value):
        if self.requires_grad and autograd.is_grad_enabled():
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
        ops.setitem(self, index, value)

    def t(self):
        return ops.transpose(self, 0, 1)

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

    # ---- arithmetic and reductions (most of them: the tables below the class) ----
    def __rmatmul__(self, o):
        return ops.matmul(o, self)

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

    def softmax(self, dim: int):
        return functional.softmax(self, dim)

    def log_softmax(self, dim: int):
        return functional.log_softmax(self, dim)


# ---- Tensor's methods that return one function of mytorch.ops applied to the tensor ----
def _method(fn: str, *head, inplace: bool = False):
    """A method returning ops.<fn>(*head, self, *args, **kwargs); with inplace, that result
    goes through Tensor._inplace (x += y)."""
    def method(self, *args, **kwargs):
        out = getattr(ops, fn)(*head, self, *args, **kwargs)
        return self._inplace(out) if inplace else out
    method.__name__ = method.__qualname__ = fn
    return method


_OPS_METHODS = {  # Tensor's method: the function of mytorch.ops it calls
    "__add__": "add", "__radd__": "add", "__sub__": "sub", "__rsub__": "rsub",
    "__mul__": "mul", "__rmul__": "mul", "__truediv__": "div", "__rtruediv__": "rdiv",
    "__pow__": "pow", "__matmul__": "matmul", "__neg__": "neg", "__getitem__": "getitem",
    **{name: name for name in (
        "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "maximum", "minimum", "clamp",
        "masked_fill", "sum", "mean", "var", "max", "min", "argmax", "logsumexp",
        "reshape", "view", "flatten", "permute", "transpose", "expand", "squeeze", "unsqueeze")},
}
for _name, _fn in _OPS_METHODS.items():
    setattr(Tensor, _name, _method(_fn))
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):  # x == y: ops.compare("eq", x, y)
    setattr(Tensor, f"__{_op}__", _method("compare", _op))
for _name, _fn in {"__iadd__": "add", "__isub__": "sub", "__imul__": "mul",
                   "__itruediv__": "div"}.items():
    setattr(Tensor, _name, _method(_fn, inplace=True))
