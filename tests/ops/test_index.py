"""Indexing ops: ATen parity, bounds checks, gradcheck, opcheck."""
import pytest
import torch
from expecttest import TestCase

import mytorch_ext  # noqa: F401
from helpers import assert_close, first_line
from ops_device import device_or_skip, no_fallbacks

m = torch.ops.mytorch
DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.int64)


def rnd(*s, dtype=torch.float32):
    return torch.randn(*s).to(dtype) if dtype.is_floating_point else torch.randint(-9, 9, s, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select_gather_scatter(dtype):
    for x in (rnd(6, 5, 7, dtype=dtype), rnd(7, 5, 6, dtype=dtype).transpose(0, 2)):
        for dim in (0, 1, -1):
            n = x.shape[dim]
            idx = torch.randint(0, n, (11,))
            assert torch.equal(m.index_select(x, dim, idx), torch.index_select(x, dim, idx))
            assert torch.equal(m.index_select(x, dim, idx.int()), torch.index_select(x, dim, idx))
            gshape = list(x.shape)
            gshape[dim] = 4
            gi = torch.randint(-n, n, gshape)
            assert torch.equal(m.gather(x, dim, gi), torch.gather(x, dim, gi % n))
            src = rnd(*gshape, dtype=dtype)
            exp = x.clone().scatter_add_(dim, gi % n, src)
            assert_close(m.scatter_add(x, dim, gi, src), exp, dtype if dtype.is_floating_point else torch.float64)
    assert torch.equal(m.index_select(rnd(4), 0, torch.tensor([], dtype=torch.long)), torch.empty(0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_index_and_index_put(dtype):
    x = rnd(5, 8, 3, dtype=dtype)
    idx = torch.tensor([[4, 0], [-1, 2]])
    for pos in range(3):
        ind = [None] * pos + [idx % x.shape[pos]]
        assert torch.equal(m.index(x, ind), x[tuple([slice(None)] * pos + [idx % x.shape[pos]])])
    mask = torch.rand(5, 8) > 0.5
    assert torch.equal(m.index(x, [mask]), x[mask])
    col = torch.rand(8) > 0.5
    assert torch.equal(m.index(x, [None, col]), x[:, col])
    # index_put with duplicates: accumulate adds, assignment writes one of them
    rows = torch.tensor([1, 3, 1, 1, 0])
    vals = rnd(5, 8, 3, dtype=dtype)
    exp = x.clone().index_put_((rows,), vals, accumulate=True)
    assert_close(m.index_put(x, [rows], vals, True), exp, dtype if dtype.is_floating_point else torch.float64)
    uniq = torch.tensor([4, 2])
    v2 = rnd(2, 1, 3, dtype=dtype)  # broadcast along dim 1
    assert torch.equal(m.index_put(x, [uniq], v2, False), x.clone().index_put_((uniq,), v2))
    assert torch.equal(m.index_put(x.transpose(0, 1), [None, uniq], v2.transpose(0, 1), True),
                       x.transpose(0, 1).clone().index_put_((torch.arange(8).unsqueeze(1), uniq),
                                                            v2.transpose(0, 1), accumulate=True))


def test_cat_nonzero():
    a, b, c = torch.randn(3, 4), torch.randn(5, 4).double(), torch.randn(4, 2).t()
    assert_close(m.cat([a, b, c], 0), torch.cat([a, b, c], 0))
    assert_close(m.cat([a.t(), torch.randn(4, 0)], 1), torch.cat([a.t(), torch.randn(4, 0)], 1))
    assert_close(m.cat([a, torch.empty(0)], -2), torch.cat([a, torch.empty(0)], -2))
    x = torch.randn(4, 5, 3) > 0.3
    assert torch.equal(m.nonzero(x), torch.nonzero(x))
    y = torch.randint(-1, 2, (7, 2))
    assert torch.equal(m.nonzero(y), torch.nonzero(y))


def test_index_gradcheck():
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([3, 0, 3, 1])
    gi = torch.tensor([[0, 3], [2, 2], [1, 0], [4, 4]])
    y = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    for fn, args in [(lambda t: m.index_select(t, 0, idx), (x,)), (lambda t: m.index_select(t, 1, idx), (x,)),
                     (lambda t: m.gather(t, 0, gi.t()), (x,)), (lambda t: m.index(t, [idx]), (x,)),
                     (lambda t, u: m.cat([t, u], 0), (x, y)),  # dim equal to its default: dropped
                     (lambda t: m.cat([t, t * 2], 1), (x,)),
                     (lambda t, s: m.scatter_add(t, 0, gi.t(), s), (x, y[:2, :4].detach().clone().requires_grad_()))]:
        assert torch.autograd.gradcheck(fn, args)


def test_index_opcheck():
    x = torch.randn(5, 4, requires_grad=True)
    idx = torch.tensor([3, 0, 3])
    gi = torch.tensor([[0, 3, 1, 1], [2, 2, 4, 0]])
    for op, args in [(m.index_select.default, (x, 0, idx)), (m.gather.default, (x, 0, gi)),
                     (m.scatter_add.default, (x, 0, gi, torch.randn(2, 4))), (m.index.default, (x, [idx])),
                     (m.index_put.default, (x.detach(), [idx], torch.randn(3, 4), True)),
                     (m.cat.default, ([x, x], 1))]:
        torch.library.opcheck(op, args)


@pytest.mark.parametrize("x", [torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]]), torch.zeros(2, 3),
                               torch.tensor([True, False, True]), torch.arange(-2, 3).view(1, 5, 1)],
                         ids=["float", "all_zero", "bool", "3d_int"])
def test_nonzero_opcheck(x):
    torch.library.opcheck(m.nonzero.default, (x,))


def test_device_indexing_no_fallback():
    dev = device_or_skip()
    x = torch.randn(6, 5)
    idx = torch.tensor([5, 0, 2, 2])
    with no_fallbacks():
        xd, idd = x.to(dev), idx.to(dev)
        got = {"select": xd.index_select(0, idd), "gather": xd.gather(1, idd[1:3].view(2, 1).expand(2, 3).contiguous()),
               "adv": xd[idd], "mask": xd[xd > 0], "cat": torch.cat([xd, xd * 2], 1), "stack": torch.stack([xd, xd]),
               "split": torch.cat(xd.split(2), 0)}
        acc = torch.zeros(6, 5, device=dev)
        acc.index_put_((idd,), torch.ones(4, 5, device=dev), accumulate=True)
        got["put"] = acc
    exp = {"select": x.index_select(0, idx), "gather": x.gather(1, idx[1:3].view(2, 1).expand(2, 3)),
           "adv": x[idx], "mask": x[x > 0], "cat": torch.cat([x, x * 2], 1), "stack": torch.stack([x, x]),
           "split": x, "put": torch.zeros(6, 5).index_put_((idx,), torch.ones(4, 5), accumulate=True)}
    for k in got:
        assert_close(got[k].cpu(), exp[k])


class TestIndexBadInput(TestCase):
    def test_index_out_of_range(self):
        self.assertExpectedInline(first_line(lambda: m.index_select(torch.randn(4, 3), 0, torch.tensor([1, 4])), IndexError), """mytorch::index_select: index 4 is out of bounds for dim 0 with size 4 (expected an index in [0, 3])""")

    def test_gather_negative_out_of_range(self):
        self.assertExpectedInline(first_line(lambda: m.gather(torch.randn(4, 3), 1, torch.tensor([[0], [-4]])), IndexError), """mytorch::gather: index -4 is out of bounds for dim 1 with size 3 (expected an index in [-3, 2])""")

    def test_float_index(self):
        self.assertExpectedInline(first_line(lambda: m.index_select(torch.randn(4), 0, torch.tensor([1.0]))), """mytorch::index_select: expected index to have dtype in (Long, Int), got Float""")

    def test_cat_shapes(self):
        self.assertExpectedInline(first_line(lambda: m.cat([torch.randn(2, 3), torch.randn(2, 4)], 0)), """mytorch::cat: sizes of tensors must match except in dim 0; expected size 3 but got size 4 for tensor 1 in dim 1""")
