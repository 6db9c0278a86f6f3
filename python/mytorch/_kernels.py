"""``K.<name>``: the kernel ``torch.ops.mytorch.<name>.default``, looked up once and called
below torch's autograd.

Every computation of the framework goes through this object, so it is the one place to
see which kernels mytorch uses. ``K.add__Scalar`` names the overload ``mytorch::add.Scalar``.
"""
import torch

import mytorch_ext

mytorch_ext.require_native()


_below_autograd = torch._C._AutoDispatchBelowAutograd


def _kernel(op):
    """op, called past torch's autograd: the framework keeps its own graph, so the
    torch.library autograd wrapper (a Python function per call, about 3 us) has nothing to do."""
    def call(*args, **kwargs):
        with _below_autograd():
            return op(*args, **kwargs)

    call.op = op
    call.__name__ = call.__qualname__ = str(op)
    return call


class _Kernels:
    def __getattr__(self, name: str):
        op_name, _, overload = name.partition("__")
        try:
            op = getattr(getattr(torch.ops.mytorch, op_name), overload or "default")
        except (AttributeError, RuntimeError):
            raise NotImplementedError(
                f"mytorch: the kernel mytorch::{op_name}{'.' + overload if overload else ''} "
                "is not in this build of mytorch_ext") from None
        fn = _kernel(op)
        setattr(self, name, fn)  # later lookups skip __getattr__
        return fn


K = _Kernels()
