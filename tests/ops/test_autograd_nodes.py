"""The C++ backward nodes of the hot ops (csrc/autograd/), as a checklist per op:
- the output's grad_fn is the op's node, and only when an input that gets a gradient needs one;
- gradients equal those of the same formula in ATen ops;
- a second backward without retain_graph is refused, with retain_graph it gives the same grads;
- forward-mode AD (dual tensors) gets a clear error naming the op.
"""
import math

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

import mytorch_ext  # noqa: F401

ops = torch.ops.mytorch


def _rope_ref(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :half], sin[:, None, :half]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def _attn_ref(q, k, v):
    s = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(q.shape[-1])
    return torch.einsum("bhij,bjhd->bihd", s.softmax(-1), v)


def _cases():
    g = torch.Generator().manual_seed(0)

    def r(*s):
        return torch.randn(*s, generator=g, dtype=torch.float64)

    x, w, b = r(4, 8), r(8), r(8)
    t = torch.randint(0, 8, (4,), generator=g)
    cos, sin = r(5, 4).cos(), r(5, 4).sin()
    emb = r(8, 6)
    return {
        # name: (node name, op on the inputs, reference formula, inputs, indices of the inputs with gradients)
        "softmax": ("mytorch::SoftmaxBackward", lambda x: ops.softmax(x, -1), lambda x: x.softmax(-1), (x,), (0,)),
        "log_softmax": ("mytorch::LogSoftmaxBackward", lambda x: ops.log_softmax(x, -1),
                        lambda x: x.log_softmax(-1), (x,), (0,)),
        "rms_norm": ("mytorch::RmsNormBackward", lambda x, w: ops.rms_norm(x, [8], w, 1e-6)[0],
                     lambda x, w: F.rms_norm(x, [8], w, 1e-6), (x, w), (0, 1)),
        "layer_norm": ("mytorch::LayerNormBackward", lambda x, w, b: ops.layer_norm(x, [8], w, b, 1e-5)[0],
                       lambda x, w, b: F.layer_norm(x, [8], w, b, 1e-5), (x, w, b), (0, 1, 2)),
        "gelu": ("mytorch::GeluBackward", lambda x: ops.gelu(x, "tanh"), lambda x: F.gelu(x, approximate="tanh"),
                 (x,), (0,)),
        "bias_gelu": ("mytorch::BiasGeluBackward", lambda x, b: ops.bias_gelu(x, b, "none"),
                      lambda x, b: F.gelu(x + b), (x, b), (0, 1)),
        "swiglu": ("mytorch::SwigluBackward", lambda a, b: ops.swiglu(a, b), lambda a, b: F.silu(a) * b,
                   (x, r(4, 8)), (0, 1)),
        "rope": ("mytorch::RopeBackward", lambda x: ops.rope(x, cos, sin, False), lambda x: _rope_ref(x, cos, sin),
                 (r(1, 5, 2, 8),), (0,)),
        "flash_attn": ("mytorch::FlashAttnBackward",
                       lambda q, k, v: ops.flash_attn(q, k, v)[0], _attn_ref,
                       (r(1, 5, 2, 8), r(1, 6, 2, 8), r(1, 6, 2, 8)), (0, 1, 2)),
        "fused_cross_entropy": ("mytorch::FusedCrossEntropyBackward",
                                lambda x: ops.fused_cross_entropy(x, t)[0], lambda x: F.cross_entropy(x, t),
                                (x,), (0,)),
        "fused_cross_entropy_grad": ("mytorch::FusedCrossEntropyGradBackward",
                                     lambda x: ops.fused_cross_entropy_grad(x, t)[0],
                                     lambda x: F.cross_entropy(x, t), (x,), (0,)),
        "fused_linear_cross_entropy": ("mytorch::FusedLinearCrossEntropyBackward",
                                       lambda h, e: ops.fused_linear_cross_entropy(h, e, t)[0],
                                       lambda h, e: F.cross_entropy(h @ e.T, t), (r(4, 6), emb), (0, 1)),
    }


CASES = _cases()


def _leaves(inputs):
    return [x.detach().clone().requires_grad_() for x in inputs]


def _grads(fn, inputs, weight, **kw):
    out = fn(*inputs)
    return torch.autograd.grad((out * weight).sum(), inputs, **kw), out


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_and_gradients(name):
    node, op, ref, inputs, _ = CASES[name]
    mine, theirs = _leaves(inputs), _leaves(inputs)
    out = op(*mine)
    assert out.grad_fn is not None and out.grad_fn.name() == node
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    got = torch.autograd.grad((out * w).sum(), mine)
    want, expected = _grads(ref, theirs, w)
    torch.testing.assert_close(out, expected)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_node_without_a_gradient(name):
    _, op, _, inputs, _ = CASES[name]
    assert op(*inputs).grad_fn is None and not op(*inputs).requires_grad
    with torch.no_grad():
        assert op(*_leaves(inputs)).grad_fn is None


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_backward(name):
    _, op, _, inputs, _ = CASES[name]
    leaves = _leaves(inputs)
    loss = op(*leaves).sum()
    first = torch.autograd.grad(loss, leaves, retain_graph=True)
    again = torch.autograd.grad(loss, leaves)  # the retained graph gives the same gradients
    for a, b in zip(first, again):
        torch.testing.assert_close(a, b)
    with pytest.raises(RuntimeError, match="second time"):
        torch.autograd.grad(loss, leaves)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_mode_ad_is_refused(name):
    _, op, _, inputs, with_grad = CASES[name]
    leaves = _leaves(inputs)
    i = with_grad[0]
    with fwAD.dual_level():
        args = list(leaves)
        args[i] = fwAD.make_dual(leaves[i], torch.ones_like(leaves[i]))
        with pytest.raises(RuntimeError, match=r"mytorch::\w+: forward-mode AD"):
            op(*args)


def test_node_creation_hooks_see_the_nodes():
    """torch.autograd.graph.node_creation_hook (in the torch releases that have it) is called
    with the op's node, as with ATen's."""
    graph = pytest.importorskip("torch.autograd.graph")
    if not hasattr(graph, "node_creation_hook"):
        pytest.skip("this torch has no node_creation_hook")
    seen = []
    x = torch.randn(3, 4, requires_grad=True)
    with graph.node_creation_hook(lambda node: seen.append(node.name())):
        ops.softmax(x, -1)
        ops.rms_norm(x, [4], None, None)
    assert "mytorch::SoftmaxBackward" in seen and "mytorch::RmsNormBackward" in seen, seen
