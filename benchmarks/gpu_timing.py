"""GPU seconds of one call, for the kernel benchmarks (hopper_attention_fwd/_fwdbwd, hopper_ab).

The calls are timed as replays of a CUDA graph that holds many of them, so the host's cost of
a launch (the Python launch path of a Triton kernel is tens of microseconds) does not count:
the shortest rows (a 1k causal forward takes about 0.2 ms of GPU time) otherwise measure the
host. HOST_TIMING=1 times plain calls instead (triton.testing.do_bench, host cost included).
Only torch and triton are imported, as the scripts load the kernels without the native library.
"""
import os

import triton


def gpu_seconds(fn, rep_ms: int = 40) -> float:
    """Median seconds of fn() (its kernels, from CUDA-graph replays; see the module's note)."""
    if os.environ.get("HOST_TIMING"):
        return triton.testing.do_bench(fn, warmup=10, rep=rep_ms, return_mode="median") * 1e-3
    return triton.testing.do_bench_cudagraph(fn, rep=rep_ms, return_mode="median") * 1e-3
