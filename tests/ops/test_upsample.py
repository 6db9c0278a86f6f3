"""mytorch::upsample_nearest2d / upsample_bilinear2d: ATen parity, gradcheck, opcheck, bad input."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

from helpers import first_line
from mytorch_ext.ops.upsample import upsample_bilinear2d, upsample_nearest2d

# (input shape, size, scale_factor)
CASES = [((2, 3, 5, 7), (10, 14), None), ((1, 2, 7, 5), (3, 11), None), ((2, 3, 5, 7), None, 2),
         ((1, 2, 5, 6), None, (1.7, 0.6)), ((1, 1, 1, 1), (4, 3), None)]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bilinear_ac"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_upsample_matches_aten(case, mode, dtype):
    shape, size, sf = case
    x = torch.randn(shape, dtype=dtype)
    for xv in (x, x.to(memory_format=torch.channels_last)):
        xv = xv.detach().requires_grad_()
        if mode == "nearest":
            out = upsample_nearest2d(xv, size, sf)
            ref = F.interpolate(xv, size, sf, mode="nearest")
        else:
            ac = mode == "bilinear_ac"
            out = upsample_bilinear2d(xv, size, sf, align_corners=ac)
            ref = F.interpolate(xv, size, sf, mode="bilinear", align_corners=ac)
        torch.testing.assert_close(out, ref)
        gy = torch.randn_like(ref)
        torch.testing.assert_close(torch.autograd.grad(out, xv, gy)[0], torch.autograd.grad(ref, xv, gy)[0])


def test_upsample_gradcheck():
    x = torch.randn(1, 2, 4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: upsample_nearest2d(t, (7, 5)), (x,))
    assert torch.autograd.gradcheck(lambda t: upsample_bilinear2d(t, (7, 5)), (x,))
    assert torch.autograd.gradcheck(lambda t: upsample_bilinear2d(t, None, 1.5, True), (x,))


def test_upsample_opcheck():
    x = torch.randn(2, 3, 4, 5, requires_grad=True)
    torch.library.opcheck(torch.ops.mytorch.upsample_nearest2d.default, (x, [7, 9], None, None))
    torch.library.opcheck(torch.ops.mytorch.upsample_nearest2d_backward.default, (torch.randn(2, 3, 7, 9), [2, 3, 4, 5], None, None))
    torch.library.opcheck(torch.ops.mytorch.upsample_bilinear2d.default, (x, [8, 10], False, 2.0, 2.0))
    torch.library.opcheck(torch.ops.mytorch.upsample_bilinear2d_backward.default, (torch.randn(2, 3, 8, 10), [2, 3, 4, 5], True, None, None))


class TestUpsampleBadInput(TestCase):
    def test_rank_and_size(self):
        msg = first_line(lambda: upsample_nearest2d(torch.randn(3, 4, 5), (6, 6)))
        self.assertExpectedInline(msg, """mytorch::upsample_nearest2d: expected x to be 4-D (N, C, H, W), got a 3-D tensor of shape [3, 4, 5]""")
        msg = first_line(lambda: upsample_bilinear2d(torch.randn(1, 1, 3, 3), (0, 4)))
        self.assertExpectedInline(msg, """mytorch::upsample_bilinear2d: expected output_size to be positive, got [0, 4]""")
