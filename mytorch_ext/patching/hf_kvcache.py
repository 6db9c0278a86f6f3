"""attn_implementation="mytorch" during generate(): attention through flash_attn_with_kvcache.

transformers' attention modules update their cache first, then call the attention function
with the whole cache: for a static cache (`cache_implementation="static"`, StaticCache, whose
layers keep (batch, heads_k, max_cache_len, head_dim) buffers) the keys past the tokens seen so
far are padding that a dense kernel reads anyway, masked. The kvcache op reads the cache
buffers as they are, through a transposed view (no copy), with split-KV for long caches, and
only the positions [cache_leftpad, cache_seqlens) of each sequence.

Two routes, by the number of queries:
- A decode step (one query): any (batch, 1, 1, kv) bool mask is taken as the op's key_mask,
  and the first and last visible key of each sequence, computed on the device, bound the read.
  Exact for every mask (padding anywhere, sliding windows, a rolled sliding-window buffer:
  the keys' order does not matter to one query). No host read, so the route also serves a
  compiled decode step (transformers compiles it for a static cache) and CUDA graphs. Without
  a mask, one query sees every key it is given (a cache without padding; SDPA's call without
  a mask).
- Several queries (a prefill or a chunk): the route is taken when the mask is exactly causal
  (bottom-right) over [cache_leftpad, cache_seqlens) per sequence, windowed when the layer has
  a sliding window (before its buffer rolls). Checking that reads the mask on the host: once
  per mask tensor (the layers of one forward share it), so on CUDA one synchronization per
  forward, none per layer; a mask made under torch.inference_mode has no version counter to
  tell an in-place change, so it is checked at every layer. Under torch.compile these calls
  take the dense path.

Dropout, softcap, attention weights requested, inputs that need a gradient (the op has no
backward), other masks (float, other shapes) and inputs the kernel does not take go to the
dense path.

Written against transformers 5.x (the AttentionInterface and masking_utils of >= 4.48).
"""
from __future__ import annotations

import weakref

import torch

from .aten import _has_kernel

STATS = {"kvcache": 0, "dense": 0}  # eager calls that took / did not take this route
_last = {}  # the mask read last (either route): a weak reference to it, its key and result


def stats(reset=False):
    """How many eager attention calls took the kvcache route and how many did not (calls
    under torch.compile leave no Python state, so they are not counted)."""
    out = dict(STATS)
    if reset:
        for k in STATS:
            STATS[k] = 0
    return out


def _kernel_takes(q, k):
    if q.device.type == "cuda":
        return q.dtype in (torch.float16, torch.bfloat16, torch.float32) and q.shape[-1] % 8 == 0 \
            and q.shape[-1] <= 256 and _has_kernel("flash_attn_with_kvcache", "cuda")
    return q.device.type in ("cpu", "mytorch") and q.dtype in (
        torch.float16, torch.bfloat16, torch.float32, torch.float64) and 1 <= q.shape[-1] <= 256


def _remembered(mask, key, compute):
    """compute(), or its result for the mask read last when it is the same tensor with the same
    key (the layers of one forward share their mask). Eager only: under torch.compile nothing
    is remembered. A mask made under torch.inference_mode has no version counter: computed at
    every call."""
    if torch.compiler.is_compiling():
        return compute()
    key = None if mask.is_inference() else (mask._version,) + key
    if key is not None and _last and _last["mask"]() is mask and _last["key"] == key:
        return _last["result"]
    result = compute()
    _last.update(mask=weakref.ref(mask), key=key, result=result)
    return result


def _span(first_row, last_row):
    """(end, start) per sequence, on the device: start = the first key first_row (batch, n_k)
    shows, end = one past the last key last_row shows; both 0 for a row that shows none."""
    j = torch.arange(last_row.shape[-1], device=last_row.device)
    end = torch.where(last_row, j + 1, 0).amax(-1)
    start = torch.minimum(torch.where(first_row, j, last_row.shape[-1]).amin(-1), end)
    return end, start


def _decode_bounds(mask):
    """(cache_seqlens, cache_leftpad, key_mask) of a one-query bool mask (batch, 1, 1, n_k),
    on its device: key_mask = the mask's row; the read spans the first to the last visible
    key (none for a row that sees no key). Device work only, no host read."""
    km = mask[:, 0, 0, :]
    seqlens, leftpad = _span(km, km)
    return seqlens.int(), leftpad.int(), km


def _geometry(mask, n_q, window):
    """(cache_seqlens, cache_leftpad, None) int32 if the bool mask (batch, 1, n_q, n_k) is causal
    over [leftpad, seqlens) per sequence (windowed: key j visible from query i iff
    i_pos - window <= j), else None. Reads the mask on the host."""
    m = mask[:, 0]
    b, _, n_k = m.shape
    j = torch.arange(n_k, device=m.device)
    # after the last key of the last query; the first key any query sees
    seqlens, leftpad = _span(m.any(1), m[:, -1])
    pos = (seqlens - n_q)[:, None] + torch.arange(n_q, device=m.device)[None, :]  # (b, n_q)
    want = (j[None, None, :] >= leftpad[:, None, None]) & (j[None, None, :] <= pos[:, :, None])
    if window is not None:
        want &= j[None, None, :] >= pos[:, :, None] - window
    ok = bool(((want == m).all() & (seqlens >= n_q).all()).item())  # one host read
    return (seqlens.int(), leftpad.int(), None) if ok else None


def attention(module, query, key, value, attention_mask, dropout, scaling, kwargs):
    """(batch, q, heads, head_dim) output through the kvcache op, or None for the dense path.
    query / key / value: (batch, heads, seqlen, head_dim), as transformers passes them."""
    compiling = torch.compiler.is_compiling()
    n_q = query.shape[2]
    ok = (dropout == 0.0 and kwargs.get("softcap") is None and kwargs.get("position_bias") is None
          and not kwargs.get("output_attentions", False) and key.shape == value.shape
          and query.dtype == key.dtype == value.dtype and query.device == key.device
          and query.shape[0] == key.shape[0] and query.shape[1] % key.shape[1] == 0
          and _kernel_takes(query, key)
          and not (torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)))
          and all(t.stride(-1) == 1 for t in (query, key, value)))
    sliding = kwargs.get("sliding_window")
    window = sliding - 1 if isinstance(sliding, int) and sliding > 0 else None
    geo = None
    if ok and attention_mask is None:
        # no mask: a decode step over a cache without padding (transformers leaves the mask out
        # when every key is visible) sees every key it is given, as SDPA's call would; a longer
        # query goes to the dense path
        geo = (None, None, None) if n_q == 1 else None
        window = None
    elif ok and (attention_mask.dtype == torch.bool and attention_mask.dim() == 4
                 and attention_mask.shape[1] == 1 and attention_mask.shape[-1] == key.shape[2]
                 and attention_mask.shape[2] == n_q and attention_mask.shape[0] == query.shape[0]):
        if n_q == 1:  # the mask says it all: no causal flag, no window
            geo = _remembered(attention_mask, ("decode",), lambda: _decode_bounds(attention_mask))
            window = None
        elif not compiling:
            geo = _remembered(attention_mask, (window,), lambda: _geometry(attention_mask, n_q, window))
    if geo is None:
        if not compiling:
            STATS["dense"] += 1
        return None
    if not compiling:
        STATS["kvcache"] += 1
    seqlens, leftpad, key_mask = geo
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))
    out, _ = torch.ops.mytorch.flash_attn_with_kvcache(
        q, k, v, None, None, None, None, seqlens, None, leftpad, None, scaling, key_mask is None,
        -1 if window is None else window, -1, 0.0, True, None, 0, key_mask)
    return out


__all__ = ["attention", "stats"]
