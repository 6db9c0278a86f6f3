"""mytorch_ext: mytorch's kernels for PyTorch.

Importing it loads the native library (``mytorch_ext._C``), which registers the
``torch.ops.mytorch.*`` schemas and kernels, then adds the Python side of each op
(fake kernels, autograd) and the ``mytorch`` device.
"""
from __future__ import annotations

__version__ = "0.1.0"

import torch  # noqa: F401  (must load before _C)

try:
    from . import _C  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError(
        f"mytorch_ext: the native library mytorch_ext._C is not built ({e}). "
        "Build it with `pip install --no-build-isolation -e .` (or `make build`)."
    ) from None

from . import ops  # noqa: E402,F401  registers fake kernels and autograd
from ._info import build_info, triton_available  # noqa: E402,F401
from .ops.activation import gelu  # noqa: E402,F401

__all__ = ["build_info", "triton_available", "gelu", "__version__"]
