"""The ops a generate() loop runs between model calls, native on the device and equal to
the CPU: bitwise and/or/xor/not, any/all (whole, one dim, several dims), cumsum, isin."""
import pytest
import torch

import mytorch_ext  # noqa: F401
from helpers import no_fallbacks

D = "mytorch"


def same(fn, *args):
    expected = fn(*args)
    with no_fallbacks():
        got = fn(*[a.to(D) if isinstance(a, torch.Tensor) else a for a in args])
    assert got.device.type == D and got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0, equal_nan=True)


def ints(*shape, dtype=torch.int64):
    return torch.randint(-50, 50, shape).to(dtype)


def bools(*shape):
    return torch.rand(shape) > 0.5


@pytest.mark.parametrize("fn", [torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor],
                         ids=["and", "or", "xor"])
def test_bitwise_binary(fn):
    same(fn, bools(3, 4), bools(3, 4))
    same(fn, bools(3, 1), bools(1, 4))                       # broadcast
    same(fn, ints(5, 2), ints(5, 2, dtype=torch.int32))        # promotion
    same(fn, ints(4, 6).t(), ints(6, 4))                      # strided
    same(lambda a: fn(a, True), bools(5))                     # a Python scalar
    same(lambda a: a & torch.tensor(True), bools(2, 3))       # a 0-dim CPU tensor operand
    same(lambda a, b: a | b, torch.ones(2, 3, dtype=torch.uint8), torch.zeros(3, dtype=torch.uint8))


def test_bitwise_inplace_and_out():
    a, b = bools(4, 5), bools(4, 5)
    expected = a.clone()
    expected &= b
    ad = a.to(D)
    with no_fallbacks():
        ad &= b.to(D)
        out = torch.empty(0, dtype=torch.int64, device=D)
        torch.bitwise_or(a.to(D), b.to(D), out=out)
    torch.testing.assert_close(ad.cpu(), expected)
    torch.testing.assert_close(out.cpu(), torch.bitwise_or(a, b).long())


def test_bitwise_not():
    same(torch.bitwise_not, bools(3, 5))
    same(torch.bitwise_not, ints(7))
    same(lambda x: ~x, ints(3, 4, dtype=torch.uint8))


def test_bitwise_rejects_floats():
    x = torch.randn(3, device=D)
    with pytest.raises(RuntimeError, match="mytorch::bitwise_and: expected integer or bool operands, got Float"):
        torch.bitwise_and(x, x)


@pytest.mark.parametrize("name", ["any", "all"])
def test_any_all(name):
    fn = getattr(torch, name)
    for x in (bools(3, 4, 5), torch.randn(3, 4) > 1.5, torch.ones(2, 3, dtype=torch.bool),
              torch.zeros(0, 3, dtype=torch.bool), ints(4, 3), torch.randint(0, 2, (4, 3), dtype=torch.uint8),
              torch.tensor(True)):
        same(fn, x)
        for d in range(-x.dim(), x.dim()):
            same(lambda t: fn(t, dim=d), x)
            same(lambda t: fn(t, dim=d, keepdim=True), x)
    x = bools(3, 4, 5)
    same(lambda t: fn(t, dim=(0, 2)), x)
    same(lambda t: fn(t, dim=(1, 2), keepdim=True), x)
    same(lambda t: fn(t.transpose(0, 2), dim=1), x)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.float32, torch.float64])
def test_cumsum(dtype):
    x = (torch.randn(4, 5, 3) * 10).to(dtype)
    for d in range(-3, 3):
        same(lambda t: torch.cumsum(t, d), x)
    same(lambda t: torch.cumsum(t, 1, dtype=torch.float64), x)
    same(lambda t: t.long().cumsum(-1) - 1, torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]]))
    same(lambda t: torch.cumsum(t, 0), torch.tensor(3))


def test_isin():
    same(torch.isin, ints(4, 6), ints(5))
    same(lambda a, b: torch.isin(a, b, invert=True), ints(4, 6), ints(5))
    same(torch.isin, torch.tensor([1.0, float("nan"), 2.5]), torch.tensor([float("nan"), 2.5]))
    same(torch.isin, ints(3), ints(4, dtype=torch.int32))
    same(lambda a: torch.isin(a, torch.tensor([3, 7]).to(a.device)), torch.arange(10))
    same(lambda a: torch.isin(a, 4), torch.arange(6))        # a scalar test element
    same(lambda b: torch.isin(3, b), torch.arange(6))        # a scalar element
