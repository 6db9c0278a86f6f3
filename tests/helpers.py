"""Shared test helpers: devices to run on, and comparison against ATen."""
from __future__ import annotations

import torch

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
