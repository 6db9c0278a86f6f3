"""End-to-end training step of a Llama-style model: stock PyTorch vs mytorch kernels.

    python -m mytorch_ext.bench.model_train --issue-models        # the four reference models
    python -m mytorch_ext.bench.model_train [--layers 16 --hidden 1024 --seq 8192 --batch 2]

Trains a Hugging Face LlamaForCausalLM built from a config (random weights, random tokens, no
downloads), AdamW (fused on CUDA), bf16 on CUDA and fp32 on the CPU, in these set-ups:
- eager:           attn_implementation="sdpa" (PyTorch's flash / cuDNN SDPA), no compile;
- compile:         the same model under torch.compile;
- mytorch:         mytorch_ext.patch() + mytorch_ext.apply_to(model), eager;
- mytorch+compile: the same under torch.compile;
- variants (VARIANTS, with or without +compile): mytorch-flash (attention always on mytorch's
  flash_attn), mytorch-ce (the fused linear cross-entropy alone);
- liger:           Liger-Kernel's apply_liger_kernel_to_llama() (when liger_kernel is installed).
Each set-up runs in a process of its own (Liger patches transformers' classes for good), from
the same weights and data; the first loss of each is checked against eager's. A step is
forward, backward, optimizer step and zero_grad, timed from the host with the device
synchronised at both ends; the median, min and max are over the steps after the warm-up.
This module is the one timing path: `python -m mytorch_ext bench model` calls it too.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import torch

SETUPS = ("eager", "compile", "mytorch", "mytorch+compile", "liger")
# Which mytorch parts a set-up uses: patch()'s op names (None: all), apply_to's arguments
# and the attention backend (mytorch_ext.set_attention_backend). "mytorch" is the default
# use; "mytorch-flash" runs every attention call on mytorch's flash_attn; "mytorch-ce" only
# swaps the loss for the fused linear cross-entropy (under torch.compile, Inductor then
# fuses the norms and activations itself).
VARIANTS = {
    "mytorch": (None, {}, "auto"),
    "mytorch-flash": (None, {}, "mytorch"),
    "mytorch-ce": ((), dict(norms=False, activations=False, rope=False, attention=False), "auto"),
}


def _variant(name: str):
    """(patch names, apply_to kwargs) of a mytorch set-up name (with or without +compile)."""
    return VARIANTS.get(name.removesuffix("+compile"))


def _valid(name: str) -> bool:
    return name in SETUPS or _variant(name) is not None
_RESULT = "MODEL_TRAIN_RESULT "  # prefix of the line a worker process prints its result on


@dataclasses.dataclass(frozen=True)
class Spec:
    """A Llama model and its batch. intermediate 0: 8/3 of hidden rounded up to 256."""

    layers: int
    hidden: int
    heads: int
    seq: int
    batch: int
    vocab: int = 32000
    intermediate: int = 0
    kv_heads: int = 0

    @property
    def ffn(self) -> int:
        return self.intermediate or int(self.hidden * 8 / 3 // 256 + 1) * 256

    def config(self):
        from transformers import LlamaConfig

        return LlamaConfig(vocab_size=self.vocab, hidden_size=self.hidden, intermediate_size=self.ffn,
                           num_hidden_layers=self.layers, num_attention_heads=self.heads,
                           num_key_value_heads=self.kv_heads or self.heads,
                           max_position_embeddings=self.seq, attn_implementation="sdpa")

    def label(self) -> str:
        return f"{self.layers} layers, d{self.hidden}, seq {self.seq}, batch {self.batch}"

    def params(self) -> int:
        from transformers import LlamaForCausalLM

        with torch.device("meta"):
            return sum(p.numel() for p in LlamaForCausalLM(self.config()).parameters())


# The models of the host-path comparison (12-layer d768 is GPT-2-small / Llama-style size).
ISSUE_MODELS = (Spec(12, 768, 12, 1024, 8), Spec(4, 768, 12, 1024, 1),
                Spec(16, 1024, 8, 8192, 2), Spec(12, 768, 12, 2048, 4))


def liger_missing() -> str | None:
    """Why the Liger-Kernel set-up cannot run, or None."""
    if importlib.util.find_spec("liger_kernel") is None:
        return "liger_kernel is not installed (pip install liger-kernel)"
    return None


def build_model(spec: Spec, device, dtype, seed: int = 0):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(spec.config()).to(device=device, dtype=dtype)


def batches(spec: Spec, n: int, device):
    """n batches of random token ids, the same in every process."""
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, spec.vocab, (spec.batch, spec.seq), generator=g).to(device) for _ in range(n)]


def _sync(device) -> None:
    from .common import sync

    sync(str(device))


def time_setup(name: str, spec: Spec, device: str, dtype, warmup: int, steps: int) -> dict:
    """Train `steps` steps (the first `warmup` untimed) of one set-up in this process."""
    import mytorch_ext

    if not _valid(name):
        raise ValueError(f"model_train: unknown set-up {name!r}; valid: {', '.join(SETUPS)}, or one of "
                         f"{', '.join(VARIANTS)} with or without +compile")
    if name == "liger":
        reason = liger_missing()
        if reason:
            raise RuntimeError(f"model_train: liger: {reason}")
        from liger_kernel.transformers import apply_liger_kernel_to_llama

        apply_liger_kernel_to_llama()  # patches modeling_llama's classes: before the model is built
    data = batches(spec, warmup + steps, device)
    model = build_model(spec, device, dtype)
    ctx, handle, stats = contextlib.nullcontext(), None, {}
    if name.startswith("mytorch"):
        ops, kwargs, backend = _variant(name)
        mytorch_ext.set_attention_backend(backend)
        ctx = mytorch_ext.patched(ops) if ops != () else contextlib.nullcontext()
        handle = mytorch_ext.apply_to(model, **kwargs)
    before = dict(mytorch_ext.fallback_counts()) if device.startswith("mytorch") else {}
    step_model = torch.compile(model) if name.endswith("compile") else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if device == "cuda" else {}))
    losses, times = [], []
    with ctx:
        if handle is not None:  # patch_stats counts eager calls: one eager forward shows the routes
            mytorch_ext.patch_stats(reset=True)
            with torch.no_grad():
                model(input_ids=data[0], labels=data[0])
            stats = mytorch_ext.patch_stats(reset=True)
            if not any(c["mytorch"] for c in stats.values()):
                raise RuntimeError(f"model_train: {name} ran no mytorch kernel on {device} ({stats})")
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        for ids in data:
            _sync(device)
            t0 = time.perf_counter()
            loss = step_model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            _sync(device)
            times.append(time.perf_counter() - t0)
            losses.append(loss.item())
    if handle is not None:
        handle.revert()
    timed = times[warmup:] or times
    from .common import fallback_note

    return dict(setup=name, step_ms=statistics.median(timed) * 1e3, min_ms=min(timed) * 1e3,
                max_ms=max(timed) * 1e3, tok_s=spec.batch * spec.seq / statistics.median(timed),
                peak_gib=torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None,
                loss0=losses[0], stats=stats,
                fallbacks=fallback_note(before) if device.startswith("mytorch") else "")


def run_setup_process(name: str, spec: Spec, device: str, dtype, warmup: int, steps: int,
                      timeout: float = 3600.0) -> dict:
    """time_setup in a fresh Python process (this interpreter, this environment)."""
    job = dict(setup=name, spec=dataclasses.asdict(spec), device=device,
               dtype=str(dtype).removeprefix("torch."), warmup=warmup, steps=steps)
    # torch first: with torch's device-backend autoload, torch is what loads mytorch_ext
    code = "import sys, torch; from mytorch_ext.bench.model_train import main; main(sys.argv[1:])"
    cmd = [sys.executable, "-c", code, "--worker", json.dumps(job)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=os.environ.copy())
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"model_train: set-up {name} ({spec.label()}) ran past {timeout:.0f}s") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_RESULT):
            return json.loads(line[len(_RESULT):])
    err = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    raise RuntimeError(f"model_train: set-up {name} ({spec.label()}) failed (exit code "
                       f"{proc.returncode}): {err[-1] if err else 'no output'}")


def _worker(job_json: str) -> None:
    job = json.loads(job_json)
    import mytorch_ext

    if job["device"].startswith("mytorch") and not hasattr(torch, "mytorch"):
        mytorch_ext.register_device()  # not registered at import where a GPU is present
    from .common import steady_host_memory

    steady_host_memory()
    r = time_setup(job["setup"], Spec(**job["spec"]), job["device"], getattr(torch, job["dtype"]),
                   job["warmup"], job["steps"])
    print(_RESULT + json.dumps(r), flush=True)


def check_losses(results: dict, reference: str, dtype) -> None:
    """Every set-up's first loss against the reference's (same weights, same data)."""
    tol = 2e-2 if dtype in (torch.bfloat16, torch.float16) else 1e-3
    ref = results[reference]["loss0"]
    for name, r in results.items():
        if abs(r["loss0"] - ref) > tol * abs(ref):
            raise RuntimeError(f"model_train: {name}'s first loss {r['loss0']:.5f} differs from "
                               f"{reference}'s {ref:.5f}")


def measure(spec: Spec, setups, device: str, dtype, warmup: int, steps: int, on_done=None) -> dict:
    """{setup: result} for one model, each set-up in its own process, losses cross-checked."""
    results = {}
    for name in setups:
        results[name] = run_setup_process(name, spec, device, dtype, warmup, steps)
        if on_done is not None:
            on_done(name)
    check_losses(results, setups[0], dtype)
    return results


# ---- the command line (profile_model builds its model through the same helpers) ----

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


def spec_of(args) -> Spec:
    return Spec(args.layers, args.hidden, args.heads, args.seq, args.batch, args.vocab,
                args.intermediate, args.kv_heads)


def build(args, seed=0):
    """The model of add_model_args' arguments, bf16 on the current CUDA device."""
    return build_model(spec_of(args), "cuda", torch.bfloat16, seed)


def token_batches(args):
    """args.steps batches of random token ids on CUDA, the same in every run."""
    return batches(spec_of(args), args.steps, "cuda")


def markdown(spec: Spec, results: dict) -> str:
    """One model's results as a Markdown table, with ratios to eager and to compile."""
    base, comp = results.get("eager"), results.get("compile")
    lines = ["| setup | step ms (min..max) | tokens/s | vs eager | vs compile | peak GiB |",
             "|---|---|---|---|---|---|"]
    for name, r in results.items():
        vs = [f"{ref['step_ms'] / r['step_ms']:.2f}x" if ref else "-" for ref in (base, comp)]
        peak = f"{r['peak_gib']:.2f}" if r["peak_gib"] is not None else "-"
        lines.append(f"| {name} | {r['step_ms']:.1f} ({r['min_ms']:.1f}..{r['max_ms']:.1f}) | "
                     f"{r['tok_s']:.0f} | {vs[0]} | {vs[1]} | {peak} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m mytorch_ext.bench.model_train",
                                description=__doc__.splitlines()[0])
    add_model_args(p)
    p.add_argument("--issue-models", action="store_true",
                   help="the four reference models instead of the one of --layers ... --batch")
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--setups", default=",".join(SETUPS), help=f"any of {', '.join(SETUPS)}")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None)
    p.add_argument("--worker", help=argparse.SUPPRESS)  # one set-up, in a process of its own
    args = p.parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    setups = [s for s in args.setups.split(",") if s]
    bad = [s for s in setups if not _valid(s)]
    if bad:
        p.error(f"--setups takes {', '.join(SETUPS)} (or a mytorch variant: {', '.join(VARIANTS)}, "
                f"with or without +compile), got {','.join(bad)}")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("model_train: --device cuda needs a CUDA GPU")
    if "liger" in setups and (liger_missing() or device != "cuda"):
        print(f"liger left out: {liger_missing() or 'Liger-Kernel runs on CUDA only'}")
        setups.remove("liger")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    specs = ISSUE_MODELS if args.issue_models else (spec_of(args),)
    where = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"{where}, torch {torch.__version__}, {str(dtype).removeprefix('torch.')}, AdamW, "
          f"{args.steps} steps after {args.warmup} warm-up, each set-up in its own process")
    for spec in specs:
        results = measure(spec, setups, device, dtype, args.warmup, args.steps)
        print(f"\nLlama {spec.params() / 1e6:.0f}M, {spec.label()}")
        print(markdown(spec, results), flush=True)


if __name__ == "__main__":
    main()
