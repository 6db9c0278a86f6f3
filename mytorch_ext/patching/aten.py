"""Route ATen ops to mytorch kernels, for any model: the Python side of patch().

patch() registers, for each named op, a C++ kernel (csrc/patching/aten.cpp) on the ATen op's
backend keys (CPU, CUDA: reached under inference_mode) and per-backend Autograd keys
(AutogradCPU, AutogradCUDA), for the devices where the mytorch ops have kernels. The kernel
calls the mytorch op, which carries its own autograd, when the mytorch kernel supports the
call; otherwise it falls through to ATen:
- CompositeImplicitAutograd ops (scaled_dot_product_attention, layer_norm, rms_norm,
  softmax, log_softmax, cross_entropy_loss) run their composite kernel;
- aten::gelu, whose own kernels the route hides, runs its formula in ATen ops.
No Python runs between the ATen call and the mytorch kernel. `unpatch()` drops the
registrations.

This module decides which ops and devices are patched; `_fused_ok` also serves the Hugging
Face integration (hf.py). Which attention calls mytorch's kernel takes is decided in C++
(csrc/kernels/attention_sdpa.h), once for patch(), the Hugging Face attention and the mytorch
device.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _C

_my = torch.ops.mytorch

_KEYS = {"cpu": ("CPU", "AutogradCPU"), "cuda": ("CUDA", "AutogradCUDA")}
_FLOAT = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
# dtypes of the fused kernels (cross-entropy, SwiGLU, RoPE): the CUDA ones have no float64
_FUSED_FLOAT = {"cpu": _FLOAT, "cuda": (torch.float32, torch.bfloat16, torch.float16)}


def _fused_ok(ops, *tensors):
    """Whether the fused mytorch ops (a tuple of names) have kernels for these tensors'
    device and dtype."""
    dev = tensors[0].device
    dtypes = _FUSED_FLOAT.get(dev.type)
    if dtypes is None:
        return False
    for op in ops:  # loops, not generators: this runs on every call of a swapped forward
        if not _has_kernel(op, dev.type):
            return False
    for t in tensors:
        if t.device != dev or t.dtype not in dtypes:
            return False
    return True


def _tally(counts: dict, way: str) -> None:
    """Count one call in patch_stats(), in eager execution only.

    Under torch.compile nothing is counted: Dynamo folds is_compiling() to True, so the
    traced code holds no read or write of the counters (a read would become a guard on
    their value, and every step would recompile), and the Python kernels that AOTAutograd
    runs while it traces a graph are not calls of the compiled program either.
    """
    if not torch.compiler.is_compiling():
        counts[way] += 1


@dataclass
class _Op:
    aten: str             # the ATen op the route takes
    mytorch: tuple        # mytorch ops the route calls: each needs a kernel on a device


def _lookup_kernel(op, device):
    if not hasattr(_my, op):
        return False
    key = {"cpu": "CPU", "cuda": "CUDA"}[device]
    if not torch._C._dispatch_has_kernel_for_dispatch_key(f"mytorch::{op}", key):
        return False
    if device == "cuda" and op.startswith("flash_attn"):  # Triton kernels
        from .._info import triton_available

        return triton_available()
    return True


# (mytorch op, device) -> has a kernel. A plain dict, so that code torch.compile traces
# (module forwards, the transformers attention function) reads it without a graph break.
_TABLE: dict = {}


def refresh_kernels() -> None:
    """Read again which mytorch ops have kernels on which device."""
    names = {op for spec in OPS.values() for op in spec.mytorch} | set(EXTRA_OPS)
    _TABLE.clear()
    for op in names:
        for dev in ("cpu", "cuda"):
            try:
                _TABLE[(op, dev)] = _lookup_kernel(op, dev)
            except RuntimeError:
                _TABLE[(op, dev)] = False


def _has_kernel(op, device):
    return _TABLE.get((op, device), False)


# ------------------------------------------------------------------ attention backend

ATTENTION_BACKENDS = ("auto", "mytorch", "sdpa")
_attention = {"mode": "auto", "ready": False}
# CUDA device indices whose plain attention calls go to PyTorch's SDPA (the C++ code holds
# a copy: _C._patching.set_sdpa_devices).
_SDPA_DEVICES: set = set()
# "auto": the least work (batch * heads * queries * keys * head_dim, halved when causal) of a
# plain call that goes to cuDNN's SDPA. Below it (about 0.6 ms of forward+backward on an
# H200) the call's host time decides, and flash_attn's is the shorter: on an H200, a 141M
# Llama at seq 2048, batch 4 (work 6.4e9 per call) trained 1.31x faster in eager mode with
# every call on flash_attn, while the 271M one at seq 8192 (6.9e10), bound by the GPU, trains
# faster on cuDNN (docs/host_path.md).
AUTO_SDPA_MIN_WORK = 1 << 34


def _sdpa_faster(index: int) -> bool:
    """Whether PyTorch's SDPA beats mytorch's flash_attn on CUDA device `index` for plain
    calls: on Hopper (sm90) its cuDNN backend does, forward and backward (see
    docs/host_path.md); elsewhere mytorch's kernel is at least as fast as FA2."""
    return (torch.cuda.get_device_capability(index)[0] == 9 and torch.backends.cudnn.is_available()
            and torch.backends.cuda.cudnn_sdp_enabled())


def _refresh_attention() -> None:
    mode = _attention["mode"]
    _attention["ready"] = True
    _SDPA_DEVICES.clear()
    if mode != "mytorch" and torch.cuda.is_available():
        _SDPA_DEVICES.update(i for i in range(torch.cuda.device_count()) if mode == "sdpa" or _sdpa_faster(i))
    _C._patching.set_sdpa_devices(sorted(_SDPA_DEVICES), AUTO_SDPA_MIN_WORK if mode == "auto" else 0)


def set_attention_backend(mode: str) -> None:
    """Which kernel serves *plain* attention calls on CUDA (no mask, no dropout, head_dim at
    most 128: what SDPA's fastest backends take) through patch() and attn_implementation=
    "mytorch": "auto" (the default) takes PyTorch's SDPA on GPUs where its cuDNN backend is
    faster than mytorch's flash_attn (Hopper) for calls with at least AUTO_SDPA_MIN_WORK of
    work (batch * heads * queries * keys * head_dim, halved when causal), mytorch's for
    smaller calls, whose host time outweighs their GPU time, and on other GPUs; "mytorch"
    always takes mytorch's; "sdpa" always PyTorch's. Masks, dropout and larger head dims always
    run on mytorch's kernel, as do calls of torch.ops.mytorch.flash_attn itself."""
    if mode not in ATTENTION_BACKENDS:
        raise ValueError(f"mytorch_ext.set_attention_backend: expected one of {ATTENTION_BACKENDS}, got {mode!r}")
    _attention["mode"] = mode
    _refresh_attention()


def attention_backend() -> str:
    return _attention["mode"]


def _ready_attention(q) -> None:
    """Put set_attention_backend()'s choice in force for q's device before an attention call
    (the C++ code reads it): the default's per-GPU choice is made at the first CUDA call,
    when CUDA is initialised. Never while torch.compile traces: the choice is Python state that
    a graph cannot hold (the first eager call, such as generate()'s prefill, makes it)."""
    if q.device.type == "cuda" and not _attention["ready"] and not torch.compiler.is_compiling():
        _refresh_attention()


_CE_OPS = ("fused_cross_entropy", "fused_cross_entropy_backward", "fused_cross_entropy_grad")


OPS: dict[str, _Op] = {
    "sdpa": _Op("aten::scaled_dot_product_attention", ("flash_attn", "flash_attn_backward")),
    "layer_norm": _Op("aten::layer_norm", ("layer_norm", "layer_norm_backward")),
    "rms_norm": _Op("aten::rms_norm", ("rms_norm", "rms_norm_backward")),
    "softmax": _Op("aten::softmax.int", ("softmax", "softmax_backward")),
    "log_softmax": _Op("aten::log_softmax.int", ("log_softmax", "log_softmax_backward")),
    "gelu": _Op("aten::gelu", ("gelu", "gelu_backward")),
    "cross_entropy": _Op("aten::cross_entropy_loss", _CE_OPS),
}
# mytorch ops used outside patch() (apply_to's module swaps): refresh_kernels() reads them too
EXTRA_OPS = ("swiglu", "swiglu_backward", "rope", "rope_backward", "fused_linear_cross_entropy",
             "flash_attn_with_kvcache")


def _devices(spec: _Op):
    return [d for d in ("cpu", "cuda") if all(_has_kernel(o, d) for o in spec.mytorch)]


def available_ops() -> list[str]:
    """Op names patch() accepts: those whose mytorch kernels exist on some device."""
    refresh_kernels()
    return [n for n, s in OPS.items() if _devices(s)]


# ----------------------------------------------------------------------------- state

_state = {"ops": ()}


def _check_names(ops):
    valid = available_ops()
    if isinstance(ops, str):
        ops = (ops,)
    ops = tuple(dict.fromkeys(ops))
    bad = [o for o in ops if o not in valid]
    if bad:
        raise ValueError(f"mytorch_ext.patch: unknown op name(s) {bad}; valid names: {valid}")
    return ops


def _forget_dispatch_decisions(names) -> None:
    """Drop the dispatch decisions Python's op objects cached for these ATen ops: patch() and
    unpatch() change their kernels in C++, which torch.library's own registrations would have
    told those caches (a stale entry keeps sending e.g. torch.compile's tracing to the kernel
    that was registered when the entry was made)."""
    for name in names:
        ns, _, rest = OPS[name].aten.partition("::")
        op_name, _, overload = rest.partition(".")
        packet = getattr(getattr(torch.ops, ns), op_name, None)
        if packet is not None:
            getattr(packet, overload or "default")._dispatch_cache.clear()


def patch(ops=None) -> tuple:
    """Route the named ATen ops (default: all available) to mytorch kernels on CPU and CUDA.

    Patching again replaces the previous patch (so calling it twice is harmless). Returns the
    names patched. Unsupported calls (dtype, mask, device) fall through to ATen.
    """
    names = _check_names(available_ops() if ops is None else ops)
    routes = [(name, [key for dev in _devices(OPS[name]) for key in _KEYS[dev]]) for name in names]
    if "sdpa" in names:
        _refresh_attention()
    _C._patching.patch(routes)
    _forget_dispatch_decisions(set(names) | set(_state["ops"]))
    _state["ops"] = names
    return names


def unpatch() -> None:
    """Remove every registration patch() made; ATen's own kernels take over again."""
    _C._patching.unpatch()
    _forget_dispatch_decisions(_state["ops"])
    _state["ops"] = ()


def patched_ops() -> tuple:
    return _state["ops"]


class patched:
    """Context manager: `with mytorch_ext.patched(("sdpa", "rms_norm")): ...`.

    Restores the patch state found on entry (unpatched, or the ops patched before).
    """

    def __init__(self, ops=None):
        self.ops = ops
        _check_names(available_ops() if ops is None else ops)

    def __enter__(self):
        self._prev = patched_ops()
        return patch(self.ops)

    def __exit__(self, *exc):
        unpatch()
        if self._prev:
            patch(self._prev)
        return False


# Calls per op, for patch() and for the Hugging Face integration alike.
refresh_kernels()
# Calls counted in Python (the apply_to swaps, the Hugging Face attention); the patch()
# routes count in C++ (_C._patching.counts). patch_stats() adds the two.
STATS: dict = {name: {"mytorch": 0, "fallthrough": 0}
               for name in [*OPS, "hf_attention", "swiglu", "rope"]}


def patch_stats(reset: bool = False) -> dict:
    """Calls per op since the last reset: {"sdpa": {"mytorch": n, "fallthrough": m}, ...}.

    Counts calls in eager execution. Nothing is counted while torch.compile traces, so
    counting adds no state to a compiled graph and never causes a recompile; the apply_to
    swaps and the Hugging Face attention traced into a graph are not counted when it runs.
    A patch() kernel that a compiled graph calls as an ATen op at run time (a graph from a
    backend that does not decompose the op) counts then, as an eager call would.
    """
    counts = {n: dict(c) for n, c in STATS.items()}
    for n, c in _C._patching.counts(reset).items():
        for way, k in c.items():
            counts[n][way] += k
    if reset:
        _reset_python_stats()
    return {n: c for n, c in sorted(counts.items()) if c["mytorch"] or c["fallthrough"]}


def _reset_python_stats() -> None:
    for c in STATS.values():
        c["mytorch"] = c["fallthrough"] = 0


def reset_stats() -> None:
    _C._patching.counts(True)
    _reset_python_stats()


__all__ = ["patch", "unpatch", "patched", "patch_stats", "reset_stats", "available_ops",
           "patched_ops", "set_attention_backend", "attention_backend"]
