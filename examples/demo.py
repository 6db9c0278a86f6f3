"""`make demo`: a short showcase of mytorch on whatever hardware is present.

1. what was built; 2. the standalone framework trains a CNN on the digits dataset;
3. a Hugging Face Llama built from a config runs with mytorch attention, compared with stock;
4. the quick side-by-side speed tables.
"""
from __future__ import annotations

import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import mytorch_ext  # noqa: E402


def section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def show_build() -> None:
    section("build")
    info = mytorch_ext.build_info()
    for key in ("version", "torch", "cuda", "cuda_archs", "cpu_flags", "omp_max_threads", "triton", "cpu"):
        print(f"  {key:>16}: {info.get(key)}")
    print(f"  {'gpu':>16}: {info.get('gpu', 'none')}")


def train_digits_cnn() -> None:
    section("standalone mytorch: CNN on scikit-learn digits")
    import standalone_digits_cnn

    epochs = 8
    result = standalone_digits_cnn.train(epochs=epochs, plot=False)
    print(f"  test accuracy {result['accuracy'] * 100:.1f}% in {result['seconds']:.1f}s ({epochs} epochs)")


def llama_with_mytorch_attention() -> None:
    section("Hugging Face Llama (from a config) with mytorch attention")
    from mytorch_ext.patching.hf import compare_llama_logits

    for line in compare_llama_logits():
        print("  " + line)


def quick_tables() -> None:
    section("quick speed comparisons")
    from mytorch_ext.bench.cli import main as bench_main

    device = "cuda" if torch.cuda.is_available() else "cpu"
    bench_main(["--quick", "--device", device, "--out", os.path.join(HERE, "out", "bench")])


def main() -> None:
    show_build()
    train_digits_cnn()
    llama_with_mytorch_attention()
    quick_tables()


if __name__ == "__main__":
    main()
