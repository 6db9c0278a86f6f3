"""Train a small CNN on scikit-learn's 8x8 digits with standalone mytorch (CPU).

    PYTHONPATH=.:python python examples/standalone_digits_cnn.py
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _standalone_common import add_out_argument, fit_digits  # noqa: E402

import mytorch.nn as nn  # noqa: E402


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),  # 4x4
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),  # 2x2
        nn.Flatten(), nn.Linear(64 * 2 * 2, 10))


def train(epochs: int = 20, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
          quiet: bool = False, plot: bool = True, out: str | None = None) -> dict:
    return fit_digits(make_model, image=True, name="digits CNN", epochs=epochs, batch_size=batch_size, lr=lr,
                      seed=seed, quiet=quiet, plot=plot, out=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=20)
    add_out_argument(ap, "the loss-curve PNG")
    args = ap.parse_args()
    r = train(args.epochs, out=args.out)
    print(f"digits CNN: test accuracy {r['accuracy']:.2%} after {args.epochs} epochs, "
          f"{r['seconds']:.1f} s of training; loss curve: {r['plot']}")


if __name__ == "__main__":
    main()
