"""Shared benchmark machinery: timing, tables with ratios, environment, JSON and plots."""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import time
from typing import Callable, Sequence

import torch


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device.startswith("mytorch"):
        torch.mytorch.synchronize()


def time_ms(fn: Callable[[], object], device: str = "cpu", warmup: int = 2, reps: int = 10,
            min_time_s: float = 0.2, max_reps: int = 200) -> float:
    """Median wall time of fn in milliseconds. CUDA: events via triton.testing.do_bench."""
    if device.startswith("cuda"):
        try:
            from triton.testing import do_bench

            return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))
        except ImportError:
            return _time_cuda_events(fn, warmup, reps)
    for _ in range(warmup):
        fn()
    sync(device)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < reps or (time.perf_counter() - start < min_time_s and len(times) < max_reps):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


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


@dataclasses.dataclass
class Table:
    """One suite's result: rows are shapes, columns implementations, plus the ratio."""

    title: str
    unit: str                   # e.g. "GFLOP/s", "GB/s", "ms"
    convention: str             # how the unit is computed, printed in the header
    impls: Sequence[str]        # column order; the first is mytorch, the ratio is vs the second
    rows: list = dataclasses.field(default_factory=list)  # (label, {impl: value})
    higher_is_better: bool = True
    ratio_label: str | None = None

    def add(self, label: str, values: dict) -> None:
        self.rows.append((label, dict(values)))

    def ratio(self, values: dict, impl: str | None = None) -> float | None:
        a = values.get(self.impls[0])
        b = values.get(impl or self.impls[1]) if len(self.impls) > 1 else None
        if a is None or b is None or a == 0 or b == 0:
            return None
        return a / b if self.higher_is_better else b / a

    def format(self) -> str:
        ratio_cols = list(self.impls[1:])
        label_w = max([len("shape")] + [len(r[0]) for r in self.rows])
        head = ["shape".ljust(label_w)] + [f"{i:>14}" for i in self.impls]
        head += [f"{'vs ' + i:>12}" for i in ratio_cols]
        lines = [f"{self.title}  [{self.unit}; {self.convention}; ratio = mytorch / peer, >1 is better]",
                 " | ".join(head), "-+-".join("-" * len(h) for h in head)]
        for label, vals in self.rows:
            cells = [label.ljust(label_w)]
            cells += [f"{vals[i]:>14.2f}" if vals.get(i) is not None else f"{'-':>14}" for i in self.impls]
            for peer in ratio_cols:
                r = self.ratio(vals, peer)
                cells.append(f"{r:>11.2f}x" if r is not None else f"{'-':>12}")
            lines.append(" | ".join(cells))
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"title": self.title, "unit": self.unit, "convention": self.convention,
                "impls": list(self.impls), "higher_is_better": self.higher_is_better,
                "rows": [{"shape": label, **vals} for label, vals in self.rows]}


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


def write_outputs(out_dir: str, suite: str, tables: list[Table]) -> list[str]:
    """JSON with the environment, and one PNG per table (value vs row, a line per impl)."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    jpath = os.path.join(out_dir, f"{suite}.json")
    with open(jpath, "w") as f:
        json.dump({"suite": suite, "environment": environment(),
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
        fig, ax = plt.subplots(figsize=(max(6, len(t.rows) * 0.9), 4))
        xs = range(len(t.rows))
        for impl in t.impls:
            ys = [vals.get(impl) for _, vals in t.rows]
            ax.plot(xs, [y if y is not None else float("nan") for y in ys], marker="o", label=impl)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([label for label, _ in t.rows], rotation=30, ha="right", fontsize=7)
        ax.set_ylabel(t.unit)
        ax.set_title(t.title, fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        ppath = os.path.join(out_dir, f"{suite}_{k}.png")
        fig.savefig(ppath, dpi=110)
        plt.close(fig)
        paths.append(ppath)
    return paths
