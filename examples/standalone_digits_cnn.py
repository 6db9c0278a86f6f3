"""Train a small CNN on scikit-learn's 8x8 digits with standalone mytorch (CPU).

    PYTHONPATH=.:python python examples/standalone_digits_cnn.py
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _standalone_common import OUT, digits, plot_losses, progress  # noqa: E402

import mytorch  # noqa: E402
import mytorch.functional as F  # noqa: E402
import mytorch.nn as nn  # noqa: E402
from mytorch.data import DataLoader, TensorDataset  # noqa: E402


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),  # 4x4
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),  # 2x2
        nn.Flatten(), nn.Linear(64 * 2 * 2, 10))


def evaluate(model, x, y) -> float:
    model.eval()
    with mytorch.no_grad():
        pred = model(mytorch.tensor(x)).argmax(dim=1).numpy()
    model.train()
    return float((pred == y).mean())


def train(epochs: int = 20, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
          quiet: bool = False, plot: bool = True) -> dict:
    mytorch.manual_seed(seed)
    xtr, xte, ytr, yte = digits(image=True, seed=seed)
    model = make_model()
    opt = mytorch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size, shuffle=True, seed=seed)
    sched = mytorch.optim.CosineWithWarmup(opt, warmup_steps=20, total_steps=epochs * len(loader))
    losses, t0 = [], time.perf_counter()
    bar = progress(epochs * len(loader), "digits CNN", quiet)
    for _ in range(epochs):
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
            bar.update()
    bar.close()
    seconds = time.perf_counter() - t0
    acc = evaluate(model, xte, yte)
    png = plot_losses(losses, os.path.join(OUT, "standalone_digits_cnn.png"),
                      f"digits CNN: test accuracy {acc:.1%}") if plot else None
    return {"accuracy": acc, "seconds": seconds, "losses": losses, "plot": png}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    args = ap.parse_args()
    r = train(args.epochs)
    print(f"digits CNN: test accuracy {r['accuracy']:.2%} after {args.epochs} epochs, "
          f"{r['seconds']:.1f} s of training; loss curve: {r['plot']}")


if __name__ == "__main__":
    main()
