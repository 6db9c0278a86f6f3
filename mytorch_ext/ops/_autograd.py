"""register_autograd with little host time per call.

Same contract as torch.library.register_autograd (setup_context(ctx, inputs, output),
backward(ctx, *grads) -> one gradient per input), but the Autograd-key kernel is an
autograd.Function around the op below autograd. torch.library's kernel flattens the
arguments and rebuilds the schema's defaults in Python on every call, which costs more
host time than launching a memory-bound kernel. Ops with keyword-only or tensor-list
arguments keep torch.library's kernel (an autograd.Function sees no tensor in a list).
"""
from __future__ import annotations

import torch

_LIBS: dict = {}
_MISSING = object()


def register_autograd(qualname: str, backward, setup_context, lib=None):
    if torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "Autograd"):
        return  # the op's autograd is C++ (csrc/autograd/), which the training path keeps to
    ns, name = qualname.split("::")
    op = getattr(getattr(torch.ops, ns), name).default
    arguments = op._schema.arguments
    if any(a.kwarg_only or (isinstance(a.type, torch._C.ListType) and "Tensor" in str(a.type)) for a in arguments):
        torch.library.register_autograd(qualname, backward, setup_context=setup_context, lib=lib)
        return
    # The dispatcher drops trailing arguments equal to their defaults: put them back.
    defaults = tuple(a.default_value if a.has_default_value() else _MISSING for a in arguments)
    n_args = len(arguments)

    class Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            with torch._C._AutoDispatchBelowAutograd():
                out = op(*args)
            setup_context(ctx, args, out)
            return out

        @staticmethod
        def backward(ctx, *grads):
            return backward(ctx, *grads)

    Function.__name__ = Function.__qualname__ = f"{name}_autograd"

    def kernel(*args):
        if len(args) < n_args:
            args = args + defaults[len(args):]
        if torch.is_grad_enabled() and _any_requires_grad(args):
            return Function.apply(*args)
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)

    lib = lib or _LIBS.setdefault(ns, torch.library.Library(ns, "IMPL"))
    lib.impl(name, kernel, "Autograd")


def _any_requires_grad(args) -> bool:
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.requires_grad:
                return True
    return False
