"""A full training step (CNN and transformer) runs only mytorch kernels: under a
TorchDispatchMode, every op seen is a mytorch:: kernel or a buffer op (allocation, copy, view)."""
import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import mytorch
import mytorch.functional as F
import mytorch.nn as nn

# torch ops that only allocate, fill a new buffer, copy, or view: no arithmetic
BUFFER_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "zero_", "ones", "ones_like", "full", "full_like", "fill_", "new_zeros", "scalar_tensor",
    "copy_", "_to_copy", "to", "clone", "contiguous", "lift_fresh", "lift_fresh_copy", "detach",
    "alias", "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "expand",
    "permute", "transpose", "t", "slice", "select", "narrow", "unsqueeze", "squeeze", "unfold",
    "split", "split_with_sizes", "unbind", "chunk", "_local_scalar_dense",
}


class Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.add((func.namespace, func._opname))
        return func(*args, **(kwargs or {}))


def non_kernel_ops(seen, device):
    allowed = set(BUFFER_OPS)
    if device == "cuda":
        allowed |= {"mm", "bmm", "addmm"}  # cuBLAS GEMM
    return sorted(f"{ns}::{name}" for ns, name in seen
                  if ns != "mytorch" and not (ns == "aten" and name in allowed))


def run_step(model, make_batch, opt, sched=None):
    rec = Recorder()
    x, y = make_batch()
    with rec:
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        mytorch.optim.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if sched is not None:
            sched.step()
    assert np.isfinite(loss.item())
    return rec.seen


def test_cnn_training_step_uses_only_mytorch_kernels():
    mytorch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(),
                          nn.AvgPool2d(2), nn.Flatten(), nn.Dropout(0.1), nn.Linear(8 * 2 * 2, 10))
    opt = mytorch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    seen = run_step(model, lambda: (mytorch.randn(4, 1, 8, 8), mytorch.randint(0, 10, (4,))), opt)
    assert non_kernel_ops(seen, "cpu") == []
    kernels = {name for ns, name in seen if ns == "mytorch"}
    assert {"conv2d", "conv2d_backward", "batch_norm", "fused_cross_entropy", "sgd_step_"} <= kernels


def test_transformer_training_step_uses_only_mytorch_kernels():
    mytorch.manual_seed(0)

    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(11, 16), nn.Embedding(8, 16)
            self.blocks = nn.ModuleList([nn.TransformerBlock(16, 2, causal=True)])
            self.ln, self.head = nn.RMSNorm(16), nn.Linear(16, 11)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(mytorch.arange(idx.shape[1]))
            for b in self.blocks:
                x = b(x)
            return self.head(F.silu(self.ln(x)))

    model = TinyGPT()
    opt = mytorch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = mytorch.optim.CosineWithWarmup(opt, 2, 10)
    seen = run_step(model, lambda: (mytorch.randint(0, 11, (2, 8)), mytorch.randint(0, 11, (2, 8))),
                    opt, sched)
    assert non_kernel_ops(seen, "cpu") == []
    kernels = {name for ns, name in seen if ns == "mytorch"}
    assert {"flash_attn", "flash_attn_backward", "layer_norm", "embedding", "adam_step_"} <= kernels


def test_recorder_catches_aten_math():
    rec = Recorder()
    with rec:
        torch.ones(3) + torch.ones(3)
    assert non_kernel_ops(rec.seen, "cpu") == ["aten::add"]
