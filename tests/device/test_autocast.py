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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cnn_trains_under_autocast(dtype):
    """conv2d is on the lower-precision list: the native conv takes bf16 / fp16 (fp32 inside)."""
    from helpers import no_fallbacks

    def make():
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                   torch.nn.Conv2d(8, 4, 3, stride=2, groups=4), torch.nn.Flatten(),
                                   torch.nn.Linear(4 * 3 * 3, 5))

    torch.manual_seed(0)
    cpu_net = make()
    dev = make().to(D)
    dev.load_state_dict(cpu_net.state_dict())
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
    with no_fallbacks():
        with torch.autocast(D, dtype=dtype):
            out = dev(x.to(D))
            loss = torch.nn.functional.cross_entropy(out, y.to(D))
        loss.backward()
    assert out.dtype == dtype and loss.dtype == torch.float32
    with torch.autocast("cpu", dtype=dtype):
        ref_loss = torch.nn.functional.cross_entropy(cpu_net(x), y)
    ref_loss.backward()
    torch.testing.assert_close(loss.cpu(), ref_loss.float(), atol=0.05, rtol=0.05)
    for (name, p), q in zip(dev.named_parameters(), cpu_net.parameters()):
        assert p.grad.dtype == torch.float32, name
        torch.testing.assert_close(p.grad.cpu(), q.grad, atol=0.05, rtol=0.1, msg=name)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_binary_cross_entropy_is_banned_as_on_cuda(dtype):
    p = torch.rand(4, 3, device=D)
    y = torch.rand(4, 3, device=D)
    with torch.autocast(D, dtype=dtype):
        with pytest.raises(RuntimeError, match="binary_cross_entropy and torch.nn.BCELoss are "
                                               "unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(p, y)
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            torch.nn.BCELoss()(p, y)
        # the logits form is safe and runs in fp32
        assert torch.nn.functional.binary_cross_entropy_with_logits(p, y).dtype == torch.float32
    # outside autocast it runs
    torch.testing.assert_close(torch.nn.functional.binary_cross_entropy(p, y).cpu(),
                               torch.nn.functional.binary_cross_entropy(p.cpu(), y.cpu()))
