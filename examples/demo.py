"""`make demo`: a short showcase of mytorch on whatever hardware is present.

1. what was built; 2. the standalone framework trains a CNN on the digits dataset;
3. a Hugging Face Llama built from a config runs with mytorch attention, compared with stock;
4. the quick side-by-side speed tables.
"""
from __future__ import annotations

import argparse
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
    from transformers import LlamaConfig, LlamaForCausalLM

    mytorch_ext.register_hf()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    cfg = LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    torch.manual_seed(0)
    stock = LlamaForCausalLM(cfg).to(device, dtype).eval()
    cfg._attn_implementation = "mytorch"
    ours = LlamaForCausalLM(cfg).to(device, dtype).eval()
    ours.load_state_dict(stock.state_dict())
    ids = torch.randint(0, 256, (2, 48), device=device)
    mask = torch.ones_like(ids)
    mask[1, :10] = 0  # left padding on the second sequence
    before = mytorch_ext.patch_stats().get("hf_attention", {}).get("mytorch", 0)
    with torch.no_grad():
        a = stock(input_ids=ids, attention_mask=mask).logits
        b = ours(input_ids=ids, attention_mask=mask).logits
    calls = mytorch_ext.patch_stats().get("hf_attention", {}).get("mytorch", 0) - before
    keep = mask.bool()
    diff = (a - b)[keep].abs().max().item()
    print(f"  LlamaForCausalLM (2 layers, GQA 4/2 heads, left padding) on {device}, {dtype}")
    print(f"  attn_implementation='mytorch': {calls} attention calls ran mytorch::flash_attn")
    print(f"  max |logits - stock eager logits| over real tokens: {diff:.2e}")


def quick_tables(out: str) -> None:
    section("quick speed comparisons")
    from mytorch_ext._bench import main as bench_main

    device = "cuda" if torch.cuda.is_available() else "cpu"
    bench_main(["--quick", "--device", device, "--out", os.path.join(out, "bench")])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0].strip("`"))
    ap.add_argument("--out", metavar="DIR", default="mytorch-out",
                    help="folder for the speed tables' JSON and PNG files; default: ./mytorch-out")
    args = ap.parse_args()
    show_build()
    train_digits_cnn()
    llama_with_mytorch_attention()
    quick_tables(args.out)


if __name__ == "__main__":
    main()
