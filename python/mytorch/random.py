"""Random numbers for initialisation and dropout, from one seeded numpy generator.

Values are drawn on the host (numpy) and copied into buffers, so no torch random kernel runs.
"""
from __future__ import annotations

import numpy as np
import torch

_rng = {"gen": np.random.default_rng(0)}


def manual_seed(seed: int) -> None:
    _rng["gen"] = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    return _rng["gen"]


def next_seed() -> int:
    """A fresh 63-bit seed for a kernel that draws its own random numbers (dropout)."""
    return int(_rng["gen"].integers(0, 2**63 - 1))


def _buffer(arr: np.ndarray, dtype, device) -> torch.Tensor:
    t = torch.from_numpy(arr)
    return t.to(device=device, dtype=dtype or torch.float32)


def randn_buffer(shape, dtype=None, device=None) -> torch.Tensor:
    return _buffer(_rng["gen"].standard_normal(shape, dtype=np.float32), dtype, device)


def rand_buffer(shape, dtype=None, device=None, low=0.0, high=1.0) -> torch.Tensor:
    return _buffer(_rng["gen"].uniform(low, high, shape).astype(np.float32), dtype, device)
