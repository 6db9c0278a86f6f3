"""Second derivatives through mytorch ops are right or raise: never silently wrong.

Every backward op (mytorch::*_backward) either has a derivative of its own, checked here by
gradgradcheck through its forward op, or raises at the second backward, naming it
(csrc/autograd/backward_ops.cpp). torch, left to itself, only warns there and leaves that
op's part of the gradient out (a None second derivative of gelu, where ATen's is defined).
Each row reaches the backward op through its forward op's autograd, with the
forward's OpInfo sample (tests/opinfo.py)."""
import pytest
import torch

from opinfo import OPS

import mytorch_ext  # noqa: F401

DIFFERENTIABLE = {"softmax_backward", "log_softmax_backward"}
BACKWARD_OPS = sorted(n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names()
                      if n.startswith("mytorch::") and n.endswith("_backward"))
# backward ops whose OpInfo entry does not name its forward op
FORWARD_OF = {"dropout_backward": "dropout", "embedding_backward": "embedding"}


def _second_order(backward_op, dtype=None):
    """(function of the differentiable inputs, those inputs) for the forward op of backward_op."""
    forward = FORWARD_OF.get(backward_op) or OPS[backward_op].backward_of
    entry = OPS[forward]
    args, kwargs = entry.samples()[0]
    args = list(args)
    idx = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
    if dtype is not None:
        args = [a.detach().to(dtype).requires_grad_(i in idx) if isinstance(a, torch.Tensor)
                and a.is_floating_point() else a for i, a in enumerate(args)]
    op = getattr(torch.ops.mytorch, forward)

    def f(*xs):
        a = list(args)
        for i, x in zip(idx, xs):
            a[i] = x
        out = op(*a, **kwargs)
        return out[0] if isinstance(out, (tuple, list)) else out

    return f, [args[i] for i in idx]


def test_every_backward_op_is_covered():
    assert BACKWARD_OPS and all(b in FORWARD_OF or (b in OPS and OPS[b].backward_of) for b in BACKWARD_OPS)


@pytest.mark.parametrize("backward_op", [b for b in BACKWARD_OPS if b not in DIFFERENTIABLE])
def test_second_backward_raises_naming_the_op(backward_op):
    f, inputs = _second_order(backward_op)
    assert inputs and all(t.requires_grad for t in inputs)
    out = f(*inputs)
    # the output's gradient needs one too, so that the second backward reaches the backward
    # op even where the forward is linear in its inputs (rope, pooling)
    v = torch.randn_like(out, requires_grad=True)
    grads = torch.autograd.grad(out, inputs, v, create_graph=True)
    second = sum((g.float() ** 2).sum() for g in grads if g is not None)
    with pytest.raises(RuntimeError, match=f"derivative for mytorch::{backward_op} is not implemented"):
        second.backward()


@pytest.mark.parametrize("backward_op", sorted(DIFFERENTIABLE))
def test_second_derivative_matches_finite_differences(backward_op):
    f, inputs = _second_order(backward_op, torch.float64)
    assert torch.autograd.gradgradcheck(f, inputs, atol=1e-5, rtol=1e-4)
