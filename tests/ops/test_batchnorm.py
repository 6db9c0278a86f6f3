"""mytorch::batch_norm: ATen parity (train / eval, running stats), gradcheck, opcheck, bad input."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

from helpers import first_line
from mytorch_ext.ops.batchnorm import batch_norm

SHAPES = [(4, 3, 7, 5), (5, 6), (3, 4, 9), (2, 8, 3, 3)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_batch_norm_matches_aten(shape, training, affine, dtype):
    c = shape[1]
    x = (torch.randn(shape, dtype=dtype) * 2 + 1).requires_grad_()
    w = torch.randn(c, dtype=dtype, requires_grad=True) if affine else None
    b = torch.randn(c, dtype=dtype, requires_grad=True) if affine else None
    rm, rv = torch.randn(c, dtype=dtype), torch.rand(c, dtype=dtype) + 0.5
    rm2, rv2 = rm.clone(), rv.clone()
    out = batch_norm(x, rm, rv, w, b, training, 0.3, 1e-4)
    ref = F.batch_norm(x, rm2, rv2, w, b, training, 0.3, 1e-4)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else {}
    torch.testing.assert_close(out, ref, **tol)
    torch.testing.assert_close(rm, rm2, **tol)
    torch.testing.assert_close(rv, rv2, **tol)
    gy = torch.randn_like(ref)
    inputs = [t for t in (x, w, b) if t is not None]
    torch.testing.assert_close(torch.autograd.grad(out, inputs, gy), torch.autograd.grad(ref, inputs, gy),
                               **(dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else {}))


def test_batch_norm_channels_last_and_no_running_stats():
    x = torch.randn(3, 5, 6, 7).to(memory_format=torch.channels_last).requires_grad_()
    w, b = torch.randn(5, requires_grad=True), torch.randn(5, requires_grad=True)
    out = batch_norm(x, None, None, w, b, True)
    ref = F.batch_norm(x, None, None, w, b, True)
    torch.testing.assert_close(out, ref)
    gy = torch.randn_like(ref)
    torch.testing.assert_close(torch.autograd.grad(out, (x, w, b), gy), torch.autograd.grad(ref, (x, w, b), gy),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_gradcheck(training):
    x = torch.randn(3, 2, 4, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, dtype=torch.float64, requires_grad=True)
    rm, rv = torch.randn(2, dtype=torch.float64), torch.rand(2, dtype=torch.float64) + 0.5
    fn = lambda x, w, b: torch.ops.mytorch.batch_norm(x, w, b, rm, rv, training, 1e-5)[0]  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x, w, b))


def test_batch_norm_opcheck():
    x = torch.randn(4, 3, 5, 2, requires_grad=True)
    w, b = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    torch.library.opcheck(torch.ops.mytorch.batch_norm.default, (x, w, b, rm, rv, True, 1e-5))
    torch.library.opcheck(torch.ops.mytorch.batch_norm.default, (x, w, b, rm, rv, False, 1e-5))
    _, sm, si = torch.ops.mytorch.batch_norm(x.detach(), w, b, None, None, True, 1e-5)
    torch.library.opcheck(torch.ops.mytorch.batch_norm_update_stats_.default, (rm, rv, sm, si, 0.1, 1e-5, 40))
    torch.library.opcheck(torch.ops.mytorch.batch_norm_backward.default,
                          (torch.randn(4, 3, 5, 2), x.detach(), w.detach(), rm, rv, sm, si, True, 1e-5,
                           [True, True, True]))


class TestBatchNormBadInput(TestCase):
    def test_weight_shape(self):
        msg = first_line(lambda: batch_norm(torch.randn(2, 3, 4), None, None, torch.ones(4), None, True))
        self.assertExpectedInline(msg, """mytorch::batch_norm: expected weight of shape [3] (one value per channel), got [4]""")

    def test_one_value_per_channel(self):
        msg = first_line(lambda: torch.ops.mytorch.batch_norm(torch.randn(1, 3), None, None, None, None, True, 1e-5))
        self.assertExpectedInline(msg, """mytorch::batch_norm: expected more than 1 value per channel when training, got x of shape [1, 3]""")

    def test_eval_without_running_stats(self):
        msg = first_line(lambda: torch.ops.mytorch.batch_norm(torch.randn(2, 3), None, None, None, None, False, 1e-5))
        self.assertExpectedInline(msg, """mytorch::batch_norm: expected running_mean and running_var in eval mode (training=False)""")
