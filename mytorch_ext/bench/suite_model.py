"""model: an end-to-end training step of a Hugging Face LlamaForCausalLM (built from a config:
random weights, random tokens, no downloads) in every set-up of model_train, which times it:
eager, torch.compile, mytorch (patch() + apply_to), mytorch + torch.compile, and Liger-Kernel
where liger_kernel is installed (CUDA). Each set-up runs in a process of its own.

- CUDA: bf16; full runs the four reference models (12 layers d768 seq 1024 batch 8; 4 layers
  d768 seq 1024 batch 1; 16 layers d1024 seq 8192 batch 2; 12 layers d768 seq 2048 batch 4),
  quick the first two, smoke a 1-layer model.
- CPU: fp32, small models.
- mytorch device: the stock model on the mytorch device vs the same model on the CPU.
Every set-up starts from the same weights and data; its first loss is checked against
eager's before its time counts. Step times are medians over the steps after the warm-up, shown
with their min..max.
"""
from __future__ import annotations

import importlib.util

import torch

from .common import SpreadTable, Table, device_skip_reason
from .model_train import ISSUE_MODELS, Spec, liger_missing, measure

# (models, warm-up steps, timed steps) per device kind and mode
SIZES = {
    "cuda": {"smoke": ([Spec(1, 256, 4, 512, 1, vocab=4096, intermediate=768)], 1, 2),
             "quick": (list(ISSUE_MODELS[:2]), 3, 6),
             "full": (list(ISSUE_MODELS), 4, 10)},
    "cpu": {"smoke": ([Spec(1, 64, 2, 32, 1, vocab=128, intermediate=128)], 1, 2),
            "quick": ([Spec(2, 256, 4, 256, 2, vocab=2048, intermediate=704)], 2, 3),
            "full": ([Spec(4, 512, 8, 512, 2, vocab=8192, intermediate=1408)], 2, 6)},
}


def skip_reason(device: str) -> str | None:
    if importlib.util.find_spec("transformers") is None:
        return "transformers is not installed (pip install transformers)"
    return device_skip_reason(device)


class StepTable(SpreadTable):
    """Step times shown as median (min..max); the ratio columns as in every Table."""

    digits = 1
    ratio_width = 18


def run(device: str, mode: str, progress) -> list[Table]:
    specs, warmup, steps = SIZES["cuda" if device == "cuda" else "cpu"][mode]
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    if device == "mytorch":
        return _device_tables(specs, warmup, steps, progress)
    setups = ["eager", "compile", "mytorch", "mytorch+compile"]
    if device == "cuda" and liger_missing() is None:
        setups.append("liger")
    else:
        print(f"[model] no Liger-Kernel column: "
              f"{liger_missing() if device == 'cuda' else 'Liger-Kernel runs on CUDA only'}")
    order = ["mytorch", "eager", "compile", "mytorch+compile"] + setups[4:]
    what = f"{'bf16' if device == 'cuda' else 'fp32'}, AdamW, each set-up in its own process"
    where = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    step = StepTable(f"Llama training step on {where}, {what}", "ms", "median step time (min..max)",
                     order, higher_is_better=False)
    step.spread = {}
    compiled = Table(f"Llama training step under torch.compile on {where}, {what}", "ms",
                     "median step time", ["mytorch+compile", "compile", "eager"], higher_is_better=False)
    tput = Table(f"Llama training throughput on {where}, {what}", "tokens/s",
                 "batch*seq / median step time", order)
    mem = Table(f"Llama training peak memory on {where}, {what}", "GiB",
                "torch.cuda.max_memory_allocated", order, higher_is_better=False)
    bar = progress(len(specs) * len(setups), f"model ({device})")
    for spec in specs:
        res = measure(spec, setups, device, dtype, warmup, steps, on_done=bar.step)
        label = f"Llama {spec.params() / 1e6:.1f}M, {spec.label()}"
        step.add(label, {k: res[k]["step_ms"] for k in order})
        step.spread[label] = {k: (res[k]["min_ms"], res[k]["max_ms"]) for k in order}
        compiled.add(label, {k: res[k]["step_ms"] for k in compiled.impls})
        tput.add(label, {k: res[k]["tok_s"] for k in order})
        if device == "cuda":
            mem.add(label, {k: res[k]["peak_gib"] for k in order})
    bar.close()
    return [step, compiled, tput] + ([mem] if device == "cuda" else [])


def _device_tables(specs, warmup, steps, progress) -> list[Table]:
    """The stock model on the mytorch device vs on the CPU (eager both)."""
    from .model_train import check_losses, run_setup_process

    what = "fp32, AdamW, stock model on the mytorch device vs on the CPU"
    impls = ["mytorch_device", "cpu"]
    step = StepTable(f"Llama training step on mytorch, {what}", "ms", "median step time (min..max)",
                     impls, higher_is_better=False)
    step.spread = {}
    tput = Table(f"Llama training throughput on mytorch, {what}", "tokens/s",
                 "batch*seq / median step time", impls)
    bar = progress(len(specs) * 2, "model (mytorch)")
    for spec in specs:
        res = {}
        for impl, where in (("cpu", "cpu"), ("mytorch_device", "mytorch")):
            res[impl] = run_setup_process("eager", spec, where, torch.float32, warmup, steps)
            bar.step(impl)
        check_losses(res, "cpu", torch.float32)
        label = f"Llama {spec.params() / 1e6:.1f}M, {spec.label()}{res['mytorch_device']['fallbacks']}"
        step.add(label, {k: res[k]["step_ms"] for k in impls})
        step.spread[label] = {k: (res[k]["min_ms"], res[k]["max_ms"]) for k in impls}
        tput.add(label, {k: res[k]["tok_s"] for k in impls})
    bar.close()
    return [step, tput]
