"""mytorch::nll_loss / cross_entropy / mse_loss (+ backward): ATen parity, gradcheck,
opcheck, out-of-range targets."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext.ops.loss as L
from helpers import CPU_DTYPES, TOL

ops = torch.ops.mytorch
REDUCTIONS = ["none", "mean", "sum"]


def close(a, b, dtype, scale=1.0):
    rtol, atol = TOL[dtype]
    if dtype in (torch.bfloat16, torch.float16):
        rtol, atol = rtol * 2, atol * 4
    torch.testing.assert_close(a.double(), b.double(), rtol=rtol * scale, atol=atol * scale, equal_nan=True)


def _targets(n_shape, C, ignore_index, with_ignored):
    t = torch.randint(0, C, n_shape)
    if with_ignored and t.numel() > 1:
        t.view(-1)[::3] = ignore_index
    return t


def _up(x):
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(7, 5), (1, 1), (33, 127), (5,), (3, 4, 2, 3), (0, 4)], ids=str)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_matches_aten(dtype, reduction, shape, weighted):
    C = shape[1] if len(shape) > 1 else shape[0]
    x = torch.randn(shape, dtype=dtype).requires_grad_()
    tshape = () if len(shape) == 1 else (shape[0], *shape[2:])
    t = _targets(tshape, C, 2, with_ignored=True) if C > 2 else torch.randint(0, C, tshape)
    w = torch.rand(C, dtype=dtype) + 0.1 if weighted else None
    out = L.nll_loss(x, t, w, ignore_index=2, reduction=reduction)
    xr = _up(x.detach()).requires_grad_()
    ref = F.nll_loss(xr, t, None if w is None else _up(w), ignore_index=2, reduction=reduction)
    if x.numel() == 0 and reduction == "mean":
        assert out.isnan().item() and ref.isnan().item()
        return
    close(out, ref, dtype)
    g = torch.randn_like(ref)
    (gx,) = torch.autograd.grad(out, x, g.to(dtype))
    (gr,) = torch.autograd.grad(ref, xr, g)
    close(gx, gr, dtype)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(9, 7), (1, 257), (6,), (2, 5, 3)], ids=str)
def test_cross_entropy_matches_aten(dtype, reduction, smoothing, weighted, shape):
    C = shape[1] if len(shape) > 1 else shape[0]
    x = (torch.randn(shape, dtype=dtype) * 3).requires_grad_()
    tshape = () if len(shape) == 1 else (shape[0], *shape[2:])
    t = _targets(tshape, C, -100, with_ignored=True)
    w = torch.rand(C, dtype=dtype) + 0.1 if weighted else None
    out = L.cross_entropy(x, t, w, reduction=reduction, label_smoothing=smoothing)
    xr = _up(x.detach()).requires_grad_()
    ref = F.cross_entropy(xr, t, None if w is None else _up(w), reduction=reduction,
                          label_smoothing=smoothing)
    close(out, ref, dtype)
    g = torch.randn_like(ref)
    (gx,) = torch.autograd.grad(out, x, g.to(dtype))
    (gr,) = torch.autograd.grad(ref, xr, g)
    close(gx, gr, dtype)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_loss_matches_aten(dtype, reduction):
    for shape in [(0,), (1,), (7, 33), (4097,), (2, 3, 5)]:
        x = torch.randn(shape, dtype=dtype).requires_grad_()
        y = torch.randn(shape, dtype=dtype).requires_grad_()
        out = L.mse_loss(x, y, reduction)
        xr, yr = _up(x.detach()).requires_grad_(), _up(y.detach()).requires_grad_()
        ref = F.mse_loss(xr, yr, reduction=reduction)
        close(out, ref, dtype)
        if x.numel() == 0:
            continue
        g = torch.randn_like(ref)
        gx, gy = torch.autograd.grad(out, (x, y), g.to(dtype))
        gxr, gyr = torch.autograd.grad(ref, (xr, yr), g)
        close(gx, gxr, dtype)
        close(gy, gyr, dtype)


def test_non_contiguous_inputs():
    x = torch.randn(10, 6).t()  # (6, 10), column-major
    t = torch.randint(0, 10, (6,))
    close(L.cross_entropy(x, t), F.cross_entropy(x, t), torch.float32)
    lp = torch.log_softmax(torch.randn(5, 14), 1)[:, ::2]
    t = torch.randint(0, 7, (5,))
    close(L.nll_loss(lp, t), F.nll_loss(lp, t), torch.float32)
    a, b = torch.randn(8, 6)[:, ::2], torch.randn(3, 8).t()
    close(L.mse_loss(a, b), F.mse_loss(a, b), torch.float32)


def test_gradcheck():
    d = dict(dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 3, 1, -100, 2])
    w = torch.rand(4, dtype=torch.float64) + 0.5
    for red in REDUCTIONS:
        assert torch.autograd.gradcheck(lambda x: L.cross_entropy(x, t, w, reduction=red, label_smoothing=0.2),
                                        (torch.randn(5, 4, **d),))
        assert torch.autograd.gradcheck(lambda x: L.nll_loss(x, t, w, reduction=red),
                                        (torch.randn(5, 4, **d),))
        assert torch.autograd.gradcheck(lambda x, y: L.mse_loss(x, y, red),
                                        (torch.randn(3, 4, **d), torch.randn(3, 4, **d)))


def test_opcheck():
    x = torch.randn(6, 5, requires_grad=True)
    t = torch.tensor([0, 4, 1, -100, 2, 3])
    w = torch.rand(5) + 0.1
    for red in (0, 1, 2):
        torch.library.opcheck(ops.nll_loss.default, (x, t, w, red, -100))
        torch.library.opcheck(ops.cross_entropy.default, (x, t, None, red, -100, 0.1))
        torch.library.opcheck(ops.mse_loss.default, (x, torch.randn(6, 5, requires_grad=True), red))
    out, tw = ops.nll_loss(x.detach(), t, w, 1, -100)
    torch.library.opcheck(ops.nll_loss_backward.default, (torch.tensor(1.0), x.detach(), t, w, 1, -100, tw))
    torch.library.opcheck(ops.cross_entropy_backward.default, (torch.randn(6), x.detach(), t, w, 0, -100, 0.0))
    torch.library.opcheck(ops.mse_loss_backward.default, (torch.tensor(2.0), x.detach(), torch.randn(6, 5), 2))


class TestLossBadInput(TestCase):
    def _msg(self, fn, exc=RuntimeError):
        with self.assertRaises(exc) as cm:
            fn()
        return str(cm.exception).splitlines()[0]

    def test_target_out_of_range(self):
        self.assertExpectedInline(
            self._msg(lambda: L.cross_entropy(torch.randn(3, 5), torch.tensor([0, 5, 1])), IndexError),
            """mytorch::cross_entropy: target 5 is out of bounds for 5 classes (expected a value in [0, 4] or ignore_index=-100)""")
        self.assertExpectedInline(
            self._msg(lambda: L.nll_loss(torch.randn(3, 5), torch.tensor([0, -1, 1])), IndexError),
            """mytorch::nll_loss: target -1 is out of bounds for 5 classes (expected a value in [0, 4] or ignore_index=-100)""")

    def test_target_shape(self):
        self.assertExpectedInline(
            self._msg(lambda: L.nll_loss(torch.randn(3, 5), torch.tensor([0, 1]))),
            """mytorch::nll_loss: expected target of shape [3] for input of shape [3, 5], got target of shape [2]""")

    def test_float_target(self):
        self.assertExpectedInline(
            self._msg(lambda: L.nll_loss(torch.randn(3, 5), torch.rand(3))),
            """mytorch::nll_loss: expected target to have an integer dtype (int64, int32, uint8), got Float""")

    def test_mse_shape(self):
        self.assertExpectedInline(
            self._msg(lambda: ops.mse_loss(torch.randn(3), torch.randn(4))),
            """mytorch::mse_loss: expected input and target to have the same shape, got [3] and [4]""")
