"""mytorch:: binary elementwise ops (add, sub, mul, div, maximum, minimum, pow, comparisons,
clamp_tensor, the activation backwards) and scale_: ATen parity on odd layouts, type promotion,
large outputs, gradcheck, opcheck, the ATen ops on the mytorch device, bad input."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext  # noqa: F401
from helpers import assert_close, devices, dtypes_for, first_line, rand_values as rand
from ops_device import device_or_skip, no_fallbacks

m = torch.ops.mytorch
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)


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


def test_clamp_tensor():
    x = rand((5, 8), torch.float32)
    lo, hi = rand((8,), torch.float32, -2, 0), rand((5, 1), torch.float32, 0, 2)
    assert_close(m.clamp_tensor(x, lo, hi), torch.clamp(x, lo, hi))


GRAD_OPS = {
    "add": lambda a, b: m.add(a, b, 0.5), "sub": lambda a, b: m.sub(a, b, 2), "mul": m.mul, "div": m.div,
    "maximum": m.maximum, "minimum": m.minimum, "pow": lambda a, b: m.pow(m.abs(a), b),
}


@pytest.mark.parametrize("name", list(GRAD_OPS))
def test_binary_gradcheck(name):
    a = (torch.rand(3, 4, dtype=torch.float64) + 0.5).requires_grad_()
    b = (torch.rand(4, dtype=torch.float64) + 0.6).requires_grad_()  # broadcast: grad sums over dim 0
    assert torch.autograd.gradcheck(GRAD_OPS[name], (a, b))


def test_opcheck_elementwise_binary():
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)
    x = torch.rand(2, 5) + 0.1
    cases = [(m.add.default, (a, b, 2)), (m.sub.default, (a, b)), (m.mul.default, (a, b)),
             (m.div.default, (a, b)), (m.div.default, (a.detach(), b.detach(), "floor")),
             (m.maximum.default, (a, b)), (m.minimum.default, (a, b)), (m.pow.default, (x, x))]
    cases += [(getattr(m, n).default, (a.detach(), b.detach())) for n in ("eq", "ne", "lt", "le", "gt", "ge")]
    cases += [(m.sigmoid_backward.default, (x, x)), (m.tanh_backward.default, (x, x)),
              (m.silu_backward.default, (x, x)), (m.threshold_backward.default, (x, x, 0.5)),
              (m.clamp_tensor.default, (x, x * 0.5, None))]
    for op, args in cases:
        torch.library.opcheck(op, args)


# ---- scale_ (the fused linear + cross-entropy backward) ----
@pytest.mark.parametrize("device", devices())
def test_scale_(device):
    for dtype in dtypes_for(device):
        for s in (2.5, -0.5, 1.0, 0.0):
            x = torch.randn(5, 7, dtype=dtype, device=device)
            want = (x.double() * s).to(dtype)
            m.scale_(x, torch.tensor(s, device=device))
            assert_close(x, want)
        x = torch.randn(6, 4, dtype=dtype, device=device)
        xt = x.t()  # not contiguous: written back in place
        want = (xt.double() * 3).to(dtype)
        m.scale_(xt, torch.tensor([3.0], dtype=torch.float64, device=device))
        assert_close(xt, want)
        assert_close(x, want.t())


@pytest.mark.parametrize("device", devices())
def test_scale_by_one_leaves_the_bits(device):
    x = torch.tensor([float("nan"), -0.0, float("inf"), 1e-40, 3.0], device=device)
    before = x.clone()
    m.scale_(x, torch.ones((), device=device))
    assert torch.equal(x.view(torch.int32).cpu(), before.view(torch.int32).cpu())


@pytest.mark.parametrize("device", devices())
def test_scale_opcheck(device):
    torch.library.opcheck(m.scale_.default, (torch.randn(3, 5, device=device), torch.tensor(0.5, device=device)))
    torch.library.opcheck(m.scale_.default, (torch.randn(3, 5, device=device), torch.tensor([1.0], device=device)))


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


class TestElementwiseBinaryBadInput(TestCase):
    def test_shape_mismatch(self):
        self.assertExpectedInline(first_line(lambda: m.add(torch.randn(3, 4), torch.randn(5))), """mytorch::add: shapes [3, 4] and [5] do not broadcast (size 4 vs 5 at dim 1)""")

    def test_unsupported_dtype(self):
        self.assertExpectedInline(first_line(lambda: m.mul(torch.randn(3, dtype=torch.complex64), torch.randn(3, dtype=torch.complex64))), """mytorch::mul: expected the operands to have dtype in (Float, Double, BFloat16, Half, Long, Int, Short, Char, Byte, Bool), got ComplexFloat""")

    def test_bool_sub(self):
        self.assertExpectedInline(first_line(lambda: m.sub(torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool))), """mytorch::sub: subtraction of bool tensors is not supported; use logical_xor or ~ instead""")

    def test_scale_(self):
        self.assertExpectedInline(first_line(lambda: m.scale_(torch.randn(2, 3), torch.ones(2))), """mytorch::scale_: expected a one-element scale, got shape [2]""")
        self.assertExpectedInline(first_line(lambda: m.scale_(torch.ones(2, dtype=torch.int64), torch.ones(()))), """mytorch::scale_: expected self to have dtype in (Float, Double, BFloat16, Half), got Long""")
