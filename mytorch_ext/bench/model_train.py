"""End-to-end training throughput of a Llama-style model: stock PyTorch vs mytorch kernels.

    python -m mytorch_ext.bench.model_train [--layers 16 --hidden 1024 --seq 4096 --batch 2]

Trains a Hugging Face LlamaForCausalLM built from a config (random weights, random tokens),
bf16 parameters, AdamW, on one CUDA GPU, in these set-ups:
- eager:          attn_implementation="sdpa" (PyTorch's flash / cuDNN SDPA), no compile;
- compile:        the same model under torch.compile;
- mytorch:        mytorch_ext.patch() + mytorch_ext.apply_to(model) (eager);
- mytorch+compile: the same under torch.compile.
Each set-up starts from the same weights and data. Before timing, the first step's loss of
each set-up is checked against eager's. Prints tokens/s, step time and peak memory, with
ratios against eager.
"""
from __future__ import annotations

import argparse
import contextlib
import time

import torch


def build(args, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden,
                      intermediate_size=args.intermediate or int(args.hidden * 8 / 3 // 256 + 1) * 256,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads or args.heads,
                      max_position_embeddings=args.seq, attn_implementation="sdpa")
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16)


def run_setup(name, args, data):
    import mytorch_ext

    model = build(args)
    handle = None
    ctx = contextlib.nullcontext()
    if name.startswith("mytorch"):
        ctx = mytorch_ext.patched()
        handle = mytorch_ext.apply_to(model)
    step_model = torch.compile(model) if name.endswith("compile") else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    losses, times = [], []
    with ctx:
        mytorch_ext.patch_stats(reset=True)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        for i, ids in enumerate(data):
            t0 = time.perf_counter()
            loss = step_model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            losses.append(loss.item())
        stats = mytorch_ext.patch_stats()
    if handle is not None:
        handle.revert()
    peak = torch.cuda.max_memory_allocated() / 2**30
    del model, step_model, opt
    torch.cuda.empty_cache()
    torch._dynamo.reset()
    timed = sorted(times[args.warmup:])
    step = timed[len(timed) // 2]  # median
    return dict(name=name, step=step, tok_s=args.batch * args.seq / step, peak=peak,
                loss0=losses[0], stats=stats)


def add_model_args(p, layers=16, intermediate=0, seq=8192, steps=12):
    """The model-shape and data arguments `build` and the step loops read."""
    p.add_argument("--layers", type=int, default=layers)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--intermediate", type=int, default=intermediate)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=0)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seq", type=int, default=seq)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=steps)


def token_batches(args):
    """args.steps batches of random token ids, the same in every run."""
    g = torch.Generator(device="cuda").manual_seed(1)
    return [torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda", generator=g)
            for _ in range(args.steps)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(p)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--setups", default="eager,mytorch,compile,mytorch+compile")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("model_train: needs a CUDA GPU")
    import mytorch_ext  # noqa: F401

    data = token_batches(args)
    n_params = sum(p.numel() for p in build(args).parameters())
    torch.cuda.empty_cache()
    print(f"Llama {n_params / 1e6:.0f}M params: {args.layers} layers, hidden {args.hidden}, "
          f"heads {args.heads}, seq {args.seq}, batch {args.batch}, bf16, AdamW; "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = []
    for name in args.setups.split(","):
        r = run_setup(name, args, data)
        rows.append(r)
        print(f"  {name}: first loss {r['loss0']:.4f}, step {r['step'] * 1e3:.1f} ms, "
              f"{r['tok_s']:.0f} tokens/s, peak {r['peak']:.2f} GiB, kernels {r['stats']}", flush=True)
    base = rows[0]
    for r in rows[1:]:
        if abs(r["loss0"] - base["loss0"]) > 2e-2 * abs(base["loss0"]):
            raise SystemExit(f"model_train: {r['name']} first loss {r['loss0']} vs {base['loss0']}")
    print()
    print(f"| setup | step ms | tokens/s | vs {base['name']} | peak GiB | vs {base['name']} |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['step'] * 1e3:.1f} | {r['tok_s']:.0f} | "
              f"{r['tok_s'] / base['tok_s']:.2f}x | {r['peak']:.2f} | {r['peak'] / base['peak']:.2f}x |")


if __name__ == "__main__":
    main()
