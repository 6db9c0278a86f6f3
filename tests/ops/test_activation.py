"""The activation family: gelu (the template op), hardswish / hardsigmoid, bias_gelu, swiglu.
ATen parity on every device present, backward against ATen autograd, gradcheck in float64,
opcheck, torch.compile, error text."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext
from helpers import CPU_DTYPES, assert_close, check_fwd_bwd, devices, dtypes_for, first_line, odd_views, rand_values
from mytorch_ext.ops.activation import bias_gelu, hardsigmoid, hardswish, swiglu

ops = torch.ops.mytorch
DEVICES = devices()
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
@pytest.mark.parametrize("dtype", CPU_DTYPES)
def test_gelu_views_match_float64(approximate, dtype):
    """Transposed, sliced, empty and 0-dim inputs against a float64 reference."""
    views = [rand_values((7, 13), dtype, -12, 12), rand_values((9, 7), dtype, -12, 12).t(),
             rand_values((5, 22), dtype, -12, 12)[:, ::3], rand_values((0, 4), dtype, -12, 12),
             rand_values((), dtype, -12, 12), rand_values((33, 1025), dtype, -12, 12)]
    for x in views:
        expected = F.gelu(x.double(), approximate=approximate).to(dtype)
        out = mytorch_ext.gelu(x, approximate)
        assert out.dtype == dtype and out.shape == x.shape
        if dtype == torch.float32:
            # fp32 kernels are accurate to a few ulp against float64
            torch.testing.assert_close(out, expected, rtol=4e-6, atol=1e-7)
        else:
            assert_close(out, expected, dtype)


def test_gelu_special_values():
    x = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 100.0, -100.0, 1e-40, -1e-30])
    for approximate in ("none", "tanh"):
        got, exp = mytorch_ext.gelu(x, approximate), F.gelu(x, approximate=approximate)
        if approximate == "none":
            # the limit at +inf is inf, which we return; ATen's erf gelu gives nan there on
            # AVX-512 CPUs and inf on AVX2 ones, so its value is not compared
            assert got[2] == float("inf") and (torch.isnan(exp[2]) or exp[2] == float("inf"))
            got, exp = got[3:], exp[3:]
        torch.testing.assert_close(got, exp, equal_nan=True, rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
def test_gelu_backward_matches_aten(dtype):
    g, x = rand_values((6, 11), dtype), rand_values((6, 11), dtype)
    r = torch.float64 if dtype == torch.float64 else torch.float32
    for approx in ("none", "tanh"):
        assert_close(torch.ops.mytorch.gelu_backward(g, x, approx),
                     torch.ops.aten.gelu_backward(g.to(r), x.to(r), approximate=approx).to(dtype))


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


# ---- hardswish, hardsigmoid ----
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_hardswish_hardsigmoid_match_aten(dtype):
    # include the exact breakpoints -3 and 3
    x = torch.cat([torch.randn(1001) * 4, torch.tensor([-3.0, 3.0, 0.0])]).to(dtype)
    for ours, ref in ((hardswish, F.hardswish), (hardsigmoid, F.hardsigmoid)):
        for xv in (x, x.view(2, -1).t()):
            xv = xv.detach().requires_grad_()
            out, r = ours(xv), ref(xv)
            torch.testing.assert_close(out, r)
            gy = torch.randn_like(r)
            torch.testing.assert_close(torch.autograd.grad(out, xv, gy)[0], torch.autograd.grad(r, xv, gy)[0])


def test_hardact_gradcheck_and_opcheck():
    x = (torch.rand(20, dtype=torch.float64) * 10 - 5).requires_grad_()
    x = x.detach().masked_fill((x.abs() - 3).abs() < 1e-3, 0.5).requires_grad_()  # away from kinks
    assert torch.autograd.gradcheck(hardswish, (x,))
    assert torch.autograd.gradcheck(hardsigmoid, (x,))
    y = torch.randn(3, 7, requires_grad=True)
    for name in ("hardswish", "hardsigmoid"):
        torch.library.opcheck(getattr(torch.ops.mytorch, name).default, (y,))
        torch.library.opcheck(getattr(torch.ops.mytorch, f"{name}_backward").default, (torch.randn(3, 7), y.detach()))


# ---- bias + GELU, SwiGLU ----
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("shape", [(7,), (5, 9), (3, 4, 64), (0, 5)])
def test_bias_gelu(device, approximate, shape):
    for dtype in dtypes_for(device):
        x = torch.randn(shape, dtype=dtype, device=device) * 2
        b = torch.randn(shape[-1], dtype=dtype, device=device)
        check_fwd_bwd(lambda x, b: bias_gelu(x, b, approximate),
                      lambda x, b: F.gelu(x + b, approximate=approximate), [x, b] if x.numel() else [x, b], dtype,
                      torch.bfloat16 if dtype != torch.float64 and dtype != torch.float32 else None)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(7,), (5, 9), (3, 4, 64), (0,)])
def test_swiglu(device, shape):
    for dtype in dtypes_for(device):
        a = torch.randn(shape, dtype=dtype, device=device) * 2
        b = torch.randn(shape, dtype=dtype, device=device)
        check_fwd_bwd(swiglu, lambda a, b: F.silu(a) * b, [a, b], dtype)


def test_bias_gelu_swiglu_gradcheck():
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, b: bias_gelu(x, b, "none"), (x, b))
    assert torch.autograd.gradcheck(lambda x, b: bias_gelu(x, b, "tanh"), (x, b))
    y = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(swiglu, (x, y))


@pytest.mark.parametrize("device", DEVICES)
def test_bias_gelu_swiglu_opcheck(device):
    oc = torch.library.opcheck
    x = torch.randn(4, 12, device=device, requires_grad=True)
    b = torch.randn(12, device=device, requires_grad=True)
    g = torch.randn(4, 12, device=device)
    oc(ops.bias_gelu.default, (x, b, "tanh"))
    oc(ops.bias_gelu_backward.default, (g, x.detach(), b.detach(), "none"))
    oc(ops.swiglu.default, (x, torch.randn(4, 12, device=device, requires_grad=True)))
    oc(ops.swiglu_backward.default, (g, x.detach(), torch.randn(4, 12, device=device)))


class TestActivationBadInput(TestCase):
    def test_integer_dtype(self):
        self.assertExpectedInline(first_line(lambda: mytorch_ext.gelu(torch.arange(4))), """mytorch::gelu: expected x to have dtype in (Float, Double, BFloat16, Half), got Long""")

    def test_bad_approximate(self):
        self.assertExpectedInline(first_line(lambda: mytorch_ext.gelu(torch.randn(3), "fast")), """mytorch::gelu: expected approximate to be 'none' or 'tanh', got 'fast'""")

    def test_backward_shape_mismatch(self):
        self.assertExpectedInline(first_line(lambda: torch.ops.mytorch.gelu_backward(torch.randn(3), torch.randn(4))), """mytorch::gelu_backward: expected grad and x to have the same shape, got [3] and [4]""")

    def test_hardswish_dtype(self):
        self.assertExpectedInline(first_line(lambda: hardswish(torch.arange(3))), """mytorch::hardswish: expected x to have dtype in (Float, Double, BFloat16, Half), got Long""")

    def test_bias_gelu_and_swiglu(self):
        self.assertExpectedInline(first_line(lambda: bias_gelu(torch.randn(2, 3), torch.randn(2))), """mytorch::bias_gelu: expected bias of shape [x.size(-1)], got x [2, 3] and bias [2]""")
        self.assertExpectedInline(first_line(lambda: swiglu(torch.randn(2, 3), torch.randn(3, 2))), """mytorch::swiglu: expected a and b to have the same shape, got [2, 3] and [3, 2]""")
