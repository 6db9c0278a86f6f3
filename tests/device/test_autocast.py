"""torch.autocast("mytorch"): the CUDA op lists, registered for AutocastPrivateUse1."""
import pytest
import torch

import mytorch_ext  # noqa: F401

D = "mytorch"


def test_supported_dtypes():
    assert torch.bfloat16 in torch.mytorch.get_amp_supported_dtype()
    assert torch.amp.is_autocast_available("mytorch")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lower_precision_ops(dtype):
    a = torch.randn(4, 5, device=D)
    b = torch.randn(5, 3, device=D)
    lin = torch.nn.Linear(5, 3).to(D)
    with torch.autocast(D, dtype=dtype):
        assert torch.is_autocast_enabled(D)
        mm = a @ b
        out = lin(a)
        bmm = torch.bmm(a[None], b[None])
    assert mm.dtype == dtype and out.dtype == dtype and bmm.dtype == dtype
    assert not torch.is_autocast_enabled(D)
    torch.testing.assert_close(mm.float().cpu(), (a.cpu() @ b.cpu()), atol=0.1, rtol=0.05)


def test_fp32_and_promote_ops():
    x = torch.randn(4, 5, device=D).bfloat16()
    with torch.autocast(D, dtype=torch.bfloat16):
        assert torch.softmax(x, -1).dtype == torch.float32
        assert torch.exp(x).dtype == torch.float32
        assert torch.nn.functional.layer_norm(x, (5,)).dtype == torch.float32
        assert torch.cat([x, x.float()]).dtype == torch.float32  # promote
        assert (x + 1).dtype == torch.bfloat16  # not in any list: untouched


def test_autocast_backward_reaches_fp32_leaves():
    w = torch.randn(5, 3, device=D, requires_grad=True)
    a = torch.randn(4, 5, device=D)
    with torch.autocast(D, dtype=torch.bfloat16):
        y = a @ w
    y.float().sum().backward()
    assert w.grad.dtype == torch.float32 and w.grad.device == torch.device("mytorch:0")


def test_disabled_and_nested():
    a = torch.randn(2, 2, device=D)
    with torch.autocast(D, dtype=torch.bfloat16):
        with torch.autocast(D, enabled=False):
            assert (a @ a).dtype == torch.float32
        assert (a @ a).dtype == torch.bfloat16
