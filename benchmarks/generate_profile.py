"""Where the time of generate()'s decode steps goes: torch.profiler tables (by GPU time, by
host time) of one greedy generate() of the benchmark Llama, bfloat16, static cache (transformers
compiles the decode step), for one attention set-up in this process.

    python -m benchmarks.generate_profile mytorch|sdpa [--new 33]

Run each set-up in a process of its own (the compiled step is per process). The per-step
times printed first come from generate() calls of 64 and 1 new tokens outside the profiler.
"""
from __future__ import annotations

import argparse
import time

import torch


def main() -> None:
    from torch.profiler import ProfilerActivity, profile

    from benchmarks.suites.kvcache import GENERATE, _generate_model

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("setup", choices=("mytorch", "sdpa"))
    p.add_argument("--new", type=int, default=33, help="new tokens of the profiled call")
    a = p.parse_args()
    layers, hidden, heads, kv_heads, ffn, vocab, batch, prompt, _ = GENERATE["cuda"]["quick"]
    model = _generate_model("cuda", a.setup, layers, hidden, heads, kv_heads, ffn, vocab, dtype=torch.bfloat16)
    ids = torch.randint(0, vocab, (batch, prompt), generator=torch.Generator().manual_seed(0)).cuda()
    kw = dict(do_sample=False, pad_token_id=0, attention_mask=torch.ones_like(ids), cache_implementation="static")

    def run(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        model.generate(ids, max_new_tokens=n, min_new_tokens=n, **kw)
        torch.cuda.synchronize()
        return time.perf_counter() - t

    run(64), run(64)  # compilation, CUDA graph recording, the allocator
    t64, t1 = min(run(64) for _ in range(2)), min(run(1) for _ in range(2))
    print(f"{a.setup}: {(t64 - t1) / 63 * 1e3:.3f} ms per decode step, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run(a.new)
    ka = prof.key_averages()
    print(ka.table(sort_by="self_cuda_time_total", row_limit=25, max_name_column_width=90))
    print(ka.table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=90))


if __name__ == "__main__":
    main()
