"""Float64 reference of flash_attn_with_kvcache (flash-attn's semantics), shared by
tests/ops/test_kvcache.py and tests/triton/test_kvcache_triton.py."""
from __future__ import annotations

import math

import torch


def rotary(x, cos, sin, pos, interleaved):
    """x (..., d) rotated at table row `pos` (an int); computed in float64."""
    half = cos.shape[1]
    c, s = cos[pos].double(), sin[pos].double()
    y = x.double().clone()
    if interleaved:
        a, b = x[..., 0:2 * half:2].double(), x[..., 1:2 * half:2].double()
        y[..., 0:2 * half:2] = a * c - b * s
        y[..., 1:2 * half:2] = a * s + b * c
    else:
        a, b = x[..., :half].double(), x[..., half:2 * half].double()
        y[..., :half] = a * c - b * s
        y[..., half:2 * half] = a * s + b * c
    return y


def positions(block_table, b, n, block_size):
    """(page, offset) of the first n positions of sequence b of a paged cache."""
    p = torch.arange(n)
    return block_table[b].long()[p // block_size], p % block_size


def reference(q, k_cache, v_cache, k=None, v=None, *, rotary_cos=None, rotary_sin=None,
              cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
              softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
              rotary_interleaved=True, alibi_slopes=None, key_mask=None):
    """Returns (out float64, lse float32 (+inf where a row sees no key), k_cache and v_cache
    as the op must leave them)."""
    q, k_cache, v_cache = q.cpu(), k_cache.cpu(), v_cache.cpu()
    kc, vc = k_cache.clone(), v_cache.clone()
    batch, sq, hq, d = q.shape
    hk = kc.shape[2]
    paged = block_table is not None
    cap = block_table.shape[1] * kc.shape[1] if paged else kc.shape[1]
    seqlens = cache_seqlens.tolist() if cache_seqlens is not None else [cap] * batch
    leftpad = cache_leftpad.tolist() if cache_leftpad is not None else [0] * batch
    bidx = cache_batch_idx.tolist() if cache_batch_idx is not None else list(range(batch))
    snew = 0 if k is None else k.shape[1]
    scale = softmax_scale if softmax_scale is not None else 1 / math.sqrt(d)
    wl, wr = window_size
    local = causal or wl >= 0 or wr >= 0
    out = torch.zeros(batch, sq, hq, d, dtype=torch.float64)
    lse = torch.full((batch, hq, sq), float("inf"))
    for b in range(batch):
        n, lp = seqlens[b], leftpad[b]
        nk = n + snew - lp
        if snew:
            kn, vn = k[b].cpu(), v[b].cpu()
            if rotary_cos is not None:
                kn = torch.stack([rotary(kn[i], rotary_cos.cpu(), rotary_sin.cpu(), n - lp + i,
                                         rotary_interleaved) for i in range(snew)]).to(kc.dtype)
            for i in range(snew):
                pos = n + i
                if paged:
                    page, off = block_table[b, pos // kc.shape[1]].item(), pos % kc.shape[1]
                    kc[page, off], vc[page, off] = kn[i], vn[i]
                else:
                    kc[bidx[b], pos], vc[bidx[b], pos] = kn[i], vn[i]
        if paged:
            page, off = positions(block_table.cpu(), b, n + snew, kc.shape[1])
            keys, vals = kc[page, off], vc[page, off]
        else:
            keys, vals = kc[bidx[b], :n + snew], vc[bidx[b], :n + snew]
        keys = keys[lp:].double().repeat_interleave(hq // hk, 1)  # (nk, hq, d)
        vals = vals[lp:].double().repeat_interleave(hq // hk, 1)
        qb = q[b].double()
        if rotary_cos is not None:
            qb = torch.stack([rotary(q[b, i], rotary_cos.cpu(), rotary_sin.cpu(),
                                     n - lp + (i if local else 0), rotary_interleaved)
                              for i in range(sq)])
        s = torch.einsum("ihd,jhd->hij", qb, keys) * scale
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        i = torch.arange(sq)[:, None]
        j = torch.arange(nk)[None, :]
        off = nk - sq
        if alibi_slopes is not None:
            sl = alibi_slopes.cpu().double()
            sl = sl[b] if sl.dim() == 2 else sl
            s = s - sl[:, None, None] * (i + off - j).abs().double()
        keep = torch.ones(sq, nk, dtype=torch.bool)
        r = 0 if causal and wr < 0 else (min(wr, 0) if causal else wr)
        if causal or wr >= 0:
            keep &= j <= i + off + r
        if wl >= 0:
            keep &= j >= i + off - wl
        if key_mask is not None:  # indexed by cache position: key j sits at position lp + j
            keep &= key_mask[b].cpu()[lp:lp + nk][None, :]
        s = s.masked_fill(~keep, float("-inf"))
        l_ = torch.logsumexp(s, -1)  # (hq, sq)
        p = torch.where(torch.isneginf(l_)[..., None], 0.0, torch.exp(s - l_[..., None]))
        # keys outside a row's visible range are not read (a NaN there stays out of the row)
        out[b] = torch.where(keep[None, :, :, None], p[..., None] * vals.permute(1, 0, 2)[:, None], 0.0).sum(2) \
            .permute(1, 0, 2)
        lse[b] = torch.where(torch.isneginf(l_), float("inf"), l_).float()
    return out, lse, kc, vc
