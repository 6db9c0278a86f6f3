"""Tensor factories: tensor, zeros, ones, full, arange, randn, rand, *_like."""
from __future__ import annotations

import numpy as np
import torch

from . import random as _random
from .tensor import Tensor


def _shape(shape):
    if len(shape) == 1 and isinstance(shape[0], tuple | list | torch.Size):
        return tuple(shape[0])
    return tuple(shape)


def tensor(data, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return Tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


def zeros(*shape, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return Tensor(torch.zeros(_shape(shape), dtype=dtype, device=device),
                  requires_grad=requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return Tensor(torch.ones(_shape(shape), dtype=dtype, device=device), requires_grad=requires_grad)


def full(shape, value, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return Tensor(torch.full(tuple(shape), value, dtype=dtype, device=device),
                  requires_grad=requires_grad)


def empty(*shape, dtype=None, device=None) -> Tensor:
    return Tensor(torch.empty(_shape(shape), dtype=dtype, device=device))


def arange(start, end=None, step=1, dtype=None, device=None) -> Tensor:
    if end is None:
        start, end = 0, start
    arr = np.arange(start, end, step)
    if dtype is None:
        dtype = torch.int64 if arr.dtype.kind in "iu" else torch.float32
    return Tensor(torch.from_numpy(arr).to(device=device, dtype=dtype))


def randn(*shape, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return Tensor(_random.randn_buffer(_shape(shape), dtype, device), requires_grad=requires_grad)


def rand(*shape, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return Tensor(_random.rand_buffer(_shape(shape), dtype, device), requires_grad=requires_grad)


def randint(low, high, shape, dtype=torch.int64, device=None) -> Tensor:
    arr = _random.generator().integers(low, high, tuple(shape))
    return Tensor(torch.from_numpy(arr).to(device=device, dtype=dtype))


def zeros_like(t: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    return zeros(t.shape, dtype=dtype or t.dtype, device=t.data.device, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype=None, requires_grad: bool = False) -> Tensor:
    return ones(t.shape, dtype=dtype or t.dtype, device=t.data.device, requires_grad=requires_grad)


def randn_like(t: Tensor) -> Tensor:
    return randn(t.shape, dtype=t.dtype, device=t.data.device)
