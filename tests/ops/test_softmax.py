"""mytorch::softmax / log_softmax (+ backward): ATen parity, gradcheck, opcheck, bad input."""
import pytest
import torch
from expecttest import TestCase

from helpers import CPU_DTYPES, assert_close, first_line

ops = torch.ops.mytorch
PAIRS = [(ops.softmax, torch.softmax, ops.softmax_backward),
         (ops.log_softmax, torch.log_softmax, ops.log_softmax_backward)]
# (shape, dim): inner-contiguous, strided (inner > 1, and > one 64-lane block),
# negative dims, size-1 dims, empty tensors, 0-D.
CASES = [((7,), 0), ((3, 257), -1), ((33, 5), 0), ((2, 127, 70), 1), ((4, 1, 9), -2),
         ((5, 3, 1), -1), ((0, 4), 1), ((3, 0), -1), ((), 0), ((2, 3, 4, 5), -3), ((1, 4096 + 3), 1)]


def ref(fn, x, dim):
    return fn(x.float() if x.dtype in (torch.bfloat16, torch.float16) else x, dim).to(x.dtype)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("log", [False, True])
def test_forward_backward_match_aten(dtype, case, log):
    shape, dim = case
    fn, aten, bwd = PAIRS[log]
    x = torch.randn(shape, dtype=dtype) * 4
    y = fn(x, dim)
    assert_close(y, ref(aten, x, dim))
    g = torch.randn(shape, dtype=dtype)
    yr = ref(aten, x, dim)
    cd = torch.float64 if dtype == torch.float64 else torch.float32
    aten_bwd = torch._log_softmax_backward_data if log else torch._softmax_backward_data
    gref = aten_bwd(g.to(cd), yr.to(cd), dim, cd)
    assert_close(bwd(g, yr, dim), gref.to(dtype))


@pytest.mark.parametrize("log", [False, True])
def test_non_contiguous_and_masked(log):
    fn, aten, _ = PAIRS[log]
    x = torch.randn(9, 40)[:, ::3]
    assert_close(fn(x, 1), aten(x, 1))
    xt = torch.randn(17, 6).t()
    assert_close(fn(xt, -1), aten(xt, -1))
    assert_close(fn(xt, 0), aten(xt, 0))
    # causal mask: -inf entries give exactly zero probability
    m = torch.randn(8, 8).masked_fill(torch.ones(8, 8, dtype=torch.bool).triu(1), float("-inf"))
    assert_close(fn(m, -1), aten(m, -1))
    if not log:
        assert (fn(m, -1)[torch.ones(8, 8, dtype=torch.bool).triu(1)] == 0).all()


def test_large_values_are_stable():
    x = torch.tensor([[1000.0, 1000.0, -1000.0], [-1e4, 0.0, 88.0]])
    assert_close(ops.softmax(x, 1), torch.softmax(x, 1))
    assert_close(ops.log_softmax(x, 1), torch.log_softmax(x, 1))


@pytest.mark.parametrize("log", [False, True])
def test_autograd_matches_aten(log):
    fn, aten, _ = PAIRS[log]
    x = torch.randn(6, 11, 5, requires_grad=True)
    g = torch.randn(6, 11, 5)
    for dim in (-1, 1):
        (gx,) = torch.autograd.grad(fn(x, dim), x, g)
        (gr,) = torch.autograd.grad(aten(x, dim), x, g)
        assert_close(gx, gr)


@pytest.mark.parametrize("log", [False, True])
def test_gradcheck(log):
    fn = PAIRS[log][0]
    for shape, dim in [((4, 7), 1), ((3, 5, 2), 1), ((5,), 0)]:
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(lambda t: fn(t, dim), (x,))
        assert torch.autograd.gradgradcheck(lambda t: fn(t, dim), (x,))


def test_opcheck():
    x = torch.randn(3, 7, 2, requires_grad=True)
    for fn, _, bwd in PAIRS:
        torch.library.opcheck(fn.default, (x, 1))
        torch.library.opcheck(fn.default, (x, -1))
        y = fn(x.detach(), 1)
        torch.library.opcheck(bwd.default, (torch.randn(3, 7, 2), y, 1))


class TestSoftmaxBadInput(TestCase):
    def test_bad_dim(self):
        self.assertExpectedInline(
            first_line(lambda: ops.softmax(torch.randn(2, 3), 2), (RuntimeError, IndexError)),
            """mytorch::softmax: dim 2 is out of range for a tensor with 2 dims (expected a dim in [-2, 1])""")

    def test_integer(self):
        self.assertExpectedInline(
            first_line(lambda: ops.log_softmax(torch.arange(3), 0), (RuntimeError, IndexError)),
            """mytorch::log_softmax: expected self to have dtype in (Float, Double, BFloat16, Half), got Long""")

    def test_backward_shapes(self):
        self.assertExpectedInline(
            first_line(lambda: ops.softmax_backward(torch.randn(2, 3), torch.randn(3, 2), 1), (RuntimeError, IndexError)),
            """mytorch::softmax_backward: expected grad_output and output to have the same shape, got [2, 3] and [3, 2]""")
