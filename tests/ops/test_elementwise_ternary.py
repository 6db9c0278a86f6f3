"""mytorch:: ternary elementwise ops (where, addcmul, addcdiv, lerp) and masked_fill: ATen parity with
broadcasting and odd layouts, gradcheck, opcheck, bad input."""
import torch
from expecttest import TestCase

import mytorch_ext  # noqa: F401
from helpers import assert_close, first_line, rand_values as rand

m = torch.ops.mytorch


def test_where_masked_fill():
    x = rand((5, 8), torch.float32)
    c = rand((5, 1), torch.bool)
    y = rand((8,), torch.float64)
    assert_close(m.where(c, x.t().contiguous().t(), y), torch.where(c, x, y))
    mm = rand((5, 8), torch.bool)
    assert_close(m.masked_fill(x, mm, -1.5), x.masked_fill(mm, -1.5))
    assert_close(m.masked_fill(x.t(), mm.t(), 3.0), x.t().masked_fill(mm.t(), 3.0))


def test_addcmul_addcdiv_lerp():
    a, b, c = rand((4, 6), torch.float64), rand((6,), torch.float64), rand((4, 1), torch.float64, 0.5, 2)
    assert_close(m.addcmul(a, b, c, 0.3), torch.addcmul(a, b, c, value=0.3))
    assert_close(m.addcdiv(a, b, c, -2), torch.addcdiv(a, b, c, value=-2))
    w = rand((4, 6), torch.float64, 0, 1)
    assert_close(m.lerp(a, b.expand(4, 6), w), torch.lerp(a, b.expand(4, 6), w))


def test_where_gradcheck():
    a = (torch.rand(3, 4, dtype=torch.float64) + 0.5).requires_grad_()
    b = (torch.rand(4, dtype=torch.float64) + 0.6).requires_grad_()  # broadcast: grad sums over dim 0
    assert torch.autograd.gradcheck(lambda a, b: m.where(torch.tensor([True, False, True, True]), a, b), (a, b))


def test_masked_fill_gradcheck():
    x = (torch.rand(3, 5, dtype=torch.float64) * 4 - 2).requires_grad_()
    assert torch.autograd.gradcheck(
        lambda t: m.masked_fill(t, torch.tensor([True, False, False, True, False]), 2.0), (x,))


def test_opcheck_elementwise_ternary():
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    x = torch.rand(2, 5) + 0.1
    cases = [(m.where.default, (torch.rand(3, 1) > 0.5, a, b)),
             (m.masked_fill.default, (x, x > 0.5, 1.0)),
             (m.addcmul.default, (x, x, x, 2)), (m.addcdiv.default, (x, x, x, 2)),
             (m.lerp.default, (x, x * 2, x))]
    for op, args in cases:
        torch.library.opcheck(op, args)


class TestElementwiseTernaryBadInput(TestCase):
    def test_where_condition_dtype(self):
        self.assertExpectedInline(first_line(lambda: m.where(torch.ones(2), torch.ones(2), torch.ones(2))), """mytorch::where: expected condition to have dtype Bool, got Float""")

    def test_mask_broadcast(self):
        self.assertExpectedInline(first_line(lambda: m.masked_fill(torch.ones(2, 3), torch.ones(4, dtype=torch.bool), 0.0)), """mytorch::masked_fill: expected mask of shape [4] and x of shape [2, 3] to broadcast together""")
