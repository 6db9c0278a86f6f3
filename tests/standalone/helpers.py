"""One helper checks a mytorch op against torch: forward values and the gradients of every
floating input, on the same random values, for each way the inputs can be laid out.

    check_op([(3, 4), (4,)], lambda a, b: a * b)                       # same code for both
    check_op([(2, 5)], torch.nn.functional.gelu, mytorch.functional.gelu)

Each input is made as a leaf of the given shape (or with its last two dims swapped, or twice
as wide), then viewed into shape through the framework itself (``layout``), so views and
their backward are part of every check.
"""
from __future__ import annotations

import numpy as np
import torch

import mytorch

TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-10, 1e-10)}
LAYOUTS = ("contiguous", "transposed", "strided")


def mytorch_device_available() -> bool:
    try:
        torch.empty(1, device="mytorch")
        return True
    except (RuntimeError, AssertionError):
        return False


def devices() -> list[str]:
    """cpu always; cuda with a GPU; the mytorch device once it is built."""
    out = ["cpu"]
    if torch.cuda.is_available():
        out.append("cuda")
    if mytorch_device_available():
        out.append("mytorch")
    return out


def _leaf_and_view(shape, layout, dtype, device, gen, low, high, integer):
    """(leaf values as a numpy array, function that views the leaf into `shape`)."""
    shape = tuple(shape)
    if layout == "transposed" and len(shape) >= 2:
        base = shape[:-2] + (shape[-1], shape[-2])
        view = lambda t: t.transpose(-1, -2)  # noqa: E731
    elif layout == "strided" and len(shape) >= 1:
        base = shape[:-1] + (shape[-1] * 2,)
        view = lambda t: t[..., ::2]  # noqa: E731
    else:
        base = shape
        view = lambda t: t  # noqa: E731
    if integer:
        arr = gen.integers(low, high, base)
    else:
        arr = gen.uniform(low, high, base)
    return arr, view


def check_op(shapes, torch_fn, mytorch_fn=None, *, inputs=None, layout="contiguous",
             device="cpu", dtype=torch.float32, low=-2.0, high=2.0, grad=True, atol=None,
             rtol=None, grad_atol=None, seed=0):
    """Compare mytorch_fn (defaults to torch_fn) with torch_fn on the same inputs.

    shapes: one shape per random floating input; inputs: explicit extra values (numpy arrays,
    numbers, or ("int", shape, low, high) for random integer tensors that get no gradient).
    Returns the two outputs for further checks.
    """
    mytorch_fn = mytorch_fn or torch_fn
    gen = np.random.default_rng(seed)
    rtol_, atol_ = TOL[dtype]
    rtol, atol = rtol or rtol_, atol or atol_
    specs = [("float", s) for s in shapes] + [("given", v) for v in (inputs or [])]
    t_args, m_args, t_leaves, m_leaves = [], [], [], []
    for kind, spec in specs:
        if kind == "given" and isinstance(spec, tuple) and spec and spec[0] == "int":
            _, shape, lo, hi = spec
            arr = gen.integers(lo, hi, shape)
            t_args.append(torch.from_numpy(arr).to(device))
            m_args.append(mytorch.tensor(torch.from_numpy(arr), device=device))
            continue
        if kind == "given":
            if isinstance(spec, np.ndarray):
                t_args.append(torch.from_numpy(spec).to(device))
                m_args.append(mytorch.tensor(spec.copy(), device=device))
            else:
                t_args.append(spec)
                m_args.append(spec)
            continue
        arr, view = _leaf_and_view(spec, layout, dtype, device, gen, low, high, False)
        t_leaf = torch.tensor(arr, dtype=dtype, device=device, requires_grad=grad)
        m_leaf = mytorch.tensor(arr, dtype=dtype, device=device, requires_grad=grad)
        t_leaves.append(t_leaf)
        m_leaves.append(m_leaf)
        t_args.append(view(t_leaf))
        m_args.append(view(m_leaf))

    t_out = torch_fn(*t_args)
    m_out = mytorch_fn(*m_args)
    if isinstance(t_out, tuple):  # e.g. max(dim): compare values and indices, grad on values
        for t, m in zip(t_out, m_out):
            _assert_close(m, t, rtol, atol, "output")
        t_out, m_out = t_out[0], m_out[0]
    _assert_close(m_out, t_out, rtol, atol, "output")
    if not grad or not t_out.requires_grad:
        return t_out, m_out
    upstream = gen.standard_normal(tuple(t_out.shape))
    t_out.backward(torch.tensor(upstream, dtype=t_out.dtype, device=device))
    m_out.backward(mytorch.tensor(upstream, dtype=m_out.dtype, device=device))
    for i, (t, m) in enumerate(zip(t_leaves, m_leaves)):
        if t.grad is None:
            assert m.grad is None, f"input {i}: torch has no gradient, mytorch has one"
            continue
        assert m.grad is not None, f"input {i}: mytorch computed no gradient"
        _assert_close(m.grad, t.grad, rtol, grad_atol or atol, f"gradient of input {i}")
    return t_out, m_out


def _assert_close(m, t, rtol, atol, what):
    assert isinstance(m, mytorch.Tensor), f"{what}: expected a mytorch.Tensor, got {type(m)}"
    assert m.shape == tuple(t.shape), f"{what}: shape {m.shape} vs torch {tuple(t.shape)}"
    assert m.dtype == t.dtype, f"{what}: dtype {m.dtype} vs torch {t.dtype}"
    assert m.data.device == t.device, f"{what}: device {m.device} vs torch {t.device}"
    torch.testing.assert_close(m.data.detach().cpu(), t.detach().cpu(), rtol=rtol, atol=atol,
                               msg=lambda s: f"{what}: {s}")
