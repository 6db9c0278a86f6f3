"""Reductions: ATen parity over dim sets and layouts, gradcheck, opcheck, bad input."""
import pytest
import torch
from expecttest import TestCase

import mytorch_ext  # noqa: F401
from helpers import TOL, assert_close, first_line
from ops_device import device_or_skip, no_fallbacks

m = torch.ops.mytorch
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def inputs(dtype):
    """Contiguous, transposed, strided, a long row (split over threads), size-1 and empty dims."""
    mk = (lambda *s: torch.randn(*s, dtype=torch.float64).to(dtype)) if dtype.is_floating_point else \
        (lambda *s: torch.randint(-50, 50, s, dtype=dtype))
    return [mk(5, 7, 9), mk(9, 7, 5).permute(2, 1, 0), mk(6, 20, 3)[:, ::3, :], mk(3, 70001),
            mk(1, 13, 1), mk(3, 0, 4)]


DIMS = [None, (0,), (-1,), (1,), (0, 2), (-1, 0), (0, 1, 2)]


def _dims_ok(x, dims):
    return dims is None or all(-x.dim() <= d < x.dim() for d in dims)


def _ref_dtype(dtype):
    return torch.float64 if dtype.is_floating_point else dtype


@pytest.mark.parametrize("dtype", FLOATS + (torch.int64, torch.int32))
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_matches_aten(dtype, keepdim):
    for x in inputs(dtype):
        for dims in DIMS:
            if not _dims_ok(x, dims):
                continue
            exp = torch.sum(x.to(_ref_dtype(dtype)), dims, keepdim=keepdim)
            out = m.sum(x, dims, keepdim)
            assert out.shape == exp.shape and out.dtype == torch.sum(x[:0], dims, keepdim).dtype
            assert_close(out, exp.to(out.dtype), dtype if dtype.is_floating_point else torch.float64)
            if dtype.is_floating_point and x.numel():
                assert_close(m.mean(x, dims, keepdim), torch.mean(x.double(), dims, keepdim=keepdim).to(dtype))


@pytest.mark.parametrize("dtype", FLOATS + (torch.int64,))
def test_amax_amin_max_dim_argmax(dtype):
    for x in inputs(dtype):
        if x.numel() == 0:
            continue
        for dims in DIMS:
            if not _dims_ok(x, dims):
                continue
            d = () if dims is None else dims
            assert torch.equal(m.amax(x, d, False), torch.amax(x, d))
            assert torch.equal(m.amin(x, d, True), torch.amin(x, d, keepdim=True))
        for dim in (0, -1, 1):
            for keepdim in (False, True):
                v, i = m.max_dim(x, dim, keepdim)
                ev, ei = torch.max(x, dim, keepdim)
                assert torch.equal(v, ev) and torch.equal(i, ei), (x.shape, dim)
                v, i = m.min_dim(x, dim, keepdim)
                ev, ei = torch.min(x, dim, keepdim)
                assert torch.equal(v, ev) and torch.equal(i, ei)
                assert torch.equal(m.argmax(x, dim, keepdim), torch.argmax(x, dim, keepdim))
        assert torch.equal(m.argmax(x), torch.argmax(x))
        assert torch.equal(m.argmin(x, None, True), torch.argmin(x, keepdim=True))


def test_max_ties_and_nan():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, float("nan"), 5.0, float("nan")]])
    for dim in (0, 1):
        v, i = m.max_dim(x, dim)
        ev, ei = torch.max(x, dim)
        torch.testing.assert_close(v, ev, equal_nan=True)
        assert torch.equal(i, ei)
    torch.testing.assert_close(m.amax(x, [1]), torch.amax(x, 1), equal_nan=True)


def close(a, b):
    rtol, atol = TOL[b.dtype]
    torch.testing.assert_close(a, b, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_std_logsumexp(dtype, correction):
    for x in inputs(dtype)[:5]:
        for dims in DIMS[:5]:
            if not _dims_ok(x, dims):
                continue
            xd = x.double()
            # fewer elements than the correction: nan, as ATen
            close(m.var(x, dims, correction, False), torch.var(xd, dims, correction=correction).to(dtype))
            close(m.std(x, dims, correction, True),
                  torch.std(xd, dims, correction=correction, keepdim=True).to(dtype))
            d = list(range(x.dim())) if dims is None else dims
            assert_close(m.logsumexp(x, d, False), torch.logsumexp(xd, d).to(dtype))


def test_prod_and_special_lse():
    x = torch.rand(4, 5, dtype=torch.float64) + 0.5
    assert_close(m.prod(x, [1]), torch.prod(x, 1))
    assert torch.equal(m.prod(torch.arange(1, 7).reshape(2, 3), None), torch.prod(torch.arange(1, 7)))
    y = torch.tensor([[float("-inf"), float("-inf")], [float("inf"), 1.0], [1000.0, 1000.0]])
    torch.testing.assert_close(m.logsumexp(y, [1]), torch.logsumexp(y, 1))


def test_reduce_gradcheck():
    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    checks = [lambda t: m.sum(t, [0, 2], False), lambda t: m.sum(t, None, True),
              lambda t: m.mean(t, [-1], True), lambda t: m.amax(t, [1], False),
              lambda t: m.max_dim(t, 1, False)[0], lambda t: m.min_dim(t, -1, True)[0],
              lambda t: m.var(t, [0, 1], 1.0, False), lambda t: m.std(t, [2], 0.0, True),
              lambda t: m.logsumexp(t, [1, 2], False)]
    for fn in checks:
        assert torch.autograd.gradcheck(fn, (x,))


def test_reduce_opcheck():
    x = torch.randn(3, 4, 5, requires_grad=True)
    for op, args in [(m.sum.default, (x, [1], True)), (m.sum.default, (x,)), (m.mean.default, (x, [0, 2])),
                     (m.amax.default, (x, [1])), (m.amin.default, (x, [])), (m.max_dim.default, (x, 2)),
                     (m.min_dim.default, (x, 0, True)), (m.argmax.default, (x.detach(), 1)),
                     (m.argmin.default, (x.detach(),)), (m.var.default, (x, [1], 1.0)),
                     (m.std.default, (x, None, 0.0, True)), (m.logsumexp.default, (x, [2])),
                     (m.prod.default, (x.detach(), [1]))]:
        torch.library.opcheck(op, args)


def test_device_reductions_no_fallback():
    dev = device_or_skip()
    x = torch.randn(6, 9, 5).transpose(0, 2)
    with no_fallbacks():
        xd = x.to(dev)
        got = {"sum": xd.sum(), "sum1": xd.sum(1, keepdim=True), "mean": xd.mean((0, 2)),
               "max": xd.max(), "maxd": xd.max(dim=-1).values, "argmax": xd.argmax(1), "amin": xd.amin(0),
               "var": xd.var(1), "std": xd.std(unbiased=False), "lse": torch.logsumexp(xd, 2),
               "norm": torch.linalg.vector_norm(xd)}
    exp = {"sum": x.sum(), "sum1": x.sum(1, keepdim=True), "mean": x.mean((0, 2)), "max": x.max(),
           "maxd": x.max(dim=-1).values, "argmax": x.argmax(1), "amin": x.amin(0), "var": x.var(1),
           "std": x.std(unbiased=False), "lse": torch.logsumexp(x, 2), "norm": torch.linalg.vector_norm(x)}
    for k in got:
        assert got[k].device.type == "mytorch"
        assert_close(got[k].cpu(), exp[k], torch.float32 if exp[k].is_floating_point() else torch.float64)


class TestReduceBadInput(TestCase):
    def test_dim_out_of_range(self):
        self.assertExpectedInline(first_line(lambda: m.sum(torch.randn(2, 3), [2]), IndexError), """mytorch::sum: dim 2 is out of range for a tensor with 2 dims (expected a dim in [-2, 1])""")

    def test_mean_of_ints(self):
        self.assertExpectedInline(first_line(lambda: m.mean(torch.arange(4))), """mytorch::mean: expected x to have dtype in (Float, Double, BFloat16, Half), got Long""")

    def test_empty_max(self):
        self.assertExpectedInline(first_line(lambda: m.amax(torch.randn(0, 3), [0])), """mytorch::amax: expected reduction dim 0 to have non-zero size, got a tensor of shape [0, 3]""")
