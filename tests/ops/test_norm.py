"""mytorch::layer_norm / rms_norm (+ backward): ATen parity, gradcheck, determinism,
opcheck, bad input."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext.ops.norm as N
from helpers import CPU_DTYPES, TOL, first_line

ops = torch.ops.mytorch
# (input shape, normalized_shape)
CASES = [((7,), (7,)), ((3, 33), (33,)), ((2, 5, 127), (127,)), ((4, 3, 5), (3, 5)),
         ((1, 3), (3,)), ((0, 8), (8,)), ((65, 1024 + 3), (1024 + 3,))]


def close(a, b, dtype, scale=1.0):
    rtol, atol = TOL[dtype]
    if dtype in (torch.bfloat16, torch.float16):
        rtol, atol = rtol * 2, atol * 4  # outputs rounded to the dtype, ATen computes differently
    torch.testing.assert_close(a.double(), b.double(), rtol=rtol * scale, atol=atol * scale)


def refs(kind, x, ns, w, b, eps):
    up = torch.float64 if x.dtype == torch.float64 else torch.float32
    xu = x.to(up).detach().requires_grad_()
    wu = None if w is None else w.to(up).detach().requires_grad_()
    bu = None if b is None else b.to(up).detach().requires_grad_()
    if kind == "layer":
        y = F.layer_norm(xu, ns, wu, bu, eps)
    else:
        y = F.rms_norm(xu, ns, wu, eps)
    return y, xu, wu, bu


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("kind", ["layer", "rms"])
@pytest.mark.parametrize("affine", [True, False])
def test_forward_backward_match_aten(dtype, case, kind, affine):
    shape, ns = case
    x = (torch.randn(shape, dtype=dtype) * 2 + 0.5).requires_grad_()
    w = (torch.randn(ns, dtype=dtype)).requires_grad_() if affine else None
    b = (torch.randn(ns, dtype=dtype)).requires_grad_() if affine and kind == "layer" else None
    eps = 1e-5
    y = N.layer_norm(x, ns, w, b, eps) if kind == "layer" else N.rms_norm(x, ns, w, eps)
    yr, xu, wu, bu = refs(kind, x, ns, w, b, eps)
    close(y, yr, dtype)
    g = torch.randn(shape, dtype=dtype)
    ins = [t for t in (x, w, b) if t is not None]
    ins_r = [t for t in (xu, wu, bu) if t is not None]
    grads = torch.autograd.grad(y, ins, g)
    grads_r = torch.autograd.grad(yr, ins_r, g.to(yr.dtype))
    n_rows = max(1, x.numel() // max(1, w.numel() if w is not None else 1))
    for got, want in zip(grads, grads_r):
        # weight/bias grads sum over rows: tolerance grows with the row count
        scale = 1.0 if got.shape == x.shape else max(1.0, n_rows ** 0.5)
        close(got, want, dtype, scale)


def test_stats_match_aten_layout():
    x = torch.randn(2, 3, 4, 5)
    y, mean, rstd = ops.layer_norm(x, [4, 5], None, None, 1e-5)
    ry, rmean, rrstd = torch.native_layer_norm(x, [4, 5], None, None, 1e-5)
    assert mean.shape == rmean.shape == (2, 3, 1, 1)
    torch.testing.assert_close(mean, rmean)
    torch.testing.assert_close(rstd, rrstd)
    _, r = ops.rms_norm(x.bfloat16(), [5], None, None)
    assert r.dtype == torch.float32 and r.shape == (2, 3, 4, 1)


def test_non_contiguous_input():
    x = torch.randn(6, 20)[:, ::2]
    w, b = torch.randn(10), torch.randn(10)
    close(N.layer_norm(x, 10, w, b), F.layer_norm(x, (10,), w, b), torch.float32)
    xt = torch.randn(9, 4).t()
    close(N.rms_norm(xt, 9, None, 1e-6), F.rms_norm(xt, (9,), None, 1e-6), torch.float32)


@pytest.mark.parametrize("cols", [6, 7, 1000])
def test_layer_norm_constant_rows_are_exactly_zero(cols):
    """A row of equal values (here a broadcast column) normalizes to exactly 0, as in ATen:
    the mean's rounding is corrected, not amplified by rstd = 1/sqrt(eps)."""
    x = (torch.randn(5, 1) * 10).expand(5, cols)
    y = N.layer_norm(x, [cols])
    assert torch.equal(y, torch.zeros_like(y)), y.abs().max()
    assert torch.equal(y, F.layer_norm(x, (cols,)))


def test_rms_default_eps_is_finfo_eps():
    x = torch.randn(3, 8) * 1e-4
    close(N.rms_norm(x, 8), F.rms_norm(x, (8,)), torch.float32)


def test_weight_grads_deterministic_across_threads():
    from mytorch_ext import _C
    x = torch.randn(301, 65)
    g = torch.randn(301, 65)
    _, mean, rstd = ops.layer_norm(x, [65], torch.randn(65), None, 1e-5)
    w = torch.randn(65)
    outs = []
    for nt in (1, 2, 3):
        _C.set_num_threads(nt)
        outs.append(ops.layer_norm_backward(g, x, [65], mean, rstd, w))
    _C.set_num_threads(torch.get_num_threads())
    for o in outs[1:]:
        for a, b in zip(o, outs[0]):
            assert torch.equal(a, b)


@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_gradcheck(kind):
    d = dict(dtype=torch.float64, requires_grad=True)
    x, w, b = torch.randn(3, 2, 5, **d), torch.randn(2, 5, **d), torch.randn(2, 5, **d)
    if kind == "layer":
        assert torch.autograd.gradcheck(lambda x, w, b: N.layer_norm(x, (2, 5), w, b), (x, w, b))
        assert torch.autograd.gradcheck(lambda x: N.layer_norm(x, 5), (x,))
    else:
        assert torch.autograd.gradcheck(lambda x, w: N.rms_norm(x, (2, 5), w, 1e-6), (x, w))
        assert torch.autograd.gradcheck(lambda x: N.rms_norm(x, 5), (x,))


def test_opcheck():
    x = torch.randn(4, 3, 6, requires_grad=True)
    w = torch.randn(6, requires_grad=True)
    b = torch.randn(6, requires_grad=True)
    torch.library.opcheck(ops.layer_norm.default, (x, [6], w, b, 1e-5))
    torch.library.opcheck(ops.layer_norm.default, (x, [3, 6], None, None, 1e-3))
    torch.library.opcheck(ops.rms_norm.default, (x, [6], w, 1e-6))
    torch.library.opcheck(ops.rms_norm.default, (x, [6], None, None))
    xd = x.detach()
    _, mean, rstd = ops.layer_norm(xd, [6], None, None, 1e-5)
    torch.library.opcheck(ops.layer_norm_backward.default, (torch.randn(4, 3, 6), xd, [6], mean, rstd, w.detach()))
    _, r = ops.rms_norm(xd, [6], None, 1e-6)
    torch.library.opcheck(ops.rms_norm_backward.default, (torch.randn(4, 3, 6), xd, [6], r, None))


class TestNormBadInput(TestCase):
    def test_shape(self):
        self.assertExpectedInline(
            first_line(lambda: ops.layer_norm(torch.randn(2, 3), [4], None, None, 1e-5)),
            """mytorch::layer_norm: expected input with trailing shape [4], got input of shape [2, 3]""")

    def test_weight_shape(self):
        self.assertExpectedInline(
            first_line(lambda: ops.rms_norm(torch.randn(2, 3), [3], torch.randn(4), None)),
            """mytorch::rms_norm: expected weight of shape [3], got [4]""")
