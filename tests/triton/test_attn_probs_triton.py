"""return_attn_probs=True through the Triton kernels (the interpreter without a GPU): the
dropout pattern S_dmask encodes is the one the output used (tests/ops/test_attention_probs.py
on the CPU kernel)."""
import math

import torch

from fa_ref import DEVICE

import mytorch_ext


def test_probs_and_dropout_pattern():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, n, h, 16, device=DEVICE, dtype=torch.float32) for n, h in ((5, 2), (21, 1), (21, 1)))
    out, lse, s = mytorch_ext.flash_attn(q, k, v, dropout_p=0.4, causal=True, return_attn_probs=True)
    assert s.shape == (1, 2, 5, 21)
    sc = torch.einsum("bihd,bjhd->bhij", q.double(), k.double().expand(-1, -1, 2, -1)) / math.sqrt(16)
    sc = sc.masked_fill(torch.arange(21, device=DEVICE)[None, :] > torch.arange(5, device=DEVICE)[:, None] + 16,
                        float("-inf"))
    p = torch.softmax(sc, -1)
    torch.testing.assert_close(s.abs().double(), p, atol=1e-4, rtol=1e-3)
    kept = s >= 0
    assert 0 < (~kept & (p > 0)).sum() < (p > 0).sum()
    pd = torch.where(kept, s.abs().double(), 0.0) / 0.6
    want = torch.einsum("bhij,bjhd->bihd", pd, v.double().expand(-1, -1, 2, -1))
    torch.testing.assert_close(out.double(), want, atol=1e-4, rtol=1e-3)
