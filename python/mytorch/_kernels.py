"""``K.<name>``: the kernel ``torch.ops.mytorch.<name>.default``, looked up once.

Every computation of the framework goes through this object, so it is the one place to
see which kernels mytorch uses. ``K.add__Scalar`` names the overload ``mytorch::add.Scalar``.
"""
import torch

import mytorch_ext

mytorch_ext.require_native()


class _Kernels:
    def __getattr__(self, name: str):
        op_name, _, overload = name.partition("__")
        try:
            op = getattr(getattr(torch.ops.mytorch, op_name), overload or "default")
        except (AttributeError, RuntimeError):
            raise NotImplementedError(
                f"mytorch: the kernel mytorch::{op_name}{'.' + overload if overload else ''} "
                "is not in this build of mytorch_ext") from None
        setattr(self, name, op)  # later lookups skip __getattr__
        return op


K = _Kernels()
