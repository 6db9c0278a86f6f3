"""norms: fused CUDA kernels vs ATen eager vs torch.compile, as GB/s and % of copy bandwidth."""
from __future__ import annotations

from .common import Table


def skip_reason(device: str) -> str | None:
    if device != "cuda":
        return "the fused-kernel suite times CUDA kernels; no CUDA device selected or present"
    return None


def run(device: str, quick: bool, progress) -> list[Table]:
    from . import cuda_fused

    copy_bw = cuda_fused.copy_bandwidth()
    rows: list[dict] = []
    shapes = [(16384, 4096)] if quick else [(16384, 4096), (32768, 8192)]
    cases = cuda_fused.cases()
    bar = progress(len(cases) * len(shapes), "norms (cuda)")
    for n, d in shapes:
        for c in cases:
            cuda_fused.run_case(*c, n, d, copy_bw, True, rows)
            bar.step(f"{c[0]} {n}x{d}")
    bar.close()
    t = Table(f"fused kernels, bf16, forward (copy = {copy_bw:.0f} GB/s)", "GB/s",
              "min bytes (inputs read once, outputs written once) / time",
              ["mytorch", "aten_eager", "torch_compile", "copy"])
    for r in rows:
        t.add(f"{r['op']} {r['shape']} ({r['fwd_pct_copy']:.0f}% of copy)",
              {"mytorch": r["fwd_gbs"], "aten_eager": r["eager_fwd_gbs"],
               "torch_compile": r["compile_fwd_gbs"], "copy": copy_bw})
    return [t]
