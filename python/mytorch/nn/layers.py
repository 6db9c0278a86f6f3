"""Layers: Linear, Conv2d, pooling, BatchNorm2d, activations, norms, Embedding, Dropout,
containers."""
from __future__ import annotations

import math

import torch

from .. import functional as F
from ..random import rand_buffer, randn_buffer
from ..tensor import Tensor
from .module import Module, Parameter


def _uniform(shape, bound, dtype=None, device=None):
    return Parameter(rand_buffer(tuple(shape), dtype, device, -bound, bound))


class Linear(Module):
    """y = x W^T + b; W and b start uniform in +-1/sqrt(in_features), as torch's."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=None,
                 device=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1 / math.sqrt(in_features) if in_features else 0.0
        self.weight = _uniform((out_features, in_features), bound, dtype, device)
        self.bias = _uniform((out_features,), bound, dtype, device) if bias else None

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Conv2d(Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, dtype=None, device=None):
        super().__init__()
        k = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, k
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        fan_in = in_channels // groups * k[0] * k[1]
        bound = 1 / math.sqrt(fan_in)
        self.weight = _uniform((out_channels, in_channels // groups, *k), bound, dtype, device)
        self.bias = _uniform((out_channels,), bound, dtype, device) if bias else None

    def forward(self, x):
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding:
            s += f", padding={self.padding}"
        return s + ("" if self.bias is not None else ", bias=False")


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride or self.kernel_size}"


class AvgPool2d(MaxPool2d):
    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding)


class BatchNorm2d(Module):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, dtype=None, device=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        kw = {"dtype": dtype, "device": device}
        self.weight = Parameter(torch.ones(num_features, **kw)) if affine else None
        self.bias = Parameter(torch.zeros(num_features, **kw)) if affine else None
        self.register_buffer("running_mean", Tensor(torch.zeros(num_features, **kw)))
        self.register_buffer("running_var", Tensor(torch.ones(num_features, **kw)))
        self.register_buffer("num_batches_tracked", Tensor(torch.zeros((), dtype=torch.int64,
                                                                       device=device)))

    def forward(self, x):
        if x.ndim != 4:
            raise ValueError(f"expected 4D input (got {x.ndim}D input)")
        if self.training:
            self.num_batches_tracked.data = (self.num_batches_tracked + 1).data
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training, self.momentum, self.eps)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps: float = 1e-5, bias: bool = True, dtype=None,
                 device=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        kw = {"dtype": dtype, "device": device}
        self.weight = Parameter(torch.ones(shape, **kw))
        self.bias = Parameter(torch.zeros(shape, **kw)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps: float | None = None, dtype=None, device=None):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.weight = Parameter(torch.ones(shape, dtype=dtype, device=device))

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Embedding(Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, dtype=None, device=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(randn_buffer((num_embeddings, embedding_dim), dtype, device))

    def forward(self, idx):
        return F.embedding(idx, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    def __init__(self, p: float = 0.5):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


# layers without state: forward is the function itself
class ReLU(Module):
    forward = staticmethod(F.relu)


class SiLU(Module):
    forward = staticmethod(F.silu)


class Tanh(Module):
    forward = staticmethod(F.tanh)


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        setattr(self, str(len(self._modules)), module)
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class Sequential(ModuleList):
    """A ModuleList whose forward runs its layers in order."""

    def __init__(self, *layers):
        super().__init__(layers)

    def forward(self, x):
        for layer in self:
            x = layer(x)
        return x
