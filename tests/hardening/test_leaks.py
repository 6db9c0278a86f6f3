"""Device memory returns to where it started: after a training loop, and after ops that
raise part-way (input checks, indices out of range inside a kernel, out of memory)."""
import gc
import time

import pytest
import torch
import torch.nn as nn

from strategies import DEVICE, has_device

pytestmark = pytest.mark.skipif(not has_device(), reason="the mytorch device is not registered")


def allocated():
    gc.collect()
    return torch.mytorch.memory_allocated()


def train(steps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Dropout(0.1),
                          nn.Linear(32, 5)).to(DEVICE)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(8, 16, device=DEVICE)
    y = torch.randint(0, 5, (8,), device=DEVICE)
    per_step = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        del loss
        per_step.append(allocated())
    return per_step


def test_training_loop_returns_memory():
    start = allocated()
    per_step = train(6)
    # After the optimizer state exists (step 1), every step ends with the same bytes held.
    assert len(set(per_step[1:])) == 1, f"memory grew during training: {per_step}"
    assert per_step[0] > start
    assert allocated() == start, f"{allocated() - start} bytes still held after the loop"


def _raises_mid_op():
    """Calls that fail after their inputs (and in some, outputs) were allocated."""
    x = torch.randn(64, 32, device=DEVICE)
    cases = [
        lambda: x @ torch.randn(31, 8, device=DEVICE),                       # shape check
        lambda: torch.index_select(x, 0, torch.tensor([0, 64], device=DEVICE)),  # index in the kernel
        lambda: torch.gather(x, 1, torch.full((64, 4), 99, device=DEVICE)),
        lambda: torch.nn.functional.embedding(torch.tensor([3, 70], device=DEVICE), x),
        lambda: torch.cat([x, torch.randn(3, 5, device=DEVICE)]),
        lambda: torch.ops.mytorch.layer_norm(x, [31]),
        lambda: torch.ops.mytorch.cross_entropy(x, torch.tensor([40] * 64, device=DEVICE)),
        lambda: torch.ops.mytorch.mm(x, torch.randn(32, 8, dtype=torch.float64, device=DEVICE)),
    ]
    for fn in cases:
        with pytest.raises((RuntimeError, IndexError, ValueError)):
            fn()


def test_exceptions_mid_op_return_memory():
    start = allocated()
    for _ in range(3):
        _raises_mid_op()
    assert allocated() == start, f"{allocated() - start} bytes still held after failed ops"


def test_out_of_memory_mid_op_returns_memory():
    x = torch.randn(256, 256, device=DEVICE)
    start = allocated()
    torch.mytorch.set_memory_limit(start + (64 << 10))
    try:
        for fn in (lambda: x @ x, lambda: torch.softmax(x, -1), lambda: x.unsqueeze(0) + x.unsqueeze(1)):
            with pytest.raises(torch.OutOfMemoryError):
                fn()
    finally:
        torch.mytorch.set_memory_limit(0)
    assert allocated() == start, f"{allocated() - start} bytes still held after out-of-memory errors"


def test_backward_raising_returns_memory():
    start = allocated()
    for _ in range(3):
        x = torch.randn(16, 16, device=DEVICE, requires_grad=True)
        y = torch.ops.mytorch.prod(x, [1])  # its backward raises: no gradient formula yet
        with pytest.raises(NotImplementedError, match="mytorch::prod"):
            y.sum().backward()
        del x, y
    # the backward runs on the autograd engine's thread for the device, which drops its graph
    # after the error has reached this thread: wait for it (briefly) before counting
    deadline = time.monotonic() + 5.0
    while allocated() != start and time.monotonic() < deadline:
        time.sleep(0.01)
    assert allocated() == start, f"{allocated() - start} bytes still held after a failed backward"
