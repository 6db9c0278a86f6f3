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


def _sdpa(**kw):
    """SDPA's call on mytorch::flash_attn (mytorch_patching::hf_attention: the Hugging Face door, GQA
    heads allowed) and ATen's SDPA with the same arguments, as (op, reference)."""
    mask = kw.pop("attn_mask", None)
    causal = kw.pop("is_causal", False)
    op = lambda q, k, v: torch.ops.mytorch_patching.hf_attention(q, k, v, mask, 0.0, causal, None)  # noqa: E731
    ref = lambda q, k, v: F.scaled_dot_product_attention(  # noqa: E731
        q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True)
    return op, ref


def _cases():
    g = torch.Generator().manual_seed(0)

    def r(*s):
        return torch.randn(*s, generator=g, dtype=torch.float64)

    x, w, b = r(4, 8), r(8), r(8)
    t = torch.randint(0, 8, (4,), generator=g)
    cos, sin = r(5, 4).cos(), r(5, 4).sin()
    emb = r(8, 6)
    sdpa, sdpa_ref = _sdpa()
    # top-left causal with fewer queries than keys: the keys past the queries are cut off (zero gradients)
    sdpa_cut, sdpa_cut_ref = _sdpa(is_causal=True)
    # an additive mask (values exact in float32, the CPU kernel's bias dtype), GQA heads
    sdpa_mask, sdpa_mask_ref = _sdpa(attn_mask=r(5, 6).float().double())
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
        "sdpa_attention": ("mytorch::SdpaAttentionBackward", sdpa, sdpa_ref,
                           (r(1, 2, 5, 8), r(1, 2, 6, 8), r(1, 2, 6, 8)), (0, 1, 2)),
        "sdpa_attention_causal_cut": ("mytorch::SdpaAttentionBackward", sdpa_cut, sdpa_cut_ref,
                                      (r(1, 2, 3, 8), r(1, 2, 6, 8), r(1, 2, 6, 8)), (0, 1, 2)),
        "sdpa_attention_gqa_mask": ("mytorch::SdpaAttentionBackward", sdpa_mask, sdpa_mask_ref,
                                    (r(1, 4, 5, 8), r(1, 2, 6, 8), r(1, 2, 6, 8)), (0, 1, 2)),
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
        with pytest.raises(RuntimeError, match=r"mytorch\w*::\w+: forward-mode AD"):
            op(*args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_mode_ad_is_refused_without_requires_grad(name):
    """A dual tensor whose primal needs no gradient is refused too: the tangent is not dropped."""
    _, op, _, inputs, with_grad = CASES[name]
    args = [x.clone() for x in inputs]
    i = with_grad[0]
    with fwAD.dual_level():
        args[i] = fwAD.make_dual(args[i], torch.ones_like(args[i]))
        with pytest.raises(RuntimeError, match=r"mytorch\w*::\w+: forward-mode AD"):
            op(*args)
        with torch.no_grad(), pytest.raises(RuntimeError, match=r"mytorch\w*::\w+: forward-mode AD"):
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


def test_sdpa_route_node():
    """patch()'s route of F.scaled_dot_product_attention attaches the same node; gradients equal ATen's."""
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 4, n, 16, generator=g, dtype=torch.float64) for n in (7, 9, 9))
    w = torch.randn(2, 4, 7, 16, generator=g, dtype=torch.float64)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
    want, expected = _grads(fn, _leaves((q, k, v)), w)
    with mytorch_ext.patched(("sdpa",)):
        mine = _leaves((q, k, v))
        out = fn(*mine)
        assert out.grad_fn.name() == "mytorch::SdpaAttentionBackward"
        got = torch.autograd.grad((out * w).sum(), mine)
    torch.testing.assert_close(out, expected)
    for a, b in zip(got, want):  # flash_attn's lse is float32, whatever the inputs' dtype
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_sdpa_dropout_backward_uses_the_forward_draw():
    """With dropout, the output is linear in value through the kept attention weights A:
    sum(w * A v) = sum((A^T w) * v), which holds only when the backward drops what the forward did."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 6, 8, generator=g, dtype=torch.float64) for _ in range(3))
    w = torch.randn(1, 2, 6, 8, generator=g, dtype=torch.float64)
    leaves = _leaves((q, k, v))
    out = torch.ops.mytorch_patching.hf_attention(*leaves, None, 0.5, False, None)
    assert out.grad_fn.name() == "mytorch::SdpaAttentionBackward"
    dv = torch.autograd.grad((out * w).sum(), leaves[2])[0]
    torch.testing.assert_close((out * w).sum(), (dv * v).sum())
    with torch.no_grad():
        nodrop = torch.ops.mytorch_patching.hf_attention(q, k, v, None, 0.0, False, None)
    assert not torch.allclose(out.detach(), nodrop)  # dropout took effect
