"""What this build contains, and which optional pieces are usable here."""
from __future__ import annotations

import functools
import os
import platform

import torch

NATIVE_ERROR: str | None = None  # set by __init__ when _C failed to load


def require_native() -> None:
    """Raise the one-line ImportError when the native library is missing."""
    if NATIVE_ERROR is not None:
        raise ImportError(NATIVE_ERROR)


@functools.lru_cache(maxsize=None)
def _triton_status() -> tuple[str | None, str]:
    """(version or None, reason when missing)."""
    try:
        import triton
    except ImportError:
        return None, "Triton is not installed (pip install 'mytorch[triton]' or pip install triton)"
    return triton.__version__, ""


def triton_available() -> bool:
    return _triton_status()[0] is not None


def require_triton(op: str) -> None:
    """Raise a one-line error when a Triton-backed op cannot run."""
    version, reason = _triton_status()
    if version is None:
        raise RuntimeError(f"{op}: needs Triton. {reason}")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def build_info() -> dict:
    """What was compiled in (CUDA archs, OpenMP, CPU flags) and what is usable now."""
    require_native()
    from . import _C

    info = dict(_C.build_info())
    info["version"] = __import__("mytorch_ext").__version__
    info["torch"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda
    info["cuda_available"] = torch.cuda.is_available()
    if info["cuda_available"]:
        info["gpu"] = torch.cuda.get_device_name()
    info["triton"] = _triton_status()[0]
    info["cpu"] = _cpu_model()
    info["cpu_count"] = os.cpu_count()
    info["torch_threads"] = torch.get_num_threads()
    return info
