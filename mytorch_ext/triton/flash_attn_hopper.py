"""FlashAttention forward for Hopper (sm90) in Gluon: warp-specialized, TMA-fed, wgmma.

One program computes a BLOCK_M x HEAD_DIM output tile of one (batch, head):

- a one-warp producer partition issues the tensor-memory-accelerator copies: Q once (in
  64-row pieces, one per consumer warpgroup), then K and V tiles into a ring of STAGES
  shared-memory slots, each slot guarded by a "ready" barrier per operand (the copy engine
  completes it) and an "empty" barrier the consumers arrive on once the slot's last reader
  is done;
- BLOCK_M / 64 consumer warpgroups (64 query rows each) run the online softmax. Two (128-row
  tiles) software-pipeline their GEMMs: S(j+1) = Q K(j+1)^T and O += P(j) V(j) are issued
  back to back, the softmax of S(j+1) runs while P(j) V(j) is still on the tensor cores, and
  O is rescaled once that GEMM retires. Three (192-row tiles, head_dim 64) have registers for
  one score tile each: each waits on its own GEMMs while the other two keep the tensor cores
  busy. P stays in registers as the A operand of the second wgmma.

The arguments are those of `_fwd_tma_kernel` in flash_attn.py, so the C++ launcher replays
either kernel the same way. Scores are kept in log2 units; lse is stored in natural units,
+inf for a row with no key (output 0), as the Triton kernels do.

Covered: float16/bfloat16, head_dim 64/128 (power of two, <= 128), GQA/MQA, causal
(bottom-right), sliding windows and softcap. ALiBi, dropout, a user mask and varlen stay on
the Triton kernels (`eligible` says which calls come here).
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from .flash_attn import _kv_range  # the Triton kernels' split, shared
from .launch_record import note_launch

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@gluon.jit
def _tanh(x):
    return 1.0 - 2.0 / (gl.exp2(x * 2.8853900817779268) + 1.0)


@gluon.jit
def _tile(t, n_m, H, GROUP, n_q, n_k, wl, wr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
          LEFT: gl.constexpr, RIGHT: gl.constexpr):
    """Tile t of the persistent schedule: (batch, head) major, so the programs running at
    once share K and V in L2, and within a head the last query block (the longest under a
    causal mask) first. Returns (b, h, kv head, m0, lo, a, b_, number of key blocks)."""
    bh = t // n_m
    m0 = (n_m - 1 - t % n_m) * BLOCK_M
    h = bh % H
    lo, a, bb, hi = _kv_range(m0, n_q, n_k, wl, wr, BLOCK_M, BLOCK_N, LEFT, RIGHT)
    return bh // H, h, h // GROUP, m0, lo, a, bb, gl.cdiv(hi - lo, BLOCK_N)


@gluon.jit
def _tile_id(r, SNAKE: gl.constexpr):
    """This program's tile of round r: program p takes tile r * grid + p, or (SNAKE) the
    programs' order reverses every other round, so that under a causal mask, where a head's
    tiles run from longest to shortest, each program's tiles alternate long and short."""
    p = gl.program_id(0)
    g = gl.num_programs(0)
    if SNAKE:
        p = p + (r % 2) * (g - 1 - 2 * p)
    return r * g + p


@gluon.jit
def _producer(args, LEFT: gl.constexpr, RIGHT: gl.constexpr, FP8: gl.constexpr,
              SNAKE: gl.constexpr):
    (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_empty, k_ready, v_ready, kv_empty,
     n_m, n_tiles, H, GROUP, n_q, n_k, wl, wr) = args
    BLOCK_M: gl.constexpr = q_smem.shape[0] * q_smem.shape[1]
    STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    q4: gl.constexpr = q_desc.layout
    k4: gl.constexpr = k_desc.layout
    v4: gl.constexpr = v_desc.layout
    NUM_WG: gl.constexpr = q_smem.shape[0]  # Q: one piece per consumer warpgroup
    WG_M: gl.constexpr = q_smem.shape[1]
    it = 0  # key blocks issued so far: the ring position
    tc = 0  # tiles so far
    for r in range(0, gl.cdiv(n_tiles, gl.num_programs(0))):
        t = _tile_id(r, SNAKE)
        if t < n_tiles:
            b, h, hk, m0, lo, a, bb, n_blocks = _tile(t, n_m, H, GROUP, n_q, n_k, wl, wr, BLOCK_M,
                                                      BLOCK_N, LEFT, RIGHT)
            # a fresh barrier counts its (non-existent) previous phase as complete: the first
            # tile's Q and the first pass over the ring do not wait
            mbarrier.wait(q_empty, (tc & 1) ^ 1)
            mbarrier.expect(q_bar, NUM_WG * q_desc.block_type.nbytes)
            for w in gl.static_range(NUM_WG):
                q_dst = q_smem.index(w)._reinterpret(q_smem.dtype, q_desc.block_type.shape, q4)
                tma.async_copy_global_to_shared(q_desc, [b, m0 + w * WG_M, h, 0], q_bar, q_dst)
            for i in range(n_blocks):
                s = it % STAGES
                mbarrier.wait(kv_empty.index(s), ((it // STAGES) & 1) ^ 1)
                j0 = lo + i * BLOCK_N
                mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(
                    k_desc, [b, j0, hk, 0], k_ready.index(s),
                    k_smem.index(s)._reinterpret(k_smem.dtype, k_desc.block_type.shape, k4))
                mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
                v_dst = v_smem.index(s)._reinterpret(v_smem.dtype, v_desc.block_type.shape, v4)
                if FP8:  # V^T, (batch, kv head, head_dim, key)
                    tma.async_copy_global_to_shared(v_desc, [b, hk, 0, j0], v_ready.index(s), v_dst)
                else:
                    tma.async_copy_global_to_shared(v_desc, [b, j0, hk, 0], v_ready.index(s), v_dst)
                it += 1
            tc += 1


@gluon.jit
def _visible(ok, qi, kj, diag, wl, wr, LEFT: gl.constexpr, RIGHT: gl.constexpr):
    """ok, and key kj inside query qi's window (bottom-right aligned: diag = n_k - n_q);
    qi and kj broadcast against each other. Shared by the forward and both backward kernels."""
    if RIGHT:
        ok = ok & (kj <= qi + diag + wr)
    if LEFT:
        ok = ok & (kj >= qi + diag - wl)
    return ok


@gluon.jit
def _scores(s, j0, rows, cols, n_k, diag, wl, wr, sm_scale, softcap, masked,
            LEFT: gl.constexpr, RIGHT: gl.constexpr, SOFTCAP: gl.constexpr):
    """Scores that _online_softmax scales to log2 units (raw q.k without a softcap, so the
    scale folds into the exponent's FMA); positions outside the key range or the window get
    -inf."""
    if SOFTCAP:
        s = _tanh(s * (sm_scale / softcap)) * (softcap * 1.4426950408889634)
    if masked:
        kj = gl.expand_dims(j0 + cols, 0)
        qi = gl.expand_dims(rows, 1)
        s = gl.where(_visible(kj < n_k, qi, kj, diag, wl, wr, LEFT, RIGHT), s, float("-inf"))
    return s


@gluon.jit
def _online_softmax(s, m_i, l_i, scale):
    """(p, new max, alpha, new row sum) of one score tile; s * scale is in log2 units."""
    m_new = gl.maximum(m_i, gl.max(s, 1) * scale)
    m_use = gl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet
    p = gl.exp2(s * scale - gl.expand_dims(m_use, 1))
    alpha = gl.exp2(m_i - m_use)
    return p, m_new, alpha, l_i * alpha + gl.sum(p, 1)


@gluon.jit
def _turn(turn, tn, WG: gl.constexpr, PINGPONG: gl.constexpr):
    """Waits for this warpgroup's turn to issue GEMMs (turn number tn). Warpgroup 0 goes
    first: its first wait is on the fresh barrier's already-complete previous phase."""
    if PINGPONG:
        mbarrier.wait(turn.index(WG), (tn & 1) ^ (1 if WG == 0 else 0))
    return tn + 1


@gluon.jit
def _pass_turn(turn, WG: gl.constexpr, PINGPONG: gl.constexpr, NUM_WG: gl.constexpr = 2):
    """Hands the turn to the next of NUM_WG warpgroups, round robin."""
    if PINGPONG:
        mbarrier.arrive(turn.index((WG + 1) % NUM_WG), count=1)


@gluon.jit
def _v_operand(v_smem, slot, FP8: gl.constexpr):
    """The B operand of P V: a (key, head_dim) view of the slot (of a V^T tile for FP8)."""
    if FP8:
        return v_smem.index(slot).permute((1, 0))
    else:
        return v_smem.index(slot)


@gluon.jit
def _release_tile(q_empty, k_ready, kv_empty, it, n_blocks, STAGES: gl.constexpr):
    """A consumer warpgroup's part of a tile in which it has no query row: it releases Q and
    each K/V slot once the copy into the slot has landed (so each arrival counts towards the
    slot's current use, never a later one) and returns the new ring position."""
    mbarrier.arrive(q_empty, count=1)
    for i in range(n_blocks):
        mbarrier.wait(k_ready.index((it + i) % STAGES), ((it + i) // STAGES) & 1)
        mbarrier.arrive(kv_empty.index((it + i) % STAGES), count=1)
    return it + n_blocks


@gluon.jit
def _store_tile(acc, m_i, l_i, O, LSE, b, h, hk, m0, rows, n_q, sob, son, soh, slb, slh,
                VD, sdb, sdh, o_layout: gl.constexpr, out_layout: gl.constexpr,
                STORE_DIRECT: gl.constexpr, FP8: gl.constexpr):
    """Normalises a warpgroup's accumulator and stores its rows of O and lse (natural units;
    +inf and a zero row for a query with no key). STORE_DIRECT stores from the accumulator's
    layout, without the scratch buffer of a layout change."""
    BLOCK_M: gl.constexpr = acc.shape[0]
    HEAD_DIM: gl.constexpr = acc.shape[1]
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    out_dtype: gl.constexpr = O.dtype.element_ty
    empty = l_i == 0.0
    l_safe = gl.where(empty, 1.0, l_i)
    lse = gl.where(empty, float("inf"), (m_i + gl.log2(l_safe)) * 0.6931471805599453)
    out = acc / gl.expand_dims(gl.convert_layout(l_safe, row_o), 1)
    if FP8:
        out = out * gl.load(VD + b * sdb + hk * sdh)
    if STORE_DIRECT:
        out = out.to(out_dtype)
        orow = m0 + gl.arange(0, BLOCK_M, layout=row_o)
        ocol = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    else:
        out = gl.convert_layout(out.to(out_dtype), out_layout)
        orow = m0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, out_layout))
        ocol = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, out_layout))
    b64 = b.to(gl.int64)
    h64 = h.to(gl.int64)
    optrs = (O + b64 * sob + h64 * soh + gl.expand_dims(orow.to(gl.int64) * son, 1)
             + gl.expand_dims(ocol, 0))
    gl.store(optrs, out, mask=gl.expand_dims(orow < n_q, 1))
    gl.store(LSE + b64 * slb + h64 * slh + rows, lse, mask=rows < n_q)


@gluon.jit
def _softmax_block(q_smem, k_smem, k_ready, turn, tn, cur, j0, s_zero, rows, cols, n_k, diag,
                   wl, wr, sm, softcap, scale, masked, m_i, l_i, WG: gl.constexpr,
                   NUM_WG: gl.constexpr, LEFT: gl.constexpr, RIGHT: gl.constexpr,
                   SOFTCAP: gl.constexpr, PINGPONG: gl.constexpr):
    """S = Q K^T of the key block at ring position cur (keys from j0), waited on, and its
    online softmax: (p, m_i, alpha, l_i, turns)."""
    STAGES: gl.constexpr = k_smem.shape[0]
    slot = cur % STAGES
    tn = _turn(turn, tn, WG, PINGPONG)
    mbarrier.wait(k_ready.index(slot), (cur // STAGES) & 1)
    s_tok = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False,
                          is_async=True)
    _pass_turn(turn, WG, PINGPONG, NUM_WG)
    s = warpgroup_mma_wait(0, deps=[s_tok])
    s = _scores(s, j0, rows, cols, n_k, diag, wl, wr, sm, softcap, masked, LEFT, RIGHT, SOFTCAP)
    p, m_i, alpha, l_i = _online_softmax(s, m_i, l_i, scale)
    return p, m_i, alpha, l_i, tn


@gluon.jit
def _key_blocks(q_smem, k_smem, v_smem, q_empty, k_ready, v_ready, kv_empty, turn, it, tn,
                n_blocks, lo, a, bb, rows, n_k, diag, wl, wr, sm, softcap, scale, acc, m_i, l_i,
                WG: gl.constexpr, NUM_WG: gl.constexpr, LEFT: gl.constexpr, RIGHT: gl.constexpr,
                SOFTCAP: gl.constexpr, PINGPONG: gl.constexpr, FP8: gl.constexpr,
                PIPELINED: gl.constexpr):
    """A warpgroup's key blocks of one tile; returns (acc, m_i, l_i, ring position, turns).

    PIPELINED: S(j+1) = Q K^T and O += P(j) V(j) go out back to back, and the softmax of
    S(j+1) runs while P(j) V(j) is on the tensor cores. Otherwise each GEMM is waited on
    before the softmax that follows it: fewer registers live at once (one score tile, no P in
    flight), for three warpgroups whose softmaxes overlap each other's GEMMs instead."""
    STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    s_layout: gl.constexpr = _acc_layout(BLOCK_N, FP8)
    o_layout: gl.constexpr = _acc_layout(k_smem.shape[2], FP8)
    p_layout: gl.constexpr = _operand_layout(o_layout, FP8)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    dtype: gl.constexpr = q_smem.dtype
    BLOCK_M: gl.constexpr = q_smem.shape[0]
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    if PIPELINED:
        if n_blocks > 0:
            # block 0: scores and probabilities; its P V product is issued in the next step
            p, m_i, alpha, l_i, tn = _softmax_block(
                q_smem, k_smem, k_ready, turn, tn, it, lo, s_zero, rows, cols, n_k, diag, wl,
                wr, sm, softcap, scale, (lo < a) | (lo >= bb), m_i, l_i, WG, NUM_WG, LEFT,
                RIGHT, SOFTCAP, PINGPONG)
            for i in range(1, n_blocks):
                j0 = lo + i * BLOCK_N
                cur = it + i
                slot = cur % STAGES
                prev = (cur - 1) % STAGES
                tn = _turn(turn, tn, WG, PINGPONG)
                mbarrier.wait(k_ready.index(slot), (cur // STAGES) & 1)
                s_tok = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), s_zero,
                                      use_acc=False, is_async=True)
                mbarrier.wait(v_ready.index(prev), ((cur - 1) // STAGES) & 1)
                o_tok = warpgroup_mma(gl.convert_layout(p.to(dtype), p_layout),
                                      _v_operand(v_smem, prev, FP8), acc, is_async=True)
                _pass_turn(turn, WG, PINGPONG, NUM_WG)
                # wgmma groups retire in issue order: waiting down to one outstanding group
                # retires S while P V runs on
                s = warpgroup_mma_wait(1, deps=[s_tok])
                s = _scores(s, j0, rows, cols, n_k, diag, wl, wr, sm, softcap,
                            (j0 < a) | (j0 >= bb), LEFT, RIGHT, SOFTCAP)
                p, m_i, alpha, l_i = _online_softmax(s, m_i, l_i, scale)
                acc = warpgroup_mma_wait(0, deps=[o_tok])
                mbarrier.arrive(kv_empty.index(prev), count=1)
                acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
            # every score GEMM has retired: Q may be replaced by the next tile's
            mbarrier.arrive(q_empty, count=1)
            last = (it + n_blocks - 1) % STAGES
            tn = _turn(turn, tn, WG, PINGPONG)
            mbarrier.wait(v_ready.index(last), ((it + n_blocks - 1) // STAGES) & 1)
            o_tok = warpgroup_mma(gl.convert_layout(p.to(dtype), p_layout),
                                  _v_operand(v_smem, last, FP8), acc, is_async=True)
            _pass_turn(turn, WG, PINGPONG, NUM_WG)
            acc = warpgroup_mma_wait(0, deps=[o_tok])
            mbarrier.arrive(kv_empty.index(last), count=1)
            it += n_blocks
        else:
            mbarrier.arrive(q_empty, count=1)
    else:
        for i in range(n_blocks):
            j0 = lo + i * BLOCK_N
            cur = it + i
            slot = cur % STAGES
            p, m_i, alpha, l_i, tn = _softmax_block(
                q_smem, k_smem, k_ready, turn, tn, cur, j0, s_zero, rows, cols, n_k, diag, wl,
                wr, sm, softcap, scale, (j0 < a) | (j0 >= bb), m_i, l_i, WG, NUM_WG, LEFT,
                RIGHT, SOFTCAP, PINGPONG)
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
            mbarrier.wait(v_ready.index(slot), (cur // STAGES) & 1)
            o_tok = warpgroup_mma(gl.convert_layout(p.to(dtype), p_layout),
                                  _v_operand(v_smem, slot, FP8), acc, is_async=True)
            acc = warpgroup_mma_wait(0, deps=[o_tok])
            mbarrier.arrive(kv_empty.index(slot), count=1)
        # every score GEMM has retired: Q may be replaced by the next tile's
        mbarrier.arrive(q_empty, count=1)
        it += n_blocks
    return acc, m_i, l_i, it, tn


@gluon.constexpr_function
def _acc_layout(width, FP8=False):
    """The register layout of a warpgroup's wgmma accumulator `width` columns wide (K step 32
    for float8 inputs, 16 otherwise): the score tile's, and with width HEAD_DIM O's. Shared
    by the forward and both backward kernels."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                     instr_shape=[16, width, 32 if FP8 else 16])


@gluon.constexpr_function
def _operand_layout(o_layout, FP8=False):
    """A register A operand of a wgmma accumulating into o_layout (P of P V; dS and P^T in
    the backward): 4 float8 or 2 16-bit elements per register."""
    return gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4 if FP8 else 2)


@gluon.jit
def _consumer(args, WG: gl.constexpr, LEFT: gl.constexpr, RIGHT: gl.constexpr,
              SOFTCAP: gl.constexpr, PINGPONG: gl.constexpr, FP8: gl.constexpr,
              SNAKE: gl.constexpr):
    """One of NUM_WG consumer warpgroups: rows [WG * BLOCK_M, (WG + 1) * BLOCK_M) of each
    TILE_M tile.

    With PINGPONG the warpgroups take turns issuing their GEMMs (turn[WG] is this one's
    token, handed to the next after each issue), so one warpgroup's softmax runs while the
    others' GEMMs occupy the tensor cores instead of all contending at once. Without it, a
    warpgroup whose rows all lie past the last query (the last tile of a 192-row schedule)
    skips the GEMMs and only takes part in the barriers' hand-offs. Two warpgroups pipeline
    their GEMMs (_key_blocks); three, whose registers hold one score tile each, do not.

    FP8: q, k, v are float8_e4m3 with descales QD, KD, VD (one per batch and kv head, at
    b * sdb + hk * sdh); the scores are scaled by QD * KD, P is rounded to float8 for the
    second GEMM (whose V operand is a V^T tile: float8 wgmma reads both operands K-major),
    and the output is scaled by VD and stored in O's dtype."""
    (q_full, k_smem, v_smem, q_bar, q_empty, k_ready, v_ready, kv_empty, turn, O, LSE, n_m,
     n_tiles, H, GROUP, n_q, n_k, sob, son, soh, slb, slh, sm_scale, softcap, wl, wr, QD, KD, VD,
     sdb, sdh) = args
    NUM_WG: gl.constexpr = q_full.shape[0]
    BLOCK_M: gl.constexpr = q_full.shape[1]  # one warpgroup's rows
    TILE_M: gl.constexpr = NUM_WG * BLOCK_M
    NUM_WARPS: gl.constexpr = 4
    STAGES: gl.constexpr = k_smem.shape[0]
    BLOCK_N: gl.constexpr = k_smem.shape[1]
    HEAD_DIM: gl.constexpr = q_full.shape[2]
    q_smem = q_full.index(WG)
    s_layout: gl.constexpr = _acc_layout(BLOCK_N, FP8)
    o_layout: gl.constexpr = _acc_layout(HEAD_DIM, FP8)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    out_layout: gl.constexpr = gl.BlockedLayout([1, 8], [HEAD_DIM // 8, 256 // HEAD_DIM],
                                                [NUM_WARPS, 1], [1, 0])
    dtype: gl.constexpr = q_smem.dtype
    # The epilogue's change to a store-friendly layout takes a scratch buffer in shared
    # memory. Where Q and the K/V ring fill it (16-bit, head_dim 128, BLOCK_N 128, 3 stages:
    # 224 KiB of 227), O is stored from the accumulator's own layout instead.
    RING_BYTES: gl.constexpr = ((2 * STAGES * BLOCK_N + TILE_M) * HEAD_DIM
                                * dtype.primitive_bitwidth // 8)
    STORE_DIRECT: gl.constexpr = RING_BYTES > 200 * 1024

    diag = n_k - n_q
    it = 0  # key blocks consumed so far: the ring position
    tc = 0  # tiles so far
    tn = 0  # GEMM turns so far
    for r in range(0, gl.cdiv(n_tiles, gl.num_programs(0))):
        t = _tile_id(r, SNAKE)
        if t < n_tiles:
            b, h, hk, m0, lo, a, bb, n_blocks = _tile(t, n_m, H, GROUP, n_q, n_k, wl, wr, TILE_M,
                                                      BLOCK_N, LEFT, RIGHT)
            m0 = m0 + WG * BLOCK_M
            sm = sm_scale
            if FP8:
                sm = sm_scale * gl.load(QD + b * sdb + hk * sdh) * gl.load(KD + b * sdb + hk * sdh)
            if SOFTCAP:
                scale = 1.0
            else:
                scale = sm * 1.4426950408889634
            rows = m0 + gl.arange(0, BLOCK_M, layout=row_s)
            acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
            m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, row_s)
            l_i = gl.zeros([BLOCK_M], gl.float32, row_s)
            mbarrier.wait(q_bar, tc & 1)
            if (m0 >= n_q) & (not PINGPONG):
                it = _release_tile(q_empty, k_ready, kv_empty, it, n_blocks, STAGES)
            else:
                acc, m_i, l_i, it, tn = _key_blocks(
                    q_smem, k_smem, v_smem, q_empty, k_ready, v_ready, kv_empty, turn, it, tn,
                    n_blocks, lo, a, bb, rows, n_k, diag, wl, wr, sm, softcap, scale, acc, m_i,
                    l_i, WG, NUM_WG, LEFT, RIGHT, SOFTCAP, PINGPONG, FP8, NUM_WG == 2)
                _store_tile(acc, m_i, l_i, O, LSE, b, h, hk, m0, rows, n_q, sob, son, soh,
                            slb, slh, VD, sdb, sdh, o_layout, out_layout, STORE_DIRECT, FP8)
            tc += 1


@gluon.jit
def _attention(q_desc, k_desc, v_desc, O, LSE, QD, KD, VD, sdb, sdh, sob, son, soh, slb, slh,
               max_q, max_k, H, GROUP, sm_scale, softcap, wl, wr,
               HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
               LEFT: gl.constexpr, RIGHT: gl.constexpr, SOFTCAP: gl.constexpr,
               STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr, PINGPONG: gl.constexpr,
               FP8: gl.constexpr, SNAKE: gl.constexpr = False):
    """Program p takes tiles p, p + grid, ... in rounds, in snake order with SNAKE (see
    _tile_id and _tile); the grid is one program per SM, or one per tile."""
    n_m = gl.cdiv(max_q, BLOCK_M)
    n_tiles = n_m * q_desc.shape[0] * H

    dtype: gl.constexpr = q_desc.dtype
    WG_M: gl.constexpr = q_desc.block_type.shape[1]  # one consumer warpgroup's query rows
    NUM_WG: gl.constexpr = BLOCK_M // WG_M
    q_smem = gl.allocate_shared_memory(dtype, [NUM_WG, WG_M, HEAD_DIM],
                                       _smem_layout(HEAD_DIM, dtype))
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM],
                                       _smem_layout(HEAD_DIM, dtype))
    if FP8:
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, HEAD_DIM, BLOCK_N],
                                           _smem_layout(BLOCK_N, dtype))
    else:
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM],
                                           _smem_layout(HEAD_DIM, dtype))
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    kv_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [NUM_WG, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    mbarrier.init(q_empty, count=NUM_WG)  # one arrival per consumer warpgroup
    for w in gl.static_range(NUM_WG):
        mbarrier.init(turn.index(w), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(s), count=1)
        mbarrier.init(v_ready.index(s), count=1)
        mbarrier.init(kv_empty.index(s), count=NUM_WG)
    fence_async_shared()

    # the consumer warpgroups' shared arguments; each also gets its index and the switches
    args = (q_smem, k_smem, v_smem, q_bar, q_empty, k_ready, v_ready, kv_empty, turn, O, LSE,
            n_m, n_tiles, H, GROUP, max_q, max_k, sob, son, soh, slb, slh, sm_scale, softcap,
            wl, wr, QD, KD, VD, sdb, sdh)
    pargs = (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_empty, k_ready, v_ready,
             kv_empty, n_m, n_tiles, H, GROUP, max_q, max_k, wl, wr)
    if NUM_WG == 3:
        gl.warp_specialize([
            (_consumer, (args, 0, LEFT, RIGHT, SOFTCAP, PINGPONG, FP8, SNAKE)),
            (_consumer, (args, 1, LEFT, RIGHT, SOFTCAP, PINGPONG, FP8, SNAKE)),
            (_consumer, (args, 2, LEFT, RIGHT, SOFTCAP, PINGPONG, FP8, SNAKE)),
            (_producer, (pargs, LEFT, RIGHT, FP8, SNAKE)),
        ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, 24])
    else:
        gl.static_assert(NUM_WG == 2, "BLOCK_M is 128 or 192")
        gl.warp_specialize([
            (_consumer, (args, 0, LEFT, RIGHT, SOFTCAP, PINGPONG, FP8, SNAKE)),
            (_consumer, (args, 1, LEFT, RIGHT, SOFTCAP, PINGPONG, FP8, SNAKE)),
            (_producer, (pargs, LEFT, RIGHT, FP8, SNAKE)),
        ], [4, 1], [CONSUMER_REGS, 24])


@gluon.constexpr_function
def _smem_layout(row, dtype):
    """The shared layout of a tile whose rows hold `row` elements: the widest swizzle a row
    spans (wgmma and the copy engine agree on it)."""
    row_bytes = row * dtype.primitive_bitwidth // 8
    return gl.NVMMASharedLayout(swizzle_byte_width=min(128, row_bytes),
                                element_bitwidth=dtype.primitive_bitwidth, rank=2)


@gluon.jit
def _fwd_kernel(q_desc, k_desc, v_desc, O, LSE, SLOPES,
                sob, son, soh, slb, slh, ssb,
                max_q, max_k, H, GROUP, sm_scale, softcap, wl, wr,
                HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                LEFT: gl.constexpr, RIGHT: gl.constexpr,
                SOFTCAP: gl.constexpr, ALIBI: gl.constexpr, STAGES: gl.constexpr,
                CONSUMER_REGS: gl.constexpr, PINGPONG: gl.constexpr, SNAKE: gl.constexpr = False):
    """float16 / bfloat16, with the arguments of the Triton `_fwd_tma_kernel`."""
    gl.static_assert(not ALIBI, "ALiBi runs on the Triton kernels")
    _attention(q_desc, k_desc, v_desc, O, LSE, SLOPES, SLOPES, SLOPES, 0, 0, sob, son, soh,
               slb, slh, max_q, max_k, H, GROUP, sm_scale, softcap, wl, wr, HEAD_DIM, BLOCK_M,
               BLOCK_N, LEFT, RIGHT, SOFTCAP, STAGES, CONSUMER_REGS, PINGPONG, False, SNAKE)


@gluon.jit
def _fwd_fp8_kernel(q_desc, k_desc, vt_desc, O, LSE, QD, KD, VD, sdb, sdh,
                    sob, son, soh, slb, slh, max_q, max_k, H, GROUP, sm_scale, softcap, wl, wr,
                    HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                    LEFT: gl.constexpr, RIGHT: gl.constexpr, SOFTCAP: gl.constexpr,
                    STAGES: gl.constexpr, CONSUMER_REGS: gl.constexpr, PINGPONG: gl.constexpr,
                    SNAKE: gl.constexpr = False):
    """float8_e4m3 q, k and V^T (batch, kv head, head_dim, key) with float32 descales."""
    _attention(q_desc, k_desc, vt_desc, O, LSE, QD, KD, VD, sdb, sdh, sob, son, soh, slb, slh,
               max_q, max_k, H, GROUP, sm_scale, softcap, wl, wr, HEAD_DIM, BLOCK_M, BLOCK_N,
               LEFT, RIGHT, SOFTCAP, STAGES, CONSUMER_REGS, PINGPONG, True, SNAKE)


# ----------------------------------------------------------------------------- launcher

# head_dim: (BLOCK_M, BLOCK_N, STAGES, PINGPONG), measured on H200 (docs/hopper_attention.md).
# BLOCK_M 192 is three consumer warpgroups, each waiting on its GEMMs (_key_blocks): at
# head_dim 64 the exponentials weigh as much as the GEMMs, and the other two warpgroups'
# GEMMs fill the tensor cores while one runs its softmax (1.01-1.15x the two pipelined
# warpgroups from 4k keys, 0.97x at 1k).
_BLOCKS = {64: (192, 128, 2, False), 128: (128, 128, 3, False)}
# Calls of at most SHORT_SEQLEN queries and keys, where their configuration differs: head_dim
# 64 keeps two warpgroups (a 192-row tile wastes more of a short sequence); head_dim 128
# under a causal mask (or right window) takes BLOCK_N 64 with ping-pong, 4 % faster there
# (H200, 1k causal), while elsewhere the 128-key blocks are 7-20 % faster. The bound is a
# seqlen bucket of the C++ launcher's plan key, so its replays keep the choice.
SHORT_SEQLEN = 1024
_SHORT_BLOCKS = {64: (128, 128, 3, False)}
_SHORT_CAUSAL_BLOCKS = {64: (128, 128, 3, False), 128: (128, 64, 3, True)}
WG_M = 64  # query rows of one consumer warpgroup: a Q copy's box
# registers per consumer thread after setmaxnreg, by BLOCK_M (two or three consumer
# warpgroups and a one-warp producer with 24 share the SM's 64k)
CONSUMER_REGS = {128: 240, 192: 160}
PERSISTENT = True
# Causal (or right-window) calls of at most this many queries and keys run on persistent programs
# that take their tiles in snake order (_tile_id); longer ones get a program per tile. The
# bound is a seqlen bucket of the C++ launcher's plan key, so its replays keep the choice.
SNAKE_MAX_SEQLEN = 8192
_UNCAPPED = 1 << 30  # the C++ launcher's grid cap for a program per tile (1-D grid)


@functools.lru_cache(maxsize=None)
def _num_sms(device):
    return torch.cuda.get_device_properties(device).multi_processor_count


def eligible(q, k, v, *, varlen, attn_mask, dropout_p, alibi_slopes, masked=False,
             window=False):
    """Whether this kernel serves the call: a Hopper GPU, plain (B, N, H, D) half-precision
    tensors aligned for the copy engine, and none of the features kept on Triton. masked: a
    causal mask or a window; window: a left window bound. With head_dim 64 under a mask the
    Triton kernel is faster on short sequences (two of its programs share an SM; this
    kernel's take a whole one): up to 8k keys with a window, up to 1k causal (longer causal
    calls run this kernel on persistent programs, see SNAKE_MAX_SEQLEN)."""
    if (varlen or attn_mask is not None or dropout_p > 0.0 or alibi_slopes is not None
            or not q.is_cuda or q.dtype not in (torch.float16, torch.bfloat16)
            or q.shape[-1] not in _BLOCKS or torch.cuda.get_device_capability(q.device)[0] != 9
            or q.numel() == 0 or k.numel() == 0):  # no copy-engine descriptor for an empty dim
        return False
    if masked and q.shape[-1] == 64 and max(q.shape[1], k.shape[1]) <= (8192 if window else 1024):
        return False
    return all(tma_aligned(t) for t in (q, k, v))


def _schedule(device, n_q, n_k, left, right):
    """(grid cap, SNAKE) of a forward call. Tiles of equal length (no causal mask or window) go
    to one persistent program per SM. Tiles of unequal length get a program each (the hardware
    hands the next one to the SM that frees first), except causal calls up to SNAKE_MAX_SEQLEN:
    there a tile is short and a program's start-up weighs, and persistent programs taking long
    and short tiles in turn measured faster (H200, bf16 D128: +16 % at 1k, +4 % at 8k; -24 % at
    16k)."""
    snake = right and not left and max(n_q, n_k) <= SNAKE_MAX_SEQLEN
    persistent = PERSISTENT and (snake or not (left or right))
    return (_num_sms(device) if persistent else _UNCAPPED), snake


def tma_aligned(t):
    """Whether the copy engine can read t: unit last stride, 16-byte aligned start and strides."""
    return t.stride(-1) == 1 and t.data_ptr() % 16 == 0 and all(
        (st * t.element_size()) % 16 == 0 for st in t.stride()[:-1])


def _blocks(D, n_q, n_k, left, right, fp8=False):
    """(BLOCK_M, BLOCK_N, STAGES, PINGPONG) of a forward call (float8 with fp8)."""
    blocks = _FP8_BLOCKS if fp8 else _BLOCKS
    if max(n_q, n_k) <= SHORT_SEQLEN:
        short = (_FP8_SHORT_BLOCKS if fp8 else
                 _SHORT_CAUSAL_BLOCKS if right and not left else _SHORT_BLOCKS)
        return short.get(D, blocks[D])
    return blocks[D]


def forward(q, k, v, out, lse, *, softmax_scale, softcap, group, left, right, wl, wr):
    """Fills out (B, N, H, D) and lse (B, H, N)."""
    B, n_q, H, D = q.shape
    n_k = k.shape[1]
    bm, bn, stages, pingpong = _blocks(D, n_q, n_k, left, right)
    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=4)
    descs = [TensorDescriptor.from_tensor(t, [1, blk, 1, D], layout)
             for t, blk in ((q, WG_M), (k, bn), (v, bn))]
    cap, snake = _schedule(q.device, n_q, n_k, left, right)
    grid = (min(triton.cdiv(n_q, bm) * B * H, cap),)
    compiled = _fwd_kernel[grid](
        *descs, out, lse, q, out.stride(0), out.stride(1), out.stride(2), lse.stride(0),
        lse.stride(1), 0, n_q, n_k, H, group, float(softmax_scale), float(softcap), wl, wr,
        HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, LEFT=left, RIGHT=right, SOFTCAP=softcap > 0.0,
        ALIBI=False, STAGES=stages, CONSUMER_REGS=CONSUMER_REGS[bm], PINGPONG=pingpong,
        SNAKE=snake, num_warps=4)
    note_launch("fwd_tma", {"BLOCK_M": bm, "BLOCK_N": bn, "GRID_CAP": cap}, compiled)
    return out, lse


# ----------------------------------------------------------------------------- float8 forward

# head_dim: (BLOCK_M, BLOCK_N, STAGES, PINGPONG). Half-width tiles leave room for 128 keys.
# Head dim 64 past SHORT_SEQLEN runs three warpgroups, as the 16-bit forward does (H200,
# float8: 1.08-1.27x two warpgroups from 4k keys; at 1k 0.56-0.88x, so short calls keep two).
_FP8_BLOCKS = {64: (192, 128, 2, False), 128: (128, 128, 3, True)}
_FP8_SHORT_BLOCKS = {64: (128, 128, 3, False)}
FP8_HEAD_DIMS = tuple(_FP8_BLOCKS)


def _desc4(t, block):
    width = t.element_size() * 8
    layout = gl.NVMMASharedLayout(swizzle_byte_width=min(128, block[-1] * width // 8),
                                  element_bitwidth=width, rank=4)
    return TensorDescriptor.from_tensor(t, block, layout)


@triton.jit
def _transpose_kernel(V, VT, n, svb, svn, svh, stb, sth, std, H,
                      HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    """VT[b, h, :, j] = V[b, j, h, :] for one (BLOCK_N keys, batch * head) tile, bytes."""
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    j = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    x = tl.load(V + b * svb + h * svh + j[:, None].to(tl.int64) * svn + d[None, :],
                mask=j[:, None] < n)
    tl.store(VT + b * stb + h * sth + d[:, None] * std + j[None, :], tl.trans(x),
             mask=j[None, :] < n)


def transpose_v(v):
    """V (B, N, H, D) as V^T (B, H, D, N) for the float8 P V product (float8 wgmma reads
    both operands K-major), the key dim padded to 16 elements in memory so that every row
    starts on the copy engine's 16-byte grid. One pass at memory speed."""
    B, n, H, D = v.shape
    vt = torch.empty(B, H, D, (n + 15) // 16 * 16, dtype=v.dtype, device=v.device)[..., :n]
    src, dst = v.view(torch.uint8), vt.view(torch.uint8)
    block = 128
    _transpose_kernel[(triton.cdiv(n, block), B * H)](
        src, dst, n, src.stride(0), src.stride(1), src.stride(2), dst.stride(0), dst.stride(1),
        dst.stride(2), H, HEAD_DIM=D, BLOCK_N=block, num_warps=4)
    return vt


def forward_fp8(q, k, v, descale, out, lse, *, softmax_scale, softcap, group, left, right, wl,
                wr):
    """q, k, v float8_e4m3fn (B, N, H, D) with head_dim 64 or 128; descale float32
    (3, B, H_k): q's, k's and v's. Fills out (B, N, H, D) and lse (B, H, N)."""
    B, n_q, H, D = q.shape
    n_k = k.shape[1]
    bm, bn, stages, pingpong = _blocks(D, n_q, n_k, left, right, fp8=True)
    vt = transpose_v(v)
    descs = (_desc4(q, [1, WG_M, 1, D]), _desc4(k, [1, bn, 1, D]), _desc4(vt, [1, 1, D, bn]))
    cap, snake = _schedule(q.device, n_q, n_k, left, right)
    grid = (min(triton.cdiv(n_q, bm) * B * H, cap),)
    _fwd_fp8_kernel[grid](
        *descs, out, lse, descale[0], descale[1], descale[2], descale.stride(1),
        descale.stride(2), out.stride(0), out.stride(1), out.stride(2), lse.stride(0),
        lse.stride(1), n_q, n_k, H, group, float(softmax_scale), float(softcap), wl, wr,
        HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, LEFT=left, RIGHT=right, SOFTCAP=softcap > 0.0,
        STAGES=stages, CONSUMER_REGS=CONSUMER_REGS[bm], PINGPONG=pingpong, SNAKE=snake,
        num_warps=4)
    return out, lse
