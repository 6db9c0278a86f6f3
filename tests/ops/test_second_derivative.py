"""Second derivatives through mytorch ops never go silently wrong.

The backward ops below have no backward of their own (csrc/autograd/backward_ops.cpp): a
second backward through one of them raises, naming it. torch, left to itself, only warns
there and leaves that op's part of the gradient out (before, the second derivative of gelu
came out as None where ATen's gives numbers). One row per backward op, reached through its
forward op's autograd with the forward's OpInfo sample (tests/opinfo.py)."""
import pytest
import torch

from opinfo import OPS

import mytorch_ext  # noqa: F401

# backward op: the forward op whose autograd calls it
NO_SECOND_DERIVATIVE = {
    "conv1d_backward": "conv1d", "conv2d_backward": "conv2d", "flash_attn_backward": "flash_attn",
    "fused_cross_entropy_backward": "fused_cross_entropy", "gelu_backward": "gelu",
    "layer_norm_backward": "layer_norm", "rms_norm_backward": "rms_norm", "rope_backward": "rope",
    "swiglu_backward": "swiglu",
}


@pytest.mark.parametrize("backward_op", sorted(NO_SECOND_DERIVATIVE))
def test_second_backward_raises_naming_the_op(backward_op):
    entry = OPS[NO_SECOND_DERIVATIVE[backward_op]]
    args, kwargs = entry.samples()[0]
    inputs = [args[i] for i in entry.grad if args[i] is not None]
    assert inputs and all(t.requires_grad for t in inputs)
    out = getattr(torch.ops.mytorch, NO_SECOND_DERIVATIVE[backward_op])(*args, **kwargs)
    out = out[0] if isinstance(out, (tuple, list)) else out
    # the output's gradient needs one too, so that the backward op is reached by the second
    # backward even where the op is linear in its inputs (rope)
    v = torch.randn_like(out, requires_grad=True)
    grads = torch.autograd.grad(out, inputs, v, create_graph=True)
    second = sum((g.float() ** 2).sum() for g in grads if g is not None)
    with pytest.raises(RuntimeError, match=f"derivative for mytorch::{backward_op} is not implemented"):
        second.backward()
