"""The ``torch.backends`` entry point: ``import torch`` calls ``load()`` at its end, so the
``mytorch`` device exists without ``import mytorch_ext`` (in spawned workers too).
torch skips every such entry point when ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``.

The device is registered on the same terms as ``import mytorch_ext`` (``MYTORCH_DEVICE``,
and not by default where a CUDA GPU is present). A checkout whose native library is not
built loads nothing, so ``import torch`` never fails because of mytorch.
"""
from __future__ import annotations


def load() -> None:
    import sys

    if "mytorch_ext" in sys.modules:
        return  # `import mytorch_ext` is what imported torch: it registers the device itself
    import mytorch_ext

    try:
        mytorch_ext.register_device  # noqa: B018  (raises ImportError without _C)
    except ImportError:
        return
