"""mytorch::mm / bmm / addmm / baddbmm / linear: ATen parity on odd shapes and layouts,
gradcheck, opcheck, bad input."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext.ops.gemm as G
from helpers import CPU_DTYPES, first_line

ops = torch.ops.mytorch

# (rtol, atol) against a float64 reference of the same (rounded) inputs.
GEMM_TOL = {
    torch.float64: (1e-12, 1e-12),
    torch.float32: (2e-5, 1e-4),
    torch.bfloat16: (1.6e-2, 2e-2),
    torch.float16: (2e-3, 2e-3),
}


def check(actual, ref64, dtype):
    rtol, atol = GEMM_TOL[dtype]
    assert actual.dtype == dtype
    torch.testing.assert_close(actual.double(), ref64.to(dtype).double(), rtol=rtol, atol=atol)


def layouts(rows, cols, dtype):
    """The same kind of matrix as contiguous, transposed (column-major) and sliced views."""
    yield "contiguous", torch.randn(rows, cols, dtype=dtype)
    yield "transposed", torch.randn(cols, rows, dtype=dtype).t()
    yield "sliced", torch.randn(rows, cols * 2 + 1, dtype=dtype)[:, 1::2]


# (m, k, n): odd, size-1, empty, and sizes that cross the MC/KC/NC blocks; m a multiple of 8
# but not 12 (16, 64: the 8-row micro-kernel where the build has one).
MM_SHAPES = [(1, 1, 1), (7, 33, 127), (257, 129, 65), (33, 1, 7), (0, 5, 3), (4, 0, 6),
             (5, 3, 0), (300, 601, 77), (16, 5, 3), (64, 300, 130)]


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("shape", MM_SHAPES)
def test_mm_matches_aten(dtype, shape):
    m, k, n = shape
    for an, a in layouts(m, k, dtype):
        for bn, b in layouts(k, n, dtype):
            out = ops.mm(a, b)
            assert out.shape == (m, n) and out.is_contiguous(), (an, bn)
            check(out, a.double() @ b.double(), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mm_crosses_column_block(dtype):
    # n > NC: several column panels of B; k > KC: several k blocks
    a = torch.randn(13, 300, dtype=dtype)
    for b in (torch.randn(300, 4100, dtype=dtype), torch.randn(4100, 300, dtype=dtype).t()):
        check(ops.mm(a, b), a.double() @ b.double(), dtype)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
def test_bmm_matches_aten(dtype):
    # small matrices (one matrix per thread) and larger ones (threads inside each GEMM)
    for bsz, m, k, n in [(0, 3, 4, 5), (1, 7, 5, 3), (9, 17, 33, 19), (3, 129, 65, 70)]:
        a = torch.randn(bsz, m, k, dtype=dtype)
        bt = torch.randn(bsz, n, k, dtype=dtype).transpose(1, 2)  # transposed batch
        check(ops.bmm(a, bt), a.double() @ bt.double(), dtype)
        at = torch.randn(bsz, k, m, dtype=dtype).transpose(1, 2)
        b = torch.randn(k, n, dtype=dtype).expand(bsz, k, n)  # batch stride 0
        check(ops.bmm(at, b), at.double() @ b.double(), dtype)


# Narrow, deep products whose A rows and B columns run along k take the dot-product kernel:
# edges of its blocks (m, n not multiples of 4), k not a multiple of the vector width, A rows
# with a stride, and addmm's alpha / beta; (128, 17, 511) stays on the packed path (k < 4 * 128).
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("m,n,k", [(1, 1, 64), (5, 7, 1001), (32, 27, 1024), (13, 3, 4099), (64, 64, 256),
                                   (128, 17, 1500), (128, 17, 511)])
def test_mm_narrow_deep(dtype, m, n, k):
    a = torch.randn(m, k + 3, dtype=dtype)[:, 2 : k + 2]
    b = torch.randn(n, k, dtype=dtype).t()
    check(ops.mm(a, b), a.double() @ b.double(), dtype)
    s = torch.randn(m, n, dtype=dtype)
    for beta, alpha in ((0.5, -2.0), (0, 1.5)):
        ref = torch.addmm(s.double(), a.double(), b.double(), beta=beta, alpha=alpha)
        check(ops.addmm(s, a, b, beta=beta, alpha=alpha), ref, dtype)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("self_shape", [(), (1,), (19,), (1, 19), (11, 1), (11, 19)])
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 1.5)])
def test_addmm_matches_aten(dtype, self_shape, beta, alpha):
    a = torch.randn(11, 23, dtype=dtype)
    b = torch.randn(19, 23, dtype=dtype).t()
    s = torch.randn(self_shape, dtype=dtype)
    ref = torch.addmm(s.double(), a.double(), b.double(), beta=beta, alpha=alpha)
    check(ops.addmm(s, a, b, beta=beta, alpha=alpha), ref, dtype)


def test_addmm_beta_zero_ignores_nan():
    a, b = torch.randn(5, 6), torch.randn(6, 7)
    s = torch.full((5, 7), float("nan"))
    out = ops.addmm(s, a, b, beta=0)
    check(out, a.double() @ b.double(), torch.float32)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
def test_baddbmm_matches_aten(dtype):
    a = torch.randn(4, 9, 13, dtype=dtype)
    b = torch.randn(4, 7, 13, dtype=dtype).transpose(1, 2)
    for s in (torch.randn(4, 9, 7, dtype=dtype), torch.randn(7, dtype=dtype),
              torch.randn(9, 1, dtype=dtype)):
        ref = torch.baddbmm(s.double(), a.double(), b.double(), beta=0.25, alpha=3)
        check(ops.baddbmm(s, a, b, beta=0.25, alpha=3), ref, dtype)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("xshape", [(5,), (3, 5), (2, 7, 5), (0, 5), (2, 1, 3, 5)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_aten(dtype, xshape, bias):
    x = torch.randn(xshape, dtype=dtype)
    w = torch.randn(6, 5, dtype=dtype)
    b = torch.randn(6, dtype=dtype) if bias else None
    ref = F.linear(x.double(), w.double(), None if b is None else b.double())
    out = ops.linear(x, w, b)
    assert out.shape == ref.shape
    check(out, ref, dtype)


def test_linear_non_contiguous_input():
    x = torch.randn(4, 8, 10)[:, ::2, 1::2]
    w = torch.randn(3, 5).t().contiguous().t()  # column-major weight
    check(ops.linear(x, w, None), F.linear(x.double(), w.double()), torch.float32)


def _d(*shape):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


def test_gradcheck():
    a, b = _d(4, 5), _d(5, 3)
    assert torch.autograd.gradcheck(ops.mm, (a, b))
    assert torch.autograd.gradcheck(ops.bmm, (_d(2, 4, 5), _d(2, 5, 3)))
    assert torch.autograd.gradcheck(
        lambda s, x, y: ops.addmm(s, x, y, beta=0.5, alpha=2.0), (_d(3), a, b))
    assert torch.autograd.gradcheck(
        lambda s, x, y: ops.baddbmm(s, x, y, beta=2.0, alpha=-1.0),
        (_d(4, 1), _d(2, 4, 5), _d(2, 5, 3)))
    assert torch.autograd.gradcheck(ops.linear, (_d(2, 3, 5), _d(4, 5), _d(4)))
    assert torch.autograd.gradcheck(lambda x, w: ops.linear(x, w, None), (_d(3, 5), _d(4, 5)))


def test_backward_matches_aten_fp32():
    x = torch.randn(6, 9, 17, requires_grad=True)
    w = torch.randn(13, 17, requires_grad=True)
    b = torch.randn(13, requires_grad=True)
    g = torch.randn(6, 9, 13)
    grads = torch.autograd.grad(G.linear(x, w, b), (x, w, b), g)
    refs = torch.autograd.grad(F.linear(x, w, b), (x, w, b), g)
    for got, ref in zip(grads, refs):
        torch.testing.assert_close(got, ref, rtol=2e-5, atol=1e-4)


def test_opcheck():
    a = torch.randn(3, 5, requires_grad=True)
    b = torch.randn(5, 4, requires_grad=True)
    torch.library.opcheck(ops.mm.default, (a, b))
    torch.library.opcheck(ops.bmm.default, (torch.randn(2, 3, 5, requires_grad=True),
                                            torch.randn(2, 5, 4, requires_grad=True)))
    torch.library.opcheck(ops.addmm.default, (torch.randn(4, requires_grad=True), a, b),
                          {"beta": 0.5, "alpha": 2.0})
    torch.library.opcheck(ops.baddbmm.default,
                          (torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 5, 4)),
                          {"beta": 1.0, "alpha": 0.5})
    torch.library.opcheck(ops.linear.default, (torch.randn(2, 3, 5, requires_grad=True),
                                               torch.randn(4, 5, requires_grad=True),
                                               torch.randn(4, requires_grad=True)))
    torch.library.opcheck(ops.linear.default, (torch.randn(3, 5), torch.randn(4, 5), None))


class TestGemmBadInput(TestCase):
    def test_shape_mismatch(self):
        self.assertExpectedInline(
            first_line(lambda: ops.mm(torch.randn(2, 3), torch.randn(4, 5))),
            """mytorch::mm: self and mat2 shapes cannot be multiplied ([2, 3] and [4, 5])""")

    def test_dtype_mismatch(self):
        self.assertExpectedInline(
            first_line(lambda: ops.mm(torch.randn(2, 3), torch.randn(3, 5, dtype=torch.float64))),
            """mytorch::mm: expected self and mat2 to have the same dtype, got Float and Double""")

    def test_integer(self):
        self.assertExpectedInline(
            first_line(lambda: ops.bmm(torch.ones(1, 2, 3, dtype=torch.int64),
                                      torch.ones(1, 3, 2, dtype=torch.int64))),
            """mytorch::bmm: expected self to have dtype in (Float, Double, BFloat16, Half), got Long""")

    def test_batch_mismatch(self):
        self.assertExpectedInline(
            first_line(lambda: ops.bmm(torch.randn(2, 2, 3), torch.randn(3, 3, 2))),
            """mytorch::bmm: expected self and mat2 to have the same batch size, got 2 and 3""")

    def test_addmm_self_broadcast(self):
        self.assertExpectedInline(
            first_line(lambda: ops.addmm(torch.randn(3), torch.randn(2, 3), torch.randn(3, 5))),
            """mytorch::addmm: self of shape [3] cannot broadcast to the output shape [2, 5]""")

    def test_linear_features(self):
        self.assertExpectedInline(
            first_line(lambda: ops.linear(torch.randn(2, 3), torch.randn(4, 5))),
            """mytorch::linear: expected input's last dim to equal in_features=5, got input of shape [2, 3]""")
