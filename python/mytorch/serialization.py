"""Checkpoints: mytorch.save writes with torch.save, so torch.load reads them too.

Every mytorch Tensor in the object (nested dicts, lists and tuples) is stored as its torch
buffer; mytorch.load turns each torch tensor back into a mytorch Tensor.
"""
from __future__ import annotations

import torch

from .tensor import Tensor


def _map(obj, fn, kind):
    if isinstance(obj, kind):
        return fn(obj)
    if isinstance(obj, dict):
        return type(obj)((k, _map(v, fn, kind)) for k, v in obj.items())
    if isinstance(obj, list | tuple):
        return type(obj)(_map(v, fn, kind) for v in obj)
    return obj


def save(obj, f) -> None:
    """Save obj (a state_dict, or any nest of dicts/lists/tuples of Tensors and numbers)."""
    torch.save(_map(obj, lambda t: t.data, Tensor), f)


def load(f, map_location=None):
    """Load what mytorch.save or torch.save wrote; torch tensors come back as mytorch Tensors."""
    obj = torch.load(f, map_location=map_location, weights_only=True)
    return _map(obj, Tensor, torch.Tensor)
