"""mytorch:: unary elementwise ops (neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, silu,
reciprocal, clamp) and cast: ATen parity on odd layouts, special values, promotion, large outputs,
gradcheck, opcheck, the activations' ATen autograd on the mytorch device, bad input."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext  # noqa: F401
from helpers import assert_close, first_line, rand_values as rand
from ops_device import device_or_skip, no_fallbacks

m = torch.ops.mytorch
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


UNARY = {
    "neg": (m.neg, torch.neg), "abs": (m.abs, torch.abs), "exp": (m.exp, torch.exp),
    "log": (m.log, torch.log), "sqrt": (m.sqrt, torch.sqrt), "rsqrt": (m.rsqrt, torch.rsqrt),
    "tanh": (m.tanh, torch.tanh), "sigmoid": (m.sigmoid, torch.sigmoid), "relu": (m.relu, torch.relu),
    "silu": (m.silu, F.silu), "reciprocal": (m.reciprocal, torch.reciprocal),
}
POSITIVE = {"log", "sqrt", "rsqrt"}


def views(dtype, positive):
    lo, hi = (0.05, 5) if positive else (-12, 12)
    return [rand((7, 13), dtype, lo, hi), rand((9, 7), dtype, lo, hi).t(), rand((5, 22), dtype, lo, hi)[:, ::3],
            rand((0, 4), dtype, lo, hi), rand((), dtype, lo, hi), rand((33, 1025), dtype, lo, hi)]


@pytest.mark.parametrize("name", list(UNARY))
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_matches_aten(name, dtype):
    ours, ref = UNARY[name]
    for x in views(dtype, name in POSITIVE):
        expected = ref(x.double()).to(dtype)
        out = ours(x)
        assert out.dtype == dtype and out.shape == x.shape
        if dtype == torch.float32:
            # fp32 kernels are accurate to a few ulp against float64
            torch.testing.assert_close(out, expected, rtol=4e-6, atol=1e-7)
        else:
            assert_close(out, expected, dtype)


# Outputs of 8 MB and more go out with streaming stores through a small buffer.
LARGE = (8 << 20) + 37  # bytes past the threshold: an odd tail


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
def test_unary_large_outputs_stream(dtype):
    # the light unary ops stream outputs of 8 MB and more (an odd tail); every element equal
    x = torch.randn(LARGE // dtype.itemsize, dtype=dtype)
    for ours, ref in ((m.neg, torch.neg), (m.abs, torch.abs), (m.relu, torch.relu),
                      (lambda t: m.clamp(t, -0.5, 0.5), lambda t: torch.clamp(t, -0.5, 0.5))):
        assert torch.equal(ours(x), ref(x))


def test_unary_special_values():
    x = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 100.0, -100.0, 1e-40, -1e-30])
    for name in ("exp", "tanh", "sigmoid", "silu", "relu", "abs"):
        ours, ref = UNARY[name]
        got, exp = ours(x), ref(x)
        torch.testing.assert_close(got, exp, equal_nan=True, rtol=1e-6, atol=1e-30)
    y = torch.tensor([0.0, float("inf"), float("nan"), -1.0, 1e-40, 1.0, 2.0])
    torch.testing.assert_close(m.log(y), torch.log(y), equal_nan=True, rtol=1e-6, atol=1e-30)


def test_unary_int_promotes_to_float():
    x = torch.arange(1, 6)
    assert m.exp(x).dtype == torch.float32
    assert_close(m.sqrt(x), torch.sqrt(x))
    assert torch.equal(m.neg(x), -x) and torch.equal(m.abs(-x), x)


def test_clamp_and_cast():
    x = rand((5, 8), torch.float32)
    assert_close(m.clamp(x, -1.0, 0.5), x.clamp(-1.0, 0.5))
    assert_close(m.clamp(x, None, 0.5), x.clamp(max=0.5))
    assert m.clamp(torch.arange(6), 0.5, None).dtype == torch.float32  # promotes like ATen
    assert_close(m.clamp(torch.arange(6), 0.5, None), torch.arange(6).clamp(0.5))
    for src, dst in [(torch.float32, torch.bfloat16), (torch.float32, torch.int64), (torch.int64, torch.float16),
                     (torch.float64, torch.bool), (torch.bool, torch.float32), (torch.bfloat16, torch.float64)]:
        v = rand((7, 9), src).t()
        assert torch.equal(m.cast(v, dst), v.to(dst))


@pytest.mark.parametrize("name", ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu",
                                  "silu", "reciprocal", "clamp", "cast"])
def test_unary_gradcheck(name):
    x = (torch.rand(3, 5, dtype=torch.float64) * 2 + 0.3).requires_grad_()
    if name not in POSITIVE and name != "reciprocal":
        x = (torch.rand(3, 5, dtype=torch.float64) * 4 - 2).requires_grad_()
    fn = {"clamp": lambda t: m.clamp(t, -1.0, 1.0),
          "cast": lambda t: m.cast(t, torch.float64)}.get(name) or getattr(m, name)
    assert torch.autograd.gradcheck(fn, (x,))


def test_opcheck_elementwise_unary():
    x = torch.rand(2, 5) + 0.1
    cases = [(getattr(m, n).default, (x.clone().requires_grad_(),))
             for n in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu",
                       "reciprocal")]
    cases += [(m.clamp.default, (x, 0.2, 0.6)), (m.cast.default, (x, torch.bfloat16))]
    for op, args in cases:
        torch.library.opcheck(op, args)


# ---- on the mytorch device, through the ATen ops ----
def test_device_autograd_activations_no_fallback():
    dev = device_or_skip()
    x = rand((6, 5), torch.float32)
    ys = {}
    for name, fn in {"gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu,
                     "sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu}.items():
        xd = x.to(dev).requires_grad_()
        xc = x.clone().requires_grad_()
        with no_fallbacks():
            fn(xd).backward(torch.ones(6, 5, device=dev))
        fn(xc).backward(torch.ones(6, 5))
        ys[name] = (xd.grad.cpu(), xc.grad)
    for name, (got, exp) in ys.items():
        assert_close(got, exp)


class TestElementwiseUnaryBadInput(TestCase):
    def test_floating_only(self):
        self.assertExpectedInline(first_line(lambda: m.silu(torch.arange(3))), """mytorch::silu: expected x to have dtype in (Float, Double, BFloat16, Half), got Long""")
