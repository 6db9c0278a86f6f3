"""attn_implementation="mytorch" during generate(): attention through flash_attn_with_kvcache.

transformers' attention modules update their cache first, then call the attention function
with the whole cache: for a static cache (`cache_implementation="static"`, StaticCache, whose
layers keep (batch, heads_k, max_cache_len, head_dim) buffers) the keys past the tokens seen so
far are padding that a dense kernel reads anyway, masked. Here the mask says where each
sequence's tokens are: left padding ends at cache_leftpad, the tokens end at cache_seqlens.
The kvcache op then reads only [cache_leftpad, cache_seqlens) of the cache (the buffers as they
are, through a transposed view, no copy), with split-KV for long caches, and takes the same
route for a DynamicCache (whose keys are all tokens).

The route is taken when the mask is exactly what that geometry gives: a (batch, 1, q, kv) bool
mask equal to causal (bottom-right) over [cache_leftpad, cache_seqlens), windowed when the
layer has a sliding window (StaticSlidingWindowLayer before its buffer rolls); or, without a
mask, for a single query (a decode step over a cache without padding: every key given, as
SDPA's call without a mask). A dense kernel would pad that one query to a whole block of
queries. Any other mask
(padding inside a sequence, a rolled sliding-window buffer, a float mask), dropout, softcap,
attention weights requested, inputs that need a gradient (the op has no backward) or inputs the
kernel does not take go to the dense path. The check
compares the mask once per mask tensor (the layers of one forward share it): a host read, so
on CUDA one synchronization per forward step (generate() synchronizes every step already),
none per layer. A mask made under torch.inference_mode has no version counter to tell an
in-place change, so it is compared at every layer. Under torch.compile the dense path is used.

Written against transformers 5.x (the AttentionInterface and masking_utils of >= 4.48).
"""
from __future__ import annotations

import weakref

import torch

STATS = {"kvcache": 0, "dense": 0}  # eager calls that took / did not take this route
_last = {}  # the mask checked last: a weak reference to it, its version, window and result


def stats(reset=False):
    """How many attention calls took the kvcache route and how many did not."""
    out = dict(STATS)
    if reset:
        for k in STATS:
            STATS[k] = 0
    return out


def _kernel_takes(q, k):
    if q.device.type == "cuda":
        return q.dtype in (torch.float16, torch.bfloat16, torch.float32) and q.shape[-1] % 8 == 0 \
            and q.shape[-1] <= 256 and torch._C._dispatch_has_kernel_for_dispatch_key(
                "mytorch::flash_attn_with_kvcache", "CUDA")
    return q.device.type in ("cpu", "mytorch") and q.dtype in (
        torch.float16, torch.bfloat16, torch.float32, torch.float64) and 1 <= q.shape[-1] <= 256


def _geometry(mask, n_q, window):
    """(cache_seqlens, cache_leftpad) int32 if the bool mask (batch, 1, n_q, n_k) is causal over
    [leftpad, seqlens) per sequence (windowed: key j visible from query i iff
    i_pos - window <= j), else None."""
    # An inference tensor has no version counter: such a mask is checked at every call.
    key = None if mask.is_inference() else (mask._version, window)
    if key is not None and _last and _last["mask"]() is mask and _last["key"] == key:
        return _last["result"]
    m = mask[:, 0]
    b, _, n_k = m.shape
    j = torch.arange(n_k, device=m.device)
    seqlens = n_k - m[:, -1].flip(-1).int().argmax(-1)  # after the last key of the last query
    leftpad = m.any(1).int().argmax(-1)                  # the first key any query sees
    pos = (seqlens - n_q)[:, None] + torch.arange(n_q, device=m.device)[None, :]  # (b, n_q)
    want = (j[None, None, :] >= leftpad[:, None, None]) & (j[None, None, :] <= pos[:, :, None])
    if window is not None:
        want &= j[None, None, :] >= pos[:, :, None] - window
    ok = bool(torch.equal(want, m)) and bool((seqlens >= n_q).all())
    result = (seqlens.int(), leftpad.int()) if ok else None
    _last.update(mask=weakref.ref(mask), key=key, result=result)
    return result


def attention(module, query, key, value, attention_mask, dropout, scaling, kwargs):
    """(batch, q, heads, head_dim) output through the kvcache op, or None for the dense path.
    query / key / value: (batch, heads, seqlen, head_dim), as transformers passes them."""
    if torch.compiler.is_compiling():  # no Python state (the counts) in a compiled graph
        return None
    ok = (dropout == 0.0 and kwargs.get("softcap") is None and kwargs.get("position_bias") is None
          and not kwargs.get("output_attentions", False) and key.shape == value.shape
          and query.dtype == key.dtype == value.dtype and query.device == key.device
          and query.shape[0] == key.shape[0] and query.shape[1] % key.shape[1] == 0
          and _kernel_takes(query, key)
          and not (torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)))
          and all(t.stride(-1) == 1 for t in (query, key, value)))
    sliding = kwargs.get("sliding_window")
    window = sliding - 1 if isinstance(sliding, int) and sliding > 0 else None
    if ok and attention_mask is None:
        # no mask: a decode step over a cache without padding (transformers leaves the mask out
        # when every key is visible) sees every key it is given, as SDPA's call would; a longer
        # query goes to the dense path
        geo = (None, None) if query.shape[2] == 1 else None
        window = None
    elif ok:
        ok = (attention_mask.dtype == torch.bool and attention_mask.dim() == 4 and attention_mask.shape[1] == 1
              and attention_mask.shape[-1] == key.shape[2] and attention_mask.shape[2] == query.shape[2]
              and attention_mask.shape[0] == query.shape[0])
        geo = _geometry(attention_mask, query.shape[2], window) if ok else None
    else:
        geo = None
    if geo is None:
        STATS["dense"] += 1
        return None
    STATS["kvcache"] += 1
    seqlens, leftpad = geo
    q, k, v = (t.transpose(1, 2) for t in (query, key, value))
    out, _ = torch.ops.mytorch.flash_attn_with_kvcache(
        q, k, v, None, None, None, None, seqlens, None, leftpad, None, scaling, True,
        -1 if window is None else window, -1, 0.0, True, None, 0)
    return out


__all__ = ["attention", "stats"]
