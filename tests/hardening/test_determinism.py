"""The same seed gives bit-identical results: the CPU kernels (on CPU tensors and on the
mytorch device), and flash_attn with deterministic=True, forward and backward."""
import pytest
import torch
import torch.nn.functional as F

from strategies import DEVICE, has_device

M = torch.ops.mytorch
DEVICES = ["cpu"] + ([DEVICE] if has_device() else [])


def seed_all(seed):
    torch.manual_seed(seed)
    if has_device():
        torch.mytorch.manual_seed_all(seed)


def kernels_once(device, seed=1234):
    """Large enough that OpenMP splits every op across threads."""
    seed_all(seed)
    x = torch.randn(257, 300).to(device).requires_grad_()
    w = torch.randn(300, 129).to(device)
    t = torch.randint(0, 129, (257,)).to(device)
    h = M.mm(x, w)
    out = [h, M.sum(h, [0]), M.var(h, [1]), M.logsumexp(h, [1]), M.softmax(h, 1)]
    out += list(M.layer_norm(h, [129]))
    out += list(M.dropout(h, 0.3))
    loss = M.cross_entropy(h, t)
    img = torch.randn(2, 4, 17, 17).to(device).requires_grad_()
    conv = M.conv2d(img, torch.randn(8, 4, 3, 3).to(device), None, [1, 1], [1, 1])
    pooled, _ = M.max_pool2d(conv, [2, 2])
    loss = loss + M.sum(pooled)
    loss.backward()
    return [o.detach().cpu() for o in out] + [loss.detach().cpu(), x.grad.cpu(), img.grad.cpu()]


@pytest.mark.parametrize("device", DEVICES)
def test_cpu_kernels_are_bit_identical_for_one_seed(device):
    first = kernels_once(device)
    for _ in range(2):
        again = kernels_once(device)
        for i, (a, b) in enumerate(zip(first, again)):
            assert torch.equal(a, b), f"result {i} differs between two runs with the same seed"


def attention_once(device, dropout_p, seed=7):
    seed_all(seed)
    q = torch.randn(2, 37, 4, 32).to(device).requires_grad_()
    k = torch.randn(2, 53, 2, 32).to(device).requires_grad_()
    v = torch.randn(2, 53, 2, 32).to(device).requires_grad_()
    out, lse = M.flash_attn(q, k, v, dropout_p=dropout_p, causal=True, seed=99, deterministic=True)
    out.backward(torch.randn(out.shape).to(device))
    return [out.detach().cpu(), lse.cpu(), q.grad.cpu(), k.grad.cpu(), v.grad.cpu()]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dropout_p", [0.0, 0.2])
def test_flash_attn_deterministic_is_bit_identical(device, dropout_p):
    first = attention_once(device, dropout_p)
    for _ in range(2):
        again = attention_once(device, dropout_p)
        for name, a, b in zip(["out", "lse", "dq", "dk", "dv"], first, again):
            assert torch.equal(a, b), f"flash_attn {name} differs between two deterministic runs"


def test_determinism_check_can_fail():
    """The comparison above does see a change: a different seed gives different dropout."""
    a = attention_once("cpu", 0.2, seed=7)
    seed_all(8)
    q, k, v = (torch.randn(1, 8, 1, 8) for _ in range(3))
    o1, _ = M.flash_attn(q, k, v, dropout_p=0.5, seed=1)
    o2, _ = M.flash_attn(q, k, v, dropout_p=0.5, seed=2)
    assert not torch.equal(o1, o2) and a[0].abs().sum() > 0
