"""The benchmarks' one timing module: every suite and tool times through it.

Host side (the CPU and the mytorch device): sample_times() takes samples of back-to-back
calls, several functions taking turns sample by sample so that a change in the machine's load
falls on all of them alike; time_ms() is the median of one function's samples. CUDA: cuda_ms()
(triton.testing.do_bench, median; CUDA events where Triton is missing) and cuda_graph_ms()
(the calls replayed from a CUDA graph: GPU time alone).

Every host measurement's (min, median, max) is kept until take_spread() sums them up: the
bench CLI prints that summary per suite, with a warning when the repeats disagree.

This module imports only the standard library and torch, so that a process timing another
build of the extension (isa_builds.py) can load it by its path.
"""
from __future__ import annotations

import contextlib
import gc
import math
import os
import statistics
import time
from typing import Callable, Sequence

import torch

# The shortest host sample: well above a scheduler tick (4 ms), so that a short call's time
# is not quantised to the tick or dominated by one preemption.
SAMPLE_S = 0.02
MAX_BATCH = 10000


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device.startswith("mytorch"):
        torch.mytorch.synchronize()


def cache_bytes(device: str) -> int:
    """Size of the last-level cache that a timed call's inputs could stay in."""
    if device.startswith("cuda"):
        return int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20))
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for idx in os.listdir(base):
            with open(os.path.join(base, idx, "size")) as f:
                text = f.read().strip()
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            best = max(best, int(text.rstrip("KMG")) * mult)
    except (OSError, ValueError):
        pass
    return best or 32 << 20


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o)


def _clone(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone().requires_grad_(obj.requires_grad)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_clone(o) for o in obj)
    return obj


def rotated(inputs: tuple, device: str, max_bytes: int = 1 << 30) -> list[tuple]:
    """Input sets to cycle through so that a timed call does not find its inputs in cache:
    copies until they span 4x the last-level cache (at most 64 sets, max_bytes in all)."""
    nbytes = sum(t.numel() * t.element_size() for t in _tensors(inputs))
    target = 4 * cache_bytes(device)
    if nbytes == 0 or nbytes >= target:
        return [inputs]
    n = min(64, -(-target // nbytes), max(1, max_bytes // nbytes))
    return [inputs] + [_clone(inputs) for _ in range(n - 1)]


def steady_host_memory() -> bool:
    """Keep freed host blocks of up to 32 MiB in the heap (glibc mallopt). Otherwise every
    large output is a fresh mmap, and its page faults (costly and erratic in a VM) set the
    time of a row instead of the kernel, for mytorch and ATen alike. False where not glibc."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    ok = libc.mallopt(m_mmap_threshold, 32 << 20) == 1  # glibc's largest allowed threshold
    return ok and libc.mallopt(m_trim_threshold, 1 << 30) == 1


# ------------------------------------------------------------------------------ host side

def sample_times(fns: dict, device: str = "cpu", *, samples: int = 10, warmup: int = 2,
                 batch: int | None = None, min_time_s: float = 0.0, max_samples: int = 200,
                 host_only: bool = False, contexts: dict | None = None, gc_off: bool = False,
                 clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """{name: [seconds per call, one per sample]} of the callables in fns ({name: fn}).

    Each fn runs `warmup` calls first. A sample times `batch` back-to-back calls: by default
    enough to last SAMPLE_S (judged from one call), or a single call where one sample is all
    that is asked for. The fns take turns sample by sample, until each has `samples` samples
    and `min_time_s` has passed (or it has max_samples). The device is synchronised after a
    sample's calls and the clock stops after that; with host_only it stops before (the host
    time of enqueueing: on CUDA keep batch below what fills the launch queue).
    contexts: {name: context factory}, entered around that fn's warm-up and each of its
    samples, outside the clock. gc_off: no garbage collection while sampling.
    """
    names = list(fns)
    contexts = contexts or {}

    def ctx(name):
        return contexts.get(name, contextlib.nullcontext)()

    for name in names:
        with ctx(name):
            for _ in range(warmup):
                fns[name]()
    sync(device)
    batches = dict.fromkeys(names, batch or 1)
    if batch is None and (samples > 1 or min_time_s > 0):
        for name in names:
            with ctx(name):
                t0 = time.perf_counter()
                fns[name]()
                sync(device)
                one = max(time.perf_counter() - t0, 1e-7)
            batches[name] = max(1, min(MAX_BATCH, math.ceil(SAMPLE_S / one)))
    out: dict[str, list[float]] = {name: [] for name in names}
    enabled = gc.isenabled()
    if gc_off:
        gc.disable()
    try:
        start = time.perf_counter()
        while True:
            k = len(out[names[0]])
            if k >= samples and (k >= max_samples or time.perf_counter() - start >= min_time_s):
                break
            for name in names:
                with ctx(name):
                    out[name].append(_sample(fns[name], batches[name], device, host_only, clock))
    finally:
        if gc_off and enabled:
            gc.enable()
    for times in out.values():
        record_times(times)
    return out


def _sample(fn, n: int, device: str, host_only: bool, clock) -> float:
    if host_only:
        sync(device)  # an empty queue: the clock sees only the enqueueing
    t0 = clock()
    for _ in range(n):
        fn()
    if host_only:
        dt = clock() - t0
        sync(device)
    else:
        sync(device)
        dt = clock() - t0
    return dt / n


def time_ms(fn: Callable, device: str = "cpu", warmup: int = 2, reps: int = 10,
            min_time_s: float = 0.2, max_reps: int = 200, inputs: tuple | None = None) -> float:
    """Median time of one call in milliseconds, after warm-up.

    With `inputs`, calls fn(*inputs) and rotates through copies of the inputs when they
    would fit in cache (see rotated); without, calls fn(). CUDA: cuda_ms, which flushes L2
    before each call. Elsewhere the median of sample_times' samples (reps of them at least,
    for min_time_s at least, at most max_reps).
    """
    sets = rotated(inputs, device) if inputs is not None else None
    k = [0]

    def call():
        if sets is None:
            return fn()
        k[0] = (k[0] + 1) % len(sets)
        return fn(*sets[k[0]])

    if device.startswith("cuda"):
        return cuda_ms(call, warmup=warmup, reps=reps)
    times = sample_times({"fn": call}, device, samples=reps, warmup=warmup, min_time_s=min_time_s,
                         max_samples=max_reps)["fn"]
    return statistics.median(times) * 1e3


# ------------------------------------------------------------------------------- CUDA

def cuda_ms(fn: Callable, rep: int = 100, grad_to_none=None, warmup: int = 2, reps: int = 10) -> float:
    """Median milliseconds of one call on CUDA: triton.testing.do_bench (L2 flushed before
    each call, `rep` ms of calls; grad_to_none: tensors whose .grad it clears), or, where
    Triton is missing, the median of `reps` calls timed with CUDA events after `warmup`."""
    try:
        from triton.testing import do_bench
    except ImportError:
        return _cuda_events_ms(fn, warmup, reps)
    return float(do_bench(fn, warmup=25, rep=rep, grad_to_none=grad_to_none, return_mode="median"))


def _cuda_events_ms(fn, warmup: int, reps: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def cuda_graph_ms(make_fn: Callable, rep: int = 100) -> float:
    """Median milliseconds per call of make_fn(), replayed from a CUDA graph: GPU time alone.

    make_fn runs on the capture stream, so autograd leaves made there belong to it."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    times = []
    with torch.cuda.stream(stream):
        fn = make_fn()
        fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            fn()
        end.record()
        torch.cuda.synchronize()
        n = max(1, min(1000, int(rep / max(start.elapsed_time(end) / 5, 1e-3))))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(n):
                fn()
        for _ in range(10):
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / n)
        del graph
    torch.cuda.current_stream().wait_stream(stream)
    return sorted(times)[len(times) // 2]


# ---- timing spread: every host measurement's (min, median, max) since the last suite ----
_SPREADS: list[tuple[float, float, float]] = []
_warned: set[str] = set()
# A measurement is "wide" when its median is this much above its minimum: the repeats
# disagree (other load, frequency changes, timer ticks) and the median is not to be trusted.
WIDE_SPREAD = 1.25


def record_times(times_s: Sequence[float]) -> None:
    """Add a measurement (its repeats, in seconds) to the spread."""
    if times_s:
        _SPREADS.append((min(times_s) * 1e3, statistics.median(times_s) * 1e3, max(times_s) * 1e3))


def take_spread() -> dict | None:
    """Summary of the measurements since the last call (and forget them): how many, the
    median of their median/min ratios, the worst one, how many were wide, and the load."""
    spreads, _SPREADS[:] = list(_SPREADS), []
    if not spreads:
        return None
    rel = [med / mn if mn > 0 else 1.0 for mn, med, _ in spreads]
    worst = max(range(len(spreads)), key=lambda i: rel[i])
    mn, med, mx = spreads[worst]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"measurements": len(spreads), "median_over_min": statistics.median(rel),
            "wide": sum(r > WIDE_SPREAD for r in rel),
            "worst_ms": {"min": mn, "median": med, "max": mx},
            "load_avg_1min": load, "threads": torch.get_num_threads()}


def spread_line(suite: str, sp: dict) -> str:
    """One line for the console: the spread of a suite's timings."""
    w = sp["worst_ms"]
    load = "" if sp["load_avg_1min"] is None else f", load {sp['load_avg_1min']:.1f} on {sp['threads']} threads"
    return (f"[{suite}] timing spread: {sp['measurements']} measurements, median/min "
            f"{sp['median_over_min']:.2f} typical, worst min/median/max "
            f"{w['min']:.3f}/{w['median']:.3f}/{w['max']:.3f} ms, {sp['wide']} wide{load}")


def spread_warnings(sp: dict) -> list[str]:
    """The warnings this spread deserves, each given once per process."""
    out = []
    if sp["wide"] and sp["median_over_min"] > WIDE_SPREAD and "spread" not in _warned:
        _warned.add("spread")
        out.append(f"WARNING: timings vary widely (typical median/min {sp['median_over_min']:.2f}, "
                   f"{sp['wide']} of {sp['measurements']} measurements above {WIDE_SPREAD}): "
                   "the machine is busy or its clock unsteady; the ratios are not reliable")
    load, threads = sp["load_avg_1min"], sp["threads"]
    if load is not None and load > threads and "load" not in _warned:
        _warned.add("load")
        out.append(f"WARNING: load average {load:.1f} exceeds the {threads} threads in use: other "
                   "processes share the cores, so times are longer and ratios noisy")
    return out
