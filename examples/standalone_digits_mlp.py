"""Train an MLP on scikit-learn's 8x8 digits with standalone mytorch (CPU, a few seconds).

    PYTHONPATH=.:python python examples/standalone_digits_mlp.py
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _standalone_common import add_out_argument, fit_digits  # noqa: E402

import mytorch.nn as nn  # noqa: E402


def make_model():
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def train(epochs: int = 40, batch_size: int = 64, lr: float = 3e-3, seed: int = 0,
          quiet: bool = False, plot: bool = True, out: str | None = None) -> dict:
    return fit_digits(make_model, image=False, name="digits MLP", epochs=epochs, batch_size=batch_size, lr=lr,
                      seed=seed, quiet=quiet, plot=plot, out=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=40)
    add_out_argument(ap, "the loss-curve PNG")
    args = ap.parse_args()
    r = train(args.epochs, out=args.out)
    print(f"digits MLP: test accuracy {r['accuracy']:.2%} after {args.epochs} epochs, "
          f"{r['seconds']:.1f} s of training; loss curve: {r['plot']}")


if __name__ == "__main__":
    main()
