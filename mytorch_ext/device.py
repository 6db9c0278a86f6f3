"""``torch.mytorch``: the runtime module of the mytorch device.

mytorch is PyTorch's PrivateUse1 backend renamed ``mytorch``. Its memory is host memory
owned by mytorch's allocator; ``MYTORCH_DEVICE_COUNT`` (default 2) sets how many devices
there are. This module mirrors ``torch.cuda`` where it makes sense: device selection,
synchronization, memory statistics, random number generators and autocast support.
"""
from __future__ import annotations

from typing import Any, Iterable, Union

import os

import torch

from . import _C

_rt = _C._device

__all__ = [
    "is_available", "device_count", "current_device", "set_device", "device", "synchronize",
    "init", "is_initialized", "get_device_capability",
    "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
    "set_rng_state", "get_rng_state_all", "set_rng_state_all", "default_generators",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "reset_peak_memory_stats", "memory_stats", "empty_cache", "set_memory_limit",
    "get_amp_supported_dtype", "is_bf16_supported",
    "fallback_counts", "reset_fallback_counts", "set_fallback_mode", "fallback_mode",
]

_Device = Union[torch.device, str, int, None]


def _index(dev: _Device, optional: bool = True) -> int:
    """The device index meant by ``dev`` (None / "mytorch": the current device)."""
    if dev is None:
        return current_device()
    if isinstance(dev, str):
        dev = torch.device(dev)
    if isinstance(dev, torch.device):
        if dev.type != "mytorch":
            raise ValueError(f"mytorch: expected a mytorch device, got {dev}")
        if dev.index is None:
            return current_device()
        dev = dev.index
    if not isinstance(dev, int):
        raise TypeError(f"mytorch: expected a device, an index or None, got {type(dev).__name__}")
    if dev < 0 and optional:
        return current_device()
    _rt.check_index(dev)
    return dev


# ---- devices ----
def is_available() -> bool:
    return _rt.device_count() > 0


def device_count() -> int:
    return _rt.device_count()


def current_device() -> int:
    return _rt.current_device()


def set_device(device: _Device) -> None:
    idx = _index(device)
    _rt.set_device(idx)


def synchronize(device: _Device = None) -> None:
    """Waits for all work on ``device``. mytorch runs every op synchronously, so this
    only checks the device."""
    _index(device)


_initialized = False


def _lazy_init() -> None:
    """Initializes the device on first use (torch calls it before the first tensor is made
    on the device). After that, a process forked from this one cannot use the device, as on
    CUDA: its memory and threads belong to the parent."""
    global _initialized
    if _is_in_bad_fork():
        raise RuntimeError(
            "Cannot re-initialize the mytorch device in a forked subprocess: the parent "
            "process initialized it before the fork. To use the mytorch device with "
            "multiprocessing, use the 'spawn' start method "
            "(multiprocessing.set_start_method('spawn') or mp.get_context('spawn')).")
    if _initialized:
        return
    _rt.register_fork_handler()
    _initialized = True


def init() -> None:
    """Initializes the device (as torch.cuda.init); raises in a child forked after the
    parent initialized it."""
    _lazy_init()


def is_initialized() -> bool:
    return _initialized and not _is_in_bad_fork()


def _is_in_bad_fork() -> bool:
    """True in a process forked after its parent initialized the mytorch device."""
    return _rt.is_in_bad_fork()


class device:
    """Context manager that makes ``device`` the current mytorch device."""

    def __init__(self, device: _Device):
        self.idx = -1 if device is None else _index(device, optional=True)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _rt.exchange_device(self.idx)
        return self

    def __exit__(self, *exc):
        _rt.set_device(self.prev_idx)
        return False


def get_device_capability(device: _Device = None) -> dict:
    """What torch.accelerator.get_device_capability reports for a mytorch device: the dtypes
    a tensor on it can hold and convert between."""
    return torch._C._accelerator_getDeviceCapability(_index(device))


# ---- random numbers ----
def _generator(dev: _Device = None) -> torch.Generator:
    return _rt.default_generator(_index(dev))


def _default_generators() -> tuple:
    return tuple(_rt.default_generator(i) for i in range(device_count()))


def manual_seed(seed: int) -> None:
    """Seeds the current device's generator."""
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for g in _default_generators():
        g.manual_seed(int(seed))


def seed() -> None:
    """Seeds the current device's generator with a non-deterministic number."""
    _generator().seed()


def seed_all() -> None:
    s = _generator().seed()
    for g in _default_generators():
        g.manual_seed(s)


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: _Device = "mytorch") -> torch.Tensor:
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: _Device = "mytorch") -> None:
    _generator(device).set_state(new_state)


def get_rng_state_all() -> list:
    return [g.get_state() for g in _default_generators()]


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def __getattr__(name: str) -> Any:
    if name == "default_generators":
        return _default_generators()
    raise AttributeError(f"module 'torch.mytorch' has no attribute {name!r}")


# ---- memory ----
def memory_stats(device: _Device = None) -> dict:
    """CUDA-style statistics of the mytorch allocator for one device."""
    return dict(sorted(_rt.memory_stats(_index(device)).items()))


def memory_allocated(device: _Device = None) -> int:
    return _rt.memory_stats(_index(device))["allocated_bytes.all.current"]


def max_memory_allocated(device: _Device = None) -> int:
    return _rt.memory_stats(_index(device))["allocated_bytes.all.peak"]


def memory_reserved(device: _Device = None) -> int:
    """The allocator keeps no cache, so reserved memory is the allocated memory."""
    return memory_allocated(device)


def max_memory_reserved(device: _Device = None) -> int:
    return max_memory_allocated(device)


def reset_peak_memory_stats(device: _Device = None) -> None:
    _rt.reset_peak_memory_stats(_index(device))


def empty_cache() -> None:
    """Returns freed heap pages to the operating system (the allocator caches nothing)."""
    _rt.empty_cache()


def set_memory_limit(nbytes: int, device: _Device = None) -> None:
    """Caps the live bytes of one device (0: no cap); beyond it allocation raises
    torch.OutOfMemoryError. MYTORCH_MEMORY_LIMIT sets the same cap at start-up."""
    _rt.set_memory_limit(_index(device), int(nbytes))


# ---- autocast ----
def get_amp_supported_dtype() -> list:
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def _is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled("mytorch")


# ---- CPU fallback ----
def fallback_counts() -> dict:
    """Op name ("aten::add.Tensor") -> how often it ran through the CPU fallback."""
    return dict(_rt.fallback_counts())


def reset_fallback_counts() -> None:
    _rt.reset_fallback_counts()


def set_fallback_mode(mode: str) -> None:
    """'warn' (once per op), 'silent', or 'error' (an op without a native kernel raises
    NotImplementedError). MYTORCH_FALLBACK sets it at start-up."""
    _rt.set_fallback_mode(mode)


def fallback_mode() -> str:
    return _rt.fallback_mode()


# ---- registration ----
def register_at_import() -> bool:
    """Whether `import mytorch_ext` makes the `mytorch` device.

    MYTORCH_DEVICE=1 or 0 decides. By default the device is registered unless a CUDA GPU is
    present: once a PrivateUse1 backend is named, torch (at least 2.11) takes it as the
    current accelerator and CUDA autograd loses its streams. With a GPU, call
    `mytorch_ext.register_device()` to use both in one process.
    """
    choice = os.environ.get("MYTORCH_DEVICE", "").strip()
    if choice in ("0", "1"):
        return choice == "1"
    return not torch.cuda.is_available()


_EXIT_GRAPHS: list = []  # alive until the interpreter clears this module


def _drain_autograd_device_threads() -> None:
    """At exit: make autograd's mytorch device threads drop their last graph task while
    Python is still whole.

    A backward leaves Python objects in its graph task (the context it ran in, the returned
    gradients). When a device thread releases the last reference to that task after the
    interpreter has begun to finalize, the release needs the GIL that can no longer be taken
    and the process aborts ("terminate called without an active exception"). A device thread
    runs tasks in order, so one more backward on each device frees the earlier tasks first.
    This last one holds no Python object the thread could release: its graph and gradients
    stay referenced here, and its gradients accumulate instead of being returned.
    """
    try:
        run_backward = torch.autograd.Variable._execution_engine.run_backward
        for index in range(device_count()):
            leaf = torch.zeros((), device=f"mytorch:{index}", requires_grad=True)
            out = leaf * 1.0
            seed = torch.ones((), device=out.device)
            _EXIT_GRAPHS.append((leaf, out, seed))
            run_backward((out,), (seed,), False, False, (), False, True)
    except Exception:  # never fail at exit
        pass


def _register() -> None:
    """Makes PrivateUse1 the `mytorch` device (idempotent)."""
    import atexit
    import sys

    if not getattr(_register, "_exit_hook", False):
        atexit.register(_drain_autograd_device_threads)
        _register._exit_hook = True
    if torch._C._get_privateuse1_backend_name() != "mytorch":
        torch.utils.rename_privateuse1_backend("mytorch")
    if not hasattr(torch, "mytorch"):
        torch._register_device_module("mytorch", sys.modules[__name__])
    if not hasattr(torch.Tensor, "is_mytorch"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
    # The device's c10d backend, registered for the device: init_process_group() without a
    # backend picks it (as it picks nccl for cuda).
    import torch.distributed as dist

    if dist.is_available():
        from . import distributed

        distributed.register()
    # torch.compile(..., backend="mytorch") and dynamo's device interface
    from . import device_compile

    device_compile.register_when_dynamo_loads()
