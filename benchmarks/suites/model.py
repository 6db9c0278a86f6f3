"""model: an end-to-end training step of a Hugging Face LlamaForCausalLM (built from a config:
random weights, random tokens, no downloads) in each set-up: eager, torch.compile, mytorch
(patch() + apply_to), mytorch + torch.compile, and Liger-Kernel where liger_kernel is
installed (CUDA).

- CUDA: bf16; full runs the four reference models (12 layers d768 seq 1024 batch 8; 4 layers
  d768 seq 1024 batch 1; 16 layers d1024 seq 8192 batch 2; 12 layers d768 seq 2048 batch 4),
  quick the first two, smoke a 1-layer model.
- CPU: fp32, small models.
- mytorch device: the stock model on the mytorch device vs the same model on the CPU.

Each set-up runs in a process of its own (Liger patches transformers' classes for good), from
the same weights and data; its first loss is checked against eager's before its time counts.
A step is forward, backward, optimizer step (AdamW, fused on CUDA) and zero_grad, timed from
the host with the device synchronised at both ends; the median, min and max are over the
steps after the warm-up.

The module also runs on its own, for any model shape or set-up, or to profile one step:

    python -m benchmarks.suites.model --issue-models        # the four reference models
    python -m benchmarks.suites.model [--layers 16 --hidden 1024 --seq 8192 --batch 2]
        [--setups eager,mytorch,mytorch-flash,mytorch-ce+compile,...] [--rounds 3]
    python -m benchmarks.suites.model --profile [--layers 4 --seq 4096] [--setups eager,mytorch]

--rounds N runs the set-ups N times, reversing their order every other round, and ends with
each set-up's median and range over the rounds, and its ratio to compile within each round.
--profile runs a few steps per set-up (CUDA), then profiles one with torch.profiler and
prints the step's wall time, the GPU busy time and the kernels that took the most GPU time.
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

import torch

from ..common import SpreadTable, Table, device_skip_reason, fallback_note
from ..timing import sample_times, steady_host_memory, sync

SETUPS = ("eager", "compile", "mytorch", "mytorch+compile", "liger")
# Which mytorch parts a set-up uses: patch()'s op names (None: all), apply_to's arguments
# and the attention backend (mytorch_ext.set_attention_backend). "mytorch" is the default
# use; "mytorch-flash" runs every attention call on mytorch's flash_attn; "mytorch-ce" only
# swaps the loss for the fused linear cross-entropy (under torch.compile, Inductor then
# fuses the norms and activations itself); "mytorch-opaque" is "mytorch" with the norms,
# RoPE and activations kept as opaque calls under Inductor (MYTORCH_INDUCTOR_DECOMPOSE=0 in
# its process) instead of Inductor's fusion of their decompositions.
VARIANTS = {
    "mytorch": (None, {}, "auto"),
    "mytorch-flash": (None, {}, "mytorch"),
    "mytorch-ce": ((), dict(norms=False, activations=False, rope=False, attention=False), "auto"),
    "mytorch-opaque": (None, {}, "auto"),
}
_VARIANT_ENV = {"mytorch-opaque": {"MYTORCH_INDUCTOR_DECOMPOSE": "0"}}
_RESULT = "MODEL_TRAIN_RESULT "  # prefix of the line a worker process prints its result on


def _variant(name: str):
    """(patch names, apply_to kwargs, attention backend) of a mytorch set-up name (with or
    without +compile)."""
    return VARIANTS.get(name.removesuffix("+compile"))


def _valid(name: str) -> bool:
    return name in SETUPS or _variant(name) is not None


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


def liger_missing() -> str | None:
    """Why the Liger-Kernel set-up cannot run, or None."""
    if importlib.util.find_spec("liger_kernel") is None:
        return "liger_kernel is not installed (pip install liger-kernel)"
    return None


# ---------------------------------------------------------------------------- the suite

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


# ----------------------------------------------------------------- one set-up, one step

def build_model(spec: Spec, device, dtype, seed: int = 0):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(spec.config()).to(device=device, dtype=dtype)


def batches(spec: Spec, n: int, device):
    """n batches of random token ids, the same in every process."""
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, spec.vocab, (spec.batch, spec.seq), generator=g).to(device) for _ in range(n)]


@dataclasses.dataclass
class SetUp:
    """A set-up's model (step_model: compiled where the set-up says so), optimizer, the
    patch() context it trains under and apply_to's handle (None when not applied)."""

    model: torch.nn.Module
    step_model: torch.nn.Module
    opt: torch.optim.Optimizer
    ctx: contextlib.AbstractContextManager
    handle: object = None

    def step(self, ids) -> torch.Tensor:
        loss = self.step_model(input_ids=ids, labels=ids).loss
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return loss


def set_up(name: str, spec: Spec, device: str, dtype) -> SetUp:
    """The model, optimizer and mytorch parts of one set-up (Liger's patch comes first, as it
    patches modeling_llama's classes before the model is built)."""
    import mytorch_ext

    if not _valid(name):
        raise ValueError(f"model: unknown set-up {name!r}; valid: {', '.join(SETUPS)}, or one of "
                         f"{', '.join(VARIANTS)} with or without +compile")
    if name == "liger":
        reason = liger_missing()
        if reason:
            raise RuntimeError(f"model: liger: {reason}")
        from liger_kernel.transformers import apply_liger_kernel_to_llama

        apply_liger_kernel_to_llama()
    model = build_model(spec, device, dtype)
    ctx, handle = contextlib.nullcontext(), None
    if name.startswith("mytorch"):
        ops, kwargs, backend = _variant(name)
        mytorch_ext.set_attention_backend(backend)
        ctx = mytorch_ext.patched(ops) if ops != () else contextlib.nullcontext()
        handle = mytorch_ext.apply_to(model, **kwargs)
    step_model = torch.compile(model) if name.endswith("compile") else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if device == "cuda" else {}))
    return SetUp(model, step_model, opt, ctx, handle)


def time_setup(name: str, spec: Spec, device: str, dtype, warmup: int, steps: int) -> dict:
    """Train `warmup` + `steps` steps of one set-up in this process, one batch each; the
    last `steps` are timed."""
    import mytorch_ext

    data = batches(spec, warmup + steps, device)
    todo = iter(data)
    s = set_up(name, spec, device, dtype)
    before = dict(mytorch_ext.fallback_counts()) if device.startswith("mytorch") else {}
    losses, stats = [], {}
    with s.ctx:
        if s.handle is not None:  # patch_stats counts eager calls: one eager forward shows the routes
            mytorch_ext.patch_stats(reset=True)
            with torch.no_grad():
                s.model(input_ids=data[0], labels=data[0])
            stats = mytorch_ext.patch_stats(reset=True)
            if not any(c["mytorch"] for c in stats.values()):
                raise RuntimeError(f"model: {name} ran no mytorch kernel on {device} ({stats})")
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        timed = sample_times({name: lambda: losses.append(s.step(next(todo)).item())}, device,
                             samples=steps, warmup=warmup, batch=1)[name]
    if s.handle is not None:
        s.handle.revert()
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
    # torch first: with torch's device-backend autoload, torch is what loads mytorch_ext; the
    # benchmarks package by its path, as the bench command loads it
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (f"import sys, torch; from mytorch_ext._bench import load; load({here!r}); "
            "from benchmarks.suites.model import main; main(sys.argv[1:])")
    cmd = [sys.executable, "-c", code, "--worker", json.dumps(job)]
    try:
        env = {**os.environ, **_VARIANT_ENV.get(name.removesuffix("+compile"), {})}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"model: set-up {name} ({spec.label()}) ran past {timeout:.0f}s") from None
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_RESULT):
            return json.loads(line[len(_RESULT):])
    err = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    raise RuntimeError(f"model: set-up {name} ({spec.label()}) failed (exit code "
                       f"{proc.returncode}): {err[-1] if err else 'no output'}")


def _worker(job_json: str) -> None:
    job = json.loads(job_json)
    import mytorch_ext

    if job["device"].startswith("mytorch") and not hasattr(torch, "mytorch"):
        mytorch_ext.register_device()  # not registered at import where a GPU is present
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
            raise RuntimeError(f"model: {name}'s first loss {r['loss0']:.5f} differs from "
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


def measure_rounds(spec: Spec, setups, device: str, dtype, warmup: int, steps: int,
                   rounds: int, on_round=None) -> list[dict]:
    """measure() `rounds` times, the set-ups in the given order in even rounds and reversed in
    odd ones, so that no set-up always runs first (a machine's speed drifts between processes).
    One {setup: result} per round, in the given order; on_round(r, order, results) after each."""
    out = []
    for r in range(rounds):
        order = list(setups) if r % 2 == 0 else list(reversed(setups))
        res = measure(spec, order, device, dtype, warmup, steps)
        out.append({name: res[name] for name in setups})
        if on_round is not None:
            on_round(r, order, res)
    return out


def rounds_markdown(rounds: list[dict]) -> str:
    """Per set-up over the rounds: the median and range of the rounds' median steps, and of
    the ratio to compile (eager without a compile column) within each round."""
    names = list(rounds[0])
    ref = "compile" if "compile" in names else ("eager" if "eager" in names else None)
    lines = [f"| setup | step ms over {len(rounds)} rounds: median (min..max) | "
             f"vs {ref or '-'} per round: median (min..max) |", "|---|---|---|"]
    for name in names:
        ms = [r[name]["step_ms"] for r in rounds]
        cell = "-"
        if ref is not None:
            ratios = [r[ref]["step_ms"] / r[name]["step_ms"] for r in rounds]
            cell = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}..{max(ratios):.2f})"
        lines.append(f"| {name} | {statistics.median(ms):.1f} ({min(ms):.1f}..{max(ms):.1f}) | {cell} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------ on its own

def markdown(results: dict) -> str:
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


def profile_setup(name: str, spec: Spec, steps: int, rows: int) -> None:
    """Train steps - 1 steps of one set-up on CUDA (bf16), time one more, profile the last."""
    data = batches(spec, steps, "cuda")
    s = set_up(name, spec, "cuda", torch.bfloat16)
    with s.ctx:
        for ids in data[:-1]:
            s.step(ids)
        wall = sample_times({name: lambda: s.step(data[0])}, "cuda", samples=1, warmup=0)[name][0]
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            s.step(data[-1])
            sync("cuda")
    if s.handle is not None:
        s.handle.revert()
    events = prof.key_averages()
    gpu_us = sum(e.self_device_time_total for e in events if e.self_device_time_total > 0
                 and e.device_type == torch.autograd.DeviceType.CUDA)
    print(f"== {name}: step {wall * 1e3:.1f} ms (unprofiled), GPU kernels {gpu_us / 1e3:.1f} ms")
    print(events.table(sort_by="self_device_time_total", row_limit=rows, max_name_column_width=70))
    print(events.table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=70))
    del s
    torch.cuda.empty_cache()


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.suites.model",
                                description="end-to-end training step of a Llama-style model: stock "
                                            "PyTorch vs mytorch kernels")
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--intermediate", type=int, default=0)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--kv-heads", type=int, default=0)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--issue-models", action="store_true",
                   help="the four reference models instead of the one of --layers ... --batch")
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--setups", default=None,
                   help=f"any of {', '.join(SETUPS)}, or a mytorch variant ({', '.join(VARIANTS)}) with "
                        "or without +compile (default: all of the first; with --profile eager,mytorch)")
    p.add_argument("--rounds", type=int, default=1,
                   help="run the set-ups this many times, the order reversed every other round; "
                        "each round's table, then the spread over rounds")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None)
    p.add_argument("--profile", action="store_true", help="profile one step per set-up (CUDA)")
    p.add_argument("--rows", type=int, default=25, help="--profile: kernels listed")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # one set-up, in a process of its own
    args = p.parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    setups = [s for s in (args.setups or ("eager,mytorch" if args.profile else ",".join(SETUPS))).split(",") if s]
    bad = [s for s in setups if not _valid(s)]
    if bad:
        p.error(f"--setups takes {', '.join(SETUPS)} (or a mytorch variant: {', '.join(VARIANTS)}, "
                f"with or without +compile), got {','.join(bad)}")
    spec = Spec(args.layers, args.hidden, args.heads, args.seq, args.batch, args.vocab,
                args.intermediate, args.kv_heads)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if (device == "cuda" or args.profile) and not torch.cuda.is_available():
        raise SystemExit(f"{p.prog.split()[-1]}: {'--profile' if args.profile else '--device cuda'} "
                         "needs a CUDA GPU")
    if args.profile:
        for name in setups:
            profile_setup(name, spec, args.steps, args.rows)
        return None
    if "liger" in setups and (liger_missing() or device != "cuda"):
        print(f"liger left out: {liger_missing() or 'Liger-Kernel runs on CUDA only'}")
        setups.remove("liger")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    where = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"{where}, torch {torch.__version__}, {str(dtype).removeprefix('torch.')}, AdamW, "
          f"{args.steps} steps after {args.warmup} warm-up, each set-up in its own process")
    if args.rounds < 1:
        p.error(f"--rounds takes a count of at least 1, got {args.rounds}")
    for spec in ISSUE_MODELS if args.issue_models else (spec,):
        def show(r, order, res, spec=spec):
            print(f"\nLlama {spec.params() / 1e6:.0f}M, {spec.label()}"
                  + (f", round {r + 1} of {args.rounds} ({', '.join(order)})" if args.rounds > 1 else ""))
            print(markdown(res), flush=True)

        rounds = measure_rounds(spec, setups, device, dtype, args.warmup, args.steps, args.rounds, show)
        if args.rounds > 1:
            print(f"\nLlama {spec.params() / 1e6:.0f}M, {spec.label()}, over the rounds")
            print(rounds_markdown(rounds), flush=True)
    return None


if __name__ == "__main__":
    main()
