"""F.scaled_dot_product_attention on the mytorch device lands in mytorch's CPU flash
kernel (the overrideable SDPA backend): parity with CPU SDPA, no CPU fallback, dropout,
and O(N * D) memory."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import mytorch_ext  # noqa: F401
from helpers import no_fallbacks

pytestmark = pytest.mark.skipif(not hasattr(torch, "mytorch"), reason="mytorch device not built")


def on_device(*ts):
    return [t.detach().to("mytorch").requires_grad_(t.requires_grad) for t in ts]


def sdpa_both(q, k, v, g, **kw):
    """(out, grads) of CPU SDPA and of the same call on mytorch tensors."""
    ref = F.scaled_dot_product_attention(q, k, v, **kw)
    ref_grads = torch.autograd.grad(ref, (q, k, v), g)
    qd, kd, vd = on_device(q, k, v)
    if "attn_mask" in kw and kw["attn_mask"] is not None:
        kw = dict(kw, attn_mask=kw["attn_mask"].to("mytorch"))
    with no_fallbacks():
        out = F.scaled_dot_product_attention(qd, kd, vd, **kw)
        grads = torch.autograd.grad(out, (qd, kd, vd), g.to("mytorch"))
    assert out.device.type == "mytorch"
    return (ref, ref_grads), (out.cpu(), [x.cpu() for x in grads])


def assert_pair(a, b):
    (ref, rg), (out, gs) = a, b
    torch.testing.assert_close(out, ref, rtol=2e-5, atol=2e-5)
    for x, y in zip(gs, rg):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("N", [1, 17, 255, 1000])
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_matches_cpu(N, causal):
    q, k, v = (torch.randn(2, 3, N, 64, requires_grad=True) for _ in range(3))
    g = torch.randn(2, 3, N, 64)
    assert_pair(*sdpa_both(q, k, v, g, is_causal=causal))


def test_sdpa_top_left_causal_gqa_and_scale():
    q = torch.randn(1, 4, 37, 32, requires_grad=True)
    k, v = (torch.randn(1, 2, 90, 32, requires_grad=True) for _ in range(2))
    g = torch.randn(1, 4, 37, 32)
    assert_pair(*sdpa_both(q, k, v, g, is_causal=True, enable_gqa=True, scale=0.3))
    q2 = torch.randn(1, 4, 90, 32, requires_grad=True)
    k2, v2 = (torch.randn(1, 4, 37, 32, requires_grad=True) for _ in range(2))
    assert_pair(*sdpa_both(q2, k2, v2, torch.randn(1, 4, 90, 32), is_causal=True))


def test_sdpa_float_mask():
    q, k, v = (torch.randn(2, 2, 70, 64, requires_grad=True) for _ in range(3))
    mask = torch.randn(2, 1, 70, 70)
    assert_pair(*sdpa_both(q, k, v, torch.randn(2, 2, 70, 64), attn_mask=mask))


def test_sdpa_bool_mask():
    q, k, v = (torch.randn(2, 2, 70, 64, requires_grad=True) for _ in range(3))
    mask = torch.rand(70, 70) > 0.3
    mask[:, 0] = True  # SDPA's CPU path gives NaN on rows that attend to nothing
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    qd, kd, vd = on_device(q, k, v)
    out = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask.to("mytorch"))
    torch.testing.assert_close(out.cpu(), ref, rtol=2e-5, atol=2e-5)


def test_sdpa_dropout_is_reproducible_and_rescaled():
    """v = identity: out is the dropped-out, rescaled probability matrix."""
    N, p = 64, 0.25
    q, k = torch.randn(1, 2, N, N), torch.randn(1, 2, N, N)
    v = torch.eye(N).expand(1, 2, N, N).contiguous()
    probs = torch.softmax(q @ k.transpose(-1, -2) / N ** 0.5, -1)
    qd, kd, vd = on_device(q, k, v)
    torch.mytorch.manual_seed(3)
    out = F.scaled_dot_product_attention(qd, kd, vd, dropout_p=p).cpu()
    kept = out != 0
    torch.testing.assert_close(out[kept], probs[kept] / (1 - p), rtol=1e-5, atol=1e-6)
    assert abs((1 - kept.double().mean().item()) - p) < 0.03
    torch.mytorch.manual_seed(3)
    again = F.scaled_dot_product_attention(qd, kd, vd, dropout_p=p).cpu()
    assert torch.equal(again, out)


def test_sdpa_dropout_backward_uses_the_same_mask():
    """v = identity makes out the dropped-out P; the backward must give dV = P^T g."""
    N, p = 64, 0.4
    q, k = torch.randn(1, 2, N, N), torch.randn(1, 2, N, N)
    v = torch.eye(N).expand(1, 2, N, N).contiguous()
    qd, kd, vd = on_device(q, k, v)
    vd.requires_grad_()
    g = torch.randn(1, 2, N, N)
    torch.mytorch.manual_seed(5)
    out = F.scaled_dot_product_attention(qd, kd, vd, dropout_p=p)
    (dv,) = torch.autograd.grad(out, (vd,), g.to("mytorch"))
    dropped = out.detach().cpu()
    assert (dropped == 0).any()
    torch.testing.assert_close(dv.cpu(), dropped.transpose(-1, -2) @ g, rtol=1e-5, atol=1e-5)


def test_math_backend_still_selectable():
    q, k, v = on_device(*(torch.randn(1, 2, 9, 16) for _ in range(3)))
    with sdpa_kernel([SDPBackend.MATH]):
        out = F.scaled_dot_product_attention(q, k, v)
    ref = F.scaled_dot_product_attention(*(t.cpu() for t in (q, k, v)))
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)


def test_flash_attn_op_on_device_and_mixed_devices():
    q, k, v = (torch.randn(1, 33, 2, 64, device="mytorch", requires_grad=True) for _ in range(3))
    with no_fallbacks():
        out, lse = torch.ops.mytorch.flash_attn(q, k, v, causal=True)
        grads = torch.autograd.grad(out, (q, k, v), torch.ones_like(out))
    ref = F.scaled_dot_product_attention(*(t.detach().cpu().transpose(1, 2) for t in (q, k, v)), is_causal=True)
    torch.testing.assert_close(out.cpu(), ref.transpose(1, 2), rtol=2e-5, atol=2e-5)
    assert all(x.device.type == "mytorch" for x in grads)
    with pytest.raises(RuntimeError, match=r"expected q and k on the same device, got mytorch:0 and cpu"):
        torch.ops.mytorch.flash_attn(q.detach(), k.detach().cpu(), v.detach().cpu())


def peak_extra_bytes(B, H, N, D, backward):
    q, k, v = (torch.randn(B, H, N, D, device="mytorch", requires_grad=backward) for _ in range(3))
    g = torch.randn(B, H, N, D, device="mytorch")
    torch.mytorch.synchronize()
    base = torch.mytorch.memory_allocated()
    torch.mytorch.reset_peak_memory_stats()
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    if backward:
        torch.autograd.grad(out, (q, k, v), g)
    return torch.mytorch.max_memory_allocated() - base


def in_out_bytes(B, H, N, D, backward):
    qkv = 3 * B * H * N * D * 4
    lse = B * H * N * 4
    return (qkv + lse + B * H * N * D * 4) if backward else (B * H * N * D * 4 + lse)  # grads / out


@pytest.mark.parametrize("N,backward", [(8192, False), (4096, True)])
def test_memory_is_linear_in_seqlen(N, backward):
    B, H, D = 1, 2, 64
    extra = peak_extra_bytes(B, H, N, D, backward) - in_out_bytes(B, H, N, D, backward)
    # the scores of one head alone would take N^2 * 4 bytes
    assert extra < 4 * B * H * N * D * 4, (extra, N * N * 4)
    assert extra < N * N * 4 / 16


@pytest.mark.slow
def test_memory_is_linear_in_seqlen_fwd_bwd_8192():
    B, H, N, D = 1, 2, 8192, 64
    extra = peak_extra_bytes(B, H, N, D, True) - in_out_bytes(B, H, N, D, True)
    assert extra < 4 * B * H * N * D * 4, (extra, N * N * 4)
