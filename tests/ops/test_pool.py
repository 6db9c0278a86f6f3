"""mytorch::max_pool2d / avg_pool2d / adaptive_avg_pool2d: ATen parity, gradcheck, opcheck, bad input."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

from helpers import first_line
from mytorch_ext.ops.pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d

# (shape, kernel, stride, padding, dilation, ceil_mode)
MAX_CASES = [
    ((2, 3, 17, 15), 3, 2, 1, 1, False),   # ResNet stem pool, odd size
    ((1, 4, 9, 10), 2, 2, 0, 1, True),
    ((2, 2, 11, 7), (3, 2), (2, 1), (1, 0), (2, 1), False),
    ((3, 8, 8), 3, 1, 1, 1, True),          # unbatched
    ((1, 2, 5, 5), 5, 1, 2, 1, False),
]


def _views(shape, dtype=torch.float32):
    x = torch.randn(shape, dtype=dtype)
    yield x
    if len(shape) == 4:
        yield x.to(memory_format=torch.channels_last)
    yield torch.randn(*shape[:-1], 2 * shape[-1], dtype=dtype)[..., ::2]


@pytest.mark.parametrize("case", MAX_CASES, ids=[str(i) for i in range(len(MAX_CASES))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_max_pool2d_matches_aten(case, dtype):
    shape, k, s, p, d, ceil = case
    for x in _views(shape, dtype):
        x = x.requires_grad_()
        out, idx = max_pool2d(x, k, s, p, d, ceil, return_indices=True)
        ref, ridx = F.max_pool2d(x, k, s, p, d, ceil, return_indices=True)
        torch.testing.assert_close(out, ref, rtol=0, atol=0)
        torch.testing.assert_close(idx, ridx, rtol=0, atol=0)
        gy = torch.randn_like(ref)
        torch.testing.assert_close(torch.autograd.grad(out, x, gy)[0], torch.autograd.grad(ref, x, gy)[0])


def test_max_pool2d_nan_and_ties():
    x = torch.tensor([[[[1.0, 1.0, float("nan")], [2.0, 2.0, 0.0], [-float("inf")] * 3]]])
    out, idx = max_pool2d(x, 2, 1, return_indices=True)
    ref, ridx = F.max_pool2d(x, 2, 1, return_indices=True)
    torch.testing.assert_close(out, ref, equal_nan=True)
    assert torch.equal(idx, ridx)


@pytest.mark.parametrize("shape", [(2, 3, 8, 6), (1, 2, 9, 7), (3, 6, 5)], ids=["even", "odd", "unbatched"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_max_pool2d_2x2_stride_2(shape, dtype):
    # the 2x2 / stride-2 form: ties, NaN and -inf at every position of a window, against ATen
    x = torch.randn(shape, dtype=dtype).round()  # many ties
    flat = x.view(-1, shape[-2], shape[-1])
    flat[0, 0, 1] = float("nan")
    flat[0, 3, 2] = float("nan")
    flat[0, 2, 3] = float("nan")  # two NaNs in one window: the later one's index
    flat[-1, 0:2, 0:2] = -float("inf")  # a window of -inf
    flat[-1, 1, 3] = -float("inf")
    for v in (x, x.transpose(-1, -2).contiguous().transpose(-1, -2)):
        v = v.detach().requires_grad_()
        out, idx = max_pool2d(v, 2, 2, return_indices=True)
        ref, ridx = F.max_pool2d(v, 2, 2, return_indices=True)
        torch.testing.assert_close(out, ref, rtol=0, atol=0, equal_nan=True)
        assert torch.equal(idx, ridx)
        gy = torch.randn_like(ref)
        torch.testing.assert_close(torch.autograd.grad(out, v, gy)[0], torch.autograd.grad(ref, v, gy)[0])


AVG_CASES = [
    ((2, 3, 17, 15), 3, 2, 1, False, True, None),
    ((2, 3, 17, 15), 3, 2, 1, True, False, None),
    ((1, 4, 9, 10), (2, 3), (2, 1), (1, 1), True, True, None),
    ((3, 8, 7), 2, None, 0, False, True, 3),   # unbatched, divisor override
]


@pytest.mark.parametrize("case", AVG_CASES, ids=[str(i) for i in range(len(AVG_CASES))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_avg_pool2d_matches_aten(case, dtype):
    shape, k, s, p, ceil, cip, dov = case
    for x in _views(shape, dtype):
        x = x.requires_grad_()
        out = avg_pool2d(x, k, s, p, ceil, cip, dov)
        ref = F.avg_pool2d(x, k, s, p, ceil, cip, dov)
        torch.testing.assert_close(out, ref)
        gy = torch.randn_like(ref)
        torch.testing.assert_close(torch.autograd.grad(out, x, gy)[0], torch.autograd.grad(ref, x, gy)[0])


@pytest.mark.parametrize("shape,size", [((2, 3, 7, 7), 1), ((2, 3, 17, 15), (4, 5)), ((3, 5, 6), (7, 3))])
def test_adaptive_avg_pool2d_matches_aten(shape, size):
    for x in _views(shape):
        x = x.requires_grad_()
        out = adaptive_avg_pool2d(x, size)
        ref = F.adaptive_avg_pool2d(x, size)
        torch.testing.assert_close(out, ref)
        gy = torch.randn_like(ref)
        torch.testing.assert_close(torch.autograd.grad(out, x, gy)[0], torch.autograd.grad(ref, x, gy)[0])


def test_pool_gradcheck():
    x = torch.randn(1, 2, 7, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: max_pool2d(t, 3, 2, 1, 1, True), (x,), fast_mode=True)
    assert torch.autograd.gradcheck(lambda t: avg_pool2d(t, 3, 2, 1, True, False), (x,), fast_mode=True)
    assert torch.autograd.gradcheck(lambda t: adaptive_avg_pool2d(t, (4, 5)), (x,), fast_mode=True)


def test_pool_opcheck():
    x = torch.randn(2, 3, 9, 8, requires_grad=True)
    torch.library.opcheck(torch.ops.mytorch.max_pool2d.default, (x, [3, 3], [2, 2], [1, 1], [1, 1], True))
    _, idx = torch.ops.mytorch.max_pool2d(x.detach(), [3, 3], [2, 2], [1, 1], [1, 1], False)
    torch.library.opcheck(torch.ops.mytorch.max_pool2d_backward.default, (torch.randn(idx.shape), x.detach(), idx))
    torch.library.opcheck(torch.ops.mytorch.avg_pool2d.default, (x, [3, 2], [2, 1], [1, 1], False, True, None))
    torch.library.opcheck(torch.ops.mytorch.avg_pool2d_backward.default,
                          (torch.randn(2, 3, 5, 9), x.detach(), [3, 2], [2, 1], [1, 1], False, True, None))
    torch.library.opcheck(torch.ops.mytorch.adaptive_avg_pool2d.default, (x, [4, 3]))
    torch.library.opcheck(torch.ops.mytorch.adaptive_avg_pool2d_backward.default, (torch.randn(2, 3, 4, 3), x.detach()))


class TestPoolBadInput(TestCase):
    def test_kernel_larger_than_input(self):
        msg = first_line(lambda: max_pool2d(torch.randn(1, 2, 3, 3), 5, 1))
        self.assertExpectedInline(msg, """mytorch::max_pool2d: expected the kernel (5x5 with dilation) to fit in the padded input (3x3), got x of shape [1, 2, 3, 3]""")
        msg = first_line(lambda: avg_pool2d(torch.randn(1, 2, 3, 8), 4))
        self.assertExpectedInline(msg, """mytorch::avg_pool2d: expected the kernel (4x4 with dilation) to fit in the padded input (3x8), got x of shape [1, 2, 3, 8]""")

    def test_padding_too_large(self):
        msg = first_line(lambda: max_pool2d(torch.randn(1, 2, 8, 8), 3, 1, 2))
        self.assertExpectedInline(msg, """mytorch::max_pool2d: expected padding (2, 2) to be at most half the kernel size (3, 3)""")

    def test_bad_indices(self):
        x = torch.randn(1, 1, 4, 4)
        msg = first_line(lambda: torch.ops.mytorch.max_pool2d_backward(
            torch.ones(1, 1, 2, 2), x, torch.tensor([[[[0, 1], [99, 2]]]])), IndexError)
        self.assertExpectedInline(msg, """mytorch::max_pool2d_backward: expected every index in [0, 16) (a position in its input plane), got one outside it""")

    def test_wrong_rank(self):
        msg = first_line(lambda: adaptive_avg_pool2d(torch.randn(4, 4), 2))
        self.assertExpectedInline(msg, """mytorch::adaptive_avg_pool2d: expected x to be 3-D (C, H, W) or 4-D (N, C, H, W), got a 2-D tensor of shape [4, 4]""")
