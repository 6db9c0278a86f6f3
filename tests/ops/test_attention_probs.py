"""return_attn_probs=True on flash_attn / flash_attn_varlen (flash-attn's testing convention):
S_dmask holds the attention probabilities, negative where dropout dropped the entry. The CPU
kernel's probabilities equal a float64 softmax, and the pattern is the one the output used:
out equals (kept P / (1 - p)) @ v."""
import math

import pytest
import torch

import mytorch_ext


def _ref_probs(q, k, scale, causal):
    b, nq, h, d = q.shape
    kk = k.double().repeat_interleave(h // k.shape[2], 2)
    s = torch.einsum("bihd,bjhd->bhij", q.double(), kk) * scale
    if causal:
        nk = k.shape[1]
        keep = torch.arange(nk)[None, :] <= torch.arange(nq)[:, None] + nk - nq
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1)


@pytest.mark.parametrize("dropout_p", [0.0, 0.3])
def test_probs_and_dropout_pattern(dropout_p):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 7, 4, 16), torch.randn(2, 37, 2, 16), torch.randn(2, 37, 2, 16)
    out, lse, s = mytorch_ext.flash_attn(q, k, v, dropout_p=dropout_p, causal=True, return_attn_probs=True)
    assert s.shape == (2, 4, 7, 37) and s.dtype == torch.float32
    p = _ref_probs(q, k, 1 / math.sqrt(16), True)
    torch.testing.assert_close(s.abs().double(), p, atol=1e-5, rtol=1e-4)
    kept = s >= 0
    if dropout_p == 0:
        assert kept.all()
    else:
        visible = p > 0
        frac = 1 - kept[visible].float().mean().item()
        assert 0.15 < frac < 0.45, frac
    # the output is the kept probabilities, rescaled, times v
    pd = torch.where(kept, s.abs().double(), 0.0) / (1 - dropout_p)
    want = torch.einsum("bhij,bjhd->bihd", pd, v.double().repeat_interleave(2, 2))
    torch.testing.assert_close(out.double(), want, atol=1e-5, rtol=1e-4)


def test_varlen_probs():
    torch.manual_seed(1)
    cu = torch.tensor([0, 5, 12], dtype=torch.int32)
    q, k, v = torch.randn(12, 2, 8), torch.randn(12, 2, 8), torch.randn(12, 2, 8)
    out, lse, s = mytorch_ext.flash_attn_varlen(q, k, v, cu, cu, 7, 7, dropout_p=0.5, return_attn_probs=True)
    assert s.shape == (2, 2, 7, 7)
    for b, (a, e) in enumerate([(0, 5), (5, 12)]):
        n = e - a
        p = _ref_probs(q[None, a:e], k[None, a:e], 1 / math.sqrt(8), False)[0]
        torch.testing.assert_close(s[b, :, :n, :n].abs().double(), p, atol=1e-5, rtol=1e-4)
        assert (s[b, :, n:] == 0).all() and (s[b, :, :, n:] == 0).all()
        pd = torch.where(s[b, :, :n, :n] >= 0, s[b, :, :n, :n].abs().double(), 0.0) / 0.5
        torch.testing.assert_close(out[a:e].double(), torch.einsum("hij,jhd->ihd", pd, v[a:e].double()),
                                   atol=1e-5, rtol=1e-4)
