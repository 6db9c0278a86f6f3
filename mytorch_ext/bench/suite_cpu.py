"""cpu: mytorch's OpenMP kernels vs ATen CPU, kernel by kernel."""
from __future__ import annotations

from .common import Table


def skip_reason(device: str) -> str | None:
    return None  # the OpenMP kernels run wherever there is a CPU


def run(device: str, quick: bool, progress) -> list[Table]:
    from . import cpu_vision

    bar = progress(1, "cpu kernels")
    tables = list(cpu_vision.conv_tables(batch=2 if quick else 8, quick=quick))
    bar.step("conv2d")
    bar.close()
    return tables
