"""mytorch_ext.patch(): ATen ops routed to mytorch kernels through torch.library."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext
from mytorch_ext.patching import aten as patching

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _run(fn, *inputs):
    """fn's output and the gradients of inputs for a fixed random cotangent."""
    xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out = fn(*xs)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out)
    out.backward(g)
    return out.detach(), [x.grad for x in xs if x.requires_grad]


def _compare(op, fn, *inputs, mytorch_calls=1, fallthrough_calls=0, rtol=1e-5, atol=1e-5):
    ref, ref_g = _run(fn, *inputs)
    with mytorch_ext.patched((op,)):
        mytorch_ext.patch_stats(reset=True)
        out, g = _run(fn, *inputs)
        stats = mytorch_ext.patch_stats()
    torch.testing.assert_close(out, ref, rtol=rtol, atol=atol)
    for a, b in zip(g, ref_g):
        torch.testing.assert_close(a, b, rtol=rtol, atol=atol)
    assert stats.get(op, {"mytorch": 0, "fallthrough": 0}) == {
        "mytorch": mytorch_calls, "fallthrough": fallthrough_calls}, stats


def _qkv(b, hq, hk, n, s, d, dtype=torch.float32, device="cpu"):
    return (torch.randn(b, hq, n, d, dtype=dtype, device=device),
            torch.randn(b, hk, s, d, dtype=dtype, device=device),
            torch.randn(b, hk, s, d, dtype=dtype, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_sdpa_routes(device):
    # on CUDA the default backend choice may leave plain calls to PyTorch's SDPA: this test
    # is about the route itself, so every call takes mytorch's kernel
    saved = patching.attention_backend()
    patching.set_attention_backend("mytorch")
    try:
        _sdpa_routes(device)
    finally:
        patching.set_attention_backend(saved)


def _sdpa_routes(device):
    dt = torch.float32 if device == "cpu" else torch.bfloat16
    tol = dict(rtol=1e-4, atol=1e-5) if device == "cpu" else dict(rtol=2e-2, atol=2e-2)
    q, k, v = _qkv(2, 4, 4, 37, 37, 16, dt, device)
    _compare("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), q, k, v, **tol)
    # GQA, cross attention with top-left causal (n < s), bool and additive masks
    q, k, v = _qkv(2, 4, 2, 19, 33, 32, dt, device)
    _compare("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
             q, k, v, **tol)
    q2, k2, v2 = _qkv(2, 4, 2, 33, 19, 32, dt, device)  # top-left causal with more queries than keys
    _compare("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
             q2, k2, v2, **tol)
    mask = torch.rand(2, 1, 19, 33, device=device) > 0.3
    mask[..., 0] = True
    _compare("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3,
                                                                    enable_gqa=True), q, k, v, **tol)
    bias = torch.randn(19, 33, dtype=dt, device=device)
    _compare("sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=True),
             q, k, v, **tol)


def test_sdpa_falls_through():
    # head_dim > 256, a mask that needs a gradient, a 3-D call: each runs the original ATen
    # kernel, and the answer is the same. (head_dim 12 and float16 run the OpenMP kernel.)
    q, k, v = _qkv(1, 2, 2, 9, 9, 12)
    _compare("sdpa", F.scaled_dot_product_attention, q, k, v, mytorch_calls=1, fallthrough_calls=0)
    q, k, v = _qkv(1, 2, 2, 9, 9, 16, torch.float16)
    _compare("sdpa", F.scaled_dot_product_attention, q, k, v, mytorch_calls=1, fallthrough_calls=0,
             rtol=2e-3, atol=2e-3)
    q, k, v = _qkv(1, 2, 2, 9, 9, 264)
    _compare("sdpa", F.scaled_dot_product_attention, q, k, v, mytorch_calls=0, fallthrough_calls=1)
    q, k, v = _qkv(1, 2, 2, 9, 9, 16)
    bias = torch.randn(9, 9)
    _compare("sdpa", lambda q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b), q, k, v, bias,
             mytorch_calls=0, fallthrough_calls=1)
    _compare("sdpa", F.scaled_dot_product_attention, q[0], k[0], v[0], mytorch_calls=0, fallthrough_calls=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_norms_softmax_gelu_route(dtype):
    x = torch.randn(3, 5, 24, dtype=dtype).transpose(0, 1)  # non-contiguous
    w, b = torch.randn(24, dtype=dtype), torch.randn(24, dtype=dtype)
    tol = dict(rtol=1e-5, atol=1e-5)
    _compare("layer_norm", lambda x, w, b: F.layer_norm(x, (24,), w, b, 1e-5), x, w, b, **tol)
    _compare("layer_norm", lambda x: F.layer_norm(x, (5, 24)), x.transpose(0, 1).contiguous(), **tol)
    _compare("rms_norm", lambda x, w: F.rms_norm(x, (24,), w, 1e-6), x, w, **tol)
    _compare("rms_norm", lambda x: F.rms_norm(x, (24,)), x, **tol)
    _compare("softmax", lambda x: F.softmax(x, dim=1), x, **tol)
    _compare("softmax", lambda x: torch.softmax(x, -1), x, **tol)
    _compare("log_softmax", lambda x: F.log_softmax(x, dim=0), x, **tol)
    _compare("gelu", F.gelu, x, **tol)
    _compare("gelu", lambda x: F.gelu(x, approximate="tanh"), x, **tol)


def test_cross_entropy_uses_patched_log_softmax():
    logits, target = torch.randn(7, 11), torch.randint(0, 11, (7,))
    target[2] = -100
    _compare("log_softmax", lambda x: F.cross_entropy(x, target), logits)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_routes(reduction):
    logits, target = torch.randn(13, 37), torch.randint(0, 37, (13,))
    target[[2, 7]] = -100
    _compare("cross_entropy", lambda x: F.cross_entropy(x, target, reduction=reduction), logits)
    _compare("cross_entropy", lambda x: F.cross_entropy(x, target, reduction=reduction,
                                                        label_smoothing=0.1), logits)
    target[[2, 7]] = 5
    _compare("cross_entropy", lambda x: F.cross_entropy(x, target, ignore_index=5,
                                                        reduction=reduction), logits)


def test_cross_entropy_falls_through():
    # class dim of a 4-D input, class weights, probability targets: ATen's composite
    x, target = torch.randn(2, 5, 3, 4), torch.randint(0, 5, (2, 3, 4))
    _compare("cross_entropy", lambda x: F.cross_entropy(x, target), x,
             mytorch_calls=0, fallthrough_calls=1)
    logits, target = torch.randn(6, 5), torch.randint(0, 5, (6,))
    w = torch.rand(5)
    _compare("cross_entropy", lambda x: F.cross_entropy(x, target, weight=w), logits,
             mytorch_calls=0, fallthrough_calls=1)
    _compare("cross_entropy", lambda x, p: F.cross_entropy(x, p), logits,
             torch.softmax(torch.randn(6, 5), 1), mytorch_calls=0, fallthrough_calls=1)


def test_falls_through_on_mismatched_dtypes():
    # bf16 input with float32 parameters: ATen's mixed-dtype kernel, not mytorch's
    x = torch.randn(4, 8, dtype=torch.bfloat16)
    _compare("layer_norm", lambda x, w: F.layer_norm(x, (8,), w), x, torch.randn(8),
             mytorch_calls=0, fallthrough_calls=1)
    _compare("softmax", lambda x: F.softmax(x, 1, dtype=torch.float32), x, mytorch_calls=1)


def test_inference_mode_routes():
    x = torch.randn(4, 8)
    ref = F.layer_norm(x, (8,))
    with mytorch_ext.patched(("layer_norm",)), torch.inference_mode():
        out = F.layer_norm(x, (8,))
    torch.testing.assert_close(out, ref)
    assert mytorch_ext.patch_stats()["layer_norm"] == {"mytorch": 1, "fallthrough": 0}


def _override_keys(qual):
    return [k for k in ("CPU", "AutogradCPU", "CUDA", "AutogradCUDA")
            if "csrc/patching/aten.cpp" in _dump(qual, k)]


def _dump(qual, key):
    lines = torch._C._dispatch_dump(qual).splitlines()
    return "\n".join(l for l in lines if l.startswith(key + ":"))


def test_unpatch_removes_registrations():
    before = torch._C._dispatch_dump("aten::scaled_dot_product_attention")
    names = mytorch_ext.patch()
    assert set(names) == set(patching.available_ops())
    assert "AutogradCPU" in _override_keys("aten::scaled_dot_product_attention")
    assert "AutogradCPU" in _override_keys("aten::layer_norm")
    assert "AutogradCPU" in _override_keys("aten::cross_entropy_loss")
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::layer_norm", "AutogradCPU")
    mytorch_ext.unpatch()
    assert torch._C._dispatch_dump("aten::scaled_dot_product_attention") == before
    for qual in ("aten::scaled_dot_product_attention", "aten::layer_norm", "aten::rms_norm",
                 "aten::softmax.int", "aten::gelu", "aten::cross_entropy_loss"):
        assert _override_keys(qual) == []
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::layer_norm", "AutogradCPU")
    x = torch.randn(3, 4)
    F.layer_norm(x, (4,))
    torch.testing.assert_close(F.gelu(x), x * 0.5 * (1 + torch.erf(x / 2 ** 0.5)))  # ATen's own again
    assert mytorch_ext.patch_stats() == {}


def test_patch_twice_and_context_manager():
    mytorch_ext.patch(("softmax",))
    mytorch_ext.patch(("softmax", "softmax"))
    F.softmax(torch.randn(2, 3), 1)
    assert mytorch_ext.patch_stats(reset=True)["softmax"] == {"mytorch": 1, "fallthrough": 0}
    with mytorch_ext.patched(("gelu",)):
        assert patching.patched_ops() == ("gelu",)
        F.softmax(torch.randn(2, 3), 1)
    assert patching.patched_ops() == ("softmax",)  # the state found on entry
    assert "softmax" not in mytorch_ext.patch_stats()
    mytorch_ext.unpatch()
    mytorch_ext.unpatch()
    assert patching.patched_ops() == ()


class TestErrors(TestCase):
    def test_unknown_name(self):
        with self.assertRaises(ValueError) as cm:
            mytorch_ext.patch(("sdpa", "layernorm"))
        msg = str(cm.exception).replace(str(patching.available_ops()), "<valid>")
        self.assertExpectedInline(msg, """mytorch_ext.patch: unknown op name(s) ['layernorm']; valid names: <valid>""")
        self.assertIn("'layer_norm'", str(cm.exception))
        self.assertEqual(patching.patched_ops(), ())

    def test_valid_names_on_cpu(self):
        self.assertEqual(sorted(patching.available_ops()),
                         sorted(["sdpa", "layer_norm", "rms_norm", "softmax", "log_softmax", "gelu",
                                 "cross_entropy"]))
