"""_copy_from / _copy_from_and_resize in every direction, strided, converting, broadcasting."""
import pytest
import torch

import mytorch_ext  # noqa: F401
from helpers import no_fallbacks, odd_views

DIRECTIONS = [("cpu", "mytorch:0"), ("mytorch:0", "cpu"), ("mytorch:0", "mytorch:0"),
              ("mytorch:0", "mytorch:1"), ("mytorch:1", "mytorch:0")]


@pytest.mark.parametrize("src_dev,dst_dev", DIRECTIONS)
def test_copy_every_direction(src_dev, dst_dev):
    x = torch.randn(7, 9)
    with no_fallbacks():
        s = x.to(src_dev)
        d = s.to(dst_dev, copy=True)
    assert d.device == torch.device(dst_dev)
    assert torch.equal(d.cpu(), x)
    assert d.untyped_storage().data_ptr() != s.untyped_storage().data_ptr()


@pytest.mark.parametrize("src_dev,dst_dev", DIRECTIONS)
def test_copy_between_strided_views(src_dev, dst_dev):
    for name, x in odd_views((6, 10)):
        dst_big = torch.zeros(6, 30)
        with no_fallbacks():
            s = x.to(src_dev) if src_dev == "cpu" else torch.empty_strided(
                x.shape, x.stride(), device=src_dev).copy_(x)
            if name != "contiguous":
                assert not s.is_contiguous()
            big = dst_big.to(dst_dev)
            view = big[:, 5:25:2]
            view.copy_(s)
        expected = dst_big.clone()
        expected[:, 5:25:2] = x
        assert torch.equal(big.cpu(), expected), name


CONVERSIONS = [(torch.float32, torch.float16), (torch.float32, torch.bfloat16),
               (torch.float64, torch.float32), (torch.float32, torch.int64),
               (torch.int32, torch.float64), (torch.float32, torch.bool),
               (torch.bool, torch.float32), (torch.uint8, torch.int8),
               (torch.complex64, torch.complex128), (torch.float32, torch.complex64)]


@pytest.mark.parametrize("src_dtype,dst_dtype", CONVERSIONS)
@pytest.mark.parametrize("src_dev,dst_dev", [("cpu", "mytorch"), ("mytorch", "cpu"),
                                             ("mytorch:0", "mytorch:1")])
def test_dtype_converting_copy(src_dtype, dst_dtype, src_dev, dst_dev):
    x = (torch.randn(5, 6) * 50).to(src_dtype)
    with no_fallbacks():
        s = x.to(src_dev)
        d = torch.empty(6, 5, dtype=dst_dtype, device=dst_dev).t()
        d.copy_(s)
        d2 = s.to(device=dst_dev, dtype=dst_dtype)
    assert torch.equal(d.cpu(), x.to(dst_dtype))
    assert torch.equal(d2.cpu(), x.to(dst_dtype))


def test_broadcasting_copy_and_non_blocking():
    with no_fallbacks():
        d = torch.empty(4, 3, device="mytorch")
        d.copy_(torch.tensor([1.0, 2.0, 3.0]))
        e = torch.empty(4, 3, device="mytorch:1")
        e.copy_(d[:1], non_blocking=True)
    assert torch.equal(d.cpu(), torch.tensor([1.0, 2.0, 3.0]).expand(4, 3))
    assert torch.equal(e.cpu(), d.cpu())


def test_large_copy_runs_in_parallel_and_matches():
    x = torch.randn(1 << 20)
    with no_fallbacks():
        d = x.to("mytorch")
        t = d.view(1024, 1024).t().contiguous()
    assert torch.equal(t.cpu(), x.view(1024, 1024).t())


def test_conjugate_and_rare_dtypes():
    z = torch.randn(4, dtype=torch.complex64)
    d = z.to("mytorch").conj()
    assert torch.equal(d.cpu().resolve_conj(), z.conj())
    e = torch.empty(4, dtype=torch.complex64, device="mytorch:1")
    e.copy_(d)  # resolves the conjugate bit on the way
    assert not e.is_conj() and torch.equal(e.cpu(), z.conj())
    n = z.to("mytorch")._neg_view()
    assert torch.equal(n.cpu().resolve_neg(), -z)
    f8 = torch.randn(8).to(torch.float8_e4m3fn)
    assert torch.equal(f8.to("mytorch").cpu().view(torch.uint8), f8.view(torch.uint8))


@pytest.mark.parametrize("src_dev,dst_dev", [("cpu", "mytorch:0"), ("mytorch:0", "mytorch:1"),
                                             ("mytorch:1", "mytorch:0"), ("mytorch:0", "cpu"),
                                             ("mytorch:1", "cpu")])
@pytest.mark.parametrize("dst_numel", [0, 5])
def test_copy_from_and_resize(src_dev, dst_dev, dst_numel):
    x = torch.arange(6.0).reshape(2, 3)
    with no_fallbacks():
        src = x.to(src_dev).t()  # a strided source
        dst = torch.full((dst_numel,), -1.0, device=dst_dev)
        res = torch.ops.aten._copy_from_and_resize(src, dst)
    assert res is dst and dst.device == torch.device(dst_dev)
    assert dst.shape == (3, 2) and dst.is_contiguous()
    assert torch.equal(dst.cpu(), x.t())
    if src_dev != "cpu":
        assert torch.equal(src.cpu(), x.t())  # the source is untouched


def test_overlapping_copy_raises():
    d = torch.arange(10.0).to("mytorch")
    with pytest.raises(RuntimeError, match="unsupported operation"):
        d[1:].copy_(d[:-1])
    with pytest.raises(RuntimeError, match="unsupported operation"):
        d.expand(3, 10).copy_(torch.zeros(3, 10))
    with pytest.raises(RuntimeError):
        torch.empty(3, device="mytorch").copy_(torch.zeros(4))
