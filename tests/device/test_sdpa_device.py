"""F.scaled_dot_product_attention on the mytorch device lands in mytorch's CPU flash
kernel (the overrideable SDPA backend): parity with CPU SDPA, no CPU fallback, dropout,
and O(N * D) memory."""
import warnings

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
    assert_pair(*sdpa_both(q, k, v, torch.randn(2, 2, 70, 64), attn_mask=mask))


# (B, Hq, Hk, L, S, E, Ev, kwargs): head_dims that are not multiples of 8, v's != q's
ODD = [
    (2, 3, 3, 17, 33, 1, 1, {}),
    (1, 4, 2, 40, 29, 12, 12, {"is_causal": True, "enable_gqa": True}),
    (2, 2, 2, 65, 65, 33, 33, {"scale": 0.2}),
    (1, 2, 2, 9, 130, 255, 255, {"is_causal": True}),
    (2, 2, 2, 30, 45, 12, 20, {}),
    (1, 4, 1, 64, 50, 40, 7, {"enable_gqa": True, "attn_mask": "float"}),
]


@pytest.mark.parametrize("case", ODD, ids=lambda c: "-".join(map(str, c[:7])))
def test_sdpa_odd_head_dims_run_on_the_device(case):
    """Any head_dim in [1, 256] and v's head_dim != q's: the flash kernel, no CPU fallback."""
    B, Hq, Hk, L, S, E, Ev, kw = case
    q = torch.randn(B, Hq, L, E, requires_grad=True)
    k = torch.randn(B, Hk, S, E, requires_grad=True)
    v = torch.randn(B, Hk, S, Ev, requires_grad=True)
    if kw.get("attn_mask") == "float":
        kw = dict(kw, attn_mask=torch.randn(L, S))
    assert_pair(*sdpa_both(q, k, v, torch.randn(B, Hq, L, Ev), **kw))


def test_sdpa_strided_last_dim_runs_on_the_device():
    q, k, v = (torch.randn(1, 2, 13, 21).transpose(-1, -2).requires_grad_() for _ in range(3))
    assert q.stride(-1) != 1
    assert_pair(*sdpa_both(q, k, v, torch.randn(1, 2, 21, 13)))


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-6), (torch.bfloat16, 3e-2)])
def test_sdpa_dtypes_on_the_device(dtype, tol):
    q, k, v = (torch.randn(1, 2, 37, 12, dtype=dtype, requires_grad=True) for _ in range(3))
    g = torch.randn(1, 2, 37, 12, dtype=dtype)
    (ref, rg), (out, gs) = sdpa_both(q, k, v, g, is_causal=True)
    assert out.dtype == dtype
    torch.testing.assert_close(out, ref, rtol=tol, atol=tol)
    for x, y in zip(gs, rg):
        torch.testing.assert_close(x, y, rtol=4 * tol, atol=4 * tol)


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
    with pytest.raises(RuntimeError, match=r"^mytorch::flash_attn: expected q, k, v on one device, "
                                           r"got q on mytorch:0, k on cpu, v on cpu"):
        torch.ops.mytorch.flash_attn(q.detach(), k.detach().cpu(), v.detach().cpu())


def op_both(args, kw, g):
    """mytorch::flash_attn (out, lse, grads of q, k, v) on CPU tensors and on mytorch ones."""
    q, k, v, *rest = args
    res = []
    for dev in ("cpu", "mytorch"):
        x = [t.detach().to(dev).requires_grad_() for t in (q, k, v)]
        extra = [t.to(dev) if isinstance(t, torch.Tensor) else t for t in rest]
        with no_fallbacks():
            out, lse = torch.ops.mytorch.flash_attn(*x, *extra, **kw)
            grads = torch.autograd.grad(out, x, g.to(dev))
        assert out.device.type == dev and all(t.device.type == dev for t in grads)
        res.append([t.cpu() for t in (out, lse, *grads)])
    return res


@pytest.mark.parametrize("kw", [{"window_left": 7, "window_right": 2}, {"softcap": 3.0, "causal": True},
                                {"window_left": 4, "window_right": 0, "softcap": 1.5}])
def test_flash_attn_window_softcap_on_device_match_cpu(kw):
    q = torch.randn(2, 45, 4, 20)
    k, v = torch.randn(2, 60, 2, 20), torch.randn(2, 60, 2, 12)
    cpu, dev = op_both((q, k, v), kw, torch.randn(2, 45, 4, 12))
    for a, b in zip(dev, cpu):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_flash_attn_varlen_on_device_matches_cpu():
    cu_q = torch.tensor([0, 17, 18, 18, 60], dtype=torch.int32)
    cu_k = torch.tensor([0, 20, 50, 55, 90], dtype=torch.int32)
    q, k, v = torch.randn(60, 4, 13), torch.randn(90, 2, 13), torch.randn(90, 2, 13)
    args = (q, k, v, 0.0, None, True, 5, -1, 2.0, None, cu_q, cu_k, 42, 35)
    cpu, dev = op_both(args, {}, torch.randn(60, 4, 13))
    for a, b in zip(dev, cpu):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_flash_attn_dropout_draws_from_the_device_generator():
    """mytorch_ext.flash_attn on the device seeds dropout from torch.mytorch's generator.
    v = identity (seqlen_k = head_dim): out is the dropped-out P, 0 where dropped."""
    q, k = (torch.randn(1, 16, 2, 16, device="mytorch") for _ in range(2))
    v = torch.eye(16).expand(1, 2, 16, 16).transpose(1, 2).contiguous().to("mytorch")

    def kept(mytorch_seed, cpu_seed):
        torch.mytorch.manual_seed(mytorch_seed)
        torch.default_generator.manual_seed(cpu_seed)  # torch.manual_seed would seed both
        with no_fallbacks():
            out = mytorch_ext.flash_attn(q, k, v, dropout_p=0.5)
        return out.cpu() != 0

    base = kept(1, 1)
    assert torch.equal(kept(1, 1), base)
    assert torch.equal(kept(1, 2), base)  # the CPU generator plays no part
    assert not torch.equal(kept(2, 1), base)


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


def test_fused_sdp_choice_answers_for_the_device():
    """torch._fused_sdp_choice on device tensors: the device's own answer, no fallback."""
    q = torch.randn(2, 3, 8, 16, device="mytorch")
    with no_fallbacks(), warnings.catch_warnings():
        warnings.simplefilter("error")
        choice = torch._fused_sdp_choice(q, q, q)
    assert choice == int(SDPBackend.OVERRIDEABLE)
    with sdpa_kernel([SDPBackend.MATH]):
        assert torch._fused_sdp_choice(q, q, q) == int(SDPBackend.MATH)
    big = torch.randn(1, 1, 4, 300, device="mytorch")  # head_dim > 256: the math path
    assert torch._fused_sdp_choice(big, big, big) == int(SDPBackend.MATH)
