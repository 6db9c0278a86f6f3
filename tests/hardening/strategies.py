"""Inputs for the hardening checks: shapes, strided layouts, values, and comparison.

A `TensorCase` describes a tensor (shape, dtype, layout, value seed) and builds the same
values with the same strides on any device, so one drawn case runs on the CPU kernels, on
the mytorch device and through the ATen reference.
"""
from __future__ import annotations

import dataclasses
import re

import torch
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes
from torch.utils._python_dispatch import TorchDispatchMode

from helpers import map_leaves, map_tensors

FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
FP32_64 = (torch.float32, torch.float64)

# Tolerances by dtype, every OpInfo's default (tests/opinfo.py): (rtol, atol). The
# reference runs in float64 and is rounded to the result dtype, so these bound the
# kernel's own error (fp32 accumulation for the half types).
TOL = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float16: (4e-3, 2e-3),
}
# Gradients go through one more kernel and a longer accumulation.
GRAD_TOL = {torch.float64: (1e-6, 1e-6), torch.float32: (1e-3, 1e-4)}

DEVICE = "mytorch"


def has_device() -> bool:
    return hasattr(torch, "mytorch")


# ---- tensors ----
@dataclasses.dataclass(frozen=True)
class TensorCase:
    shape: tuple
    dtype: torch.dtype
    layout: str = "contiguous"  # contiguous | transposed | stepped | expanded
    seed: int = 0
    values: str = "normal"  # normal | positive | unit | int:<lo>:<hi> | bool
    layout_dim: int = 0
    step: int = 2

    def on(self, device="cpu") -> torch.Tensor:
        shape = list(self.shape)
        buf_shape = list(shape)
        if self.layout == "transposed":
            buf_shape[-1], buf_shape[-2] = buf_shape[-2], buf_shape[-1]
        elif self.layout == "transposed_seq":  # (b, s, h, d) stored as (b, h, s, d)
            buf_shape[-2], buf_shape[-3] = buf_shape[-3], buf_shape[-2]
        elif self.layout == "stepped":
            buf_shape[self.layout_dim] = buf_shape[self.layout_dim] * self.step + 1
        elif self.layout == "expanded":
            buf_shape[self.layout_dim] = 1
        buf = make_values(buf_shape, self.dtype, self.values, self.seed).to(device)
        if self.layout == "transposed":
            return buf.transpose(-1, -2)
        if self.layout == "transposed_seq":
            return buf.transpose(-2, -3)
        if self.layout == "stepped":
            idx = [slice(None)] * len(shape)
            idx[self.layout_dim] = slice(1, None, self.step)
            return buf[tuple(idx)]
        if self.layout == "expanded":
            return buf.expand(shape)
        return buf


def make_values(shape, dtype, values="normal", seed=0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if values.startswith("perm:"):  # distinct indices below n
        return torch.randperm(int(values[5:]), generator=g)[:shape[0]].to(dtype)
    if values == "bool":
        return torch.rand(shape, generator=g) < 0.5
    if values.startswith("int:"):
        _, lo, hi = values.split(":")
        return torch.randint(int(lo), int(hi), shape, generator=g).to(dtype)
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=g).to(dtype)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if values == "positive":
        x = x.abs() + 0.25
    elif values == "unit":
        x = torch.rand(shape, generator=g, dtype=torch.float64)
    return x.to(dtype)


@st.composite
def layouts(draw, shape, allow_expand=True):
    """(layout, dim, step) for a tensor of `shape`."""
    options = ["contiguous", "stepped"]
    if len(shape) >= 2:
        options.append("transposed")
    if allow_expand and any(s != 1 for s in shape) and shape:
        options.append("expanded")
    layout = draw(st.sampled_from(options))
    if layout == "contiguous" or layout == "transposed" or not shape:
        return ("contiguous" if not shape else layout), 0, 2
    if layout == "expanded":
        dims = [i for i, s in enumerate(shape) if s != 1]
        return layout, draw(st.sampled_from(dims)), 2
    return layout, draw(st.integers(0, len(shape) - 1)), draw(st.sampled_from([2, 3]))


@st.composite
def tensors(draw, shape, dtype, values="normal", allow_expand=True, layout=None):
    if layout is None:
        lay, dim, step = draw(layouts(tuple(shape), allow_expand))
    else:
        lay, dim, step = layout, 0, 2
    seed = draw(st.integers(0, 2**31 - 1))
    return TensorCase(tuple(shape), dtype, lay, seed, values, dim, step)


def shapes(min_dims=0, max_dims=4, min_side=0, max_side=6):
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


def broadcast_shapes(n=2, min_dims=0, max_dims=4, max_side=5):
    return mutually_broadcastable_shapes(num_shapes=n, min_dims=min_dims, max_dims=max_dims,
                                         min_side=0, max_side=max_side).map(lambda r: r.input_shapes)


def dims_of(ndim):
    """A valid dim for a tensor of `ndim` dims, negative ones included."""
    n = max(ndim, 1)
    return st.integers(-n, n - 1)


# ---- realizing drawn arguments ----
def realize(obj, device="cpu"):
    """obj with each TensorCase in it built on device."""
    return map_leaves(lambda o: o.on(device) if isinstance(o, TensorCase) else o, obj)


def upcast(obj):
    """float64 copies of the floating tensors in obj (the reference computes in float64)."""
    return map_tensors(lambda t: t.detach().to(torch.float64) if t.is_floating_point() else t, obj)


# ---- comparison ----
def assert_same(actual, expected, dtype=None, what="result", tol=TOL):
    """`actual` (any device) matches the reference `expected` (CPU, float64 for floats)
    rounded to actual's dtype; `dtype` is the dtype ATen gives at the input dtypes."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), \
            f"{what}: got {type(actual).__name__} of {len(actual) if isinstance(actual, (tuple, list)) else '-'}, expected {len(expected)} results"
        dts = dtype if isinstance(dtype, (tuple, list)) else [dtype] * len(expected)
        for i, (a, e, d) in enumerate(zip(actual, expected, dts)):
            assert_same(a, e, d, f"{what}[{i}]", tol)
        return
    if expected is None:
        assert actual is None, f"{what}: expected None, got {actual!r}"
        return
    assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual).__name__}"
    assert tuple(actual.shape) == tuple(expected.shape), \
        f"{what}: shape {tuple(actual.shape)}, ATen gives {tuple(expected.shape)}"
    if dtype is not None:
        assert actual.dtype == dtype, f"{what}: dtype {actual.dtype}, ATen gives {dtype}"
    a = actual.detach().cpu()
    e = expected.detach().cpu()
    if a.dtype.is_floating_point or a.dtype.is_complex:
        rtol, atol = tol.get(a.dtype, TOL[torch.float32])
        e = e.to(torch.float64)
        # Round the reference to the result dtype, except where that overflows it.
        rounded = e.to(a.dtype).to(torch.float64)
        e = torch.where(rounded.isfinite() | ~e.isfinite(), rounded, e)
        torch.testing.assert_close(a.to(torch.float64), e, rtol=rtol, atol=atol, equal_nan=True,
                                   msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(a, e.to(a.dtype)), f"{what}: {a} != ATen's {e}"


# ---- errors ----
_INTERNAL = re.compile(r"INTERNAL ASSERT FAILED|Please report a bug|internal error", re.I)
CLEAR_ERRORS = (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError)


def is_clear_error(exc: BaseException, names) -> str | None:
    """None when `exc` is a clear error naming one of `names`; else what is wrong with it."""
    if not isinstance(exc, CLEAR_ERRORS):
        return f"{type(exc).__name__} is not an error type a user can catch as input error"
    msg = str(exc)
    if _INTERNAL.search(msg):
        return "an internal assertion, not an input check"
    if not any(n in msg for n in names):
        return f"the message names none of {list(names)}"
    return None


# ---- which ops a block reaches ----
class OpLog(TorchDispatchMode):
    """Records the name of every op that reaches the backends inside the block."""

    def __init__(self):
        super().__init__()
        self.seen: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.add(func._schema.name + ("." + func._overloadname if func._overloadname != "default" else ""))
        return func(*args, **(kwargs or {}))
