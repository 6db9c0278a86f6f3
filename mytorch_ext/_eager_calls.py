"""call(op, *args): a mytorch op from Python code on the hot path.

In eager mode the op runs through its binding in mytorch_ext._C._eager_calls (csrc/eager_calls.cpp):
one call into a typed dispatcher handle, about 1.3-2.5 us less than torch.ops' Python overload
resolution and argument parsing on a CPU, with the same dispatch (the op's own autograd node)
and the same result. Otherwise it runs through torch.ops: torch.compile traces those calls,
and a TorchFunctionMode or an argument with __torch_function__ needs their Python dispatch
(torch._C._has_torch_function checks both).
"""
from __future__ import annotations

import torch

from . import _C

_bound = _C._eager_calls
_ops = torch.ops.mytorch
_has_torch_function = torch._C._has_torch_function


def call(op: str, *args):
    if not torch.compiler.is_compiling() and not _has_torch_function(args):
        return getattr(_bound, op)(*args)
    return getattr(_ops, op)(*args)
