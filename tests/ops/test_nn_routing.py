"""The aten ops of the GEMM, softmax, norm, loss, embedding and dropout families run
natively on the mytorch device (no CPU fallback), forward and backward, and match CPU."""
import pytest
import torch
import torch.nn.functional as F

from helpers import no_fallbacks

pytestmark = pytest.mark.skipif(not hasattr(torch, "mytorch"), reason="no mytorch device in this build")


def both(fn, *tensors, grad=True):
    """fn on CPU and on mytorch (same values); returns outputs and input grads of each."""
    res = []
    for dev in ("cpu", "mytorch"):
        ins = [t.detach().to(dev).requires_grad_(grad and t.is_floating_point() and i == 0)
               for i, t in enumerate(tensors)] if grad == "first" else \
              [t.detach().to(dev).requires_grad_(grad and t.is_floating_point()) for t in tensors]
        with no_fallbacks():
            out = fn(*ins)
            grads = []
            if grad:
                g = torch.linspace(-1, 1, out.numel()).view(out.shape).to(dev)
                diff = [t for t in ins if t.requires_grad]
                grads = torch.autograd.grad(out, diff, g)
        res.append((out.cpu(), [x.cpu() for x in grads]))
    return res


def check(fn, *tensors, grad=True, rtol=1e-5, atol=1e-5):
    (o1, g1), (o2, g2) = both(fn, *tensors, grad=grad)
    torch.testing.assert_close(o2, o1, rtol=rtol, atol=atol)
    for a, b in zip(g2, g1):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)


def test_gemm_family():
    a, b = torch.randn(33, 17), torch.randn(17, 9)
    check(torch.mm, a, b, rtol=1e-4, atol=1e-4)
    check(lambda x, y: x.t() @ y, torch.randn(17, 33), b, rtol=1e-4, atol=1e-4)
    check(torch.bmm, torch.randn(3, 5, 7), torch.randn(3, 7, 2), rtol=1e-4, atol=1e-4)
    check(lambda s, x, y: torch.addmm(s, x, y, beta=0.5, alpha=2), torch.randn(9), a, b, rtol=1e-4, atol=1e-4)
    check(lambda s, x, y: torch.baddbmm(s, x, y, alpha=0.3), torch.randn(3, 5, 2), torch.randn(3, 5, 7),
          torch.randn(3, 7, 2), rtol=1e-4, atol=1e-4)
    check(F.linear, torch.randn(2, 4, 17), torch.randn(6, 17), torch.randn(6), rtol=1e-4, atol=1e-4)
    check(torch.matmul, torch.randn(2, 3, 4, 5), torch.randn(5, 6), rtol=1e-4, atol=1e-4)
    # in-place and out=
    for dev in ("cpu", "mytorch"):
        s = torch.ones(33, 9, device=dev)
        with no_fallbacks():
            s.addmm_(a.to(dev), b.to(dev))
            out = torch.empty(0, device=dev)
            torch.mm(a.to(dev), b.to(dev), out=out)
        torch.testing.assert_close(s.cpu(), 1 + a @ b, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(out.cpu(), a @ b, rtol=1e-4, atol=1e-4)


def test_softmax_family():
    x = torch.randn(4, 7, 5)
    for dim in (-1, 1, 0):
        check(lambda t: torch.softmax(t, dim), x)
        check(lambda t: torch.log_softmax(t, dim), x)


def test_norm_family():
    x = torch.randn(3, 5, 8)
    check(lambda t, w, b: F.layer_norm(t, (8,), w, b), x, torch.randn(8), torch.randn(8))
    check(lambda t: F.layer_norm(t, (5, 8)), x)
    check(lambda t, w: F.rms_norm(t, (8,), w, 1e-6), x, torch.randn(8))


def test_loss_family():
    x = torch.randn(6, 5)
    t = torch.tensor([0, 4, 1, -100, 2, 3])
    for red in ("mean", "sum", "none"):
        check(lambda a, tt: F.cross_entropy(a, tt, reduction=red), x, t)
        check(lambda a, tt, w: F.nll_loss(torch.log_softmax(a, 1), tt, w, reduction=red), x, t,
              torch.rand(5) + 0.1, grad="first")
        check(lambda a, b: F.mse_loss(a, b, reduction=red), x, torch.randn(6, 5))
    check(lambda a, tt: F.nll_loss(a, tt), torch.randn(2, 3, 4, 5), torch.randint(0, 3, (2, 4, 5)))


def test_embedding_family():
    idx = torch.tensor([[1, 0, 3], [3, 3, 2]])
    check(lambda w, i: F.embedding(i, w, padding_idx=3), torch.randn(5, 4), idx)


def test_dropout_family():
    x = torch.randn(64, 33)
    for dev in ("cpu", "mytorch"):
        xd = x.detach().to(dev).requires_grad_()
        with no_fallbacks():
            torch.mytorch.manual_seed(11) if dev == "mytorch" else torch.manual_seed(11)
            y = F.dropout(xd, 0.3, training=True)
            y.sum().backward()
        if dev == "mytorch":
            keep = (y.detach().cpu() != 0)
            torch.testing.assert_close(y.detach().cpu(), torch.where(keep, x / 0.7, 0.0))
            torch.testing.assert_close(xd.grad.cpu(), keep.float() / 0.7)
            torch.mytorch.manual_seed(11)
            with no_fallbacks():
                y2 = F.dropout(x.to(dev), 0.3, training=True)
            assert torch.equal(y2.cpu(), y.detach().cpu())  # same seed, same mask
