"""FlashAttention backward for Hopper (sm90) in Gluon: a dK/dV kernel and a dQ kernel.

One program owns a block of BLOCK_N keys of one KV head and keeps its dK and dV in
registers while it walks the query blocks of every query head of its group:

- a one-warp producer partition copies K and V once, then Q and dO tiles into a ring of
  STAGES shared-memory slots (one "ready" barrier per slot for both, one "empty" barrier the
  consumers arrive on);
- consumer warpgroups of 64 keys each (BLOCK_N / 64 of them: two, or three at head dim 64
  without a mask) compute per query block S^T = K Q^T and dP^T = V dO^T,
  P^T = exp2(S^T - lse), dS^T = P^T (dP^T - delta), then dV += P^T dO and dK += dS^T Q with
  P^T and dS^T as register operands. Two warpgroups issue S^T and dP^T back to back and
  compute the probabilities while dP^T is still on the tensor cores; three, with 160
  registers each, hold one of the two score tiles at a time and wait on S^T before issuing
  dP^T, while the other warpgroups keep the tensor cores busy. With PINGPONG the
  warpgroups take turns issuing their GEMMs, as in the forward.

The dQ kernel mirrors the forward: a program owns BLOCK_M query rows (half per warpgroup),
keeps dQ in registers and walks the key blocks, S = Q K^T and dP = dO V^T issued back to
back, dS = P (dP - delta), dQ += dS K with dS as the register operand. Two passes instead
of atomics keep dQ deterministic. delta = rowsum(O dO) comes from `_bwd_pre_kernel` in
flash_attn.py. Covered: float16/bfloat16, head_dim 64/128, GQA/MQA, causal and
windows; softcap, ALiBi, dropout, masks and varlen stay on the Triton kernels.
"""
from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from .flash_attn import _kv_range, _q_range  # the Triton kernels' splits, shared
from .flash_attn_hopper import _acc_layout, _operand_layout, _pass_turn, _turn, _visible
from .launch_record import note_launch


@gluon.jit
def _bwd_producer(q_desc, k_desc, v_desc, do_desc, k_smem, v_smem, q_smem, do_smem, kv_bar,
                  ready, empty, b, hk, n0, lo, n_qb, GROUP,
                  BLOCK_M: gl.constexpr, STAGES: gl.constexpr):
    k4: gl.constexpr = k_desc.layout
    q4: gl.constexpr = q_desc.layout
    # K and V: one copy of the program's 128 keys, or, for three warpgroups' 192 (a copy's
    # box and a buffer's shape are powers of two), one 64-key piece per warpgroup
    COPIES: gl.constexpr = k_smem.shape[0] if k_smem.rank == 3 else 1
    mbarrier.expect(kv_bar, COPIES * (k_desc.block_type.nbytes + v_desc.block_type.nbytes))
    if COPIES == 1:
        tma.async_copy_global_to_shared(
            k_desc, [b, n0, hk, 0], kv_bar,
            k_smem._reinterpret(k_smem.dtype, k_desc.block_type.shape, k4))
        tma.async_copy_global_to_shared(
            v_desc, [b, n0, hk, 0], kv_bar,
            v_smem._reinterpret(v_smem.dtype, v_desc.block_type.shape, k4))
    else:
        PIECE: gl.constexpr = k_smem.shape[1]
        for w in gl.static_range(COPIES):
            tma.async_copy_global_to_shared(
                k_desc, [b, n0 + w * PIECE, hk, 0], kv_bar,
                k_smem.index(w)._reinterpret(k_smem.dtype, k_desc.block_type.shape, k4))
            tma.async_copy_global_to_shared(
                v_desc, [b, n0 + w * PIECE, hk, 0], kv_bar,
                v_smem.index(w)._reinterpret(v_smem.dtype, v_desc.block_type.shape, k4))
    step = 0
    for g in range(GROUP):
        h = hk * GROUP + g
        for i in range(n_qb):
            s = step % STAGES
            mbarrier.wait(empty.index(s), ((step // STAGES) & 1) ^ 1)
            m0 = lo + i * BLOCK_M
            mbarrier.expect(ready.index(s), q_desc.block_type.nbytes + do_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(
                q_desc, [b, m0, h, 0], ready.index(s),
                q_smem.index(s)._reinterpret(q_smem.dtype, q_desc.block_type.shape, q4))
            tma.async_copy_global_to_shared(
                do_desc, [b, m0, h, 0], ready.index(s),
                do_smem.index(s)._reinterpret(do_smem.dtype, do_desc.block_type.shape, q4))
            step += 1


@gluon.jit
def _bwd_kv_step(k_smem, v_smem, q_smem, do_smem, ready, empty, turn, LSE, DELTA, stat, m0,
                 step, tn, dk, dv, kj, cols, zero, scale, diag, a, bb, n_q, n_k, wl, wr,
                 WG: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
                 LEFT: gl.constexpr, RIGHT: gl.constexpr, PINGPONG: gl.constexpr,
                 NUM_WG: gl.constexpr):
    """One query block of one head against the warpgroup's keys: dV += P^T dO, dK += dS^T Q.
    stat is the (batch, head) offset into LSE and DELTA; returns (dk, dv, tn). Two
    warpgroups issue S^T and dP^T back to back; three wait on S^T before issuing dP^T (their
    registers hold one score tile at a time: back to back, ptxas spills 116 bytes)."""
    acc_layout: gl.constexpr = _acc_layout(HEAD_DIM)
    op_layout: gl.constexpr = _operand_layout(acc_layout)
    dtype: gl.constexpr = q_smem.dtype
    qi = m0 + cols
    # loaded before the GEMMs are waited on, so its latency hides behind them
    lse = gl.load(LSE + stat + qi, mask=qi < n_q, other=0.0) * 1.4426950408889634
    s = step % STAGES
    mbarrier.wait(ready.index(s), (step // STAGES) & 1)
    tn = _turn(turn, tn, WG, PINGPONG)
    st_tok = warpgroup_mma(k_smem, q_smem.index(s).permute((1, 0)), zero, use_acc=False,
                           is_async=True)
    if NUM_WG == 2:
        dpt_tok = warpgroup_mma(v_smem, do_smem.index(s).permute((1, 0)), zero,
                                use_acc=False, is_async=True)
        _pass_turn(turn, WG, PINGPONG, NUM_WG)
        st = warpgroup_mma_wait(1, deps=[st_tok])
    else:
        _pass_turn(turn, WG, PINGPONG, NUM_WG)
        st = warpgroup_mma_wait(0, deps=[st_tok])
    arg = st * scale - gl.expand_dims(lse, 0)
    if (m0 < a) | (m0 >= bb):
        q2 = gl.expand_dims(qi, 0)
        ok = _visible((q2 < n_q) & (kj < n_k), q2, kj, diag, wl, wr, LEFT, RIGHT)
        arg = gl.where(ok, arg, float("-inf"))
    pt = gl.exp2(arg)
    if NUM_WG != 2:
        tn = _turn(turn, tn, WG, PINGPONG)
        dpt_tok = warpgroup_mma(v_smem, do_smem.index(s).permute((1, 0)), zero,
                                use_acc=False, is_async=True)
        _pass_turn(turn, WG, PINGPONG, NUM_WG)
    # loaded while dP^T is still on the tensor cores: not live across the S^T wait
    delta = gl.load(DELTA + stat + qi, mask=qi < n_q, other=0.0)
    dpt = warpgroup_mma_wait(0, deps=[dpt_tok])
    dst = pt * (dpt - gl.expand_dims(delta, 0))
    tn = _turn(turn, tn, WG, PINGPONG)
    dv_tok = warpgroup_mma(gl.convert_layout(pt.to(dtype), op_layout), do_smem.index(s), dv,
                           is_async=True)
    dk_tok = warpgroup_mma(gl.convert_layout(dst.to(dtype), op_layout), q_smem.index(s),
                           dk, is_async=True)
    _pass_turn(turn, WG, PINGPONG, NUM_WG)
    dv, dk = warpgroup_mma_wait(0, deps=[dv_tok, dk_tok])
    mbarrier.arrive(empty.index(s), count=1)
    return dk, dv, tn


@gluon.jit
def _bwd_consumer(args, WG: gl.constexpr, LEFT: gl.constexpr, RIGHT: gl.constexpr,
                  PINGPONG: gl.constexpr):
    """One of NUM_WG consumer warpgroups: keys [n0 + WG * BLOCK_N, n0 + (WG + 1) * BLOCK_N).
    Without PINGPONG, a warpgroup none of whose keys exists (the last key block of a
    192-key schedule) only releases each slot once its copy has landed."""
    (k_full, v_full, q_smem, do_smem, kv_bar, ready, empty, turn, LSE, DELTA, DK, DV, b, hk,
     n0, lo, a, bb, n_qb, GROUP, n_q, n_k, sdkb, sdkn, sdkh, sdvb, sdvn, sdvh, slb, slh,
     sm_scale, wl, wr) = args
    BLOCK_N: gl.constexpr = 64  # one warpgroup's keys
    HEAD_DIM: gl.constexpr = q_smem.shape[2]
    STAGES: gl.constexpr = q_smem.shape[0]
    BLOCK_M: gl.constexpr = q_smem.shape[1]
    if k_full.rank == 3:  # three warpgroups' pieces
        NUM_WG: gl.constexpr = k_full.shape[0]
        k_smem = k_full.index(WG)
        v_smem = v_full.index(WG)
    else:
        NUM_WG: gl.constexpr = k_full.shape[0] // BLOCK_N
        k_smem = k_full.slice(WG * BLOCK_N, BLOCK_N)
        v_smem = v_full.slice(WG * BLOCK_N, BLOCK_N)
    st_layout: gl.constexpr = _acc_layout(BLOCK_M)
    acc_layout: gl.constexpr = _acc_layout(HEAD_DIM)
    out_layout: gl.constexpr = gl.BlockedLayout([1, 8], [HEAD_DIM // 8, 256 // HEAD_DIM],
                                                [4, 1], [1, 0])
    dtype: gl.constexpr = q_smem.dtype

    scale = sm_scale * 1.4426950408889634
    diag = n_k - n_q
    n_lo = n0 + WG * BLOCK_N
    kj = gl.expand_dims(n_lo + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, st_layout)), 1)
    cols = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, st_layout))
    zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, st_layout)
    dk = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, acc_layout)
    dv = gl.zeros([BLOCK_N, HEAD_DIM], gl.float32, acc_layout)
    b64 = b.to(gl.int64)
    mbarrier.wait(kv_bar, 0)
    tn = 0
    if (n_lo >= n_k) & (not PINGPONG):
        for step in range(GROUP * n_qb):
            mbarrier.wait(ready.index(step % STAGES), (step // STAGES) & 1)
            mbarrier.arrive(empty.index(step % STAGES), count=1)
    elif (HEAD_DIM == 128) | (NUM_WG == 3):
        # one flat loop over (head of the group, query block): the nested loops keep more
        # values live across the inner loop, and ptxas then spills more at head dim 128 and
        # with three warpgroups' 160 registers (fwd+bwd with GQA +1 to +10 % at head dim
        # 128, without it within the spread: docs/hopper_attention.md)
        for step in range(GROUP * n_qb):
            g = step // n_qb
            stat = b64 * slb + (hk * GROUP + g).to(gl.int64) * slh
            m0 = lo + (step - g * n_qb) * BLOCK_M
            dk, dv, tn = _bwd_kv_step(
                k_smem, v_smem, q_smem, do_smem, ready, empty, turn, LSE, DELTA, stat, m0,
                step, tn, dk, dv, kj, cols, zero, scale, diag, a, bb, n_q, n_k, wl, wr,
                WG, HEAD_DIM, STAGES, LEFT, RIGHT, PINGPONG, NUM_WG)
    else:
        step = 0
        for g in range(GROUP):
            stat = b64 * slb + (hk * GROUP + g).to(gl.int64) * slh
            for i in range(n_qb):
                dk, dv, tn = _bwd_kv_step(
                    k_smem, v_smem, q_smem, do_smem, ready, empty, turn, LSE, DELTA, stat,
                    lo + i * BLOCK_M, step, tn, dk, dv, kj, cols, zero, scale, diag, a, bb,
                    n_q, n_k, wl, wr, WG, HEAD_DIM, STAGES, LEFT, RIGHT, PINGPONG, NUM_WG)
                step += 1

    rows = n_lo + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, out_layout))
    ocol = gl.expand_dims(gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, out_layout)), 0)
    keep = gl.expand_dims(rows < n_k, 1)
    r64 = gl.expand_dims(rows.to(gl.int64), 1)
    hk64 = hk.to(gl.int64)
    gl.store(DK + b64 * sdkb + hk64 * sdkh + r64 * sdkn + ocol,
             gl.convert_layout((dk * sm_scale).to(dtype), out_layout), mask=keep)
    gl.store(DV + b64 * sdvb + hk64 * sdvh + r64 * sdvn + ocol,
             gl.convert_layout(dv.to(dtype), out_layout), mask=keep)


@gluon.jit
def _bwd_kv_kernel(q_desc, k_desc, v_desc, do_desc, LSE, DELTA, DK, DV,
                   sdkb, sdkn, sdkh, sdvb, sdvn, sdvh, slb, slh,
                   max_q, max_k, HK, GROUP, sm_scale, wl, wr,
                   HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                   LEFT: gl.constexpr, RIGHT: gl.constexpr, STAGES: gl.constexpr,
                   CONSUMER_REGS: gl.constexpr, PINGPONG: gl.constexpr):
    """Grid (key blocks, batch * KV heads); BLOCK_N keys per program, 64 per warpgroup."""
    n0 = gl.program_id(0) * BLOCK_N
    bh = gl.program_id(1)
    b = bh // HK
    hk = bh % HK
    lo, a, bb, hi = _q_range(n0, max_q, max_k, wl, wr, BLOCK_M, BLOCK_N, LEFT, RIGHT)
    n_qb = gl.cdiv(hi - lo, BLOCK_M)

    NUM_WG: gl.constexpr = BLOCK_N // 64  # consumer warpgroups of 64 keys
    dtype: gl.constexpr = q_desc.dtype
    smem2: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    if NUM_WG == 3:  # 192 rows: one 64-row piece per warpgroup (shapes are powers of two)
        k_smem = gl.allocate_shared_memory(dtype, [NUM_WG, 64, HEAD_DIM], smem2)
        v_smem = gl.allocate_shared_memory(dtype, [NUM_WG, 64, HEAD_DIM], smem2)
    else:
        k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], smem2)
        v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_DIM], smem2)
    q_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], smem2)
    do_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_DIM], smem2)
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [NUM_WG, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for w in gl.static_range(NUM_WG):
        mbarrier.init(turn.index(w), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=NUM_WG)  # one arrival per consumer warpgroup
    fence_async_shared()

    args = (k_smem, v_smem, q_smem, do_smem, kv_bar, ready, empty, turn, LSE, DELTA, DK, DV,
            b, hk, n0, lo, a, bb, n_qb, GROUP, max_q, max_k, sdkb, sdkn, sdkh, sdvb, sdvn,
            sdvh, slb, slh, sm_scale, wl, wr)
    pargs = (q_desc, k_desc, v_desc, do_desc, k_smem, v_smem, q_smem, do_smem, kv_bar, ready,
             empty, b, hk, n0, lo, n_qb, GROUP, BLOCK_M, STAGES)
    if NUM_WG == 3:
        gl.warp_specialize([
            (_bwd_consumer, (args, 0, LEFT, RIGHT, PINGPONG)),
            (_bwd_consumer, (args, 1, LEFT, RIGHT, PINGPONG)),
            (_bwd_consumer, (args, 2, LEFT, RIGHT, PINGPONG)),
            (_bwd_producer, pargs),
        ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, 24])
    else:
        gl.static_assert(NUM_WG == 2, "BLOCK_N is 128 or 192")
        gl.warp_specialize([
            (_bwd_consumer, (args, 0, LEFT, RIGHT, PINGPONG)),
            (_bwd_consumer, (args, 1, LEFT, RIGHT, PINGPONG)),
            (_bwd_producer, pargs),
        ], [4, 1], [CONSUMER_REGS, 24])


# --------------------------------------------------------------------------------- dQ

@gluon.jit
def _dq_producer(q_desc, k_desc, v_desc, do_desc, q_smem, do_smem, k_smem, v_smem, q_bar,
                 ready, empty, b, h, hk, m0, lo, n_blocks,
                 BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    q4: gl.constexpr = q_desc.layout
    k4: gl.constexpr = k_desc.layout
    mbarrier.expect(q_bar, q_desc.block_type.nbytes + do_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(
        q_desc, [b, m0, h, 0], q_bar, q_smem._reinterpret(q_smem.dtype, q_desc.block_type.shape, q4))
    tma.async_copy_global_to_shared(
        do_desc, [b, m0, h, 0], q_bar,
        do_smem._reinterpret(do_smem.dtype, do_desc.block_type.shape, q4))
    for i in range(n_blocks):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)
        j0 = lo + i * BLOCK_N
        mbarrier.expect(ready.index(s), k_desc.block_type.nbytes + v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(
            k_desc, [b, j0, hk, 0], ready.index(s),
            k_smem.index(s)._reinterpret(k_smem.dtype, k_desc.block_type.shape, k4))
        tma.async_copy_global_to_shared(
            v_desc, [b, j0, hk, 0], ready.index(s),
            v_smem.index(s)._reinterpret(v_smem.dtype, v_desc.block_type.shape, k4))


@gluon.jit
def _dq_consumer(q_full, do_full, k_smem, v_smem, q_bar, ready, empty, turn, LSE, DELTA, DQ,
                 b, h, m0, lo, a, bb, n_blocks, n_q, n_k, sdqb, sdqn, sdqh, slb, slh,
                 sm_scale, wl, wr, WG: gl.constexpr, BLOCK_M: gl.constexpr,
                 BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, STAGES: gl.constexpr,
                 LEFT: gl.constexpr, RIGHT: gl.constexpr, PINGPONG: gl.constexpr):
    """One consumer warpgroup: query rows [m0 + WG * BLOCK_M, m0 + (WG + 1) * BLOCK_M)."""
    q_smem = q_full.slice(WG * BLOCK_M, BLOCK_M)
    do_smem = do_full.slice(WG * BLOCK_M, BLOCK_M)
    s_layout: gl.constexpr = _acc_layout(BLOCK_N)
    acc_layout: gl.constexpr = _acc_layout(HEAD_DIM)
    op_layout: gl.constexpr = _operand_layout(acc_layout)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    out_layout: gl.constexpr = gl.BlockedLayout([1, 8], [HEAD_DIM // 8, 256 // HEAD_DIM],
                                                [4, 1], [1, 0])
    dtype: gl.constexpr = q_smem.dtype

    scale = sm_scale * 1.4426950408889634
    diag = n_k - n_q
    m_lo = m0 + WG * BLOCK_M
    rows = m_lo + gl.arange(0, BLOCK_M, layout=row_layout)
    qi = gl.expand_dims(rows, 1)
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    b64 = b.to(gl.int64)
    h64 = h.to(gl.int64)
    stat = b64 * slb + h64 * slh
    lse = gl.expand_dims(gl.load(LSE + stat + rows, mask=rows < n_q, other=0.0)
                         * 1.4426950408889634, 1)
    delta = gl.expand_dims(gl.load(DELTA + stat + rows, mask=rows < n_q, other=0.0), 1)
    zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout)
    dq = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, acc_layout)
    mbarrier.wait(q_bar, 0)
    tn = 0
    for i in range(n_blocks):
        j0 = lo + i * BLOCK_N
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        tn = _turn(turn, tn, WG, PINGPONG)
        s_tok = warpgroup_mma(q_smem, k_smem.index(s).permute((1, 0)), zero, use_acc=False,
                              is_async=True)
        dp_tok = warpgroup_mma(do_smem, v_smem.index(s).permute((1, 0)), zero, use_acc=False,
                               is_async=True)
        _pass_turn(turn, WG, PINGPONG)
        st = warpgroup_mma_wait(1, deps=[s_tok])
        arg = st * scale - lse
        if (j0 < a) | (j0 >= bb):
            kj = gl.expand_dims(j0 + cols, 0)
            arg = gl.where(_visible(kj < n_k, qi, kj, diag, wl, wr, LEFT, RIGHT), arg, float("-inf"))
        p = gl.exp2(arg)
        dp = warpgroup_mma_wait(0, deps=[dp_tok])
        ds = p * (dp - delta)
        tn = _turn(turn, tn, WG, PINGPONG)
        dq_tok = warpgroup_mma(gl.convert_layout(ds.to(dtype), op_layout), k_smem.index(s), dq,
                               is_async=True)
        _pass_turn(turn, WG, PINGPONG)
        dq = warpgroup_mma_wait(0, deps=[dq_tok])
        mbarrier.arrive(empty.index(s), count=1)

    orow = m_lo + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, out_layout))
    ocol = gl.expand_dims(gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, out_layout)), 0)
    gl.store(DQ + b64 * sdqb + h64 * sdqh + gl.expand_dims(orow.to(gl.int64) * sdqn, 1) + ocol,
             gl.convert_layout((dq * sm_scale).to(dtype), out_layout),
             mask=gl.expand_dims(orow < n_q, 1))


@gluon.jit
def _bwd_q_kernel(q_desc, k_desc, v_desc, do_desc, LSE, DELTA, DQ, sdqb, sdqn, sdqh, slb, slh,
                  max_q, max_k, H, GROUP, sm_scale, wl, wr,
                  HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  LEFT: gl.constexpr, RIGHT: gl.constexpr, STAGES: gl.constexpr,
                  CONSUMER_REGS: gl.constexpr, PINGPONG: gl.constexpr):
    """Grid (query blocks, batch * heads); BLOCK_M rows per program, half per warpgroup."""
    pid_m = gl.num_programs(0) - 1 - gl.program_id(0)  # the longest (causal) blocks first
    bh = gl.program_id(1)
    b = bh // H
    h = bh % H
    hk = h // GROUP
    m0 = pid_m * BLOCK_M
    lo, a, bb, hi = _kv_range(m0, max_q, max_k, wl, wr, BLOCK_M, BLOCK_N, LEFT, RIGHT)
    n_blocks = gl.cdiv(hi - lo, BLOCK_N)

    dtype: gl.constexpr = q_desc.dtype
    smem2: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], smem2)
    do_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], smem2)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], smem2)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], smem2)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    mbarrier.init(turn.index(0), count=1)
    mbarrier.init(turn.index(1), count=1)
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=2)
    fence_async_shared()

    HALF: gl.constexpr = BLOCK_M // 2
    gl.warp_specialize([
        (_dq_consumer, (q_smem, do_smem, k_smem, v_smem, q_bar, ready, empty, turn, LSE, DELTA,
                        DQ, b, h, m0, lo, a, bb, n_blocks, max_q, max_k, sdqb, sdqn, sdqh, slb,
                        slh, sm_scale, wl, wr, 0, HALF, BLOCK_N, HEAD_DIM, STAGES, LEFT, RIGHT,
                        PINGPONG)),
        (_dq_consumer, (q_smem, do_smem, k_smem, v_smem, q_bar, ready, empty, turn, LSE, DELTA,
                        DQ, b, h, m0, lo, a, bb, n_blocks, max_q, max_k, sdqb, sdqn, sdqh, slb,
                        slh, sm_scale, wl, wr, 1, HALF, BLOCK_N, HEAD_DIM, STAGES, LEFT, RIGHT,
                        PINGPONG)),
        (_dq_producer, (q_desc, k_desc, v_desc, do_desc, q_smem, do_smem, k_smem, v_smem, q_bar,
                        ready, empty, b, h, hk, m0, lo, n_blocks, BLOCK_N, STAGES)),
    ], [4, 1], [CONSUMER_REGS, 24])


# ----------------------------------------------------------------------------- launcher

# head_dim: (BLOCK_M, BLOCK_N, STAGES, PINGPONG) of the dK/dV and the dQ kernel
_BLOCKS = {64: (64, 128, 2, True), 128: (64, 128, 2, True)}
# the dK/dV kernel without a mask (no causal, no window): head dim 64 on three warpgroups
# (fwd+bwd +2 to +7 % on H200; with a mask -4 to 0 %: docs/hopper_attention.md)
_UNMASKED_BLOCKS = {64: (64, 192, 2, False)}
# dQ here for head_dim 128 only: at 64 the Triton dQ kernel measured faster on H200
_DQ_BLOCKS = {128: (128, 64, 2, True)}
CONSUMER_REGS = 240  # per consumer thread with two consumer warpgroups
_KV_REGS = {192: 160}  # by the dK/dV kernel's BLOCK_N: three warpgroups and the producer


def _kv_blocks(D, left, right):
    """(BLOCK_M, BLOCK_N, STAGES, PINGPONG) of the dK/dV kernel for this head dim and mask."""
    if not (left or right) and D in _UNMASKED_BLOCKS:
        return _UNMASKED_BLOCKS[D]
    return _BLOCKS[D]


def eligible(q, k, v, grad_out, *, varlen, attn_mask, dropout_p, alibi_slopes, softcap):
    """Whether this kernel computes dK and dV: the forward's conditions, no softcap, and a
    dO the copy engine can read."""
    from .flash_attn_hopper import eligible as forward_eligible

    if softcap > 0.0 or not forward_eligible(q, k, v, varlen=varlen, attn_mask=attn_mask,
                                             dropout_p=dropout_p, alibi_slopes=alibi_slopes):
        return False
    return (grad_out.stride(-1) == 1 and grad_out.data_ptr() % 16 == 0
            and all((st * grad_out.element_size()) % 16 == 0 for st in grad_out.stride()[:-1]))


def backward_kv(q, k, v, grad_out, lse, delta, dk, dv, *, softmax_scale, group, left, right,
                wl, wr):
    """Fills dk and dv (the shapes of k and v); lse and delta are (B, H, N) float32."""
    B, n_q, H, D = q.shape
    n_k, HK = k.shape[1], k.shape[2]
    bm, bn, stages, pingpong = _kv_blocks(D, left, right)
    kv_box = bn if bn <= 128 else 64  # a copy's box is a power of two: 192 keys in 3 pieces
    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=4)
    descs = [TensorDescriptor.from_tensor(t, [1, blk, 1, D], layout)
             for t, blk in ((q, bm), (k, kv_box), (v, kv_box), (grad_out, bm))]
    grid = (triton.cdiv(n_k, bn), B * HK)
    compiled = _bwd_kv_kernel[grid](
        *descs, lse, delta, dk, dv, dk.stride(0), dk.stride(1), dk.stride(2), dv.stride(0),
        dv.stride(1), dv.stride(2), lse.stride(0), lse.stride(1), n_q, n_k, HK, group,
        float(softmax_scale), wl, wr, HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, LEFT=left,
        RIGHT=right, STAGES=stages, CONSUMER_REGS=_KV_REGS.get(bn, CONSUMER_REGS),
        PINGPONG=pingpong, num_warps=4)
    note_launch("bwd_kv_tma", {"BLOCK_M": bm, "BLOCK_N": bn}, compiled)
    return dk, dv


def backward_q(q, k, v, grad_out, lse, delta, dq, *, softmax_scale, group, left, right, wl, wr):
    """Fills dq (the shape of q)."""
    B, n_q, H, D = q.shape
    n_k = k.shape[1]
    bm, bn, stages, pingpong = _DQ_BLOCKS[D]
    layout = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=4)
    descs = [TensorDescriptor.from_tensor(t, [1, blk, 1, D], layout)
             for t, blk in ((q, bm), (k, bn), (v, bn), (grad_out, bm))]
    grid = (triton.cdiv(n_q, bm), B * H)
    compiled = _bwd_q_kernel[grid](
        *descs, lse, delta, dq, dq.stride(0), dq.stride(1), dq.stride(2), lse.stride(0),
        lse.stride(1), n_q, n_k, H, group, float(softmax_scale), wl, wr, HEAD_DIM=D, BLOCK_M=bm,
        BLOCK_N=bn, LEFT=left, RIGHT=right, STAGES=stages, CONSUMER_REGS=CONSUMER_REGS,
        PINGPONG=pingpong, num_warps=4)
    note_launch("bwd_q_tma", {"BLOCK_M": bm, "BLOCK_N": bn}, compiled)
    return dq
