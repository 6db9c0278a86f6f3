"""mytorch::conv2d / conv1d: ATen parity (forward, every grad), gradcheck, opcheck, bad input."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

from helpers import first_line
from mytorch_ext.ops.conv import conv1d, conv2d

# (input shape, weight shape, stride, padding, dilation, groups): the geometries
# torchvision's ResNet / MobileNetV3 use, at small odd sizes, plus asymmetric ones.
CASES = [
    ((2, 3, 17, 15), (8, 3, 7, 7), 2, 3, 1, 1),     # ResNet stem
    ((2, 8, 9, 11), (8, 8, 3, 3), 1, 1, 1, 1),      # basic block
    ((2, 8, 9, 11), (16, 8, 3, 3), 2, 1, 1, 1),     # downsampling block
    ((2, 8, 9, 11), (16, 8, 1, 1), 2, 0, 1, 1),     # 1x1 stride-2 shortcut
    ((3, 16, 7, 5), (24, 16, 1, 1), 1, 0, 1, 1),    # pointwise
    ((2, 12, 9, 9), (12, 1, 3, 3), 1, 1, 1, 12),    # depthwise
    ((2, 12, 10, 9), (12, 1, 3, 3), 2, 1, 1, 12),   # depthwise, stride 2
    ((2, 6, 11, 13), (6, 1, 5, 5), 2, 2, 1, 6),     # depthwise 5x5
    ((1, 4, 9, 8), (8, 1, 3, 3), 1, 1, 1, 4),       # depthwise, channel multiplier 2
    ((2, 8, 9, 11), (6, 4, 3, 2), (2, 1), (1, 0), (2, 1), 2),  # groups, asymmetric everything
    ((1, 5, 8, 7), (7, 5, 2, 3), (1, 2), (0, 2), (1, 2), 1),
    ((2, 1, 12, 12), (6, 1, 5, 5), 1, 0, 1, 1),     # LeNet first layer
]


def _grads(fn, x, w, b, gy):
    out = fn(x, w, b)
    return (out, *torch.autograd.grad(out, (x, w, b), gy))


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv2d_matches_aten(case, dtype):
    xs, ws, stride, padding, dilation, groups = case
    x = torch.randn(xs, dtype=dtype, requires_grad=True)
    w = torch.randn(ws, dtype=dtype, requires_grad=True)
    b = torch.randn(ws[0], dtype=dtype, requires_grad=True)
    ref = F.conv2d(x, w, b, stride, padding, dilation, groups)
    gy = torch.randn_like(ref)
    ours = _grads(lambda *a: conv2d(*a, stride, padding, dilation, groups), x, w, b, gy)
    refs = _grads(lambda *a: F.conv2d(*a, stride, padding, dilation, groups), x, w, b, gy)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    for name, a, r in zip(("out", "grad_input", "grad_weight", "grad_bias"), ours, refs):
        torch.testing.assert_close(a, r, **tol, msg=lambda m: f"{name}: {m}")


def test_conv2d_channels_last_and_strided_views():
    x = torch.randn(2, 8, 9, 11).to(memory_format=torch.channels_last).requires_grad_()
    w = torch.randn(16, 3, 3, 8).permute(0, 3, 1, 2).requires_grad_()  # non-contiguous weight
    ref = F.conv2d(x, w, None, 2, 1)
    out = conv2d(x, w, None, 2, 1)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    gy = torch.randn_like(ref).to(memory_format=torch.channels_last)
    torch.testing.assert_close(torch.autograd.grad(out, (x, w), gy),
                               torch.autograd.grad(ref, (x, w), gy), rtol=1e-4, atol=1e-4)
    xs = torch.randn(2, 8, 18, 11)[:, :, ::2]  # sliced input
    torch.testing.assert_close(conv2d(xs, w.detach(), None, 1, 1), F.conv2d(xs, w.detach(), None, 1, 1),
                               rtol=1e-4, atol=1e-4)


def test_conv2d_without_bias_and_empty_batch():
    x = torch.randn(0, 4, 5, 5, requires_grad=True)
    w = torch.randn(6, 4, 3, 3, requires_grad=True)
    out = conv2d(x, w)
    assert out.shape == (0, 6, 3, 3)
    out.sum().backward()
    assert x.grad.shape == x.shape and torch.equal(w.grad, torch.zeros_like(w))


def test_conv2d_large_tiles_match():
    # Enough output positions to cover several column tiles and both thread modes.
    x = torch.randn(3, 16, 45, 47)
    w = torch.randn(32, 16, 3, 3)
    torch.testing.assert_close(conv2d(x, w, None, 1, 1), F.conv2d(x, w, None, 1, 1), rtol=1e-4, atol=1e-3)
    x1 = x[:1]
    torch.testing.assert_close(conv2d(x1, w, None, 1, 1), F.conv2d(x1, w, None, 1, 1), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 3, 2, 2), (1, 1, 1, 4)])
def test_conv1d_matches_aten(stride, padding, dilation, groups):
    x = torch.randn(2, 4, 23, requires_grad=True)
    w = torch.randn(8, 4 // groups, 3, requires_grad=True)
    b = torch.randn(8, requires_grad=True)
    ref = F.conv1d(x, w, b, stride, padding, dilation, groups)
    gy = torch.randn_like(ref)
    ours = _grads(lambda *a: conv1d(*a, stride, padding, dilation, groups), x, w, b, gy)
    refs = _grads(lambda *a: F.conv1d(*a, stride, padding, dilation, groups), x, w, b, gy)
    torch.testing.assert_close(ours, refs, rtol=1e-4, atol=1e-4)


GRADCHECK_CASES = [
    ((2, 4, 6, 5), (6, 2, 3, 3), (2, 1), 1, (1, 2), 2),
    ((1, 4, 7, 6), (4, 1, 3, 3), 2, 1, 1, 4),     # depthwise
    ((2, 3, 4, 5), (5, 3, 1, 1), 1, 0, 1, 1),     # pointwise
    ((1, 2, 7, 7), (3, 2, 3, 2), 2, (1, 2), 1, 1),
]


@pytest.mark.parametrize("case", GRADCHECK_CASES, ids=[str(i) for i in range(len(GRADCHECK_CASES))])
def test_conv2d_gradcheck(case):
    xs, ws, stride, padding, dilation, groups = case
    x = torch.randn(xs, dtype=torch.float64, requires_grad=True)
    w = torch.randn(ws, dtype=torch.float64, requires_grad=True)
    b = torch.randn(ws[0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *a: conv2d(*a, stride, padding, dilation, groups), (x, w, b))


def test_conv1d_gradcheck():
    x = torch.randn(2, 4, 9, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 2, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: conv1d(x, w, None, 2, 1, 2, 2), (x, w))


def test_conv_opcheck():
    x = torch.randn(2, 4, 7, 6, requires_grad=True)
    w = torch.randn(6, 2, 3, 3, requires_grad=True)
    b = torch.randn(6, requires_grad=True)
    torch.library.opcheck(torch.ops.mytorch.conv2d.default, (x, w, b, [2, 1], [1, 1], [1, 1], 2))
    gy = torch.randn(2, 6, 4, 6)
    torch.library.opcheck(torch.ops.mytorch.conv2d_backward.default,
                          (gy, x.detach(), w.detach(), [2, 1], [1, 1], [1, 1], 2, [True, True, True]))
    x1 = torch.randn(2, 4, 9, requires_grad=True)
    w1 = torch.randn(6, 4, 3, requires_grad=True)
    torch.library.opcheck(torch.ops.mytorch.conv1d.default, (x1, w1, None, [1], [1], [1], 1))
    torch.library.opcheck(torch.ops.mytorch.conv1d_backward.default,
                          (torch.randn(2, 6, 9), x1.detach(), w1.detach(), [1], [1], [1], 1, [True, True, False]))


class TestConvBadInput(TestCase):
    def test_channels_not_divisible_by_groups(self):
        msg = first_line(lambda: conv2d(torch.randn(1, 6, 5, 5), torch.randn(4, 2, 3, 3), groups=4))
        self.assertExpectedInline(msg, """mytorch::conv2d: expected input channels (6) to be divisible by groups (4)""")

    def test_weight_channels_do_not_match(self):
        msg = first_line(lambda: conv2d(torch.randn(1, 6, 5, 5), torch.randn(4, 2, 3, 3), groups=2))
        self.assertExpectedInline(msg, """mytorch::conv2d: expected weight.size(1) == in_channels / groups = 3 (input has 6 channels, groups=2), got weight of shape [4, 2, 3, 3]""")

    def test_kernel_larger_than_padded_input(self):
        msg = first_line(lambda: conv2d(torch.randn(1, 2, 4, 9), torch.randn(3, 2, 5, 5), padding=0))
        self.assertExpectedInline(msg, """mytorch::conv2d: expected the dilated kernel (5x5) to fit in the padded input (4x9)""")

    def test_wrong_weight_rank(self):
        msg = first_line(lambda: conv2d(torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3)))
        self.assertExpectedInline(msg, """mytorch::conv2d: expected weight to be 4-D (out_channels, in_channels / groups, kH, kW), got a 3-D tensor of shape [3, 2, 3]""")

    def test_wrong_input_rank_and_dtype(self):
        msg = first_line(lambda: conv2d(torch.randn(2, 5, 5), torch.randn(3, 2, 3, 3)))
        self.assertExpectedInline(msg, """mytorch::conv2d: expected input to be 4-D (N, C, H, W), got a 3-D tensor of shape [2, 5, 5]""")
        msg = first_line(lambda: conv2d(torch.ones(1, 2, 5, 5, dtype=torch.int32), torch.ones(3, 2, 3, 3, dtype=torch.int32)))
        self.assertExpectedInline(msg, """mytorch::conv2d: expected input to have dtype in (Float, Double, BFloat16, Half), got Int""")

    def test_bad_stride_and_grad_shape(self):
        msg = first_line(lambda: conv2d(torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3), stride=0))
        self.assertExpectedInline(msg, """mytorch::conv2d: expected stride to be positive, got [0, 0]""")
        msg = first_line(lambda: torch.ops.mytorch.conv2d_backward(
            torch.randn(1, 3, 4, 4), torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3), [1, 1], [0, 0], [1, 1], 1,
            [True, True, True]))
        self.assertExpectedInline(msg, """mytorch::conv2d_backward: expected grad of shape [1, 3, 3, 3] (the output shape), got [1, 3, 4, 4]""")

    def test_conv1d_kernel_too_large(self):
        msg = first_line(lambda: conv1d(torch.randn(1, 2, 4), torch.randn(3, 2, 7), padding=1))
        self.assertExpectedInline(msg, """mytorch::conv1d: expected the dilated kernel (7) to fit in the padded input (6)""")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_conv2d_half_precisions_compute_in_fp32(dtype):
    x = torch.randn(2, 6, 9, 7).to(dtype).requires_grad_()
    w = torch.randn(4, 3, 3, 3).to(dtype).requires_grad_()
    b = torch.randn(4).to(dtype).requires_grad_()
    y = torch.ops.mytorch.conv2d(x, w, b, [2, 1], [1, 0], [1, 1], 2)
    g = torch.randn_like(y)
    y.backward(g)
    xr, wr, br = (t.detach().float().requires_grad_() for t in (x, w, b))
    yr = torch.nn.functional.conv2d(xr, wr, br, (2, 1), (1, 0), 1, 2)
    yr.backward(g.float())
    assert y.dtype == dtype and x.grad.dtype == dtype and w.grad.dtype == dtype
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(y.float(), yr.to(dtype).float(), **tol)
    for got, ref in ((x.grad, xr.grad), (w.grad, wr.grad), (b.grad, br.grad)):
        torch.testing.assert_close(got.float(), ref.to(dtype).float(), **tol)
