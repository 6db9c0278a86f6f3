"""Reverse-mode automatic differentiation.

Every differentiable op is a ``Function`` subclass with two static methods over torch
buffers (plain ``torch.Tensor`` objects, never mytorch Tensors):

    forward(ctx, *args)  -> one output buffer
    backward(ctx, grad)  -> one gradient buffer per argument of forward (None for none)

``Function.apply`` runs ``forward`` on the buffers of its mytorch arguments and wraps the
result. When grad mode is on and some argument requires grad, ``ctx`` (an instance of the
Function subclass) becomes the output's graph node: it records the arguments that need a
gradient in ``ctx.parents`` and keeps whatever ``forward`` stored on it.

``backward`` sorts the nodes reachable from a tensor topologically, then visits them once
each, output first, summing the gradients that reach each node before passing them on.
Leaves (tensors that require grad and were not made by an op) accumulate into ``.grad``.
Unless ``retain_graph=True``, each node drops what it saved as soon as it has run, so a
second backward through it fails with a clear error instead of a wrong answer.
"""
from __future__ import annotations

import functools

import torch

from ._kernels import K
from .tensor import Tensor

_state = {"enabled": True}

_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved intermediate "
    "values after calling backward.")


def is_grad_enabled() -> bool:
    return _state["enabled"]


class _GradMode:
    """Context manager and decorator that sets grad mode, restoring the old one on exit."""
    mode = True

    def __enter__(self):
        self.prev = _state["enabled"]
        _state["enabled"] = self.mode

    def __exit__(self, *exc):
        _state["enabled"] = self.prev

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):
    """Within it, ops record no graph: outputs never require grad."""
    mode = False


class enable_grad(_GradMode):
    mode = True


class Function:
    """Base class of every differentiable op; an instance is one node of the graph."""
    parents = ()
    needs_input_grad = ()
    freed = False

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args):
        ctx = cls()
        track = False
        if _state["enabled"]:
            needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
            track = True in needs
            if track:
                ctx.needs_input_grad = needs
        out = cls.forward(ctx, *[a.data if isinstance(a, Tensor) else a for a in args])
        result = Tensor.__new__(Tensor)
        result.data = out
        result.grad = None
        if track:
            ctx.parents = tuple(a if n else None for a, n in zip(args, needs))
            result.requires_grad = True
            result._ctx = ctx
        else:
            result.requires_grad = False
            result._ctx = None
        return result

    def release(self):
        """Drop everything forward saved; keep the graph's shape."""
        parents, needs = self.parents, self.needs_input_grad
        self.__dict__.clear()
        self.parents, self.needs_input_grad, self.freed = parents, needs, True

    def __repr__(self):
        return f"<{type(self).__name__}Backward>"


def _toposort(root: Function) -> list[Function]:
    """Nodes reachable from root, each after every node that consumes its output."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        for p in node.parents:
            if p is not None and p._ctx is not None and p._ctx not in seen:
                stack.append((p._ctx, False))
    order.reverse()
    return order


def _accumulate(leaf, grad: torch.Tensor) -> None:
    if grad.shape != leaf.data.shape:
        raise RuntimeError(f"autograd: gradient of shape {tuple(grad.shape)} for a leaf of shape "
                           f"{tuple(leaf.data.shape)} (a backward formula is wrong)")
    if leaf.grad is None:
        leaf.grad = Tensor(grad)
    else:
        leaf.grad = Tensor(K.add(leaf.grad.data, grad))


def backward(tensor, gradient=None, retain_graph: bool = False) -> None:
    """Accumulate d(tensor)/d(leaf) into leaf.grad for every leaf that requires grad."""
    if not tensor.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
        if tensor.data.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        grad = torch.ones_like(tensor.data)
    else:
        grad = gradient.data if isinstance(gradient, Tensor) else gradient
        if grad.shape != tensor.data.shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[0] has a shape of {grad.shape} and output[0] "
                f"has a shape of {tensor.data.shape}.")
        if grad.dtype != tensor.data.dtype:
            raise RuntimeError(f"backward: gradient has dtype {grad.dtype} but the tensor has "
                               f"dtype {tensor.data.dtype}")
    root = tensor._ctx
    if root is None:  # a leaf
        _accumulate(tensor, grad)
        return
    grads = {root: grad}
    with no_grad():
        for node in _toposort(root):
            g = grads.pop(node, None)
            if g is None:
                continue
            if node.freed:
                raise RuntimeError(_FREED)
            in_grads = node.backward(node, g)
            if not isinstance(in_grads, tuple):
                in_grads = (in_grads,)
            for parent, gi in zip(node.parents, in_grads):
                if parent is None or gi is None:
                    continue
                ctx = parent._ctx
                if ctx is None:
                    _accumulate(parent, gi)
                else:
                    prev = grads.get(ctx)
                    grads[ctx] = gi if prev is None else K.add(prev, gi)
            if not retain_graph:
                node.release()

