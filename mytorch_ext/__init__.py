"""mytorch_ext: mytorch's kernels for PyTorch.

Importing it loads the native library (``mytorch_ext._C``), which registers the
``torch.ops.mytorch.*`` schemas and kernels, then adds the Python side of each op
(fake kernels, autograd) and the ``mytorch`` device.

If ``_C`` is not built, the import still succeeds so that the pure-Python parts
(``mytorch_ext.triton``) stay usable; anything that needs ``_C`` then raises one
clear ImportError.
"""
from __future__ import annotations

__version__ = "0.1.0"

import torch  # noqa: F401  (must load before _C)

from ._info import build_info, require_native, triton_available  # noqa: E402,F401

try:
    from . import _C  # noqa: F401
except ImportError as _e:  # pragma: no cover - depends on the install
    from . import _info as _i

    _i.NATIVE_ERROR = (
        f"mytorch_ext: the native library mytorch_ext._C is not built ({_e}). "
        "Build it with `pip install --no-build-isolation -e .` or `make build`."
    )

    def __getattr__(name):
        raise ImportError(_i.NATIVE_ERROR)

else:
    from . import ops  # noqa: F401  registers fake kernels and autograd
    from .ops.activation import gelu  # noqa: F401
    from .ops.attention import flash_attn, flash_attn_varlen, scaled_dot_product_attention  # noqa: F401
    from .ops.kvcache import flash_attn_with_kvcache  # noqa: F401
    from .ops.attention_fp8 import flash_attn_fp8, quantize_fp8  # noqa: F401
    from . import device as _device

    register_device = _device._register  # torch.device("mytorch"), torch.mytorch, tensor.mytorch()
    if _device.register_at_import():
        register_device()
    from .device import (  # noqa: F401
        fallback_counts,
        fallback_mode,
        reset_fallback_counts,
        set_fallback_mode,
    )
    from .patching import (apply_to, patch, patch_stats, patched, register_hf,  # noqa: F401
                           revert, set_attention_backend, unpatch)
    from .patching.hf import install_import_hook as _install_hf_hook

    # attn_implementation="mytorch" without a register_hf() call, whether transformers is
    # imported before or after mytorch_ext.
    _install_hf_hook()

__all__ = ["build_info", "triton_available", "gelu", "flash_attn", "flash_attn_varlen",
           "scaled_dot_product_attention", "flash_attn_with_kvcache", "flash_attn_fp8",
           "quantize_fp8", "__version__", "fallback_counts",
           "reset_fallback_counts", "set_fallback_mode", "fallback_mode", "patch", "unpatch",
           "patched", "patch_stats", "apply_to", "revert", "register_hf", "register_device",
           "set_attention_backend"]
