"""mytorch::dropout (+ backward): statistics, seeding, scaling, gradcheck, opcheck."""
import pytest
import torch
from expecttest import TestCase

import mytorch_ext.ops.dropout as Dr
from helpers import CPU_DTYPES, first_line

ops = torch.ops.mytorch


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_mask_rate_and_scaling(dtype, p):
    x = torch.randn(200, 301, dtype=dtype)
    out, mask = ops.dropout(x, p, True)
    assert mask.dtype == torch.bool and mask.shape == x.shape
    keep = mask.double().mean().item()
    n = x.numel()
    assert abs(keep - (1 - p)) < 5 * ((p * (1 - p) / n) ** 0.5)  # 5 sigma
    ref = torch.where(mask, x.double() / (1 - p), 0.0)
    tol = 1e-12 if dtype == torch.float64 else 1e-2
    torch.testing.assert_close(out.double(), ref.to(dtype).double(), rtol=tol, atol=tol)


def test_same_seed_same_mask_and_fresh_masks_otherwise():
    x = torch.randn(1000)
    torch.manual_seed(123)
    a = ops.dropout(x, 0.5, True)[1]
    b = ops.dropout(x, 0.5, True)[1]
    torch.manual_seed(123)
    a2 = ops.dropout(x, 0.5, True)[1]
    assert torch.equal(a, a2)
    assert not torch.equal(a, b)
    g = torch.Generator().manual_seed(7)
    c = ops.dropout(x, 0.5, True, g)[1]
    g.manual_seed(7)
    assert torch.equal(c, ops.dropout(x, 0.5, True, g)[1])


def test_mask_independent_of_thread_count():
    from mytorch_ext import _C
    x = torch.randn(100_000)
    masks = []
    for nt in (1, 2):
        _C.set_num_threads(nt)
        torch.manual_seed(5)
        masks.append(ops.dropout(x, 0.3, True)[1])
    _C.set_num_threads(torch.get_num_threads())
    assert torch.equal(masks[0], masks[1])


def test_edge_cases():
    x = torch.randn(5, 7)[:, ::2]  # non-contiguous
    out, mask = ops.dropout(x, 0.0, True)
    assert mask.all() and torch.equal(out, x)
    out, mask = ops.dropout(x, 1.0, True)
    assert not mask.any() and (out == 0).all()
    out, mask = ops.dropout(x, 0.7, False)
    assert mask.all() and torch.equal(out, x)
    out, mask = ops.dropout(torch.randn(0, 3), 0.5, True)
    assert out.shape == (0, 3)


def test_backward():
    x = torch.randn(50, 40, requires_grad=True)
    torch.manual_seed(0)
    y = Dr.dropout(x, 0.25)
    g = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, g)
    torch.manual_seed(0)
    mask = ops.dropout(x.detach(), 0.25, True)[1]
    torch.testing.assert_close(gx, torch.where(mask, g / 0.75, 0.0))
    gb = torch.ops.aten.native_dropout_backward(g, mask, 1 / 0.75)
    torch.testing.assert_close(ops.dropout_backward(g, mask, 1 / 0.75), gb)


def test_gradcheck():
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)

    def f(t):
        g = torch.Generator().manual_seed(3)  # the same mask on every call
        return ops.dropout(t, 0.4, True, g)[0]

    assert torch.autograd.gradcheck(f, (x,))


def test_opcheck():
    x = torch.randn(4, 6, requires_grad=True)
    torch.library.opcheck(ops.dropout.default, (x, 0.4, True, None))
    mask = torch.rand(4, 6) > 0.5
    torch.library.opcheck(ops.dropout_backward.default, (torch.randn(4, 6), mask, 2.0))


class TestDropoutBadInput(TestCase):
    def test_bad_p(self):
        self.assertExpectedInline(first_line(lambda: ops.dropout(torch.randn(3), 1.5, True), ValueError),
                                  """mytorch::dropout: expected p in [0, 1], got 1.5""")
