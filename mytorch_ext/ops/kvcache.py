"""mytorch::flash_attn_with_kvcache: Python side.

- The public wrapper `flash_attn_with_kvcache`, flash-attn's signature and semantics.
- The fake kernel (shapes only; the caches' in-place update is declared in the schema).
- The Python Triton kernel: the launchers of mytorch_ext/triton/kvcache.py. The real op's
  CUDA key holds the C++ kernel (csrc/kernels/cuda/kvcache.cpp), which launches the same
  compiled Triton kernels without Python; the Python one serves a build without the CUDA
  sources and the tests' interpreter-backed copy of the op. The CPU and mytorch-device keys
  hold the C++ OpenMP kernel (csrc/kernels/cpu/kvcache.cpp).
- check_inputs: the checks of csrc/kernels/kvcache_checks.h with the same messages (the fake
  kernel and the Python Triton kernel run it). On CUDA only shapes are checked: reading
  cache_seqlens, cache_leftpad, cache_batch_idx or block_table on the host would synchronize
  every call. The Triton kernels instead mask every cache read and write to the cache's
  bounds and skip pages outside [0, num_blocks), so bad values give wrong numbers, never an
  out-of-bounds access. On host memory (the CPU kernel, and the Triton kernels under
  TRITON_INTERPRET=1) the values are checked too.

`register(namespace, kernel_keys, lib)` attaches the fake and Triton kernels to any library
holding the same schema; the tests use it on a test-local copy of the op whose CPU key runs
the Triton kernels in the interpreter.
"""
from __future__ import annotations

import torch

from .._info import require_triton
from .attention import resolve_softmax_scale

OP = "mytorch::flash_attn_with_kvcache"
PAGE_TILE = 16  # block_size of a paged cache: a multiple of this (kvcache_checks.h kPageTile)
_TRITON = ("float16", "bfloat16", "float32")
_OPENMP = _TRITON + ("float64",)


def _dt(t):
    return str(t.dtype).replace("torch.", "")


def _desc(name, t):
    return f"{name} {tuple(t.shape)} {_dt(t)}"


def _err(msg, cls=ValueError):
    raise cls(f"{OP}: {msg}")


def _index_vector(name, t, q, batch):
    if t.dtype != torch.int32 or t.dim() != 1 or t.shape[0] != batch:
        _err(f"expected {name} an int32 tensor of shape ({batch},) (one per sequence), got {_desc(name, t)}")
    if t.device != q.device:
        _err(f"expected {name} on {q.device}, got {t.device}", RuntimeError)


def check_inputs(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                 cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                 alibi_slopes=None, softcap=0.0, num_splits=0, triton=True, key_mask=None):
    """The shape checks of kvcache_checks.h (check_shapes); returns a dict of the geometry."""
    paged = block_table is not None
    layout = ("(num_blocks, block_size, heads_k, head_dim) with block_table" if paged
              else "(batch_cache, seqlen_cache, heads_k, head_dim)")

    def all3():
        return f"{_desc('q', q)}, {_desc('k_cache', k_cache)}, {_desc('v_cache', v_cache)}"

    if q.dim() != 4:
        _err(f"expected q of layout (batch, seqlen_q, heads, head_dim), got {_desc('q', q)}")
    if k_cache.dim() != 4 or v_cache.dim() != 4:
        _err(f"expected k_cache and v_cache of layout {layout}, got {all3()}")
    accepted = _TRITON if triton else _OPENMP
    names = ("float16, bfloat16 or float32" if triton else "float16, bfloat16, float32 or float64")
    if any(_dt(t) not in accepted for t in (q, k_cache, v_cache)):
        _err(f"expected q, k_cache, v_cache of dtype {names}, got {all3()}")
    if not (q.dtype == k_cache.dtype == v_cache.dtype):
        _err(f"expected q, k_cache, v_cache of one dtype, got {all3()}")
    if not (q.device == k_cache.device == v_cache.device):
        _err(f"expected q, k_cache, v_cache on one device, got q on {q.device}, k_cache on "
             f"{k_cache.device}, v_cache on {v_cache.device}", RuntimeError)
    if k_cache.shape != v_cache.shape:
        _err(f"expected k_cache and v_cache of the same shape, got {all3()}")
    batch, seqlen_q, hq, d = q.shape
    hk = k_cache.shape[2]
    if k_cache.shape[3] != d:
        _err(f"expected q and k_cache with the same head_dim, got {all3()}")
    if triton:
        if d % 8 != 0 or not 8 <= d <= 256:
            _err(f"expected head_dim a multiple of 8 in [8, 256], got {d} ({all3()})")
    elif not 1 <= d <= 256:
        _err(f"expected head_dim in [1, 256], got {d} ({all3()})")
    if hk == 0 or hq % hk != 0:
        _err(f"expected the heads of k_cache, v_cache to divide the heads of q, got {hq} and {hk} ({all3()})")
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        if t.stride(-1) != 1 and t.shape[-1] > 1:
            _err(f"expected {name} with a contiguous last dim, got strides {tuple(t.stride())}")

    if (k is None) != (v is None):
        _err(f"expected k and v together or neither, got {'k without v' if k is not None else 'v without k'}")
    seqlen_new = 0
    if k is not None:
        kv = f"{_desc('k', k)}, {_desc('v', v)}"
        want = (batch, k.shape[1] if k.dim() >= 2 else 0, hk, d)
        if k.dim() != 4 or k.shape != v.shape or tuple(k.shape) != want:
            _err(f"expected k and v of shape (batch, seqlen_new, heads_k, head_dim) = ({batch}, "
                 f"seqlen_new, {hk}, {d}), got {kv}")
        if k.dtype != q.dtype or v.dtype != q.dtype:
            _err(f"expected k and v of q's dtype, got {kv}, {_desc('q', q)}")
        if k.device != q.device or v.device != q.device:
            _err(f"expected k and v on {q.device}, got {k.device} and {v.device}", RuntimeError)
        if (k.stride(-1) != 1 or v.stride(-1) != 1) and d > 1:
            _err(f"expected k and v with a contiguous last dim, got strides {tuple(k.stride())} "
                 f"and {tuple(v.stride())}")
        seqlen_new = k.shape[1]

    batch_cache = k_cache.shape[0]
    block_size = max_blocks = 0
    if paged:
        bt = block_table
        if bt.dtype != torch.int32 or bt.dim() != 2 or bt.shape[0] != batch:
            _err(f"expected block_table an int32 tensor of shape ({batch}, max_blocks_per_sequence), "
                 f"got {_desc('block_table', bt)}")
        if bt.device != q.device:
            _err(f"expected block_table on {q.device}, got {bt.device}", RuntimeError)
        if cache_batch_idx is not None:
            _err("cache_batch_idx is not supported with block_table (the block table picks the pages)")
        block_size, max_blocks = k_cache.shape[1], bt.shape[1]
        if block_size % PAGE_TILE != 0 or block_size <= 0:
            _err(f"expected the block_size of a paged k_cache (its dim 1) a multiple of {PAGE_TILE}, "
                 f"got {block_size} ({_desc('k_cache', k_cache)})")
        capacity = max_blocks * block_size
    else:
        capacity = k_cache.shape[1]
        if cache_batch_idx is None and batch_cache < batch:
            _err(f"expected k_cache with at least batch = {batch} sequences (or cache_batch_idx), "
                 f"got {_desc('k_cache', k_cache)}")
    for name, t in (("cache_seqlens", cache_seqlens), ("cache_batch_idx", cache_batch_idx),
                    ("cache_leftpad", cache_leftpad)):
        if t is not None:
            _index_vector(name, t, q, batch)
    room = capacity if cache_seqlens is not None else 0
    if seqlen_new > room:
        have = (f"cache length {capacity}" if cache_seqlens is not None
                else "no cache_seqlens (the whole cache is taken as filled)")
        _err(f"the cache is too short for the new tokens: {seqlen_new} new tokens, {have} "
             f"({_desc('k_cache', k_cache)})")

    if (rotary_cos is None) != (rotary_sin is None):
        _err("expected rotary_cos and rotary_sin together or neither")
    rotary_dim = seqlen_ro = 0
    if rotary_cos is not None:
        c, s = rotary_cos, rotary_sin
        if k is None:
            _err("rotary_cos and rotary_sin rotate the new k: they need k and v")
        cs = f"{_desc('rotary_cos', c)}, {_desc('rotary_sin', s)}"
        if c.dim() != 2 or c.shape != s.shape or c.shape[1] < 1 or 2 * c.shape[1] > d:
            _err(f"expected rotary_cos and rotary_sin of one shape (seqlen_ro, rotary_dim / 2) with "
                 f"0 < rotary_dim <= head_dim = {d}, got {cs}")
        if c.dtype != q.dtype or s.dtype != q.dtype:
            _err(f"expected rotary_cos and rotary_sin of q's dtype, got {cs}, {_desc('q', q)}")
        if c.device != q.device or s.device != q.device:
            _err(f"expected rotary_cos and rotary_sin on {q.device}, got {c.device} and {s.device}",
                 RuntimeError)
        if c.stride(-1) != 1 or s.stride(-1) != 1:
            _err("expected rotary_cos and rotary_sin with a contiguous last dim")
        rotary_dim, seqlen_ro = 2 * c.shape[1], c.shape[0]
        if seqlen_ro < seqlen_new:
            _err(f"expected rotary_cos and rotary_sin with at least the {seqlen_new} positions of the "
                 f"new tokens, got {cs}")
    if softcap < 0:
        _err(f"expected softcap >= 0, got {float(softcap)}")
    if num_splits < 0:
        _err(f"expected num_splits >= 0 (0: a heuristic picks), got {num_splits}")
    if alibi_slopes is not None:
        a = alibi_slopes
        if a.dtype != torch.float32 or a.shape not in ((hq,), (batch, hq)):
            _err(f"expected alibi_slopes float32 of shape ({hq},) or (batch, {hq}), got "
                 f"{_desc('alibi_slopes', a)}")
        if a.device != q.device:
            _err(f"expected alibi_slopes on {q.device}, got {a.device}", RuntimeError)
        if a.stride(-1) != 1:
            _err("expected alibi_slopes with a contiguous last dim")
    if key_mask is not None:
        km = key_mask
        if km.dtype != torch.bool or km.dim() != 2 or tuple(km.shape) != (batch, capacity):
            _err(f"expected key_mask a bool tensor of shape (batch, cache length) = ({batch}, {capacity}), "
                 f"got {_desc('key_mask', km)}")
        if km.device != q.device:
            _err(f"expected key_mask on {q.device}, got {km.device}", RuntimeError)
    return dict(batch=batch, seqlen_q=seqlen_q, heads_q=hq, heads_k=hk, head_dim=d,
                seqlen_new=seqlen_new, capacity=capacity, batch_cache=batch_cache, paged=paged,
                block_size=block_size, max_blocks=max_blocks, rotary_dim=rotary_dim,
                seqlen_ro=seqlen_ro)


def check_values(g, cache_seqlens, cache_batch_idx, cache_leftpad, block_table, causal_or_local):
    """The value checks of kvcache_checks.h (check_values), for tensors in host memory."""
    batch = g["batch"]
    seqlens = cache_seqlens.tolist() if cache_seqlens is not None else [g["capacity"]] * batch
    leftpad = cache_leftpad.tolist() if cache_leftpad is not None else [0] * batch
    bidx = cache_batch_idx.tolist() if cache_batch_idx is not None else list(range(batch))
    for b in range(batch):
        n, lp = seqlens[b], leftpad[b]
        if n < 0:
            _err(f"expected cache_seqlens >= 0, got cache_seqlens[{b}] = {n}")
        if n + g["seqlen_new"] > g["capacity"]:
            _err(f"the cache is too short for cache_seqlens + the new tokens: cache_seqlens[{b}] = "
                 f"{n} + {g['seqlen_new']} new tokens > cache length {g['capacity']}")
        if not 0 <= lp <= n:
            _err(f"expected 0 <= cache_leftpad <= cache_seqlens, got cache_leftpad[{b}] = {lp} and "
                 f"cache_seqlens[{b}] = {n}")
        if not g["paged"] and not 0 <= bidx[b] < g["batch_cache"]:
            _err(f"expected cache_batch_idx in [0, {g['batch_cache']}) (the sequences of k_cache), "
                 f"got cache_batch_idx[{b}] = {bidx[b]}")
        if g["rotary_dim"] > 0:
            last = n - lp + max(g["seqlen_new"], g["seqlen_q"] if causal_or_local else 1) - 1
            if last >= g["seqlen_ro"]:
                _err(f"rotary_cos and rotary_sin are too short: sequence {b} uses position {last}, "
                     f"the table has {g['seqlen_ro']} rows")
    if g["paged"]:
        table = block_table.tolist()
        for b in range(batch):
            used = -(-(seqlens[b] + g["seqlen_new"]) // g["block_size"])
            for i in range(min(used, g["max_blocks"])):
                x = table[b][i]
                if not 0 <= x < g["batch_cache"]:
                    _err(f"expected block_table entries in [0, num_blocks = {g['batch_cache']}), got "
                         f"block_table[{b}][{i}] = {x}")


# ----------------------------------------------------------------------------- kernels

def _fake(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
          cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
          softmax_scale=None, causal=False, window_left=-1, window_right=-1, softcap=0.0,
          rotary_interleaved=True, alibi_slopes=None, num_splits=0, key_mask=None):
    check_inputs(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                 cache_leftpad, block_table, alibi_slopes, softcap, num_splits,
                 triton=q.device.type == "cuda", key_mask=key_mask)
    b, sq, hq, d = q.shape
    return q.new_empty((b, sq, hq, d)), q.new_empty((b, hq, sq), dtype=torch.float32)


def _triton_kernel(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                   cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                   softmax_scale=None, causal=False, window_left=-1, window_right=-1, softcap=0.0,
                   rotary_interleaved=True, alibi_slopes=None, num_splits=0, key_mask=None):
    require_triton(OP)
    g = check_inputs(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                     cache_batch_idx, cache_leftpad, block_table, alibi_slopes, softcap, num_splits,
                     key_mask=key_mask)
    if q.device.type != "cuda":  # host memory (the interpreter): the values are checked too
        check_values(g, cache_seqlens, cache_batch_idx, cache_leftpad, block_table,
                     causal or window_left >= 0 or window_right >= 0)
    from ..triton.kvcache import kvcache_forward

    scale = resolve_softmax_scale(softmax_scale, q.shape[-1])
    return kvcache_forward(
        q, k_cache, v_cache, k, v, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
        cache_seqlens=cache_seqlens, cache_batch_idx=cache_batch_idx, cache_leftpad=cache_leftpad,
        block_table=block_table, softmax_scale=scale, causal=causal, window_left=window_left,
        window_right=window_right, softcap=softcap, rotary_interleaved=rotary_interleaved,
        alibi_slopes=alibi_slopes, num_splits=num_splits, key_mask=key_mask)


def register(namespace="mytorch", kernel_keys=("cuda",), lib=None):
    """The fake kernel and the Triton kernel (for kernel_keys) of `namespace`'s op."""
    name = f"{namespace}::flash_attn_with_kvcache"
    torch.library.register_fake(name, _fake, lib=lib)
    for key in kernel_keys:
        torch.library.register_kernel(name, key, _triton_kernel, lib=lib)


def _native_cuda():
    """Whether the extension holds the C++ CUDA kernel (built with the CUDA sources)."""
    return torch._C._dispatch_has_kernel_for_dispatch_key(OP, "CUDA")


register("mytorch", () if _native_cuda() else ("cuda",))

# ------------------------------------------------------------------------ public wrapper

def bind(ops):
    """The public wrapper over `ops`, a torch.ops namespace holding the op's schema
    (torch.ops.mytorch, or a copy registered with register()). mytorch_ext's is
    bind(torch.ops.mytorch)."""
    op = ops.flash_attn_with_kvcache

    def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, *, rotary_cos=None,
                                rotary_sin=None, cache_seqlens=None, cache_batch_idx=None,
                                cache_leftpad=None, block_table=None, softmax_scale=None, causal=False,
                                window_size=(-1, -1), softcap=0.0, rotary_interleaved=True,
                                alibi_slopes=None, num_splits=0, return_softmax_lse=False, key_mask=None):
        """Attention of q against a KV cache, appending k, v to it in place, as flash-attn's
        flash_attn_with_kvcache.

        q (batch, seqlen_q, heads, head_dim). k_cache, v_cache (batch_cache, seqlen_cache,
        heads_k, head_dim), or pages (num_blocks, block_size, heads_k, head_dim) with block_table
        (batch, max_blocks) int32 (block_size a multiple of 16). k, v (batch, seqlen_new, heads_k,
        head_dim), when given, are written into the caches at cache_seqlens (an int or int32
        (batch,); None: the whole cache is filled) and attended to. rotary_cos/sin (seqlen_ro,
        rotary_dim / 2) rotate the new k at positions cache_seqlens - cache_leftpad + i, and q at
        the same positions when causal or windowed (else all of q at cache_seqlens - cache_leftpad).
        cache_batch_idx picks the cache entry of each sequence; cache_leftpad (int32 (batch,))
        the first valid position. Causal and windows are bottom-right aligned on the keys
        [cache_leftpad, cache_seqlens + seqlen_new). num_splits: key splits per (sequence, kv head)
        (0: a heuristic). key_mask (not in flash-attn's API): bool (batch, cache length), False
        hides the key at that cache position (a padded decode step's mask, kept on the device).
        Returns out, or (out, lse) with return_softmax_lse (float32, (batch, heads, seqlen_q)).
        No backward.
        """
        if isinstance(cache_seqlens, int):
            cache_seqlens = torch.full((q.shape[0],), cache_seqlens, dtype=torch.int32, device=q.device)
        wl, wr = (int(w) for w in window_size)
        out, lse = op(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
                      cache_leftpad, block_table, softmax_scale, causal, wl, wr, float(softcap),
                      rotary_interleaved, alibi_slopes, int(num_splits), key_mask)
        return (out, lse) if return_softmax_lse else out

    return flash_attn_with_kvcache


flash_attn_with_kvcache = bind(torch.ops.mytorch)


__all__ = ["flash_attn_with_kvcache", "check_inputs", "register", "bind"]
