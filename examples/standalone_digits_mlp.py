"""Train an MLP on scikit-learn's 8x8 digits with standalone mytorch (CPU, a few seconds).

    PYTHONPATH=.:python python examples/standalone_digits_mlp.py
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _standalone_common import digits_main, fit_digits  # noqa: E402

import mytorch.nn as nn  # noqa: E402


def make_model():
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def train(epochs: int = 40, **options) -> dict:
    """Train the MLP; options: those of fit_digits (batch_size, lr, seed, quiet, plot, out)."""
    return fit_digits(make_model, image=False, name="digits MLP", epochs=epochs, **options)


if __name__ == "__main__":
    digits_main(__doc__, train, "digits MLP", epochs=40)
