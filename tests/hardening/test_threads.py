"""Ops from four Python threads at once on the mytorch device, and OpenMP kernels inside
forked DataLoader workers."""
import os
import subprocess
import sys
import threading

import pytest
import torch
import torch.nn.functional as F

from strategies import DEVICE, has_device

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(not has_device(), reason="the mytorch device is not registered")


def workload(seed):
    """A mix of GEMM, reductions, norms, softmax, conv and autograd; returns CPU results."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(67, 45, generator=g)
    b = torch.randn(45, 33, generator=g)
    img = torch.randn(2, 3, 9, 9, generator=g)
    w = torch.randn(4, 3, 3, 3, generator=g)

    def run(device):
        x, y = a.detach().to(device).requires_grad_(), b.to(device)
        h = F.layer_norm(torch.softmax(x @ y, -1), (33,))
        loss = (h.sum(0) * torch.arange(33, device=device)).sum() + F.conv2d(img.to(device), w.to(device)).mean()
        loss.backward()
        return [h.detach().cpu(), loss.detach().cpu(), x.grad.cpu()]
    return run


def run_in_four_threads(thread, errors):
    """thread(i) for i in 0..3 at once; each must finish within 120 s and report no error."""
    threads = [threading.Thread(target=thread, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread did not finish in 120 s"
    assert not errors, "\n".join(errors)


def test_four_threads_give_correct_results():
    runs = [workload(s) for s in range(4)]
    expected = [r("cpu") for r in runs]
    errors, barrier = [], threading.Barrier(4)

    def thread(i):
        try:
            barrier.wait()
            for _ in range(10):
                for got, want in zip(runs[i](DEVICE), expected[i]):
                    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        except Exception as e:  # noqa: BLE001  reported below
            errors.append(f"thread {i}: {e!r}")

    run_in_four_threads(thread, errors)


def test_threads_on_two_devices_keep_their_device():
    errors = []

    def thread(i):
        try:
            dev = f"{DEVICE}:{i % 2}"
            for _ in range(20):
                torch.mytorch.set_device(i % 2)
                x = torch.full((32, 32), float(i), device=dev)
                y = (x @ x).sum()
                assert y.device == torch.device(dev) and y.item() == i * i * 32 * 32 * 32, (y, dev)
        except Exception as e:  # noqa: BLE001
            errors.append(f"thread {i}: {e!r}")

    run_in_four_threads(thread, errors)


FORK_SCRIPT = r"""
import torch, mytorch_ext
from torch.utils.data import DataLoader, Dataset

class Squares(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        x = torch.full((96, 96), float(i))
        # OpenMP kernels in the worker: GEMM, a reduction and softmax
        y = torch.ops.mytorch.mm(x, torch.eye(96))
        return torch.ops.mytorch.sum(y).reshape(1), torch.ops.mytorch.softmax(y, -1)[0, :2]

# The parent starts OpenMP's thread pool before the workers fork.
big = torch.randn(512, 512)
for _ in range(3):
    torch.ops.mytorch.mm(big, big)
loader = DataLoader(Squares(), batch_size=2, num_workers=2, multiprocessing_context="fork")
total = sum(float(s.sum()) for s, _ in loader)
print("total", total)
torch.ops.mytorch.mm(big, big)  # and the parent's pool still works
print("parent ok")
"""


def test_openmp_in_forked_dataloader_workers_does_not_deadlock():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "python")]), OMP_NUM_THREADS="2")
    r = subprocess.run([sys.executable, "-c", FORK_SCRIPT], env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    expected = sum(96 * 96 * i for i in range(8))
    assert r.stdout.split() == ["total", f"{float(expected)}", "parent", "ok"], r.stdout
