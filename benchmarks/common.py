"""What the benchmark suites share besides timing (timing.py): the reasons a suite cannot run,
the correctness checks before timing, the result tables, the environment, and the JSON and
PNG outputs."""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
from typing import Sequence

import torch

from mytorch_ext._info import _cpu_model

from . import timing

def device_skip_reason(device: str, native: bool = True, triton: bool = False) -> str | None:
    """One line saying why `device` (and, with native, mytorch's native library; with triton,
    Triton where the device is cuda) cannot run here, or None."""
    from mytorch_ext import _info

    if native and _info.NATIVE_ERROR is not None:
        return "the native library mytorch_ext._C is not built (pip install --no-build-isolation -e .)"
    if device == "cuda":
        if not torch.backends.cuda.is_built():
            return "this torch is built without CUDA"
        if not torch.cuda.is_available():
            return "no CUDA GPU is available (torch.cuda.is_available() is False)"
        if triton and not _info.triton_available():
            return "Triton is not installed (pip install triton)"
    elif device == "mytorch" and not hasattr(torch, "mytorch"):
        return "the mytorch device is not registered (mytorch_ext.register_device())"
    return None


def fallback_note(before: dict) -> str:
    """" (CPU fallbacks: op xN, ...)" for the mytorch device's fallbacks since `before`, or ""."""
    import mytorch_ext

    after = mytorch_ext.fallback_counts()
    fell = {k: v - before.get(k, 0) for k, v in after.items() if v > before.get(k, 0)}
    return " (CPU fallbacks: " + ", ".join(f"{k} x{v}" for k, v in sorted(fell.items())) + ")" if fell else ""


def rel_err(ours, ref) -> float:
    """||ours - ref|| / ||ref|| in float64, on the reference's device."""
    b = ref.detach().double()
    a = ours.detach().to(b.device).double()
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
        return [self._title_line(), " | ".join(head)]

    def _title_line(self) -> str:
        better = "higher" if self.higher_is_better else "lower"
        return f"{self.title}  [{self.unit}, {better} is better: {self.convention}; {self.ratio_note()}]"

    def ratio_note(self) -> str:
        """What the printed ratio columns mean (the title line's last part)."""
        return self.ratio_meaning()

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
    """Values shown as median (min..max) over the samples, with `digits` decimals in cells
    `cell_width` wide; then a ratio column per peer, `ratio_width` wide (ratio_head and
    ratio_cell: "x PEER", as in every Table). `spread[label][impl]` is (min, max), set by the
    suite; the JSON adds IMPL_min and IMPL_max to each row."""

    spread: dict
    digits = 2
    cell_width = 24
    ratio_width = 12

    def impl_head(self, impl: str) -> str:
        return impl

    def ratio_head(self, peer: str) -> str:
        return "x " + peer

    def ratio_cell(self, vals: dict, peer: str) -> float:
        return self.ratio(vals, peer)

    def header(self) -> list[str]:
        head = ["shape".ljust(self._label_width())] + [f"{self.impl_head(i):>{self.cell_width}}" for i in self.impls]
        head += [f"{self.ratio_head(i):>{self.ratio_width}}" for i in self.impls[1:]]
        return [self._title_line(), " | ".join(head)]

    def format(self) -> str:
        title, head = self.header()
        lines = [title, head, "-+-".join("-" * len(h) for h in head.split(" | "))]
        d, w = self.digits, self.ratio_width - 1
        for label, vals in self.rows:
            cells = [label.ljust(self._label_width())]
            for i in self.impls:
                lo, hi = self.spread[label][i]
                cells.append(f"{f'{vals[i]:.{d}f} ({lo:.{d}f}..{hi:.{d}f})':>{self.cell_width}}")
            cells += [f"{self.ratio_cell(vals, peer):>{w}.2f}x" for peer in self.impls[1:]]
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


def write_outputs(out_dir: str, suite: str, tables: list[Table], **meta) -> list[str]:
    """JSON with the environment, meta (device, mode) and the timing spread; one PNG per
    table (chart). Prints the spread line, and the spread/load warnings once per process."""
    os.makedirs(out_dir, exist_ok=True)
    spread = timing.take_spread()
    if spread is not None:
        print(timing.spread_line(suite, spread))
        for w in timing.spread_warnings(spread):
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
