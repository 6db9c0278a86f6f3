"""Vision models run natively on the mytorch device: no CPU fallback, same losses as CPU.

resnet18 and a LeNet-style CNN train for 10 steps on `mytorch` and on `cpu` from the
same weights (state_dict) and batches; mobilenet_v3_small's forward matches CPU.
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

import mytorch_ext
from helpers import no_fallbacks

pytestmark = pytest.mark.skipif(
    not hasattr(mytorch_ext, "fallback_counts") or not hasattr(torch, "mytorch"),
    reason="this build has no mytorch device")

STEPS = 10


def batches(n, shape=(4, 3, 32, 32), classes=10, dtype=torch.float32):
    gen = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        x, y = torch.randn(*shape, generator=gen), torch.randint(0, classes, (shape[0],), generator=gen)
        x[:, 0] += (y.float() - classes / 2)[:, None, None] * 0.3  # a signal to learn
        out.append((x.to(dtype), y))
    return out


def train(model, data, device, make_opt, frozen_bn=False):
    model = model.to(device).train()
    if frozen_bn:  # BatchNorm normalizes with its running statistics; its affine still trains
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.eval()
    opt = make_opt(model.parameters())
    losses = []
    for x, y in data:
        loss = F.cross_entropy(model(x.to(device)), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def compare(make_model, make_opt, data, rtol, atol, dtype=torch.float32, frozen_bn=False):
    torch.manual_seed(0)
    ref_model = make_model().to(dtype)
    dev_model = make_model().to(dtype)
    dev_model.load_state_dict(ref_model.state_dict())
    ref, ref_model = train(ref_model, data, "cpu", make_opt, frozen_bn)
    with no_fallbacks():
        got, dev_model = train(dev_model, data, "mytorch", make_opt, frozen_bn)
    assert all(p.is_mytorch for p in dev_model.parameters())
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), rtol=rtol, atol=atol)
    assert min(ref[-3:]) < ref[0]  # it does train
    return ref_model, dev_model


def resnet18():
    return torchvision.models.resnet18(num_classes=10)


def sgd(ps):
    return torch.optim.SGD(ps, lr=0.01, momentum=0.9)


# At batch 4 and 32x32, layer4's BatchNorms normalize over 4 values per channel and amplify
# rounding 10-1000x per step: two float32 CPU runs (float32 vs float64) part by ~20% in 10
# steps. So the 10-step float32 run uses frozen BatchNorm statistics, and BatchNorm's
# training mode is checked on one float32 step and on 5 float64 steps.
def test_resnet18_trains_like_cpu():
    compare(resnet18, sgd, batches(STEPS), rtol=1e-5, atol=1e-6, frozen_bn=True)


def test_resnet18_float32_step_with_batch_statistics_matches_cpu():
    x, y = batches(1)[0]
    torch.manual_seed(0)
    ref = resnet18()
    dev = resnet18()
    dev.load_state_dict(ref.state_dict())
    ref_loss = F.cross_entropy(ref(x), y)
    ref_loss.backward()
    with no_fallbacks():
        dev.to("mytorch")
        loss = F.cross_entropy(dev(x.to("mytorch")), y.to("mytorch"))
        loss.backward()
    torch.testing.assert_close(loss.item(), ref_loss.item(), rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(ref.named_parameters(), dev.parameters()):
        err = (q.grad.cpu() - p.grad).norm() / p.grad.norm()
        assert err < 1e-3, f"{name}: gradient differs from CPU by {err:.1e} (relative)"
    for (name, b), c in zip(ref.named_buffers(), dev.buffers()):
        torch.testing.assert_close(c.cpu(), b, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


def test_resnet18_trains_with_batch_statistics_like_cpu_in_float64():
    data = batches(5, dtype=torch.float64)
    ref, dev = compare(resnet18, lambda ps: torch.optim.SGD(ps, lr=0.01), data, rtol=1e-6, atol=1e-8,
                       dtype=torch.float64)
    for (name, b), c in zip(ref.named_buffers(), dev.buffers()):
        torch.testing.assert_close(c.cpu(), b, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
    assert dev.bn1.num_batches_tracked.item() == 5


class LeNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(3, 6, 5), nn.Conv2d(6, 16, 5)
        self.fc1, self.fc2, self.fc3 = nn.Linear(16 * 5 * 5, 120), nn.Linear(120, 84), nn.Linear(84, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def test_lenet_trains_like_cpu():
    data = batches(STEPS, shape=(8, 3, 32, 32))
    compare(LeNet, lambda ps: torch.optim.AdamW(ps, lr=3e-3, weight_decay=0.01), data, rtol=1e-4, atol=1e-5)


def test_mobilenet_v3_small_forward_matches_cpu():
    torch.manual_seed(0)
    ref = torchvision.models.mobilenet_v3_small(num_classes=10)
    # non-trivial BatchNorm statistics, so that eval mode is not the identity
    for m in ref.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.normal_(0, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    ref.eval()
    dev = torchvision.models.mobilenet_v3_small(num_classes=10)
    dev.load_state_dict(ref.state_dict())
    dev.to("mytorch").eval()
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        want = ref(x)
        with no_fallbacks():
            got = dev(x.to("mytorch"))
    assert got.is_mytorch and got.shape == (4, 10)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
