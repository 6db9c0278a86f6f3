"""Train a LeNet-style CNN on scikit-learn's 8x8 digits, on the `mytorch` device.

    PYTHONPATH=.:python python examples/device_digits_cnn.py [--epochs 15] [--device mytorch]

Every op of the model, the loss and the optimizer runs on mytorch's kernels; the
script prints the CPU-fallback counts at the end (empty when nothing fell back).
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import mytorch_ext


def lenet_digits() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),  # 16x4x4
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),  # 32x2x2
        nn.Flatten(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))


def load_digits(seed: int = 0):
    """(x_train, y_train, x_test, y_test): 80/20 split, pixels scaled to [0, 1]."""
    from sklearn.datasets import load_digits as sk_digits

    d = sk_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(d.target, dtype=torch.int64)
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_test = len(y) // 5
    test, train = perm[:n_test], perm[n_test:]
    return x[train], y[train], x[test], y[test]


def train_digits(device: str = "mytorch", epochs: int = 15, batch: int = 32, seed: int = 0,
                 log=None) -> float:
    """Trains on the digits training split; returns the test accuracy."""
    torch.manual_seed(seed)
    xtr, ytr, xte, yte = load_digits(seed)
    xtr, ytr, xte, yte = (t.to(device) for t in (xtr, ytr, xte, yte))
    model = lenet_digits().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        model.train()
        perm = torch.randperm(len(ytr), generator=g).to(device)
        total = 0.0
        for i in range(0, len(ytr), batch):
            idx = perm[i:i + batch]
            if len(idx) < 2:  # batch norm needs two samples
                continue
            opt.zero_grad()
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        if log:
            log(f"epoch {epoch + 1:2d}: train loss {total / len(ytr):.4f}")
    model.eval()
    with torch.no_grad():
        pred = model(xte).argmax(1)
    return (pred == yte).float().mean().item()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--device", default="mytorch")
    p.add_argument("--out", metavar="DIR", default=None, help="accepted by every example; this one writes no files")
    args = p.parse_args()
    t0 = time.perf_counter()
    acc = train_digits(args.device, args.epochs, log=print)
    print(f"test accuracy on {args.device}: {acc:.4f}  ({time.perf_counter() - t0:.1f} s)")
    if args.device.startswith("mytorch"):
        print("CPU fallbacks:", mytorch_ext.fallback_counts())


if __name__ == "__main__":
    main()
