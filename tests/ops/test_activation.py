"""mytorch::gelu, the template op: ATen parity, gradcheck, opcheck, bad input."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext
from helpers import CPU_DTYPES, assert_close, devices, odd_views

SHAPES = [(0,), (1,), (7,), (3, 5), (2, 33, 17), (4096 * 9 + 3,)]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", SHAPES)
def test_gelu_matches_aten(device, dtype, approximate, shape):
    x = torch.randn(shape, dtype=dtype, device=device) * 3
    ref_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    ref = F.gelu(x.to(ref_dtype), approximate=approximate).to(dtype)
    assert_close(mytorch_ext.gelu(x, approximate), ref)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_non_contiguous_and_backward(device, approximate):
    for name, x in odd_views((5, 9), device=device):
        x = x.detach().requires_grad_()
        xr = x.detach().clone().requires_grad_()
        y = mytorch_ext.gelu(x, approximate)
        yr = F.gelu(xr, approximate=approximate)
        assert_close(y, yr)
        g = torch.randn_like(yr)
        y.backward(g)
        yr.backward(g)
        assert_close(x.grad, xr.grad)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradcheck(approximate):
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: mytorch_ext.gelu(t, approximate), (x,))


@pytest.mark.parametrize("device", devices())
def test_gelu_opcheck(device):
    x = torch.randn(3, 7, device=device, requires_grad=True)
    torch.library.opcheck(torch.ops.mytorch.gelu.default, (x, "tanh"))
    g = torch.randn(3, 7, device=device)
    torch.library.opcheck(torch.ops.mytorch.gelu_backward.default, (g, x.detach(), "none"))


def test_gelu_compiles_without_graph_break():
    def f(x):
        return mytorch_ext.gelu(x * 2) + 1

    x = torch.randn(8, 16)
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    assert_close(compiled(x), f(x))


class TestGeluBadInput(TestCase):
    def test_integer_dtype(self):
        with self.assertRaises(RuntimeError) as cm:
            mytorch_ext.gelu(torch.arange(4))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::gelu: expected x to have dtype in (Float, Double, BFloat16, Half), got Long""")

    def test_bad_approximate(self):
        with self.assertRaises(RuntimeError) as cm:
            mytorch_ext.gelu(torch.randn(3), "fast")
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::gelu: expected approximate to be 'none' or 'tanh', got 'fast'""")

    def test_backward_shape_mismatch(self):
        with self.assertRaises(RuntimeError) as cm:
            torch.ops.mytorch.gelu_backward(torch.randn(3), torch.randn(4))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::gelu_backward: expected grad and x to have the same shape, got [3] and [4]""")
