"""Train a small CNN on scikit-learn's 8x8 digits with standalone mytorch (CPU).

    PYTHONPATH=.:python python examples/standalone_digits_cnn.py
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _standalone_common import digits_main, fit_digits  # noqa: E402

import mytorch.nn as nn  # noqa: E402


def make_model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),  # 4x4
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),  # 2x2
        nn.Flatten(), nn.Linear(64 * 2 * 2, 10))


def train(epochs: int = 20, **options) -> dict:
    """Train the CNN; options: those of fit_digits (batch_size, lr, seed, quiet, plot, out)."""
    return fit_digits(make_model, image=True, name="digits CNN", epochs=epochs, **options)


if __name__ == "__main__":
    digits_main(__doc__, train, "digits CNN", epochs=20)
