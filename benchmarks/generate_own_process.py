"""Greedy generate() of a Llama from a config (random weights), attn_implementation="mytorch"
against "sdpa", each set-up in a process of its own, alternating over rounds.

    python -m benchmarks.generate_own_process [--cache static|dynamic] [--dtype bfloat16|float32]
        [--rounds 2] [--reps 3] [--config quick|smoke] [--device cuda|cpu] [--profile]

Each child builds the model (the same seed, so the same weights in every process), warms
generate() up once (with a static cache, transformers compiles the decode step there), then
times `reps` calls of generate(max_new_tokens=1) (the prefill) and `reps` of the full
generation. Per decode step = (median full - median prefill) / (new - 1). The parent runs the
children round by round, the order of the two set-ups swapped every round, so that a drift of
the host's speed falls on both; each round's tokens are compared between the set-ups.

With float32 the two attention kernels differ by about 1e-6 relative, below the gap between
the two best logits at almost every step, so greedy tokens are expected to be identical; with
bfloat16 they part at the first near-tie of two logits (random weights have many).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SETUPS = ("mytorch", "sdpa")


def _child(a) -> None:
    import torch

    from benchmarks.suites.kvcache import GENERATE, _generate_model

    layers, hidden, heads, kv_heads, ffn, vocab, batch, prompt, new = GENERATE[a.device][a.config]
    dtype = getattr(torch, a.dtype)
    model = _generate_model(a.device, a.child, layers, hidden, heads, kv_heads, ffn, vocab, dtype=dtype)
    ids = torch.randint(0, vocab, (batch, prompt), generator=torch.Generator().manual_seed(0)).to(a.device)
    kw = dict(do_sample=False, pad_token_id=0, attention_mask=torch.ones_like(ids))
    if a.cache == "static":
        kw["cache_implementation"] = "static"

    def timed(n):
        if a.device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
        if a.device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0, out

    timed(new)  # warm-up: kernel compilation, the compiled decode step, the allocator
    prefill = statistics.median(timed(1)[0] for _ in range(a.reps))
    full = [timed(new) for _ in range(a.reps)]
    t_full = statistics.median(t for t, _ in full)
    tokens = full[-1][1][:, prompt:]
    torch.save(tokens.cpu(), a.tokens)
    res = {"prefill_ms": prefill * 1e3, "step_ms": (t_full - prefill) / (new - 1) * 1e3,
           "tokens_per_s": batch * new / t_full}
    if a.profile and a.device == "cuda":
        res["gpu_ms_per_token"] = _gpu_ms(lambda: timed(new), lambda: timed(1)) / (new - 1)
    print(json.dumps(res), flush=True)


def _gpu_ms(full, prefill) -> float:
    """GPU kernel time of full() minus that of prefill(), in ms, from torch.profiler: set
    beside the wall time per step, it tells whether the decode steps are bound by the GPU or
    by the host."""
    from torch.profiler import ProfilerActivity, profile

    def kernel_ms(fn):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
        return sum(e.self_device_time_total for e in prof.key_averages()) / 1e3  # self: no op counted twice

    return kernel_ms(full) - kernel_ms(prefill)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", choices=("static", "dynamic"), default="static")
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--config", choices=("smoke", "quick"), default="quick")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None)
    p.add_argument("--profile", action="store_true",
                   help="also report each set-up's GPU kernel time per decode step (CUDA)")
    p.add_argument("--child", choices=SETUPS, help=argparse.SUPPRESS)
    p.add_argument("--tokens", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.device is None:
        import torch

        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.child:
        return _child(a)

    import torch

    from benchmarks.suites.kvcache import GENERATE

    layers, hidden, heads, kv_heads, ffn, vocab, batch, prompt, new = GENERATE[a.device][a.config]
    where = torch.cuda.get_device_name() if a.device == "cuda" else "cpu"
    print(f"# generate(), Llama {layers} layers d{hidden} GQA {heads}:{kv_heads} vocab {vocab}, batch {batch}, "
          f"{prompt}-token prompt + {new} new, {a.dtype}, {a.cache} cache, {where}, torch {torch.__version__}; "
          f"one process per set-up and round, median of {a.reps} calls each", flush=True)
    results = {s: [] for s in SETUPS}
    equal = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = SETUPS if r % 2 == 0 else SETUPS[::-1]
            for s in order:
                cmd = [sys.executable, "-m", "benchmarks.generate_own_process", "--child", s,
                       "--tokens", os.path.join(tmp, f"{s}.pt")] + [
                    f"--{k}={getattr(a, k)}" for k in ("cache", "dtype", "reps", "config", "device")]
                cmd += ["--profile"] if a.profile else []
                # Inductor's performance hints say when a compiled step runs without CUDA graphs
                env = dict(os.environ, TORCH_LOGS="perf_hints")
                out = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if out.returncode:
                    sys.exit(f"{s} failed:\n{out.stderr[-3000:]}")
                res = json.loads(out.stdout.strip().splitlines()[-1])
                results[s].append(res)
                gpu = (f", GPU kernels {res['gpu_ms_per_token']:6.3f} ms per step"
                       if "gpu_ms_per_token" in res else "")
                print(f"round {r} {s:8s} prefill+1 {res['prefill_ms']:7.1f} ms, per decode step "
                      f"{res['step_ms']:6.3f} ms{gpu}, {res['tokens_per_s']:7.1f} tokens/s", flush=True)
                skips = sorted({ln.strip() for ln in out.stderr.splitlines() if "skipping cudagraphs" in ln})
                for ln in skips:
                    print(f"    {s}: {ln[:300]}", flush=True)
            mine, stock = (torch.load(os.path.join(tmp, f"{s}.pt")) for s in SETUPS)
            same = (mine == stock).float().mean().item()
            first = (mine != stock).any(0).nonzero()
            equal.append(same)
            print(f"round {r} greedy tokens equal: {same:.1%}"
                  + (f" (first difference at new token {first[0].item()})" if len(first) else " (all)"),
                  flush=True)

    def cell(s, key, digits):
        v = [x[key] for x in results[s]]
        return f"{statistics.median(v):.{digits}f} ({min(v):.{digits}f}..{max(v):.{digits}f})"

    print("\n| set-up | per decode step ms | tokens/s incl. prefill |\n|---|--:|--:|")
    for s in SETUPS:
        print(f"| {s} | {cell(s, 'step_ms', 3)} | {cell(s, 'tokens_per_s', 1)} |")
    ratio = [m["tokens_per_s"] / q["tokens_per_s"] for m, q in zip(results["mytorch"], results["sdpa"])]
    step = [q["step_ms"] / m["step_ms"] for m, q in zip(results["mytorch"], results["sdpa"])]
    print(f"\nmytorch / sdpa tokens/s per round: {', '.join(f'{x:.3f}' for x in ratio)}; "
          f"per decode step: {', '.join(f'{x:.3f}' for x in step)}; greedy tokens equal per round: "
          f"{', '.join(f'{x:.1%}' for x in equal)}")


if __name__ == "__main__":
    main()
