"""The compiled kernels behind a flash_attn or flash_attn_with_kvcache call, for the C++
launchers.

The CUDA ops (csrc/kernels/cuda/attention.cpp, csrc/kernels/cuda/kvcache.cpp) launch the
Triton kernels of flash_attn.py and kvcache.py themselves. The first call of a launch family
runs `forward` / `backward` / `kvcache` here: the Python launcher picks the configuration,
compiles and launches, and each launch site reports its compiled kernel through
`note_launch`. `describe` turns a CompiledKernel into what the C++ side needs to launch it
again: the CUfunction, the launch geometry, the type each positional argument was compiled
with (an int equal to 1 becomes a constant; a tensor descriptor becomes a CUtensorMap plus
its shape and strides) and each descriptor's layout.

Only torch and triton are imported here, as in flash_attn.py.
"""
from __future__ import annotations

import threading

_local = threading.local()

# Param codes: the order of triton::Param in csrc/kernels/cuda/triton_launch.h.
_CONST, _PTR, _I1, _I32, _I64, _U64, _F32, _DESC = range(8)
_SCALAR = {"i1": _I1, "u1": _I1, "i32": _I32, "i64": _I64, "u64": _U64, "fp32": _F32}
# The TMA dtype enum differs between the device-side and the host-side (driver) numbering.
_TMA_DTYPE_TO_HOST = {**{i: i for i in range(16)}, 8: 10, 9: 8, 10: 9}


def note_launch(kind, cfg, compiled):
    """Called by every launch site in flash_attn.py and kvcache.py with what the launch
    returned."""
    rec = getattr(_local, "launches", None)
    if rec is not None and compiled is not None:
        rec[kind] = (cfg, compiled)  # the last launch of a kind is the one that ran


class Unsupported(Exception):
    pass


def describe(kind, cfg, compiled):
    """(kind, function, num_warps, num_ctas, shared, global_scratch, global_scratch_align,
    cooperative, pdl, BLOCK_M, BLOCK_N, param codes, TMA layouts, grid cap). A grid cap > 0
    marks a kernel on a 1-D grid of min(tiles, cap) programs (persistent when the cap is
    below the tiles)."""
    compiled._init_handles()
    md = compiled.metadata
    src = compiled.src
    signature = src.signature
    names = list(signature) if isinstance(signature, dict) else None
    if names is None:
        raise Unsupported(f"signature of type {type(signature).__name__}")
    meta = list(getattr(md, "tensordesc_meta", None) or [])
    declared = _declared_constexprs(src)
    params, tma = [], []
    for name in names:  # the positional (runtime) arguments, in order
        if name in declared:
            continue
        ty = signature[name]
        if ty == "constexpr":
            params.append(_CONST)
        elif isinstance(ty, str) and ty.startswith("*"):
            params.append(_PTR)
        elif isinstance(ty, str) and ty.startswith("tensordesc"):
            if len(tma) >= len(meta):
                raise Unsupported("tensor descriptors without host-side layout metadata")
            m = meta[len(tma)]
            block = [int(b) for b in m["block_size"]]
            if len(block) != 4 or m.get("fp4_padded") or m.get("is_im2col"):
                raise Unsupported(f"tensor descriptor layout {m}")
            tma.append((int(m["swizzle"]), int(m["elem_size"]),
                        _TMA_DTYPE_TO_HOST[int(m["elem_type"])], block))
            params.append(_DESC)
        elif ty in _SCALAR:
            params.append(_SCALAR[ty])
        else:
            raise Unsupported(f"argument {name} of type {ty}")
    if getattr(md, "profile_scratch_size", 0):
        raise Unsupported("a profile scratch buffer")
    return (kind, int(compiled.function), int(md.num_warps), int(getattr(md, "num_ctas", 1)),
            int(md.shared), int(getattr(md, "global_scratch_size", 0) or 0),
            int(getattr(md, "global_scratch_align", 1) or 1),
            bool(getattr(md, "launch_cooperative_grid", False)),
            bool(getattr(md, "launch_pdl", False)), int(cfg.get("BLOCK_M", 0)),
            int(cfg.get("BLOCK_N", 0)), params, tma, int(cfg.get("GRID_CAP", 0)))


def _declared_constexprs(src):
    fn = src.fn
    return {fn.arg_names[i] for i, p in enumerate(fn.params) if p.is_constexpr}


def _recorded(run):
    _local.launches = {}
    try:
        outputs = run()
        launches = _local.launches
    finally:
        _local.launches = None
    described, why = [], ""
    for kind, (cfg, compiled) in launches.items():
        try:
            described.append(describe(kind, cfg, compiled))
        except (Unsupported, AttributeError, KeyError, TypeError) as e:
            described.append(None)
            why = f"{kind}: {type(e).__name__}: {e}"
    return tuple(outputs), described, why


def forward(q, k, v, dropout_p, softmax_scale, causal, window_left, window_right, softcap,
            alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seed,
            attn_mask, seed_tensor):
    from .flash_attn import flash_attn_forward

    return _recorded(lambda: flash_attn_forward(
        q, k, v, softmax_scale=softmax_scale, causal=causal, window_left=window_left,
        window_right=window_right, softcap=softcap, alibi_slopes=alibi_slopes,
        dropout_p=dropout_p, seed=seed, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
        max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k, attn_mask=attn_mask,
        seed_tensor=seed_tensor))


def backward(grad_out, q, k, v, out, lse, dropout_p, softmax_scale, causal, window_left,
             window_right, softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
             max_seqlen_k, seed, deterministic, attn_mask, seed_tensor):
    from .flash_attn import flash_attn_backward

    return _recorded(lambda: flash_attn_backward(
        grad_out, q, k, v, out, lse, softmax_scale=softmax_scale, causal=causal,
        window_left=window_left, window_right=window_right, softcap=softcap,
        alibi_slopes=alibi_slopes, dropout_p=dropout_p, seed=seed, cu_seqlens_q=cu_seqlens_q,
        cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
        deterministic=deterministic, attn_mask=attn_mask, seed_tensor=seed_tensor))


def kvcache(q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
            cache_leftpad, block_table, softmax_scale, causal, window_left, window_right, softcap,
            rotary_interleaved, alibi_slopes, num_splits, key_mask):
    from .kvcache import kvcache_forward

    return _recorded(lambda: kvcache_forward(
        q, k_cache, v_cache, k, v, rotary_cos=rotary_cos, rotary_sin=rotary_sin,
        cache_seqlens=cache_seqlens, cache_batch_idx=cache_batch_idx, cache_leftpad=cache_leftpad,
        block_table=block_table, softmax_scale=softmax_scale, causal=causal,
        window_left=window_left, window_right=window_right, softcap=softcap,
        rotary_interleaved=rotary_interleaved, alibi_slopes=alibi_slopes, num_splits=num_splits,
        key_mask=key_mask))
