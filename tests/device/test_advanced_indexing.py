"""Advanced indexing on the device with several index tensors (x[i, j], masks next to
integer indices, non-adjacent indices), computed natively and equal to the CPU."""
import pytest
import torch

import mytorch_ext  # noqa: F401
from helpers import no_fallbacks

D = "mytorch"


def index_tensors():
    g = torch.Generator().manual_seed(1)
    return {
        "i": torch.randint(-4, 4, (3,), generator=g),
        "j": torch.randint(-6, 6, (3,), generator=g),
        "k": torch.randint(-4, 4, (3,), generator=g),
        "row_mask": torch.tensor([True, False, True, True]),           # 3 of 4 rows
        "one": torch.tensor([2]),                                       # broadcasts
        "mask4x5": torch.rand(4, 5, generator=g) > 0.5,
    }


CASES = {
    # name: (x shape, indexing of x with the index tensors t)
    "two_adjacent": ((5, 6, 7), lambda x, t: x[t["i"], t["j"]]),
    "two_broadcast": ((5, 6, 7), lambda x, t: x[t["i"][:, None], t["j"][None, :]]),
    "three_full": ((4, 6, 4), lambda x, t: x[t["i"], t["j"], t["k"]]),
    "after_slice": ((3, 5, 6, 4), lambda x, t: x[:, t["i"], t["j"]]),
    "non_adjacent": ((5, 3, 6, 4), lambda x, t: x[t["i"], :, t["j"]]),
    "non_adjacent_last": ((5, 3, 6), lambda x, t: x[t["i"], :, t["j"]]),
    "mask_and_index": ((4, 6, 5), lambda x, t: x[t["row_mask"], t["j"]]),
    "index_and_mask": ((6, 4, 5), lambda x, t: x[t["one"], t["mask4x5"]]),
    "int32_indices": ((5, 6), lambda x, t: x[t["i"].int(), t["j"].int()]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("index_device", ["mytorch", "cpu"])
def test_index_matches_cpu(name, index_device):
    shape, fn = CASES[name]
    x = torch.randn(*shape)
    t = index_tensors()
    expected = fn(x, t)
    with no_fallbacks():
        got = fn(x.to(D), {k: v.to(index_device) for k, v in t.items()})
    assert got.device.type == "mytorch"
    assert got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)


def test_padded_hf_mask_gather():
    """masking_utils' padding_mask[batch_idx, kv_idx] with broadcast aranges."""
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)
    b = torch.arange(2)[:, None, None, None]
    kv = torch.arange(5)[None, None, None, :]
    expected = mask[b, kv]
    with no_fallbacks():
        got = mask.to(D)[b.to(D), kv.to(D)]
    assert torch.equal(got.cpu(), expected) and got.shape == (2, 1, 1, 5)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_several_indices(accumulate):
    x = torch.randn(5, 6, 7)
    i = torch.tensor([0, 2, 2, -1])
    j = torch.tensor([1, 3, 3, 0])
    v = torch.randn(4, 7)
    if not accumulate:  # distinct positions: the result does not depend on the write order
        i, j, v = i[[0, 1, 3]], j[[0, 1, 3]], v[[0, 1, 3]]
    expected = x.clone().index_put_((i, j), v, accumulate=accumulate)
    xd = x.to(D)
    with no_fallbacks():
        xd.index_put_((i.to(D), j.to(D)), v.to(D), accumulate=accumulate)
    torch.testing.assert_close(xd.cpu(), expected)


def test_index_put_non_adjacent_and_strided():
    x = torch.randn(4, 3, 5, 2)
    xd = x.to(D).transpose(0, 3)  # non-contiguous: shape (2, 3, 5, 4)
    xc = x.transpose(0, 3).clone()
    i = torch.tensor([1, 0])
    k = torch.tensor([4, 2])
    v = torch.randn(2, 3, 4)
    xc[i, :, k] = v
    with no_fallbacks():
        xd[i.to(D), :, k.to(D)] = v.to(D)
    torch.testing.assert_close(xd.cpu(), xc)


def test_backward_through_two_indices():
    x = torch.randn(4, 5, requires_grad=True)
    i = torch.tensor([0, 3, 3])
    j = torch.tensor([1, 2, 2])
    (x[i, j] * torch.arange(3.0)).sum().backward()
    xd = x.detach().to(D).requires_grad_()
    (xd[i.to(D), j.to(D)] * torch.arange(3.0, device=D)).sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), x.grad)


def test_out_of_range_and_bad_shapes_raise():
    x = torch.randn(3, 4, device=D)
    with pytest.raises(IndexError, match=r"mytorch::index: index 4 is out of bounds for dim 1 with size 4"):
        x[torch.tensor([0, 1], device=D), torch.tensor([1, 4], device=D)]
    with pytest.raises(RuntimeError, match="shape mismatch|cannot be broadcast|must match"):
        x[torch.tensor([0, 1], device=D), torch.tensor([1, 2, 3], device=D)]
