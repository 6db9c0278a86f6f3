"""mytorch::embedding (+ backward): ATen parity, padding_idx, gradcheck, opcheck, bad indices."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext.ops.embedding as E
from helpers import CPU_DTYPES, TOL, first_line

ops = torch.ops.mytorch


def close(a, b, dtype):
    rtol, atol = TOL[dtype]
    torch.testing.assert_close(a.double(), b.double(), rtol=rtol * 2, atol=atol * 4)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("ishape", [(0,), (1,), (7,), (3, 33), (2, 1, 5)], ids=str)
@pytest.mark.parametrize("padding_idx", [None, 0, -2])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_matches_aten(dtype, ishape, padding_idx, index_dtype):
    V, D = 11, 17
    w = torch.randn(V, D, dtype=dtype, requires_grad=True)
    idx = torch.randint(0, V, ishape, dtype=index_dtype)
    if idx.numel() > 2:
        idx.view(-1)[:2] = 0  # repeated rows, and the padding row when padding_idx=0
    out = E.embedding(idx, w, padding_idx)
    wr = w.detach().float().requires_grad_() if dtype != torch.float64 else w.detach().clone().requires_grad_()
    ref = F.embedding(idx, wr, padding_idx)
    close(out, ref, dtype)
    g = torch.randn(ref.shape, dtype=ref.dtype)
    (gw,) = torch.autograd.grad(out, w, g.to(dtype))
    (gr,) = torch.autograd.grad(ref, wr, g)
    close(gw, gr, dtype)


def test_non_contiguous_weight_and_scale_by_freq():
    w = torch.randn(20, 9).t().contiguous().t()[:, :]  # column-major
    w2 = torch.randn(9, 40)[:, ::2].t()  # strided both ways
    idx = torch.tensor([[1, 4, 4], [8, 1, 0]])
    for ww in (w, w2):
        torch.testing.assert_close(E.embedding(idx, ww), F.embedding(idx, ww))
    g = torch.randn(2, 3, 9)
    ref = torch.ops.aten.embedding_dense_backward(g, idx, 20, -1, True)
    torch.testing.assert_close(ops.embedding_backward(g, idx, 20, -1, True), ref)


def test_gradcheck():
    w = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([[0, 2, 2], [5, 1, 0]])
    # (padding_idx is left out: its row is used forward but gets no gradient by design)
    assert torch.autograd.gradcheck(lambda w: E.embedding(idx, w), (w,))
    assert torch.autograd.gradcheck(lambda w: E.embedding(idx.t(), w), (w,))


def test_opcheck():
    w = torch.randn(6, 4, requires_grad=True)
    idx = torch.tensor([[0, 2, 2], [5, 1, 0]])
    torch.library.opcheck(ops.embedding.default, (w, idx, -1))
    torch.library.opcheck(ops.embedding.default, (w, idx, 2))
    torch.library.opcheck(ops.embedding_backward.default, (torch.randn(2, 3, 4), idx, 6, 0, False))


class TestEmbeddingBadInput(TestCase):
    def test_index_out_of_range(self):
        self.assertExpectedInline(
            first_line(lambda: E.embedding(torch.tensor([1, 10]), torch.randn(10, 3)), IndexError),
            """mytorch::embedding: index 10 is out of range for an embedding of 10 rows (expected a value in [0, 9])""")
        self.assertExpectedInline(
            first_line(lambda: ops.embedding_backward(torch.randn(2, 3), torch.tensor([-1, 0]), 4), IndexError),
            """mytorch::embedding_backward: index -1 is out of range for an embedding of 4 rows (expected a value in [0, 3])""")

    def test_float_indices(self):
        self.assertExpectedInline(
            first_line(lambda: ops.embedding(torch.randn(10, 3), torch.tensor([1.0]))),
            """mytorch::embedding: expected indices to have dtype int64 or int32, got Float""")
