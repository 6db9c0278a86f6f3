"""Elementwise ops: ATen parity on odd layouts, type promotion, gradcheck, opcheck, bad input."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext  # noqa: F401
from helpers import assert_close
from ops_device import device_or_skip, no_fallbacks

m = torch.ops.mytorch
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


def rand(shape, dtype=torch.float32, low=-3, high=3):
    if dtype.is_floating_point:
        return (torch.rand(shape, dtype=torch.float64) * (high - low) + low).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    return torch.randint(low, high + 1, shape, dtype=dtype)


def pairs(dtype):
    """(a, b) operand pairs: same shape, broadcast, transposed, strided, empty, 0-dim, size-1."""
    t = rand((9, 7), dtype).t()
    s = rand((5, 14), dtype)[:, ::2]
    return [
        (rand((7, 13), dtype), rand((7, 13), dtype)),
        (rand((5, 1, 3), dtype), rand((4, 3), dtype)),
        (t, rand((7, 9), dtype)),
        (s, rand((1, 7), dtype)),
        (rand((0, 3), dtype), rand((3,), dtype)),
        (rand((), dtype), rand((2, 3), dtype)),
        (rand((1, 1), dtype), rand((1,), dtype)),
        (rand((4099,), dtype), rand((4099,), dtype)),
    ]


BINARY = {
    "add": (lambda a, b: m.add(a, b, 2), lambda a, b: torch.add(a, b, alpha=2)),
    "sub": (lambda a, b: m.sub(a, b), torch.sub),
    "mul": (m.mul, torch.mul),
    "div": (m.div, torch.div),
    "div_trunc": (lambda a, b: m.div(a, b, "trunc"), lambda a, b: torch.div(a, b, rounding_mode="trunc")),
    "div_floor": (lambda a, b: m.div(a, b, "floor"), lambda a, b: torch.div(a, b, rounding_mode="floor")),
    "maximum": (m.maximum, torch.maximum),
    "minimum": (m.minimum, torch.minimum),
    "eq": (m.eq, torch.eq), "ne": (m.ne, torch.ne), "lt": (m.lt, torch.lt),
    "le": (m.le, torch.le), "gt": (m.gt, torch.gt), "ge": (m.ge, torch.ge),
}


def _ref(fn, a, b, dtype):
    # reduced floats: ATen computes in fp32 too; compare against a float32 reference
    if dtype in (torch.bfloat16, torch.float16):
        r = fn(a.float(), b.float())
        return r.to(dtype) if r.is_floating_point() else r
    return fn(a, b)


@pytest.mark.parametrize("name", list(BINARY))
@pytest.mark.parametrize("dtype", FLOATS + (torch.int64, torch.int32))
def test_binary_matches_aten(name, dtype):
    ours, ref = BINARY[name]
    for a, b in pairs(dtype):
        if name.startswith("div") and not dtype.is_floating_point:
            b = torch.where(b == 0, torch.ones_like(b), b)
        out = ours(a, b)
        expected = _ref(ref, a, b, dtype)
        assert out.shape == expected.shape and out.dtype == expected.dtype, (name, a.shape, b.shape)
        assert out.is_contiguous()
        if name.startswith("div_") and dtype in (torch.bfloat16, torch.float16):
            # rounding of a quotient that sits on an integer boundary may differ by one
            assert ((out.float() - expected.float()).abs() <= 1).all()
            continue
        assert_close(out, expected, dtype)


# Outputs of 8 MB and more go out with streaming stores through a small buffer.
LARGE = (8 << 20) + 37  # bytes past the threshold: an odd tail


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
def test_binary_large_outputs_stream(dtype):
    n = LARGE // dtype.itemsize
    a, b = torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype).abs() + 0.5
    for name in ("add", "sub", "mul", "div", "maximum", "minimum"):
        ours, ref = BINARY[name]
        assert torch.equal(ours(a, b), ref(a, b)), name
    rows, col = torch.randn(n // 1024, 1024, dtype=dtype), torch.randn(1024, dtype=dtype)
    assert torch.equal(m.add(rows, col), rows + col)  # broadcast


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
def test_device_binary_large_out_and_in_place(dtype):
    """`out=` starting off a 64-byte line (a head written directly), in place (plain stores), and
    the light unary ops the CPU ops do not expose (sign, square)."""
    dev = device_or_skip()
    n = LARGE // dtype.itemsize
    a, b = torch.randn(n, dtype=dtype), torch.randn(n, dtype=dtype)
    ad, bd = a.to(dev), b.to(dev)
    out = torch.empty(n + 3, dtype=dtype, device=dev)[3:]
    torch.mul(ad, bd, out=out)
    assert torch.equal(out.cpu(), a * b)
    ad.add_(bd)
    assert torch.equal(ad.cpu(), a + b)
    assert torch.equal(bd.sign().cpu(), b.sign()) and torch.equal(bd.square().cpu(), b.square())


def test_pow_matches_aten():
    a = rand((6, 5), torch.float64, 0.1, 3)
    b = rand((5,), torch.float64, -2, 2)
    assert_close(m.pow(a, b), torch.pow(a, b))
    ia, ib = rand((7,), torch.int64, -3, 3), rand((7,), torch.int64, 0, 5)
    assert torch.equal(m.pow(ia, ib), torch.pow(ia, ib))
    # negative integer exponents: 1, -1 and 0 as ATen
    base = torch.tensor([1, -1, 2, -1, 3])
    e = torch.tensor([-3, -3, -1, -2, 0])
    assert torch.equal(m.pow(base, e), torch.pow(base, e))


@pytest.mark.parametrize("a_dtype,b_dtype", [
    (torch.int64, torch.float32), (torch.float32, torch.float64), (torch.bfloat16, torch.float32),
    (torch.int32, torch.int64), (torch.bool, torch.int64), (torch.float16, torch.bfloat16),
])
def test_type_promotion(a_dtype, b_dtype):
    a, b = rand((3, 4), a_dtype), rand((4,), b_dtype)
    for ours, ref in (BINARY["add"], BINARY["mul"], BINARY["div"], BINARY["lt"], BINARY["maximum"]):
        out, exp = ours(a, b), ref(a, b)
        assert out.dtype == exp.dtype
        assert_close(out.double(), exp.double(), exp.dtype if exp.is_floating_point() else torch.float64)
    # 0-dim tensors do not promote dimensioned ones of the same category
    z = torch.tensor(2.5, dtype=torch.float64)
    assert m.mul(rand((3,), torch.float32), z).dtype == torch.float32
    assert m.mul(rand((3,), torch.int64), z).dtype == torch.float64
    assert torch.add(rand((3,), torch.int64), 2.5).dtype == torch.get_default_dtype()


def test_int_div_by_zero_raises():
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        m.div(torch.tensor([4, 5]), torch.tensor([2, 0]), "floor")


UNARY = {
    "neg": (m.neg, torch.neg), "abs": (m.abs, torch.abs), "exp": (m.exp, torch.exp),
    "log": (m.log, torch.log), "sqrt": (m.sqrt, torch.sqrt), "rsqrt": (m.rsqrt, torch.rsqrt),
    "tanh": (m.tanh, torch.tanh), "sigmoid": (m.sigmoid, torch.sigmoid), "relu": (m.relu, torch.relu),
    "silu": (m.silu, F.silu), "reciprocal": (m.reciprocal, torch.reciprocal),
    "gelu": (lambda x: m.gelu(x, "none"), lambda x: F.gelu(x)),
    "gelu_tanh": (lambda x: m.gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh")),
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


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
def test_unary_large_outputs_stream(dtype):
    # the light unary ops stream outputs of 8 MB and more (an odd tail); every element equal
    x = torch.randn(LARGE // dtype.itemsize, dtype=dtype)
    for ours, ref in ((m.neg, torch.neg), (m.abs, torch.abs), (m.relu, torch.relu),
                      (lambda t: m.clamp(t, -0.5, 0.5), lambda t: torch.clamp(t, -0.5, 0.5))):
        assert torch.equal(ours(x), ref(x))


def test_unary_special_values():
    x = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 100.0, -100.0, 1e-40, -1e-30])
    for name in ("exp", "tanh", "sigmoid", "silu", "gelu", "gelu_tanh", "relu", "abs"):
        ours, ref = UNARY[name]
        got, exp = ours(x), ref(x)
        if name == "gelu":  # ATen's erf gelu gives nan at +inf; the limit, which we return, is inf
            assert got[2] == float("inf") and torch.isnan(exp[2])
            got, exp = got[3:], exp[3:]
        torch.testing.assert_close(got, exp, equal_nan=True, rtol=1e-6, atol=1e-30)
    y = torch.tensor([0.0, float("inf"), float("nan"), -1.0, 1e-40, 1.0, 2.0])
    torch.testing.assert_close(m.log(y), torch.log(y), equal_nan=True, rtol=1e-6, atol=1e-30)


def test_unary_int_promotes_to_float():
    x = torch.arange(1, 6)
    assert m.exp(x).dtype == torch.float32
    assert_close(m.sqrt(x), torch.sqrt(x))
    assert torch.equal(m.neg(x), -x) and torch.equal(m.abs(-x), x)


@pytest.mark.parametrize("dtype", FLOATS)
def test_backward_kernels_match_aten(dtype):
    g, x = rand((6, 11), dtype), rand((6, 11), dtype)
    r = torch.float64 if dtype == torch.float64 else torch.float32
    y = torch.sigmoid(x.float()).to(dtype)
    assert_close(m.sigmoid_backward(g, y), torch.ops.aten.sigmoid_backward(g.to(r), y.to(r)).to(dtype))
    assert_close(m.tanh_backward(g, y), torch.ops.aten.tanh_backward(g.to(r), y.to(r)).to(dtype))
    assert_close(m.silu_backward(g, x), torch.ops.aten.silu_backward(g.to(r), x.to(r)).to(dtype))
    assert_close(m.threshold_backward(g, x, 0.5),
                 torch.ops.aten.threshold_backward(g.to(r), x.to(r), 0.5).to(dtype))
    for approx in ("none", "tanh"):
        assert_close(m.gelu_backward(g, x, approx),
                     torch.ops.aten.gelu_backward(g.to(r), x.to(r), approximate=approx).to(dtype))


def test_clamp_where_masked_fill_cast():
    x = rand((5, 8), torch.float32)
    assert_close(m.clamp(x, -1.0, 0.5), x.clamp(-1.0, 0.5))
    assert_close(m.clamp(x, None, 0.5), x.clamp(max=0.5))
    assert m.clamp(torch.arange(6), 0.5, None).dtype == torch.float32  # promotes like ATen
    assert_close(m.clamp(torch.arange(6), 0.5, None), torch.arange(6).clamp(0.5))
    lo, hi = rand((8,), torch.float32, -2, 0), rand((5, 1), torch.float32, 0, 2)
    assert_close(m.clamp_tensor(x, lo, hi), torch.clamp(x, lo, hi))
    c = rand((5, 1), torch.bool)
    y = rand((8,), torch.float64)
    assert_close(m.where(c, x.t().contiguous().t(), y), torch.where(c, x, y))
    mm = rand((5, 8), torch.bool)
    assert_close(m.masked_fill(x, mm, -1.5), x.masked_fill(mm, -1.5))
    assert_close(m.masked_fill(x.t(), mm.t(), 3.0), x.t().masked_fill(mm.t(), 3.0))
    for src, dst in [(torch.float32, torch.bfloat16), (torch.float32, torch.int64), (torch.int64, torch.float16),
                     (torch.float64, torch.bool), (torch.bool, torch.float32), (torch.bfloat16, torch.float64)]:
        v = rand((7, 9), src).t()
        assert torch.equal(m.cast(v, dst), v.to(dst))


def test_addcmul_addcdiv_lerp():
    a, b, c = rand((4, 6), torch.float64), rand((6,), torch.float64), rand((4, 1), torch.float64, 0.5, 2)
    assert_close(m.addcmul(a, b, c, 0.3), torch.addcmul(a, b, c, value=0.3))
    assert_close(m.addcdiv(a, b, c, -2), torch.addcdiv(a, b, c, value=-2))
    w = rand((4, 6), torch.float64, 0, 1)
    assert_close(m.lerp(a, b.expand(4, 6), w), torch.lerp(a, b.expand(4, 6), w))


GRAD_OPS = {
    "add": lambda a, b: m.add(a, b, 0.5), "sub": lambda a, b: m.sub(a, b, 2), "mul": m.mul, "div": m.div,
    "maximum": m.maximum, "minimum": m.minimum, "pow": lambda a, b: m.pow(m.abs(a), b),
    "where": lambda a, b: m.where(torch.tensor([True, False, True, True]), a, b),
}


@pytest.mark.parametrize("name", list(GRAD_OPS))
def test_binary_gradcheck(name):
    a = (torch.rand(3, 4, dtype=torch.float64) + 0.5).requires_grad_()
    b = (torch.rand(4, dtype=torch.float64) + 0.6).requires_grad_()  # broadcast: grad sums over dim 0
    assert torch.autograd.gradcheck(GRAD_OPS[name], (a, b))


@pytest.mark.parametrize("name", ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu",
                                  "silu", "reciprocal", "clamp", "masked_fill", "cast"])
def test_unary_gradcheck(name):
    x = (torch.rand(3, 5, dtype=torch.float64) * 2 + 0.3).requires_grad_()
    if name not in POSITIVE and name != "reciprocal":
        x = (torch.rand(3, 5, dtype=torch.float64) * 4 - 2).requires_grad_()
    fn = {"clamp": lambda t: m.clamp(t, -1.0, 1.0),
          "masked_fill": lambda t: m.masked_fill(t, torch.tensor([True, False, False, True, False]), 2.0),
          "cast": lambda t: m.cast(t, torch.float64)}.get(name) or getattr(m, name)
    assert torch.autograd.gradcheck(fn, (x,))


def test_opcheck_elementwise():
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    x = torch.rand(2, 5) + 0.1
    cases = [(m.add.default, (a, b, 2)), (m.sub.default, (a, b)), (m.mul.default, (a, b)),
             (m.div.default, (a, b)), (m.div.default, (a.detach(), b.detach(), "floor")),
             (m.maximum.default, (a, b)), (m.minimum.default, (a, b)), (m.pow.default, (x, x)),
             (m.where.default, (torch.rand(3, 1) > 0.5, a, b))]
    cases += [(getattr(m, n).default, (a.detach(), b.detach())) for n in ("eq", "ne", "lt", "le", "gt", "ge")]
    cases += [(getattr(m, n).default, (x.clone().requires_grad_(),))
              for n in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu",
                        "reciprocal")]
    cases += [(m.sigmoid_backward.default, (x, x)), (m.tanh_backward.default, (x, x)),
              (m.silu_backward.default, (x, x)), (m.threshold_backward.default, (x, x, 0.5)),
              (m.clamp.default, (x, 0.2, 0.6)), (m.clamp_tensor.default, (x, x * 0.5, None)),
              (m.masked_fill.default, (x, x > 0.5, 1.0)), (m.cast.default, (x, torch.bfloat16)),
              (m.addcmul.default, (x, x, x, 2)), (m.addcdiv.default, (x, x, x, 2)),
              (m.lerp.default, (x, x * 2, x))]
    for op, args in cases:
        torch.library.opcheck(op, args)


# ---- on the mytorch device, through the ATen ops ----
def test_device_binary_unary_no_fallback():
    dev = device_or_skip()
    a, b = rand((9, 7), torch.float32).t(), rand((7, 1), torch.float32)
    ia = rand((4, 7), torch.int64)
    with no_fallbacks():
        da, db, dia = a.to(dev), b.to(dev), ia.to(dev)
        results = {
            "add": (da + db, a + b), "add_alpha": (torch.add(da, db, alpha=3), torch.add(a, b, alpha=3)),
            "radd": (2 + da, 2 + a), "sub": (da - 1.5, a - 1.5), "rsub": (1 - da, 1 - a),
            "mul": (da * db, a * b), "div": (da / db, a / b), "floordiv": (da // 0.7, a // 0.7),
            "pow": (da ** 2, a ** 2), "pow3": (da.abs() ** 1.5, a.abs() ** 1.5),
            "int": (dia * 3 + 1, ia * 3 + 1), "intdiv": (dia / 2, ia / 2),
            "max": (torch.maximum(da, db), torch.maximum(a, b)), "lt": (da < db, a < b),
            "eq": (dia == 2, ia == 2), "neg": (-da, -a), "exp": (da.exp(), a.exp()), "relu": (da.relu(), a.relu()),
            "gelu": (F.gelu(da), F.gelu(a)), "silu": (F.silu(da), F.silu(a)), "tanh": (da.tanh(), a.tanh()),
            "sigmoid": (da.sigmoid(), a.sigmoid()), "clamp": (da.clamp(-1, 1), a.clamp(-1, 1)),
            "where": (torch.where(da > 0, da, db), torch.where(a > 0, a, b)),
            "masked_fill": (da.masked_fill(da > 1, 0.0), a.masked_fill(a > 1, 0.0)),
            "sqrt": (da.abs().sqrt(), a.abs().sqrt()), "rsqrt": (da.abs().rsqrt(), a.abs().rsqrt()),
            "log": (da.abs().log(), a.abs().log()),
        }
        x = da.clone()
        x.add_(db, alpha=0.5).mul_(2).sub_(db).div_(3).clamp_(-0.5, 0.5)
        results["inplace"] = (x, ((a + 0.5 * b) * 2 - b).div(3).clamp(-0.5, 0.5))
        out = torch.empty(0, device=dev)
        torch.mul(da, db, out=out)
        results["out"] = (out, a * b)
    for name, (got, exp) in results.items():
        assert got.device.type == "mytorch", name
        assert got.dtype == exp.dtype, name
        assert_close(got.cpu(), exp, torch.float32 if exp.is_floating_point() else torch.float64)


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


class TestElementwiseBadInput(TestCase):
    def test_shape_mismatch(self):
        with self.assertRaises(RuntimeError) as cm:
            m.add(torch.randn(3, 4), torch.randn(5))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::add: shapes [3, 4] and [5] do not broadcast (size 4 vs 5 at dim 1)""")

    def test_unsupported_dtype(self):
        with self.assertRaises(RuntimeError) as cm:
            m.mul(torch.randn(3, dtype=torch.complex64), torch.randn(3, dtype=torch.complex64))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::mul: expected the operands to have dtype in (Float, Double, BFloat16, Half, Long, Int, Short, Char, Byte, Bool), got ComplexFloat""")

    def test_floating_only(self):
        with self.assertRaises(RuntimeError) as cm:
            m.silu(torch.arange(3))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::silu: expected x to have dtype in (Float, Double, BFloat16, Half), got Long""")

    def test_bool_sub(self):
        with self.assertRaises(RuntimeError) as cm:
            m.sub(torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::sub: subtraction of bool tensors is not supported; use logical_xor or ~ instead""")

    def test_where_condition_dtype(self):
        with self.assertRaises(RuntimeError) as cm:
            m.where(torch.ones(2), torch.ones(2), torch.ones(2))
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::where: expected condition to have dtype Bool, got Float""")

    def test_mask_broadcast(self):
        with self.assertRaises(RuntimeError) as cm:
            m.masked_fill(torch.ones(2, 3), torch.ones(4, dtype=torch.bool), 0.0)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::masked_fill: expected mask of shape [4] and x of shape [2, 3] to broadcast together""")
