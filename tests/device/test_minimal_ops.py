"""Minimal ops run natively (no fallback): empty, views, resize_, set_, scalars, fill."""
import pytest
import torch

import mytorch_ext  # noqa: F401
from helpers import no_fallbacks

D = "mytorch"


def test_empty_and_empty_strided():
    with no_fallbacks():
        a = torch.empty(3, 4, device=D)
        b = torch.empty((2, 3, 4, 5), device=D, memory_format=torch.channels_last)
        c = torch.empty_strided((3, 4), (1, 3), device=D)
        e = torch.empty(0, 5, device=D, dtype=torch.float16)
    assert a.shape == (3, 4) and a.is_contiguous()
    assert b.is_contiguous(memory_format=torch.channels_last)
    assert c.stride() == (1, 3)
    assert e.numel() == 0 and e.dtype == torch.float16


def test_views_share_memory():
    x = torch.arange(24.0).reshape(4, 6)
    with no_fallbacks():
        d = x.to(D)
        v = d.view(6, 4)
        s = d.as_strided((3, 2), (6, 2), 1)
        r = d.reshape(2, 12)
        sl = d[1:, ::2]
        sl.zero_()
    expected = x.clone()
    expected[1:, ::2] = 0
    assert torch.equal(d.cpu(), expected)
    assert torch.equal(v.cpu(), expected.view(6, 4))
    assert torch.equal(s.cpu(), expected.as_strided((3, 2), (6, 2), 1))
    assert torch.equal(r.cpu(), expected.reshape(2, 12))
    assert v.untyped_storage().data_ptr() == d.untyped_storage().data_ptr()


def test_reshape_alias_and_contiguous_on_strided_views():
    x = torch.randn(5, 7)
    with no_fallbacks():
        d = x.to(D)
        t = d.t()
        c = t.contiguous()
        flat = d[:, 1:].reshape(-1)  # needs a copy
        perm = d.unsqueeze(0).permute(2, 0, 1).contiguous()
    assert c.is_contiguous() and torch.equal(c.cpu(), x.t())
    assert torch.equal(flat.cpu(), x[:, 1:].reshape(-1))
    assert torch.equal(perm.cpu(), x.unsqueeze(0).permute(2, 0, 1))


def test_resize_keeps_data_and_grows_storage():
    with no_fallbacks():
        d = torch.arange(6.0).to(D)
        d.resize_(2, 3)
        assert d.shape == (2, 3)
        d.resize_(4, 4)
        assert d.numel() == 16 and d.untyped_storage().nbytes() >= 64
        assert torch.equal(d.reshape(-1)[:6].cpu(), torch.arange(6.0))
        e = torch.empty(0, device=D).resize_(3, 5, memory_format=torch.contiguous_format)
    assert e.shape == (3, 5)
    with pytest.raises(RuntimeError, match="expected non-negative sizes"):
        d.resize_(-1, 2)


def test_set_overloads():
    with no_fallbacks():
        src = torch.arange(12.0).to(D)
        a = torch.empty(0, device=D).set_(src)
        b = torch.empty(0, device=D).set_(src.untyped_storage())
        c = torch.empty(0, device=D).set_(src.untyped_storage(), 2, (2, 3), (3, 1))
        e = torch.empty(3, device=D).set_()
    assert torch.equal(a.cpu(), torch.arange(12.0))
    assert b.shape == (12,)
    assert torch.equal(c.cpu(), torch.arange(12.0).as_strided((2, 3), (3, 1), 2))
    assert e.shape == (0,)
    c.fill_(-1)  # shares src's memory
    assert src.cpu()[2:8].eq(-1).all()
    with pytest.raises(RuntimeError, match="set_: expected a storage on mytorch:1"):
        torch.empty(0, device="mytorch:1").set_(src.untyped_storage())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool,
                                   torch.complex64])
def test_local_scalar_dense_and_fill(dtype):
    with no_fallbacks():
        t = torch.empty(3, 4, dtype=dtype, device=D)
        t.fill_(1)
        t[1:, ::3].fill_(0)
        item = t[0, 1].item()
        t2 = torch.empty(2, dtype=dtype, device=D)
        t2.fill_(torch.tensor(1, dtype=dtype))
    expected = torch.ones(3, 4, dtype=dtype)
    expected[1:, ::3] = 0
    assert torch.equal(t.cpu(), expected)
    assert item == 1
    assert torch.equal(t2.cpu(), torch.ones(2, dtype=dtype))


def test_zero_on_a_transposed_view():
    with no_fallbacks():
        t = torch.ones(4, 5, device=D)
        t.t()[1:3].zero_()
    e = torch.ones(4, 5)
    e.t()[1:3] = 0
    assert torch.equal(t.cpu(), e)
