"""Shared test helpers: devices to run on, comparison against ATen, and walking the nested
lists, tuples and dicts of an op's arguments."""
from __future__ import annotations

import pytest
import torch

from benchmarks.attention_ref import attention_reference  # noqa: F401  (re-exported)

CPU_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
# Tolerances by dtype, in one place: (rtol, atol)
TOL = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-5, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float16: (2e-3, 1e-3),
}


def devices() -> list[str]:
    """cpu always; cuda when a GPU is present."""
    out = ["cpu"]
    if torch.cuda.is_available():
        out.append("cuda")
    return out


def assert_close(actual, expected, dtype=None):
    dtype = dtype or expected.dtype
    rtol, atol = TOL.get(dtype, (1e-5, 1e-5))
    torch.testing.assert_close(actual.cpu(), expected.cpu(), rtol=rtol, atol=atol)


def rand_values(shape, dtype=torch.float32, low=-3, high=3):
    """Values in [low, high] of any dtype (bool: coin flips)."""
    if dtype.is_floating_point:
        return (torch.rand(shape, dtype=torch.float64) * (high - low) + low).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    return torch.randint(low, high + 1, shape, dtype=dtype)


def dtypes_for(device):
    """The floating dtypes the kernels of a device take (CUDA: no float64)."""
    return CPU_DTYPES if device == "cpu" else (torch.float32, torch.bfloat16, torch.float16)


def ref_dtype(dtype):
    """The dtype a reference runs in: float64 for float64, float32 otherwise."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def check_fwd_bwd(fn, ref_fn, inputs, dtype, grad_tol_dtype=None):
    """Forward and backward of fn against ref_fn computed in float32 (float64) from the same values."""
    xs = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    rs = [t.detach().to(ref_dtype(dtype) if t.is_floating_point() else t.dtype).requires_grad_(t.is_floating_point())
          for t in inputs]
    y, r = fn(*xs), ref_fn(*rs)
    assert_close(y, r.to(dtype), dtype)
    g = torch.randn_like(r)
    y.backward(g.to(y.dtype))
    r.backward(g)
    for a, b in zip(xs, rs):
        if a.is_floating_point():
            assert_close(a.grad, b.grad.to(dtype), grad_tol_dtype or dtype)


def odd_views(shape, dtype=torch.float32, device="cpu"):
    """The same values as a contiguous tensor, a transposed view and a sliced view."""
    base = torch.randn(*shape, dtype=dtype, device=device)
    out = [("contiguous", base)]
    if len(shape) >= 2:
        t = torch.randn(*shape[:-2], shape[-1], shape[-2], dtype=dtype, device=device).transpose(-1, -2)
        out.append(("transposed", t))
    big = torch.randn(*shape[:-1], shape[-1] * 2, dtype=dtype, device=device)
    out.append(("strided", big[..., ::2]))
    return out


def first_line(fn, exc=RuntimeError) -> str:
    """The first line of the message of the exc that fn() raises (fails where it raises none):
    what the bad-input tests pin."""
    with pytest.raises(exc) as e:
        fn()
    return str(e.value).splitlines()[0]


def map_leaves(fn, obj):
    """obj rebuilt with fn applied to every leaf of its nested lists, tuples and dicts."""
    if isinstance(obj, list):
        return [map_leaves(fn, o) for o in obj]
    if isinstance(obj, tuple):
        return tuple(map_leaves(fn, o) for o in obj)
    if isinstance(obj, dict):
        return {k: map_leaves(fn, v) for k, v in obj.items()}
    return fn(obj)


def map_tensors(fn, obj):
    """obj rebuilt with fn applied to every tensor in it; other leaves stay."""
    return map_leaves(lambda o: fn(o) if isinstance(o, torch.Tensor) else o, obj)


def flat_tensors(obj) -> list:
    """The tensors in nested lists, tuples and dicts, in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in flat_tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in flat_tensors(o)]
    return []


class no_fallbacks:
    """Asserts that the block runs no op through the mytorch device's CPU fallback.

        with no_fallbacks():
            y = x.to("mytorch") + 1          # fails if aten::add.Tensor fell back

    `allow` names ops (e.g. "aten::add.Tensor") that may still fall back.
    """

    def __init__(self, allow=()):
        self.allow = set(allow)

    def __enter__(self):
        import mytorch_ext

        self.before = mytorch_ext.fallback_counts()
        return self

    def __exit__(self, exc_type, exc, tb):
        import mytorch_ext

        if exc_type is not None:
            return False
        after = mytorch_ext.fallback_counts()
        grew = {k: v - self.before.get(k, 0) for k, v in after.items()
                if v > self.before.get(k, 0) and k not in self.allow}
        assert not grew, f"ops ran through the mytorch CPU fallback: {grew}"
        return False


def causal_lm_losses(step_model, opt, batches) -> list[float]:
    """One training step of a Hugging Face causal LM (step_model: the model or its compiled
    form) per batch of token ids, each batch its own labels; the losses."""
    losses = []
    for ids in batches:
        loss = step_model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


# ---- CUDA ----
def run_without_host_sync(step):
    """step() under CUDA's sync debug mode "error": any host synchronization in it raises."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        return step()
    finally:
        torch.cuda.set_sync_debug_mode("default")


def capture_cuda_graph(step):
    """(graph, outputs) of step captured in a CUDA graph, after a warm-up on a side stream."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    return graph, captured
