"""Inductor decompositions of the mytorch ops whose work Inductor fuses with its neighbours.

Under torch.compile, Inductor fuses pointwise and row-reduction code across op boundaries: a
residual add into the next norm, the casts around a RoPE, an activation's backward into the
gradient that feeds it. A mytorch op is opaque to it: one more call from the generated code,
its own launch and output buffer, and run-time checks of each output. For the norms, RoPE,
the activations (gelu, bias + gelu, SwiGLU, hardswish, hardsigmoid) and softmax / log_softmax,
forward and backward, Inductor uses the decomposition registered beside each op instead: the
same math in ATen ops, in float32 for 16-bit inputs as the kernels compute. Eager calls,
opcheck and backends other than Inductor (aot_eager, export) keep the op itself. Attention and the fused
losses stay mytorch calls under Inductor: their kernels do what Inductor's generated code does
not (an online softmax over key tiles; no logits tensor).

The registrations go into Inductor's own table (torch._inductor.decomposition.decompositions)
when Inductor first loads, so `import mytorch_ext` does not import Inductor.
MYTORCH_INDUCTOR_DECOMPOSE=0, read at that moment, leaves every op opaque. Inductor's on-disk
caches key a compiled graph by the graph Dynamo captured, not by the decompositions in the
table, so that setting also turns them off for the process: a graph compiled with the ops
opaque is never stored where a later default run would load it, nor the other way round.
"""
from __future__ import annotations

import os
from typing import Callable

import torch

from .._after_import import after_import

_TABLE_MODULE = "torch._inductor.decomposition"
_PENDING: list[tuple[str, Callable]] = []
_INSTALLED: dict[str, Callable] = {}

LOW = (torch.bfloat16, torch.float16)


def enabled() -> bool:
    return os.environ.get("MYTORCH_INDUCTOR_DECOMPOSE", "1") != "0"


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the kernels compute in: float32 for 16-bit inputs, else the input's."""
    return torch.float32 if dtype in LOW else dtype


def sum_over(t: torch.Tensor, dims: tuple) -> torch.Tensor:
    """t summed over dims, or t itself when dims is empty (t.sum(()) sums every dim)."""
    return t.sum(dims) if dims else t


def inductor_decomposition(qualname: str) -> Callable[[Callable], Callable]:
    """Decorator: fn becomes Inductor's decomposition of the op `qualname` (its default
    overload), from the moment Inductor loads."""

    def wrap(fn: Callable) -> Callable:
        _PENDING.append((qualname, fn))
        after_import(_TABLE_MODULE, _install)
        return fn

    return wrap


def _install() -> None:
    if not enabled():
        _PENDING.clear()
        from torch._functorch import config as aot_config
        from torch._inductor import config as inductor_config

        inductor_config.fx_graph_cache = False
        aot_config.enable_autograd_cache = False
        return
    import torch._inductor.decomposition as table

    while _PENDING:
        qualname, fn = _PENDING.pop(0)
        ns, name = qualname.split("::")
        op = getattr(getattr(torch.ops, ns), name).default
        table.register_decomposition(op)(fn)
        _INSTALLED[qualname] = fn


def installed() -> dict[str, Callable]:
    """{op name: decomposition} of those now in Inductor's table."""
    return dict(_INSTALLED)
