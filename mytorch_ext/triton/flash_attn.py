"""FlashAttention forward and backward in Triton.

Layout (batch, seqlen, heads, head_dim), any strides with a contiguous last dim; with
cu_seqlens, (total_tokens, heads, head_dim). K and V may have fewer heads (GQA/MQA).
Options: softmax scale, causal (bottom-right aligned), sliding window, softcap, ALiBi,
dropout (mask regenerated from (seed, batch, head, row, col)), and a user mask (bool or
additive float, broadcast through strides).

Only torch and triton are imported here, so the kernels run without mytorch's native
library (and on CPU tensors under TRITON_INTERPRET=1).

Scores are kept in log2 units (exp2); lse is stored in natural units, float32.
A row with no key to attend to gets output 0 and lse +inf (as flash-attn).
"""
from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

from .flash_attn_config import bwd_configs, fwd_configs, run_with_fallback
from .launch_record import note_launch

try:  # host-side TMA descriptors (Triton >= 3.4)
    from triton.tools.tensor_descriptor import TensorDescriptor as _TensorDescriptor
except ImportError:  # pragma: no cover - older Triton
    _TensorDescriptor = None
# Set when this Triton cannot compile the TMA forward; the pointer kernel is used then.
_TMA_DISABLED = None
# The Hopper (sm90) forward of flash_attn_hopper.py serves the calls it covers unless
# MYTORCH_HOPPER_ATTENTION=0; set to the reason when it cannot be imported or compiled here.
_HOPPER_DISABLED = (None if os.environ.get("MYTORCH_HOPPER_ATTENTION", "1") != "0"
                    else "MYTORCH_HOPPER_ATTENTION=0")
_HOPPER_FP8_DISABLED = None  # the float8 kernel's own reason, set as _HOPPER_DISABLED is

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
# The interpreter multiplies bfloat16 tiles as their raw 16-bit patterns: upcast there.
_INTERPRET = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") == "1")


@triton.jit
def _cvt(x, dtype: tl.constexpr):
    """x.to(dtype); the interpreter truncates float32 -> bfloat16, so round to nearest even
    by hand there."""
    if _INTERPRET and dtype == tl.bfloat16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = bits + 0x7FFF + ((bits >> 16) & 1)
        return (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    else:
        return x.to(dtype)


@triton.jit
def _mm(a, b, acc):
    if _INTERPRET:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    elif a.dtype == tl.float32:  # float32 inputs: full-precision products, not TF32
        return tl.dot(a, b, acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


@triton.jit
def _tanh(x):
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)


@triton.jit
def _score(qk, qi, kj, n_q, n_k, diag, wl, wr, sm_scale, softcap, slope,
           mask_base, smm, smn,
           GEOM: tl.constexpr, LEFT: tl.constexpr, RIGHT: tl.constexpr,
           SOFTCAP: tl.constexpr, ALIBI: tl.constexpr, MASK_KIND: tl.constexpr):
    """Scores in log2 units from q.k^T. qi / kj broadcast to qk's shape (either orientation).
    Returns (scores, tanh term for the softcap backward)."""
    if SOFTCAP:
        t = _tanh(qk * (sm_scale / softcap))
        s = t * (softcap * 1.4426950408889634)
    else:
        t = qk
        s = qk * (sm_scale * 1.4426950408889634)
    if ALIBI:
        s -= (slope * 1.4426950408889634) * tl.abs(qi + diag - kj).to(tl.float32)
    if MASK_KIND == 1:
        mk = tl.load(mask_base + qi * smm + kj * smn, mask=(qi < n_q) & (kj < n_k), other=0)
        s = tl.where(mk != 0, s, float("-inf"))
    if MASK_KIND == 2:
        mk = tl.load(mask_base + qi * smm + kj * smn, mask=(qi < n_q) & (kj < n_k), other=0.0)
        s += mk.to(tl.float32) * 1.4426950408889634
    if GEOM:
        ok = kj < n_k
        if RIGHT:
            ok = ok & (kj <= qi + diag + wr)
        if LEFT:
            ok = ok & (kj >= qi + diag - wl)
        s = tl.where(ok, s, float("-inf"))
    return s, t


@triton.jit
def _load_rows(base, rows, stride, offs_d, n, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
               CHECK: tl.constexpr):
    """A [len(rows), BLOCK_D] tile; rows >= n and columns >= HEAD_DIM read as zero."""
    ptrs = base + rows[:, None] * stride + offs_d[None, :]
    if CHECK:
        if BLOCK_D == HEAD_DIM:
            x = tl.load(ptrs, mask=rows[:, None] < n, other=0.0)
        else:
            x = tl.load(ptrs, mask=(rows[:, None] < n) & (offs_d[None, :] < HEAD_DIM), other=0.0)
    else:
        if BLOCK_D == HEAD_DIM:
            x = tl.load(ptrs)
        else:
            x = tl.load(ptrs, mask=offs_d[None, :] < HEAD_DIM, other=0.0)
    return x


@triton.jit
def _load_cols(base, cols, stride, offs_d, n, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
               CHECK: tl.constexpr):
    """The transposed tile [BLOCK_D, len(cols)]."""
    ptrs = base + cols[None, :] * stride + offs_d[:, None]
    if CHECK:
        if BLOCK_D == HEAD_DIM:
            x = tl.load(ptrs, mask=cols[None, :] < n, other=0.0)
        else:
            x = tl.load(ptrs, mask=(cols[None, :] < n) & (offs_d[:, None] < HEAD_DIM), other=0.0)
    else:
        if BLOCK_D == HEAD_DIM:
            x = tl.load(ptrs)
        else:
            x = tl.load(ptrs, mask=offs_d[:, None] < HEAD_DIM, other=0.0)
    return x


@triton.jit
def _kv_range(m0, n_q, n_k, wl, wr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              LEFT: tl.constexpr, RIGHT: tl.constexpr):
    """Key blocks for query rows [m0, m0+BLOCK_M): [lo, a) and [b, hi) need the geometric
    mask, [a, b) is fully inside it (and inside n_k)."""
    diag = n_k - n_q
    lo = 0
    hi = n_k
    if RIGHT:
        hi = tl.minimum(hi, m0 + BLOCK_M + diag + wr)
    if LEFT:
        lo = tl.maximum(lo, m0 + diag - wl)
        lo = (lo // BLOCK_N) * BLOCK_N
    a = lo
    if LEFT:
        a = tl.cdiv(tl.maximum(m0 + BLOCK_M - 1 + diag - wl, 0), BLOCK_N) * BLOCK_N
        a = tl.minimum(tl.maximum(a, lo), tl.maximum(hi, lo))
    b = (hi // BLOCK_N) * BLOCK_N
    if RIGHT:
        b = tl.minimum(b, (tl.maximum(m0 + diag + wr + 1, 0) // BLOCK_N) * BLOCK_N)
    b = tl.maximum(b, a)
    hi = tl.maximum(hi, b)
    return lo, a, b, hi


@triton.jit
def _q_range(n0, n_q, n_k, wl, wr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             LEFT: tl.constexpr, RIGHT: tl.constexpr):
    """Query blocks for key rows [n0, n0+BLOCK_N), split as in _kv_range (rows past n_q
    count as masked, since their loads must be)."""
    diag = n_k - n_q
    lo = 0
    hi = n_q
    if RIGHT:
        lo = tl.maximum(0, n0 - diag - wr)
        lo = (lo // BLOCK_M) * BLOCK_M
    if LEFT:
        hi = tl.minimum(hi, n0 + BLOCK_N + wl - diag)
    a = lo
    if RIGHT:
        a = tl.cdiv(tl.maximum(n0 + BLOCK_N - 1 - diag - wr, 0), BLOCK_M) * BLOCK_M
        a = tl.minimum(tl.maximum(a, lo), tl.maximum(hi, lo))
    b = (hi // BLOCK_M) * BLOCK_M
    if LEFT:
        b = tl.minimum(b, (tl.maximum(n0 + wl - diag + 1, 0) // BLOCK_M) * BLOCK_M)
    b = tl.maximum(b, a)
    hi = tl.maximum(hi, b)
    return lo, a, b, hi


# ----------------------------------------------------------------------------- forward

@triton.jit
def _softmax_step(s, m_i, l_i, acc, EMPTY_ROWS: tl.constexpr):
    """One online-softmax step over a score tile s (log2 units): returns (p, new running max,
    new row sum, rescaled accumulator). EMPTY_ROWS: a row may have no key yet (max -inf)."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    if EMPTY_ROWS:
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    else:
        m_use = m_new
    p = tl.math.exp2(s - m_use[:, None])
    alpha = tl.math.exp2(m_i - m_use)
    return p, m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None]


@triton.jit
def _fwd_inner(acc, l_i, m_i, q, k_base, v_base, skn, svn, start, end,
               offs_m, offs_n, offs_d, n_q, n_k, diag, wl, wr, sm_scale, softcap, slope,
               mask_base, smm, smn, p_drop, seed, rng_row,
               HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
               GEOM: tl.constexpr, LEFT: tl.constexpr, RIGHT: tl.constexpr,
               SOFTCAP: tl.constexpr, ALIBI: tl.constexpr, DROPOUT: tl.constexpr,
               MASK_KIND: tl.constexpr, max_k):
    for j0 in range(start, end, BLOCK_N):
        kj = j0 + offs_n
        kt = _load_cols(k_base, kj, skn, offs_d, n_k, HEAD_DIM, BLOCK_D, GEOM)
        qk = _mm(q, kt, None)
        s, t = _score(qk, offs_m[:, None], kj[None, :], n_q, n_k, diag, wl, wr, sm_scale,
                      softcap, slope, mask_base, smm, smn, GEOM, LEFT, RIGHT, SOFTCAP, ALIBI,
                      MASK_KIND)
        if GEOM or MASK_KIND != 0:
            p, m_new, l_i, acc = _softmax_step(s, m_i, l_i, acc, True)
        else:
            p, m_new, l_i, acc = _softmax_step(s, m_i, l_i, acc, False)
        if DROPOUT:
            r = tl.rand(seed, rng_row[:, None] + kj[None, :].to(tl.int64))
            p = tl.where(r >= p_drop, p, 0.0)
        v = _load_rows(v_base, kj, svn, offs_d, n_k, HEAD_DIM, BLOCK_D, GEOM)
        acc = _mm(_cvt(p, v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _fwd_kernel(Q, K, V, O, LSE, SLOPES, CU_Q, CU_K, MASK,
                sqb, sqn, sqh, skb, skn, skh, svb, svn, svh, sob, son, soh, slb, slh,
                smb, smh, smm, smn, ssb,
                max_q, max_k, H, GROUP, sm_scale, softcap, p_drop, seed, wl, wr, SEED,
                HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                VARLEN: tl.constexpr, LEFT: tl.constexpr, RIGHT: tl.constexpr,
                SOFTCAP: tl.constexpr, ALIBI: tl.constexpr, DROPOUT: tl.constexpr,
                MASK_KIND: tl.constexpr, SEED_IN_MEMORY: tl.constexpr):
    if SEED_IN_MEMORY:  # the dropout seed from a device tensor (drawn by torch.randint)
        seed = tl.load(SEED)
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    if VARLEN:
        q0 = tl.load(CU_Q + b).to(tl.int64)
        n_q = (tl.load(CU_Q + b + 1) - tl.load(CU_Q + b)).to(tl.int32)
        k0 = tl.load(CU_K + b).to(tl.int64)
        n_k = (tl.load(CU_K + b + 1) - tl.load(CU_K + b)).to(tl.int32)
    else:
        q0 = 0
        n_q = max_q
        k0 = 0
        n_k = max_k
    m0 = pid_m * BLOCK_M
    if m0 < n_q:
        b64 = b.to(tl.int64)
        offs_m = m0 + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        q_base = Q + b64 * sqb + h.to(tl.int64) * sqh + q0 * sqn
        k_base = K + b64 * skb + hk.to(tl.int64) * skh + k0 * skn
        v_base = V + b64 * svb + hk.to(tl.int64) * svh + k0 * svn
        mask_base = MASK + b64 * smb + h.to(tl.int64) * smh
        slope = 0.0
        if ALIBI:
            slope = tl.load(SLOPES + b * ssb + h).to(tl.float32)
        rng_row = (bh.to(tl.int64) * max_q + offs_m) * max_k
        diag = n_k - n_q

        q = _load_rows(q_base, offs_m, sqn, offs_d, n_q, HEAD_DIM, BLOCK_D, True)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        lo, a, bb, hi = _kv_range(m0, n_q, n_k, wl, wr, BLOCK_M, BLOCK_N, LEFT, RIGHT)
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_base, v_base, skn, svn, lo, a,
                                   offs_m, offs_n, offs_d, n_q, n_k, diag, wl, wr, sm_scale,
                                   softcap, slope, mask_base, smm, smn, p_drop, seed, rng_row,
                                   HEAD_DIM, BLOCK_D, BLOCK_N, True, LEFT, RIGHT, SOFTCAP,
                                   ALIBI, DROPOUT, MASK_KIND, max_k)
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_base, v_base, skn, svn, a, bb,
                                   offs_m, offs_n, offs_d, n_q, n_k, diag, wl, wr, sm_scale,
                                   softcap, slope, mask_base, smm, smn, p_drop, seed, rng_row,
                                   HEAD_DIM, BLOCK_D, BLOCK_N, False, LEFT, RIGHT, SOFTCAP,
                                   ALIBI, DROPOUT, MASK_KIND, max_k)
        acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, k_base, v_base, skn, svn, bb, hi,
                                   offs_m, offs_n, offs_d, n_q, n_k, diag, wl, wr, sm_scale,
                                   softcap, slope, mask_base, smm, smn, p_drop, seed, rng_row,
                                   HEAD_DIM, BLOCK_D, BLOCK_N, True, LEFT, RIGHT, SOFTCAP,
                                   ALIBI, DROPOUT, MASK_KIND, max_k)
        empty = l_i == 0.0
        out = acc / tl.where(empty, 1.0, l_i)[:, None]
        if DROPOUT:
            out = out * (1.0 / (1.0 - p_drop))
        l_safe = tl.where(empty, 1.0, l_i)
        lse = tl.where(empty, float("inf"), (m_i + tl.math.log2(l_safe)) * 0.6931471805599453)
        o_ptrs = (O + b64 * sob + h.to(tl.int64) * soh + q0 * son
                  + offs_m[:, None] * son + offs_d[None, :])
        tl.store(o_ptrs, _cvt(out, O.dtype.element_ty),
                 mask=(offs_m[:, None] < n_q) & (offs_d[None, :] < HEAD_DIM))
        tl.store(LSE + b64 * slb + h.to(tl.int64) * slh + q0 + offs_m, lse, mask=offs_m < n_q)


# ------------------------------------------------------------------ forward, TMA loads
# The plain-layout forward (no varlen, no user mask, no dropout, head_dim a power of two)
# with Q, K and V tiles fetched by the Hopper tensor-memory accelerator: one bulk copy per
# tile, rows past the sequence end filled with zeros by the copy engine, no address math
# in registers. Chosen per shape family by the tuned table like any other config.

@triton.jit
def _fwd_tma_inner(acc, l_i, m_i, q, k_desc, v_desc, b, hk, start, end, offs_m, offs_n,
                   n_q, n_k, diag, wl, wr, sm_scale, softcap, slope, mask_dummy,
                   HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, GEOM: tl.constexpr,
                   LEFT: tl.constexpr, RIGHT: tl.constexpr, SOFTCAP: tl.constexpr,
                   ALIBI: tl.constexpr):
    for j0 in range(start, end, BLOCK_N):
        kj = j0 + offs_n
        k = k_desc.load([b, j0, hk, 0]).reshape(BLOCK_N, HEAD_DIM)
        qk = _mm(q, tl.trans(k), None)
        s, t = _score(qk, offs_m[:, None], kj[None, :], n_q, n_k, diag, wl, wr, sm_scale,
                      softcap, slope, mask_dummy, 0, 0, GEOM, LEFT, RIGHT, SOFTCAP, ALIBI, 0)
        p, m_new, l_i, acc = _softmax_step(s, m_i, l_i, acc, GEOM)
        v = v_desc.load([b, j0, hk, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = _mm(_cvt(p, v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _fwd_tma_kernel(q_desc, k_desc, v_desc, O, LSE, SLOPES,
                    sob, son, soh, slb, slh, ssb,
                    max_q, max_k, H, GROUP, sm_scale, softcap, wl, wr,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    LEFT: tl.constexpr, RIGHT: tl.constexpr,
                    SOFTCAP: tl.constexpr, ALIBI: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    n_q = max_q
    n_k = max_k
    m0 = pid_m * BLOCK_M
    b64 = b.to(tl.int64)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    slope = 0.0
    if ALIBI:
        slope = tl.load(SLOPES + b * ssb + h).to(tl.float32)
    diag = n_k - n_q
    q = q_desc.load([b, m0, h, 0]).reshape(BLOCK_M, HEAD_DIM)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    lo, a, bb, hi = _kv_range(m0, n_q, n_k, wl, wr, BLOCK_M, BLOCK_N, LEFT, RIGHT)
    acc, l_i, m_i = _fwd_tma_inner(acc, l_i, m_i, q, k_desc, v_desc, b, hk, lo, a, offs_m,
                                   offs_n, n_q, n_k, diag, wl, wr, sm_scale, softcap, slope,
                                   O, HEAD_DIM, BLOCK_N, True, LEFT, RIGHT, SOFTCAP, ALIBI)
    acc, l_i, m_i = _fwd_tma_inner(acc, l_i, m_i, q, k_desc, v_desc, b, hk, a, bb, offs_m,
                                   offs_n, n_q, n_k, diag, wl, wr, sm_scale, softcap, slope,
                                   O, HEAD_DIM, BLOCK_N, False, LEFT, RIGHT, SOFTCAP, ALIBI)
    acc, l_i, m_i = _fwd_tma_inner(acc, l_i, m_i, q, k_desc, v_desc, b, hk, bb, hi, offs_m,
                                   offs_n, n_q, n_k, diag, wl, wr, sm_scale, softcap, slope,
                                   O, HEAD_DIM, BLOCK_N, True, LEFT, RIGHT, SOFTCAP, ALIBI)
    empty = l_i == 0.0
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    l_safe = tl.where(empty, 1.0, l_i)
    lse = tl.where(empty, float("inf"), (m_i + tl.math.log2(l_safe)) * 0.6931471805599453)
    o_ptrs = (O + b64 * sob + h.to(tl.int64) * soh + offs_m[:, None] * son + offs_d[None, :])
    tl.store(o_ptrs, _cvt(out, O.dtype.element_ty), mask=offs_m[:, None] < n_q)
    tl.store(LSE + b64 * slb + h.to(tl.int64) * slh + offs_m, lse, mask=offs_m < n_q)


def _tma_eligible(q, k, v, varlen, attn_mask, dropout_p, head_dim, block_d):
    """The TMA forward takes plain (B, N, H, D) half-precision tensors whose base pointers
    and strides meet the copy engine's 16-byte alignment."""
    if (_TensorDescriptor is None or _TMA_DISABLED or varlen or attn_mask is not None
            or dropout_p > 0.0 or head_dim != block_d or head_dim > 256
            or q.dtype not in (torch.float16, torch.bfloat16)):
        return False
    for t in (q, k, v):
        if t.data_ptr() % 16 or any((st * t.element_size()) % 16 for st in t.stride()[:-1]):
            return False
    return True


def _launch_fwd_tma(q, k, v, out, lse, slopes, ssb, scal, consts, cfg, grid):
    bm, bn, d = cfg["BLOCK_M"], cfg["BLOCK_N"], q.shape[-1]
    descs = [_TensorDescriptor(t, list(t.shape), list(t.stride()), [1, blk, 1, d])
             for t, blk in ((q, bm), (k, bn), (v, bn))]
    note_launch("fwd_tma", cfg, _fwd_tma_kernel[grid](
        *descs, out, lse, slopes, out.stride(0), out.stride(1), out.stride(2), lse.stride(0),
        lse.stride(1), ssb, *scal, **consts, BLOCK_M=bm, BLOCK_N=bn, num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"]))


# ---------------------------------------------------------------------------- backward

@triton.jit
def _bwd_pre_kernel(O, DO, DELTA, sob, son, soh, sdb, sdn, sdh, slb, slh, CU_Q, max_q, H,
                    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                    VARLEN: tl.constexpr):
    """delta = rowsum(out * grad_out), float32, in lse's layout."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    if VARLEN:
        q0 = tl.load(CU_Q + b).to(tl.int64)
        n_q = (tl.load(CU_Q + b + 1) - tl.load(CU_Q + b)).to(tl.int32)
    else:
        q0 = 0
        n_q = max_q
    m0 = pid_m * BLOCK_M
    if m0 < n_q:
        b64 = b.to(tl.int64)
        offs_m = m0 + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        o = _load_rows(O + b64 * sob + h.to(tl.int64) * soh + q0 * son, offs_m, son, offs_d,
                       n_q, HEAD_DIM, BLOCK_D, True)
        do = _load_rows(DO + b64 * sdb + h.to(tl.int64) * sdh + q0 * sdn, offs_m, sdn, offs_d,
                        n_q, HEAD_DIM, BLOCK_D, True)
        delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
        tl.store(DELTA + b64 * slb + h.to(tl.int64) * slh + q0 + offs_m, delta, mask=offs_m < n_q)


@triton.jit
def _bwd_kv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, dq_base,
                  sqn, sdn, sdqn, start, end, offs_n, offs_d, n_q, n_k, diag, wl, wr,
                  sm_scale, softcap, slope, mask_base, smm, smn, p_drop, seed, rng_bh, max_k,
                  HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr,
                  GEOM: tl.constexpr, LEFT: tl.constexpr, RIGHT: tl.constexpr,
                  SOFTCAP: tl.constexpr, ALIBI: tl.constexpr, DROPOUT: tl.constexpr,
                  MASK_KIND: tl.constexpr, ATOMIC_DQ: tl.constexpr):
    """Transposed orientation: tiles are [BLOCK_N keys, BLOCK_M queries]."""
    for i0 in range(start, end, BLOCK_M):
        offs_m = i0 + tl.arange(0, BLOCK_M)
        qt = _load_cols(q_base, offs_m, sqn, offs_d, n_q, HEAD_DIM, BLOCK_D, GEOM)
        if GEOM:
            lse = tl.load(lse_base + offs_m, mask=offs_m < n_q, other=float("inf"))
        else:
            lse = tl.load(lse_base + offs_m)
        st = _mm(k, qt, None)
        s, t = _score(st, offs_m[None, :], offs_n[:, None], n_q, n_k, diag, wl, wr, sm_scale,
                      softcap, slope, mask_base, smm, smn, GEOM, LEFT, RIGHT, SOFTCAP, ALIBI,
                      MASK_KIND)
        pt = tl.math.exp2(s - (lse * 1.4426950408889634)[None, :])
        do = _load_rows(do_base, offs_m, sdn, offs_d, n_q, HEAD_DIM, BLOCK_D, GEOM)
        if DROPOUT:
            r = tl.rand(seed, (rng_bh + offs_m[None, :].to(tl.int64)) * max_k
                        + offs_n[:, None].to(tl.int64))
            keep = r >= p_drop
            scale = 1.0 / (1.0 - p_drop)
            pdt = tl.where(keep, pt * scale, 0.0)
        else:
            pdt = pt
        dv = _mm(_cvt(pdt, do.dtype), do, dv)
        dpt = _mm(v, tl.trans(do), None)
        if DROPOUT:
            dpt = tl.where(keep, dpt * scale, 0.0)
        if GEOM:
            delta = tl.load(delta_base + offs_m, mask=offs_m < n_q, other=0.0)
        else:
            delta = tl.load(delta_base + offs_m)
        dst = pt * (dpt - delta[None, :])
        if SOFTCAP:
            dst = dst * (1.0 - t * t)
        dst = _cvt(dst, qt.dtype)
        dk = _mm(dst, tl.trans(qt), dk)
        if ATOMIC_DQ:
            dq = _mm(tl.trans(dst), k, None) * sm_scale
            dq_ptrs = dq_base + offs_m[:, None] * sdqn + offs_d[None, :]
            tl.atomic_add(dq_ptrs, dq, mask=(offs_m[:, None] < n_q) & (offs_d[None, :] < HEAD_DIM),
                          sem="relaxed")
    return dk, dv


@triton.jit
def _bwd_kv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, DQ, SLOPES, CU_Q, CU_K, MASK,
                   sqb, sqn, sqh, skb, skn, skh, svb, svn, svh, sdb, sdn, sdh,
                   sdkb, sdkn, sdkh, sdvb, sdvn, sdvh, sdqb, sdqn, sdqh, slb, slh,
                   smb, smh, smm, smn, ssb,
                   max_q, max_k, H, HK, GROUP, sm_scale, softcap, p_drop, seed, wl, wr, SEED,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   VARLEN: tl.constexpr, LEFT: tl.constexpr, RIGHT: tl.constexpr,
                   SOFTCAP: tl.constexpr, ALIBI: tl.constexpr, DROPOUT: tl.constexpr,
                   MASK_KIND: tl.constexpr, ATOMIC_DQ: tl.constexpr, SEED_IN_MEMORY: tl.constexpr):
    """dK, dV for one block of keys of one KV head, summed over the heads of its group
    (and, with ATOMIC_DQ, dQ added into a float32 buffer)."""
    if SEED_IN_MEMORY:
        seed = tl.load(SEED)
    pid_n = tl.program_id(0)
    bhk = tl.program_id(1)
    b = bhk // HK
    hk = bhk % HK
    if VARLEN:
        q0 = tl.load(CU_Q + b).to(tl.int64)
        n_q = (tl.load(CU_Q + b + 1) - tl.load(CU_Q + b)).to(tl.int32)
        k0 = tl.load(CU_K + b).to(tl.int64)
        n_k = (tl.load(CU_K + b + 1) - tl.load(CU_K + b)).to(tl.int32)
    else:
        q0 = 0
        n_q = max_q
        k0 = 0
        n_k = max_k
    n0 = pid_n * BLOCK_N
    if n0 < n_k:
        b64 = b.to(tl.int64)
        hk64 = hk.to(tl.int64)
        offs_n = n0 + tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        k = _load_rows(K + b64 * skb + hk64 * skh + k0 * skn, offs_n, skn, offs_d, n_k,
                       HEAD_DIM, BLOCK_D, True)
        v = _load_rows(V + b64 * svb + hk64 * svh + k0 * svn, offs_n, svn, offs_d, n_k,
                       HEAD_DIM, BLOCK_D, True)
        dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        diag = n_k - n_q
        lo, a, bb, hi = _q_range(n0, n_q, n_k, wl, wr, BLOCK_M, BLOCK_N, LEFT, RIGHT)
        for g in range(0, GROUP):
            h = hk * GROUP + g
            h64 = h.to(tl.int64)
            q_base = Q + b64 * sqb + h64 * sqh + q0 * sqn
            do_base = DO + b64 * sdb + h64 * sdh + q0 * sdn
            dq_base = DQ + b64 * sdqb + h64 * sdqh + q0 * sdqn
            lse_base = LSE + b64 * slb + h64 * slh + q0
            delta_base = DELTA + b64 * slb + h64 * slh + q0
            mask_base = MASK + b64 * smb + h64 * smh
            slope = 0.0
            if ALIBI:
                slope = tl.load(SLOPES + b * ssb + h).to(tl.float32)
            rng_bh = (b64 * H + h64) * max_q
            dk, dv = _bwd_kv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, dq_base,
                                   sqn, sdn, sdqn, lo, a, offs_n, offs_d, n_q, n_k, diag, wl, wr,
                                   sm_scale, softcap, slope, mask_base, smm, smn, p_drop, seed,
                                   rng_bh, max_k, HEAD_DIM, BLOCK_D, BLOCK_M, True, LEFT, RIGHT,
                                   SOFTCAP, ALIBI, DROPOUT, MASK_KIND, ATOMIC_DQ)
            dk, dv = _bwd_kv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, dq_base,
                                   sqn, sdn, sdqn, a, bb, offs_n, offs_d, n_q, n_k, diag, wl, wr,
                                   sm_scale, softcap, slope, mask_base, smm, smn, p_drop, seed,
                                   rng_bh, max_k, HEAD_DIM, BLOCK_D, BLOCK_M, False, LEFT, RIGHT,
                                   SOFTCAP, ALIBI, DROPOUT, MASK_KIND, ATOMIC_DQ)
            dk, dv = _bwd_kv_inner(dk, dv, k, v, q_base, do_base, lse_base, delta_base, dq_base,
                                   sqn, sdn, sdqn, bb, hi, offs_n, offs_d, n_q, n_k, diag, wl, wr,
                                   sm_scale, softcap, slope, mask_base, smm, smn, p_drop, seed,
                                   rng_bh, max_k, HEAD_DIM, BLOCK_D, BLOCK_M, True, LEFT, RIGHT,
                                   SOFTCAP, ALIBI, DROPOUT, MASK_KIND, ATOMIC_DQ)
        out_mask = (offs_n[:, None] < n_k) & (offs_d[None, :] < HEAD_DIM)
        dk_ptrs = DK + b64 * sdkb + hk64 * sdkh + k0 * sdkn + offs_n[:, None] * sdkn + offs_d[None, :]
        tl.store(dk_ptrs, _cvt(dk * sm_scale, DK.dtype.element_ty), mask=out_mask)
        dv_ptrs = DV + b64 * sdvb + hk64 * sdvh + k0 * sdvn + offs_n[:, None] * sdvn + offs_d[None, :]
        tl.store(dv_ptrs, _cvt(dv, DV.dtype.element_ty), mask=out_mask)


@triton.jit
def _bwd_q_inner(dq, q, do, lse2, delta, k_base, v_base, skn, svn, start, end,
                 offs_m, offs_n, offs_d, n_q, n_k, diag, wl, wr, sm_scale, softcap, slope,
                 mask_base, smm, smn, p_drop, seed, rng_row,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
                 GEOM: tl.constexpr, LEFT: tl.constexpr, RIGHT: tl.constexpr,
                 SOFTCAP: tl.constexpr, ALIBI: tl.constexpr, DROPOUT: tl.constexpr,
                 MASK_KIND: tl.constexpr):
    for j0 in range(start, end, BLOCK_N):
        kj = j0 + offs_n
        kt = _load_cols(k_base, kj, skn, offs_d, n_k, HEAD_DIM, BLOCK_D, GEOM)
        vt = _load_cols(v_base, kj, svn, offs_d, n_k, HEAD_DIM, BLOCK_D, GEOM)
        qk = _mm(q, kt, None)
        s, t = _score(qk, offs_m[:, None], kj[None, :], n_q, n_k, diag, wl, wr, sm_scale,
                      softcap, slope, mask_base, smm, smn, GEOM, LEFT, RIGHT, SOFTCAP, ALIBI,
                      MASK_KIND)
        p = tl.math.exp2(s - lse2[:, None])
        dp = _mm(do, vt, None)
        if DROPOUT:
            r = tl.rand(seed, rng_row[:, None] + kj[None, :].to(tl.int64))
            dp = tl.where(r >= p_drop, dp * (1.0 / (1.0 - p_drop)), 0.0)
        ds = p * (dp - delta[:, None])
        if SOFTCAP:
            ds = ds * (1.0 - t * t)
        dq = _mm(_cvt(ds, kt.dtype), tl.trans(kt), dq)
    return dq


@triton.jit
def _bwd_q_kernel(Q, K, V, DO, LSE, DELTA, DQ, SLOPES, CU_Q, CU_K, MASK,
                  sqb, sqn, sqh, skb, skn, skh, svb, svn, svh, sdb, sdn, sdh,
                  sdqb, sdqn, sdqh, slb, slh, smb, smh, smm, smn, ssb,
                  max_q, max_k, H, GROUP, sm_scale, softcap, p_drop, seed, wl, wr, SEED,
                  HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  VARLEN: tl.constexpr, LEFT: tl.constexpr, RIGHT: tl.constexpr,
                  SOFTCAP: tl.constexpr, ALIBI: tl.constexpr, DROPOUT: tl.constexpr,
                  MASK_KIND: tl.constexpr, SEED_IN_MEMORY: tl.constexpr):
    """dQ for one block of query rows, looping over keys: no atomics, deterministic."""
    if SEED_IN_MEMORY:
        seed = tl.load(SEED)
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    if VARLEN:
        q0 = tl.load(CU_Q + b).to(tl.int64)
        n_q = (tl.load(CU_Q + b + 1) - tl.load(CU_Q + b)).to(tl.int32)
        k0 = tl.load(CU_K + b).to(tl.int64)
        n_k = (tl.load(CU_K + b + 1) - tl.load(CU_K + b)).to(tl.int32)
    else:
        q0 = 0
        n_q = max_q
        k0 = 0
        n_k = max_k
    m0 = pid_m * BLOCK_M
    if m0 < n_q:
        b64 = b.to(tl.int64)
        h64 = h.to(tl.int64)
        offs_m = m0 + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        q = _load_rows(Q + b64 * sqb + h64 * sqh + q0 * sqn, offs_m, sqn, offs_d, n_q,
                       HEAD_DIM, BLOCK_D, True)
        do = _load_rows(DO + b64 * sdb + h64 * sdh + q0 * sdn, offs_m, sdn, offs_d, n_q,
                        HEAD_DIM, BLOCK_D, True)
        lse = tl.load(LSE + b64 * slb + h64 * slh + q0 + offs_m, mask=offs_m < n_q,
                      other=float("inf"))
        delta = tl.load(DELTA + b64 * slb + h64 * slh + q0 + offs_m, mask=offs_m < n_q, other=0.0)
        lse2 = lse * 1.4426950408889634
        k_base = K + b64 * skb + hk.to(tl.int64) * skh + k0 * skn
        v_base = V + b64 * svb + hk.to(tl.int64) * svh + k0 * svn
        mask_base = MASK + b64 * smb + h64 * smh
        slope = 0.0
        if ALIBI:
            slope = tl.load(SLOPES + b * ssb + h).to(tl.float32)
        rng_row = (bh.to(tl.int64) * max_q + offs_m) * max_k
        diag = n_k - n_q
        dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
        lo, a, bb, hi = _kv_range(m0, n_q, n_k, wl, wr, BLOCK_M, BLOCK_N, LEFT, RIGHT)
        dq = _bwd_q_inner(dq, q, do, lse2, delta, k_base, v_base, skn, svn, lo, a, offs_m, offs_n,
                          offs_d, n_q, n_k, diag, wl, wr, sm_scale, softcap, slope, mask_base,
                          smm, smn, p_drop, seed, rng_row, HEAD_DIM, BLOCK_D, BLOCK_N, True,
                          LEFT, RIGHT, SOFTCAP, ALIBI, DROPOUT, MASK_KIND)
        dq = _bwd_q_inner(dq, q, do, lse2, delta, k_base, v_base, skn, svn, a, bb, offs_m, offs_n,
                          offs_d, n_q, n_k, diag, wl, wr, sm_scale, softcap, slope, mask_base,
                          smm, smn, p_drop, seed, rng_row, HEAD_DIM, BLOCK_D, BLOCK_N, False,
                          LEFT, RIGHT, SOFTCAP, ALIBI, DROPOUT, MASK_KIND)
        dq = _bwd_q_inner(dq, q, do, lse2, delta, k_base, v_base, skn, svn, bb, hi, offs_m, offs_n,
                          offs_d, n_q, n_k, diag, wl, wr, sm_scale, softcap, slope, mask_base,
                          smm, smn, p_drop, seed, rng_row, HEAD_DIM, BLOCK_D, BLOCK_N, True,
                          LEFT, RIGHT, SOFTCAP, ALIBI, DROPOUT, MASK_KIND)
        dq_ptrs = DQ + b64 * sdqb + h64 * sdqh + q0 * sdqn + offs_m[:, None] * sdqn + offs_d[None, :]
        tl.store(dq_ptrs, _cvt(dq * sm_scale, DQ.dtype.element_ty),
                 mask=(offs_m[:, None] < n_q) & (offs_d[None, :] < HEAD_DIM))


# --------------------------------------------------------------------------- launchers

def _geometry(q, k, cu_seqlens_q, max_seqlen_q, max_seqlen_k):
    """(batch, max_q, max_k, varlen) from the tensors."""
    if cu_seqlens_q is not None:
        return cu_seqlens_q.numel() - 1, int(max_seqlen_q), int(max_seqlen_k), True
    return q.shape[0], q.shape[1], k.shape[1], False


def _strides3(x, varlen):
    """(batch, seq, head) strides of a (B, N, H, D) or varlen (T, H, D) tensor."""
    if varlen:
        return 0, x.stride(0), x.stride(1)
    return x.stride(0), x.stride(1), x.stride(2)


def _lse_strides(lse, varlen):
    if varlen:  # (H, total)
        return 0, lse.stride(0)
    return lse.stride(0), lse.stride(1)  # (B, H, N)


def _mask_args(attn_mask, q, max_q, max_k):
    """(tensor, strides b, h, m, n, kind) for the kernels; a dummy when there is no mask.
    Broadcast dims get stride 0: the mask is never materialized."""
    if attn_mask is None:
        return q, 0, 0, 0, 0, 0
    m = attn_mask.expand(q.shape[0], q.shape[-2], max_q, max_k)
    if m.dtype == torch.bool:
        m = m.view(torch.uint8)
        kind = 1
    else:
        kind = 2
    return (m, m.stride(0), m.stride(1), m.stride(2), m.stride(3), kind)


def _common(q, k, alibi_slopes, softcap, window_left, window_right, causal):
    head_dim = q.shape[-1]
    block_d = max(16, triton.next_power_of_2(head_dim))
    group = q.shape[-2] // k.shape[-2]
    if causal:
        window_right = 0
    left = window_left is not None and window_left >= 0
    right = window_right is not None and window_right >= 0
    slopes = alibi_slopes if alibi_slopes is not None else q
    ssb = 0
    if alibi_slopes is not None and alibi_slopes.dim() == 2:
        ssb = alibi_slopes.stride(0)
    return (head_dim, block_d, group, left, right, int(window_left if left else 0),
            int(window_right if right else 0), slopes, ssb, softcap > 0.0)


def flash_attn_forward(q, k, v, *, softmax_scale, causal=False, window_left=-1, window_right=-1,
                       softcap=0.0, alibi_slopes=None, dropout_p=0.0, seed=0,
                       cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=0, max_seqlen_k=0,
                       attn_mask=None, seed_tensor=None):
    """Returns (out, lse). Inputs are assumed validated (mytorch_ext.ops.attention does it)."""
    B, max_q, max_k, varlen = _geometry(q, k, cu_seqlens_q, max_seqlen_q, max_seqlen_k)
    H = q.shape[-2]
    (head_dim, block_d, group, left, right, wl, wr, slopes, ssb,
     has_softcap) = _common(q, k, alibi_slopes, softcap, window_left, window_right, causal)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if varlen:
        lse = torch.empty((H, q.shape[0]), dtype=torch.float32, device=q.device)
    else:
        lse = torch.empty((B, H, max_q), dtype=torch.float32, device=q.device)
    if out.numel() == 0 or max_q == 0:
        return out, lse.fill_(float("inf"))
    mask, smb, smh, smm, smn, mask_kind = _mask_args(attn_mask, q, max_q, max_k)
    cu_q = cu_seqlens_q if varlen else q
    cu_k = cu_seqlens_k if varlen else q
    args = (q, k, v, out, lse, slopes, cu_q, cu_k, mask,
            *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen),
            *_strides3(out, varlen), *_lse_strides(lse, varlen),
            smb, smh, smm, smn, ssb,
            max_q, max_k, H, group, float(softmax_scale), float(softcap), float(dropout_p),
            int(seed), wl, wr, seed_tensor if seed_tensor is not None else q)
    consts = dict(HEAD_DIM=head_dim, BLOCK_D=block_d, VARLEN=varlen, LEFT=left, RIGHT=right,
                  SOFTCAP=has_softcap, ALIBI=alibi_slopes is not None, DROPOUT=dropout_p > 0.0,
                  MASK_KIND=mask_kind, SEED_IN_MEMORY=seed_tensor is not None)

    if _hopper_forward(q, k, v, out, lse, varlen, attn_mask, dropout_p, alibi_slopes,
                       softmax_scale, softcap, group, left, right, wl, wr):
        return out, lse

    def launch(cfg):
        global _TMA_DISABLED
        grid = (triton.cdiv(max_q, cfg["BLOCK_M"]), B * H)
        if cfg.get("TMA") and _tma_eligible(q, k, v, varlen, attn_mask, dropout_p, head_dim, block_d):
            tma_consts = {k_: consts[k_] for k_ in ("HEAD_DIM", "LEFT", "RIGHT", "SOFTCAP",
                                                    "ALIBI")}
            try:
                return _launch_fwd_tma(q, k, v, out, lse, slopes, ssb,
                                       (max_q, max_k, H, group, float(softmax_scale),
                                        float(softcap), wl, wr), tma_consts, cfg, grid)
            except Exception as e:  # noqa: BLE001
                if "out of resource" in str(e).lower():
                    raise
                _TMA_DISABLED = f"{type(e).__name__}: {e}"[:300]
        note_launch("fwd", cfg, _fwd_kernel[grid](
            *args, **consts, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))

    key = _key("fwd", q, head_dim, causal or right or left, max(max_q, max_k))
    run_with_fallback(key, fwd_configs(q.device, head_dim), launch, q.device)
    return out, lse


def _hopper(run, q, fp8=False):
    """run() with the Gluon Hopper kernels (flash_attn_hopper*.py) imported as its argument;
    it returns what it served (falsy: nothing, the Triton kernels take the call). A failure to
    import or compile them disables them for the process with one warning (the float8 kernel
    apart from the others: fp8=True)."""
    global _HOPPER_DISABLED, _HOPPER_FP8_DISABLED
    if _HOPPER_DISABLED or (fp8 and _HOPPER_FP8_DISABLED) or not q.is_cuda:
        return 0
    try:
        from . import flash_attn_hopper, flash_attn_hopper_bwd

        return run(flash_attn_hopper, flash_attn_hopper_bwd)
    except Exception as e:  # noqa: BLE001
        why = f"{type(e).__name__}: {e}"[:300]
        if fp8:
            _HOPPER_FP8_DISABLED = why
        else:
            _HOPPER_DISABLED = why
        import warnings

        warnings.warn(f"mytorch.flash_attn{'_fp8' if fp8 else ''}: the Hopper kernel is "
                      f"unavailable here, using the {'dequantizing path' if fp8 else 'Triton kernels'} "
                      f"({why})", RuntimeWarning, stacklevel=3)
        return 0


def _hopper_forward(q, k, v, out, lse, varlen, attn_mask, dropout_p, alibi_slopes, softmax_scale,
                    softcap, group, left, right, wl, wr):
    """Runs the Gluon Hopper forward when it covers the call; False leaves it to the Triton
    kernels."""
    def run(fwd, _bwd):
        if not fwd.eligible(q, k, v, varlen=varlen, attn_mask=attn_mask, dropout_p=dropout_p,
                            alibi_slopes=alibi_slopes, masked=left or right, window=left):
            return 0
        fwd.forward(q, k, v, out, lse, softmax_scale=softmax_scale, softcap=softcap, group=group,
                    left=left, right=right, wl=wl, wr=wr)
        return 1

    return bool(_hopper(run, q))


def flash_attn_fp8_forward(q, k, v, descale, *, softmax_scale, causal, window_left,
                           window_right, softcap):
    """(out bfloat16, lse) from the Gluon Hopper float8 kernel, or None where it does not run
    (not an sm90 GPU, a Triton without it, MYTORCH_HOPPER_ATTENTION=0, an empty q or k: the
    copy engine needs non-empty dimensions). Inputs are validated
    (mytorch_ext.ops.attention_fp8); descale is float32 (3, batch, heads_k)."""
    if (torch.cuda.get_device_capability(q.device)[0] != 9 or q.numel() == 0
            or k.numel() == 0):
        return None
    (_, _, group, left, right, wl, wr, *_rest) = _common(q, k, None, softcap, window_left,
                                                         window_right, causal)

    def run(fwd, _bwd):
        B, n_q, H, _ = q.shape
        out = torch.empty(q.shape, dtype=torch.bfloat16, device=q.device)
        lse = torch.empty((B, H, n_q), dtype=torch.float32, device=q.device)
        # the copy engine reads rows that start on 16 bytes: a contiguous float8 tensor's do
        fwd.forward_fp8(*(t if fwd.tma_aligned(t) else t.contiguous() for t in (q, k, v)),
                        descale, out, lse, softmax_scale=softmax_scale, softcap=softcap,
                        group=group, left=left, right=right, wl=wl, wr=wr)
        return out, lse

    return _hopper(run, q, fp8=True) or None


def flash_attn_backward(grad_out, q, k, v, out, lse, *, softmax_scale, causal=False,
                        window_left=-1, window_right=-1, softcap=0.0, alibi_slopes=None,
                        dropout_p=0.0, seed=0, cu_seqlens_q=None, cu_seqlens_k=None,
                        max_seqlen_q=0, max_seqlen_k=0, deterministic=False, attn_mask=None,
                        atomic_dq=False, seed_tensor=None):
    """Returns (dq, dk, dv) in the dtypes and shapes of q, k, v."""
    B, max_q, max_k, varlen = _geometry(q, k, cu_seqlens_q, max_seqlen_q, max_seqlen_k)
    H, HK = q.shape[-2], k.shape[-2]
    (head_dim, block_d, group, left, right, wl, wr, slopes, ssb,
     has_softcap) = _common(q, k, alibi_slopes, softcap, window_left, window_right, causal)
    dk = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    dv = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    if q.numel() == 0 or k.numel() == 0 or max_q == 0 or max_k == 0:
        return torch.zeros_like(q), dk.zero_(), dv.zero_()
    if grad_out.stride(-1) != 1:
        grad_out = grad_out.contiguous()
    if lse.stride(-1) != 1:  # the kernels step along the rows of lse one float at a time
        lse = lse.contiguous()
    # dQ by its own kernel (no atomics, deterministic) measured as fast as or faster than
    # float32 atomics on H200 (docs/notes_attention.md), so it is the default.
    atomic_dq = bool(atomic_dq) and not deterministic
    if atomic_dq:
        dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    else:
        dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    delta = torch.empty_like(lse)
    mask, smb, smh, smm, smn, mask_kind = _mask_args(attn_mask, q, max_q, max_k)
    cu_q = cu_seqlens_q if varlen else q
    cu_k = cu_seqlens_k if varlen else q
    consts = dict(HEAD_DIM=head_dim, BLOCK_D=block_d, VARLEN=varlen)
    pre_m = 64 if block_d <= 128 else 32
    note_launch("bwd_pre", {"BLOCK_M": pre_m}, _bwd_pre_kernel[(triton.cdiv(max_q, pre_m), B * H)](
        out, grad_out, delta, *_strides3(out, varlen), *_strides3(grad_out, varlen),
        *_lse_strides(lse, varlen), cu_q, max_q, H, **consts, BLOCK_M=pre_m))

    opts = dict(LEFT=left, RIGHT=right, SOFTCAP=has_softcap, ALIBI=alibi_slopes is not None,
                DROPOUT=dropout_p > 0.0, MASK_KIND=mask_kind, SEED_IN_MEMORY=seed_tensor is not None)
    scal = (float(softmax_scale), float(softcap), float(dropout_p), int(seed), wl, wr,
            seed_tensor if seed_tensor is not None else q)
    masking = causal or right or left
    kv_args = (q, k, v, grad_out, lse, delta, dk, dv, dq, slopes, cu_q, cu_k, mask,
               *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen),
               *_strides3(grad_out, varlen), *_strides3(dk, varlen), *_strides3(dv, varlen),
               *_strides3(dq, varlen), *_lse_strides(lse, varlen), smb, smh, smm, smn, ssb,
               max_q, max_k, H, HK, group, *scal)

    hopper = 0 if atomic_dq else _hopper_backward(
        q, k, v, grad_out, lse, delta, dq, dk, dv, varlen, attn_mask, dropout_p, alibi_slopes,
        softcap, softmax_scale, group, left, right, wl, wr)
    if hopper == 2:
        return dq, dk, dv

    def launch_kv(cfg):
        if atomic_dq:
            dq.zero_()
        grid = (triton.cdiv(max_k, cfg["BLOCK_N"]), B * HK)
        note_launch("bwd_kv", cfg, _bwd_kv_kernel[grid](
            *kv_args, **consts, **opts, ATOMIC_DQ=atomic_dq, BLOCK_M=cfg["BLOCK_M"],
            BLOCK_N=cfg["BLOCK_N"], num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))

    n = max(max_q, max_k)
    if not hopper:
        run_with_fallback(_key("bwd_kv" + ("_atomic" if atomic_dq else ""), q, head_dim, masking,
                               n), bwd_configs(q.device, head_dim, "kv"), launch_kv, q.device)
    if atomic_dq:
        return dq.to(q.dtype), dk, dv

    q_args = (q, k, v, grad_out, lse, delta, dq, slopes, cu_q, cu_k, mask,
              *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen),
              *_strides3(grad_out, varlen), *_strides3(dq, varlen), *_lse_strides(lse, varlen),
              smb, smh, smm, smn, ssb, max_q, max_k, H, group, *scal)

    def launch_q(cfg):
        grid = (triton.cdiv(max_q, cfg["BLOCK_M"]), B * H)
        note_launch("bwd_q", cfg, _bwd_q_kernel[grid](
            *q_args, **consts, **opts, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"],
            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]))

    run_with_fallback(_key("bwd_q", q, head_dim, masking, n), bwd_configs(q.device, head_dim, "q"),
                      launch_q, q.device)
    return dq, dk, dv


def _hopper_backward(q, k, v, grad_out, lse, delta, dq, dk, dv, varlen, attn_mask, dropout_p,
                     alibi_slopes, softcap, softmax_scale, group, left, right, wl, wr):
    """dK and dV by the Gluon Hopper kernel when it covers the call, and dQ too where its
    kernel is the faster one; delta is already computed. Returns 0 (neither), 1 (dK and dV)
    or 2 (all three)."""
    def run(_fwd, bwd):
        if not bwd.eligible(q, k, v, grad_out, varlen=varlen, attn_mask=attn_mask,
                            dropout_p=dropout_p, alibi_slopes=alibi_slopes, softcap=softcap):
            return 0
        kw = dict(softmax_scale=softmax_scale, group=group, left=left, right=right, wl=wl, wr=wr)
        bwd.backward_kv(q, k, v, grad_out, lse, delta, dk, dv, **kw)
        if q.shape[-1] not in bwd._DQ_BLOCKS:
            return 1
        bwd.backward_q(q, k, v, grad_out, lse, delta, dq, **kw)
        return 2

    return _hopper(run, q)


def _key(kind, q, head_dim, masking, n):
    """Shape family of a launch: the tuned-config table and cache are keyed by it."""
    bucket = min(max(triton.next_power_of_2(max(n, 1)), 128), 16384)
    return (kind, str(q.dtype).replace("torch.", ""), int(head_dim), bool(masking), int(bucket))


__all__ = ["flash_attn_forward", "flash_attn_backward", "LOG2E", "LN2", "math"]
