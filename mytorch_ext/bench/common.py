"""Shared benchmark machinery: timing, tables with ratios, environment, JSON and plots."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import statistics
import time
from typing import Callable, Sequence

import torch


MODES = ("smoke", "quick", "full")  # smoke: tiny shapes for the tests; quick: < 2 min on 2 cores


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device.startswith("mytorch"):
        torch.mytorch.synchronize()


def device_skip_reason(device: str, native: bool = True) -> str | None:
    """One line saying why `device` (and, with native, mytorch's native library) cannot run
    here, or None."""
    from .. import _info

    if native and _info.NATIVE_ERROR is not None:
        return "the native library mytorch_ext._C is not built (pip install --no-build-isolation -e .)"
    if device == "cuda":
        if not torch.backends.cuda.is_built():
            return "this torch is built without CUDA"
        if not torch.cuda.is_available():
            return "no CUDA GPU is available (torch.cuda.is_available() is False)"
    elif device == "mytorch" and not hasattr(torch, "mytorch"):
        return "the mytorch device is not registered (mytorch_ext.register_device())"
    return None


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


SAMPLE_S = 0.02  # the shortest timed sample on the CPU (see time_ms)


def time_ms(fn: Callable, device: str = "cpu", warmup: int = 2, reps: int = 10,
            min_time_s: float = 0.2, max_reps: int = 200, inputs: tuple | None = None) -> float:
    """Median time of one call in milliseconds, after warm-up.

    With `inputs`, calls fn(*inputs) and rotates through copies of the inputs when they
    would fit in cache (see rotated); without, calls fn(). CPU: each sample is the mean of
    enough back-to-back calls to last SAMPLE_S. CUDA: triton.testing.do_bench, which flushes
    L2 before each call, or CUDA events when Triton is missing.
    """
    sets = rotated(inputs, device) if inputs is not None else None
    k = [0]

    def call():
        if sets is None:
            return fn()
        k[0] = (k[0] + 1) % len(sets)
        return fn(*sets[k[0]])

    if device.startswith("cuda"):
        try:
            from triton.testing import do_bench

            return float(do_bench(call, warmup=25, rep=100, return_mode="median"))
        except ImportError:
            return _time_cuda_events(call, warmup, reps)
    for _ in range(warmup):
        call()
    sync(device)
    # One sample times enough calls to last SAMPLE_S, well above a scheduler tick (4 ms), so
    # that a short call's time is not quantised to the tick or dominated by one preemption.
    t0 = time.perf_counter()
    call()
    sync(device)
    batch = max(1, min(10000, math.ceil(SAMPLE_S / max(time.perf_counter() - t0, 1e-7))))
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < reps or (time.perf_counter() - start < min_time_s and len(times) < max_reps):
        t0 = time.perf_counter()
        for _ in range(batch):
            call()
        sync(device)
        times.append((time.perf_counter() - t0) / batch)
    _SPREADS.append((min(times) * 1e3, statistics.median(times) * 1e3, max(times) * 1e3))
    return statistics.median(times) * 1e3


# ---- timing spread: every CPU measurement's (min, median, max) since the last suite ----
_SPREADS: list[tuple[float, float, float]] = []
_warned: set[str] = set()
# A measurement is "wide" when its median is this much above its minimum: the repeats
# disagree (other load, frequency changes, timer ticks) and the median is not to be trusted.
WIDE_SPREAD = 1.25


def record_times(times_s: Sequence[float]) -> None:
    """Add a measurement made outside time_ms (its repeats, in seconds) to the spread."""
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


def _time_cuda_events(fn, warmup, reps) -> float:
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


def fallback_note(before: dict) -> str:
    """" (CPU fallbacks: op xN, ...)" for the mytorch device's fallbacks since `before`, or ""."""
    import mytorch_ext

    after = mytorch_ext.fallback_counts()
    fell = {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}
    return " (CPU fallbacks: " + ", ".join(f"{k} x{v}" for k, v in sorted(fell.items())) + ")" if fell else ""


def rel_err(ours, ref) -> float:
    """||ours - ref|| / ||ref|| in float64, on the CPU."""
    a, b = ours.detach().cpu().double(), ref.detach().cpu().double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def check_close(name: str, ours, ref, tol: float) -> None:
    """Raise when any output of mytorch differs from the reference by more than tol."""
    ours = ours if isinstance(ours, (list, tuple)) else [ours]
    ref = ref if isinstance(ref, (list, tuple)) else [ref]
    for a, b in zip(ours, ref):
        err = rel_err(a, b)
        if not err <= tol:
            raise RuntimeError(f"{name}: mytorch differs from the reference (relative error {err:.3g})")


_MEMORY_UNITS = ("B", "KiB", "MiB", "GiB")


@dataclasses.dataclass
class Table:
    """One suite's result: rows are shapes, columns implementations, then one ratio column
    per peer. The first impl is mytorch's; "x PEER" is how many times better it does than PEER
    (a speed-up for times and rates, a saving for memory): >1 means mytorch is better."""

    title: str
    unit: str                   # e.g. "GFLOP/s", "GB/s", "ms"
    convention: str             # how the unit is computed, printed in the header
    impls: Sequence[str]        # column order; the first is mytorch, the others its peers
    rows: list = dataclasses.field(default_factory=list)  # (label, {impl: value})
    higher_is_better: bool = True

    def add(self, label: str, values: dict) -> None:
        self.rows.append((label, dict(values)))

    def ratio(self, values: dict, peer: str | None = None) -> float | None:
        a = values.get(self.impls[0])
        b = values.get(peer or self.impls[1]) if len(self.impls) > 1 else None
        if a is None or b is None or a == 0 or b == 0 or a != a or b != b:
            return None
        return a / b if self.higher_is_better else b / a

    def ratio_meaning(self) -> str:
        what = "saving" if self.unit in _MEMORY_UNITS else "speed-up"
        return f"x PEER = {self.impls[0]}'s {what} over PEER, >1: {self.impls[0]} better"

    def header(self) -> list[str]:
        """The title line and the column line: the user-facing text the tests pin."""
        label_w = self._label_width()
        head = ["shape".ljust(label_w)] + [f"{i:>14}" for i in self.impls]
        head += [f"{'x ' + i:>12}" for i in self.impls[1:]]
        better = "higher" if self.higher_is_better else "lower"
        return [f"{self.title}  [{self.unit}, {better} is better: {self.convention}; {self.ratio_meaning()}]",
                " | ".join(head)]

    def _label_width(self) -> int:
        return max([len("shape")] + [len(r[0]) for r in self.rows])

    def format(self) -> str:
        label_w = self._label_width()
        title, head = self.header()
        lines = [title, head, "-+-".join("-" * len(h) for h in head.split(" | "))]
        for label, vals in self.rows:
            cells = [label.ljust(label_w)]
            cells += [f"{vals[i]:>14.2f}" if vals.get(i) is not None else f"{'-':>14}" for i in self.impls]
            for peer in self.impls[1:]:
                r = self.ratio(vals, peer)
                cells.append(f"{r:>11.2f}x" if r is not None else f"{'-':>12}")
            lines.append(" | ".join(cells))
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"title": self.title, "unit": self.unit, "convention": self.convention,
                "impls": list(self.impls), "higher_is_better": self.higher_is_better,
                "ratio": self.ratio_meaning(),
                "rows": [{"shape": label, **vals,
                          **{f"x_{peer}": self.ratio(vals, peer) for peer in self.impls[1:]}}
                         for label, vals in self.rows]}


class SpreadTable(Table):
    """Times shown as median (min..max) over the samples, with `digits` decimals; the ratio
    columns (`ratio_width` wide) as in every Table. `spread[label][impl]` is (min, max), set
    by the suite."""

    spread: dict
    digits = 2
    ratio_width = 12

    def header(self) -> list[str]:
        title, _ = super().header()
        head = ["shape".ljust(self._label_width())] + [f"{i:>24}" for i in self.impls]
        head += [f"{'x ' + i:>{self.ratio_width}}" for i in self.impls[1:]]
        return [title, " | ".join(head)]

    def format(self) -> str:
        title, head = self.header()
        lines = [title, head, "-+-".join("-" * len(h) for h in head.split(" | "))]
        d, w = self.digits, self.ratio_width - 1
        for label, vals in self.rows:
            cells = [label.ljust(self._label_width())]
            for i in self.impls:
                lo, hi = self.spread[label][i]
                cells.append(f"{f'{vals[i]:.{d}f} ({lo:.{d}f}..{hi:.{d}f})':>24}")
            cells += [f"{self.ratio(vals, peer):>{w}.2f}x" for peer in self.impls[1:]]
            lines.append(" | ".join(cells))
        return "\n".join(lines)

    def to_json(self) -> dict:
        out = super().to_json()
        for row, (label, _) in zip(out["rows"], self.rows):
            for i in self.impls:
                row[f"{i}_min"], row[f"{i}_max"] = self.spread[label][i]
        return out


def has_cuda_kernel(op: str) -> bool:
    """Whether mytorch_ext was built with a CUDA kernel for mytorch::<op>."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"mytorch::{op}", "CUDA")


def environment() -> dict:
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
           "threads": torch.get_num_threads(), "cpu": _cpu_model(), "cpu_count": os.cpu_count()}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
    return env


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def write_outputs(out_dir: str, suite: str, tables: list[Table], **meta) -> list[str]:
    """JSON with the environment, meta (device, mode) and the timing spread; one PNG per
    table (chart). Prints the spread line, and the spread/load warnings once per process."""
    import sys

    os.makedirs(out_dir, exist_ok=True)
    spread = take_spread()
    if spread is not None:
        print(spread_line(suite, spread))
        for w in spread_warnings(spread):
            print(w, file=sys.stderr)
    paths = []
    jpath = os.path.join(out_dir, f"{suite}.json")
    with open(jpath, "w") as f:
        json.dump({"suite": suite, **meta, "environment": environment(), "timing_spread": spread,
                   "tables": [t.to_json() for t in tables]}, f, indent=2)
    paths.append(jpath)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return paths
    for k, t in enumerate(tables):
        if not t.rows:
            continue
        fig = chart(t, plt)
        ppath = os.path.join(out_dir, f"{suite}_{k}.png")
        fig.savefig(ppath, dpi=110)
        plt.close(fig)
        paths.append(ppath)
    return paths


def chart(t: Table, plt):
    """Grouped bars: one group per row (shape), one bar per implementation, y from 0. Each
    peer's bar carries the first implementation's ratio over it ("1.31x": >1 means the first
    is better), as in the table's "x PEER" columns."""
    fig, ax = plt.subplots(figsize=(chart_width(t), 4.5))
    draw_bars(t, ax)
    fig.tight_layout()
    return fig


def chart_width(t: Table) -> float:
    """Figure width in inches for t's bar groups."""
    return min(18, max(6, 1.0 + len(t.rows) * (0.35 + 0.3 * len(t.impls))))


def draw_bars(t: Table, ax) -> None:
    """t as grouped bars on ax (see chart)."""
    n_rows, n_impl = len(t.rows), len(t.impls)
    width = 0.8 / n_impl
    top = 0.0
    for j, impl in enumerate(t.impls):
        xs = [i + (j - (n_impl - 1) / 2) * width for i in range(n_rows)]
        ys = [vals.get(impl) for _, vals in t.rows]
        hs = [y if y is not None and y == y else 0.0 for y in ys]
        top = max([top] + hs)
        ax.bar(xs, hs, width=width * 0.95, label=impl, color=f"C{j}")
        if j == 0:
            continue
        for x, h, (_, vals) in zip(xs, hs, t.rows):
            r = t.ratio(vals, impl)
            if r is not None:
                ax.text(x, h, f"{r:.2f}x", ha="center", va="bottom", fontsize=7, rotation=90 if n_rows > 8 else 0)
    ax.set_ylim(0, top * 1.18 if top > 0 else 1)
    ax.set_xticks(list(range(n_rows)))
    ax.set_xticklabels([label for label, _ in t.rows], rotation=30 if n_rows > 1 else 0, ha="right" if n_rows > 1 else "center", fontsize=7)
    better = "higher is better" if t.higher_is_better else "lower is better"
    ax.set_ylabel(f"{t.unit} ({better})")
    what = "saving" if t.unit in _MEMORY_UNITS else "speed-up"
    ax.set_title(f"{t.title}\n{better}; on a bar: {t.impls[0]}'s {what} over it", fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
