"""model: an end-to-end training step of a Hugging Face LlamaForCausalLM (built from a config:
random weights, random tokens, no downloads), stock vs mytorch.

- CUDA: bf16, a real size; stock eager (SDPA) vs mytorch_ext.patch() + apply_to(model),
  and torch.compile of the stock model in full runs; step time, tokens/s, peak memory.
- CPU: fp32, a small model; stock eager vs patch() + apply_to(model).
- mytorch device: the stock model on the mytorch device vs the same model on the CPU.
Every set-up starts from the same weights and data; its first loss is checked against the
stock one before its time counts. Times are medians over steps after warm-up.
"""
from __future__ import annotations

import contextlib
import importlib.util
import statistics
import time

import torch

from .common import Table, device_skip_reason, fallback_note, sync

# (layers, hidden, intermediate, heads, vocab, seq, batch, warm-up steps, timed steps)
SIZES = {
    "cuda": {"smoke": (1, 256, 768, 4, 4096, 512, 1, 1, 2), "quick": (4, 1024, 2816, 8, 32000, 4096, 4, 2, 5),
             "full": (16, 1024, 2816, 8, 32000, 8192, 2, 4, 8)},
    "cpu": {"smoke": (1, 64, 128, 2, 128, 32, 1, 0, 1), "quick": (2, 256, 704, 4, 2048, 256, 2, 1, 3),
            "full": (4, 512, 1408, 8, 8192, 512, 2, 2, 8)},
}


def skip_reason(device: str) -> str | None:
    if importlib.util.find_spec("transformers") is None:
        return "transformers is not installed (pip install transformers)"
    return device_skip_reason(device)


def _build(size, device, dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    layers, hidden, inter, heads, vocab, seq = size[:6]
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                      max_position_embeddings=seq, attn_implementation="sdpa")
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).to(device=device, dtype=dtype)


def _run_setup(name, size, device, dtype, data, progress_bar):
    import mytorch_ext

    model = _build(size, device, dtype)
    ctx, handle = contextlib.nullcontext(), None
    if name == "mytorch":
        ctx = mytorch_ext.patched()
        handle = mytorch_ext.apply_to(model)
    step_model = torch.compile(model) if name == "compile" else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if device == "cuda" else {}))
    losses, times = [], []
    before = dict(mytorch_ext.fallback_counts())
    with ctx:
        mytorch_ext.patch_stats(reset=True)
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        for ids in data:
            t0 = time.perf_counter()
            loss = step_model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sync(device)
            times.append(time.perf_counter() - t0)
            losses.append(loss.item())
            progress_bar.step(name)
        stats = mytorch_ext.patch_stats()
    if handle is not None:
        handle.revert()
    if name == "mytorch" and not any(c["mytorch"] for c in stats.values()):
        raise RuntimeError(f"model: patch() + apply_to ran no mytorch kernel on {device} ({stats})")
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None
    del model, step_model, opt
    if device == "cuda":
        torch.cuda.empty_cache()
    torch._dynamo.reset()
    warmup = size[7]
    return dict(step_ms=statistics.median(times[warmup:]) * 1e3, loss0=losses[0], peak=peak,
                fallbacks=fallback_note(before) if device == "mytorch" else "")


def run(device: str, mode: str, progress) -> list[Table]:
    size = SIZES["cuda" if device == "cuda" else "cpu"][mode]
    layers, hidden, _, heads, vocab, seq, batch, warmup, steps = size
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    if device == "mytorch":
        setups = [("mytorch_device", "mytorch"), ("cpu", "cpu")]  # (impl, where it runs)
    else:
        setups = [("mytorch", device), ("eager", device)] + ([("compile", device)]
                                                             if device == "cuda" and mode == "full" else [])
    g = torch.Generator().manual_seed(1)
    data = [torch.randint(0, vocab, (batch, seq), generator=g) for _ in range(warmup + steps)]
    bar = progress(len(setups) * len(data), f"model ({device})")
    results = {}
    for impl, where in setups:
        name = impl if impl in ("mytorch", "compile") else "eager"
        results[impl] = _run_setup(name, size, where, dtype, [d.to(where) for d in data], bar)
    bar.close()
    stock = results[setups[-1][0] if device == "mytorch" else "eager"]
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-3
    for impl, r in results.items():
        if abs(r["loss0"] - stock["loss0"]) > tol * abs(stock["loss0"]):
            raise RuntimeError(f"model: {impl}'s first loss {r['loss0']:.5f} differs from stock "
                               f"{stock['loss0']:.5f}")
    impls = [impl for impl, _ in setups]
    with torch.device("meta"):
        n_params = sum(p.numel() for p in _build(size, "meta", dtype).parameters())
    label = f"Llama {n_params / 1e6:.1f}M, {layers} layers, d{hidden}, seq {seq}, batch {batch}"
    label += "".join(r["fallbacks"] for r in results.values())
    what = {"cuda": "bf16, AdamW, patch()+apply_to vs stock",
            "cpu": "fp32, AdamW, patch()+apply_to vs stock",
            "mytorch": "fp32, AdamW, stock model on the mytorch device vs on the CPU"}[device]
    step = Table(f"Llama training step on {device}, {what}", "ms", "median step time", impls,
                 higher_is_better=False)
    step.add(label, {k: r["step_ms"] for k, r in results.items()})
    tput = Table(f"Llama training throughput on {device}, {what}", "tokens/s",
                 "batch*seq / median step time", impls)
    tput.add(label, {k: batch * seq / (r["step_ms"] * 1e-3) for k, r in results.items()})
    tables = [step, tput]
    if device == "cuda":
        mem = Table(f"Llama training peak memory on {device}, {what}", "GiB",
                    "torch.cuda.max_memory_allocated", impls, higher_is_better=False)
        mem.add(label, {k: r["peak"] for k, r in results.items()})
        tables.append(mem)
    return tables
