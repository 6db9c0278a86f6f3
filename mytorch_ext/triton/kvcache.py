"""flash_attn_with_kvcache in Triton: append (+ rotary), split-KV attention, combine.

Layouts as flash-attn's: q (batch, seqlen_q, heads, head_dim); caches (batch_cache,
seqlen_cache, heads_k, head_dim), or pages (num_blocks, block_size, heads_k, head_dim) with
block_table (batch, max_blocks) int32; any strides with a contiguous last dim.

1. `_append_kernel`: k, v (batch, seqlen_new, heads_k, head_dim) written into the caches at
   cache_seqlens[b] + i, k rotated at position cache_seqlens[b] - cache_leftpad[b] + i.
2. `_split_kernel` ("flash-decoding"): one program per (row block, sequence * kv head, split).
   Its rows are the heads_q / heads_k query heads of one kv head times the seqlen_q queries,
   so each K/V tile is loaded once for the whole group. Keys are the cache positions
   [cache_leftpad, cache_seqlens + seqlen_new), less those key_mask hides, read in tiles of
   BLOCK_N positions aligned to BLOCK_N in the cache, so that with a paged cache (block_size a multiple of 16 >= BLOCK_N)
   a tile lies in one page: one block_table read per tile. q is rotated in the kernel.
3. `_combine_kernel`: out = sum over splits of exp(lse_split - lse) * out_split.

No host synchronization: the values of cache_seqlens, cache_leftpad, cache_batch_idx and
block_table are read by the kernels only. Every cache read and write is masked to the cache
(positions < capacity, rows in [0, batch_cache), pages in [0, num_blocks)), rotary table reads
to its rows; out-of-range values give wrong numbers, never an out-of-bounds access (the CPU
kernel raises for them).

On CUDA the op's C++ kernel (csrc/kernels/cuda/kvcache.cpp) computes what kvcache_forward
computes and launches the compiled kernels itself; kvcache_forward runs for the first call of
a specialization, each launch reporting its compiled kernel through note_launch
(launch_record.py). Any change to the launches here (arguments, grids, constexprs, the split
heuristic) must be made there too.

Scores in log2 units (exp2); lse in natural units, float32; a row with no key to attend to
gets output 0 and lse +inf (as flash-attn). Only torch and triton are imported, so the
kernels run on CPU tensors under TRITON_INTERPRET=1.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .flash_attn import _INTERPRET, _cvt, _mm, _tanh
from .launch_record import note_launch

# Read inside the kernels: constexpr globals (Triton 3.6 refuses plain float globals there).
LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def _rotate(x, base, offs_d, cos_ptr, sin_ptr, row, row_ok, ld_ok, sro, HALF: tl.constexpr,
            INTERLEAVED: tl.constexpr, HEAD_DIM: tl.constexpr):
    """x (rows, BLOCK_D) read from base (rows, 1) + offs_d, rotated at table rows `row`
    (rows,). Pairs (2r, 2r+1) interleaved, (r, r + HALF) otherwise; dims >= 2 * HALF
    unchanged. ld_ok: the rows that exist; rows where row_ok is false read cos 1, sin 0."""
    if INTERLEAVED:
        partner = offs_d ^ 1
        r = offs_d // 2
        first = (offs_d % 2) == 0
    else:
        partner = tl.where(offs_d < HALF, offs_d + HALF, offs_d - HALF)
        r = tl.where(offs_d < HALF, offs_d, offs_d - HALF)
        first = offs_d < HALF
    rot = offs_d < 2 * HALF
    m = row_ok[:, None] & rot[None, :]
    y = tl.load(base + partner[None, :], mask=ld_ok[:, None] & rot[None, :] & (partner[None, :] < HEAD_DIM),
                other=0.0)
    c = tl.load(cos_ptr + row[:, None] * sro + r[None, :], mask=m, other=1.0).to(tl.float32)
    s = tl.load(sin_ptr + row[:, None] * sro + r[None, :], mask=m, other=0.0).to(tl.float32)
    s = tl.where(first[None, :], -s, s)
    xf = x.to(tl.float32)
    return tl.where(rot[None, :], xf * c + y.to(tl.float32) * s, xf)


@triton.jit
def _softmax_step(s, m_i, l_i, acc):
    """One online-softmax step over a score tile s (log2 units; a row may see no key yet)."""
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.math.exp2(s - m_use[:, None])
    alpha = tl.math.exp2(m_i - m_use)
    return p, m_new, l_i * alpha + tl.sum(p, 1), acc * alpha[:, None]


@triton.jit
def _append_kernel(KN, VN, KC, VC, SEQLENS, LEFTPAD, BIDX, BT, COS, SIN,
                   skn_b, skn_n, skn_h, svn_b, svn_n, svn_h,
                   skc0, skc1, skc2, svc0, svc1, svc2, sbt, sro, seqlen_ro,
                   seqlen_new, capacity, batch_cache, block_size,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, PAGED: tl.constexpr,
                   HAS_LEFTPAD: tl.constexpr, HAS_BIDX: tl.constexpr, ROTARY: tl.constexpr,
                   HALF: tl.constexpr, INTERLEAVED: tl.constexpr):
    """One program per (sequence, new token); all kv heads at once."""
    pid = tl.program_id(0)
    b = pid // seqlen_new
    i = pid % seqlen_new
    h = tl.program_id(1)
    offs_d = tl.arange(0, BLOCK_D)
    dmask = offs_d < HEAD_DIM
    n = tl.load(SEQLENS + b).to(tl.int64)
    pos = n + i
    ok = (pos >= 0) & (pos < capacity)
    if PAGED:
        page = tl.load(BT + b * sbt + pos // block_size, mask=ok, other=-1).to(tl.int64)
        ok = ok & (page >= 0) & (page < batch_cache)
        koff = page * skc0 + (pos % block_size) * skc1 + h * skc2
        voff = page * svc0 + (pos % block_size) * svc1 + h * svc2
    else:
        if HAS_BIDX:
            row = tl.load(BIDX + b).to(tl.int64)
        else:
            row = b.to(tl.int64)
        ok = ok & (row >= 0) & (row < batch_cache)
        koff = row * skc0 + pos * skc1 + h * skc2
        voff = row * svc0 + pos * svc1 + h * svc2
    kbase = KN + b.to(tl.int64) * skn_b + i * skn_n + h * skn_h
    k = tl.load(kbase + offs_d, mask=dmask, other=0.0)
    v = tl.load(VN + b.to(tl.int64) * svn_b + i * svn_n + h * svn_h + offs_d, mask=dmask, other=0.0)
    if ROTARY:
        if HAS_LEFTPAD:
            lp = tl.load(LEFTPAD + b).to(tl.int64)
        else:
            lp = 0
        rp = pos - lp
        row_ok = (rp >= 0) & (rp < seqlen_ro)
        # inline rather than _rotate: the interpreter loses its patches of tl's standard
        # functions in a kernel body after a nested @jit call returns
        if INTERLEAVED:
            partner = offs_d ^ 1
            r = offs_d // 2
            first = (offs_d % 2) == 0
        else:
            partner = tl.where(offs_d < HALF, offs_d + HALF, offs_d - HALF)
            r = tl.where(offs_d < HALF, offs_d, offs_d - HALF)
            first = offs_d < HALF
        rot = offs_d < 2 * HALF
        y = tl.load(kbase + partner, mask=rot & (partner < HEAD_DIM), other=0.0).to(tl.float32)
        c = tl.load(COS + rp * sro + r, mask=rot & row_ok, other=1.0).to(tl.float32)
        sn = tl.load(SIN + rp * sro + r, mask=rot & row_ok, other=0.0).to(tl.float32)
        sn = tl.where(first, -sn, sn)
        k = _cvt(tl.where(rot, k.to(tl.float32) * c + y * sn, k.to(tl.float32)), KC.dtype.element_ty)
    tl.store(KC + koff + offs_d, k, mask=dmask & ok)
    tl.store(VC + voff + offs_d, v, mask=dmask & ok)


@triton.jit
def _split_kernel(Q, KC, VC, O, LSE, OP, LP, SEQLENS, LEFTPAD, BIDX, BT, COS, SIN, SLOPES, KM,
                  sqb, sqn, sqh, skc0, skc1, skc2, svc0, svc1, svc2, sob, son, soh, skm_b, skm_n,
                  sbt, sro, seqlen_ro, slope_b,
                  seqlen_q, seqlen_new, heads_q, heads_k, capacity, batch_cache, block_size,
                  sm_scale, softcap, wl, wr,
                  GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, NUM_SPLITS: tl.constexpr,
                  PAGED: tl.constexpr, HAS_LEFTPAD: tl.constexpr, HAS_BIDX: tl.constexpr,
                  ROTARY: tl.constexpr, HALF: tl.constexpr, INTERLEAVED: tl.constexpr,
                  Q_PER_TOKEN: tl.constexpr, LEFT: tl.constexpr, RIGHT: tl.constexpr,
                  SOFTCAP: tl.constexpr, ALIBI: tl.constexpr, KEY_MASK: tl.constexpr):
    mblk = tl.program_id(0)
    bh = tl.program_id(1)
    split = tl.program_id(2)
    b = bh // heads_k
    hk = bh % heads_k
    rows = GROUP * seqlen_q
    offs_m = mblk * BLOCK_M + tl.arange(0, BLOCK_M)  # row m: head hk * GROUP + m // seqlen_q
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < rows
    g = offs_m // seqlen_q
    qi = offs_m % seqlen_q
    h = hk * GROUP + g
    n_cache = tl.load(SEQLENS + b).to(tl.int32)
    if HAS_LEFTPAD:
        lp = tl.load(LEFTPAD + b).to(tl.int32)
    else:
        lp = 0
    nk = n_cache + seqlen_new - lp
    diag = nk - seqlen_q

    # q rows, rotated at cache_seqlens - leftpad (+ i when causal / local), scaled later
    qbase = Q + b.to(tl.int64) * sqb + qi[:, None].to(tl.int64) * sqn + h[:, None] * sqh
    dmask = offs_d < HEAD_DIM
    q = tl.load(qbase + offs_d[None, :], mask=row_ok[:, None] & dmask[None, :], other=0.0)
    if ROTARY:
        if Q_PER_TOKEN:
            rp = n_cache - lp + qi
        else:
            rp = n_cache - lp + qi * 0
        qr = _rotate(q, qbase, offs_d, COS, SIN, rp, row_ok & (rp >= 0) & (rp < seqlen_ro), row_ok, sro,
                     HALF, INTERLEAVED, HEAD_DIM)
        q = _cvt(qr, Q.dtype.element_ty)
    if ALIBI:
        slope = tl.load(SLOPES + b * slope_b + h, mask=row_ok, other=0.0).to(tl.float32)

    # the keys of this program: tiles of cache positions [lp + lo, lp + hi), aligned to BLOCK_N
    lo = nk * 0
    hi = nk
    if LEFT:
        lo = tl.minimum(nk, tl.maximum(0, diag - wl))
    if RIGHT:
        hi = tl.maximum(0, tl.minimum(nk, seqlen_q - 1 + diag + wr + 1))
    hi = tl.maximum(hi, lo)
    p_lo = lp + lo
    p_hi = lp + hi
    first = (p_lo // BLOCK_N) * BLOCK_N
    n_tiles = (p_hi - first + BLOCK_N - 1) // BLOCK_N
    per = (n_tiles + NUM_SPLITS - 1) // NUM_SPLITS
    t_begin = split * per
    t_end = tl.minimum(n_tiles, t_begin + per)

    if HAS_BIDX:
        crow = tl.load(BIDX + b).to(tl.int64)
    else:
        crow = b.to(tl.int64)
    crow_ok = (crow >= 0) & (crow < batch_cache)

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.full((BLOCK_M,), 0.0, tl.float32)
    acc = tl.full((BLOCK_M, BLOCK_D), 0.0, tl.float32)
    if SOFTCAP:
        qk_scale = sm_scale / softcap
    else:
        qk_scale = sm_scale * LOG2E
    for t in range(t_begin, t_end):
        p0 = first + t * BLOCK_N
        pos = p0 + offs_n
        ok = (pos >= p_lo) & (pos < p_hi) & (pos < capacity)
        if PAGED:
            page = tl.load(BT + b * sbt + p0 // block_size, mask=p0 < capacity, other=-1).to(tl.int64)
            ok = ok & (page >= 0) & (page < batch_cache)
            inpage = (pos % block_size).to(tl.int64)
            koff = page * skc0 + inpage * skc1 + hk * skc2
            voff = page * svc0 + inpage * svc1 + hk * svc2
        else:
            ok = ok & crow_ok
            koff = crow * skc0 + pos.to(tl.int64) * skc1 + hk * skc2
            voff = crow * svc0 + pos.to(tl.int64) * svc1 + hk * svc2
        kt = tl.load(KC + koff[None, :] + offs_d[:, None], mask=ok[None, :] & dmask[:, None], other=0.0)
        qk = _mm(q, kt, None)
        if SOFTCAP:
            s = _tanh(qk * qk_scale) * (softcap * LOG2E)
        else:
            s = qk * qk_scale
        j = pos - lp  # key index
        if ALIBI:
            s -= (slope[:, None] * LOG2E) * tl.abs(qi[:, None] + diag - j[None, :]).to(tl.float32)
        vis = ok[None, :] & row_ok[:, None]
        if RIGHT:
            vis = vis & (j[None, :] <= qi[:, None] + diag + wr)
        if LEFT:
            vis = vis & (j[None, :] >= qi[:, None] + diag - wl)
        if KEY_MASK:
            km = tl.load(KM + b.to(tl.int64) * skm_b + pos.to(tl.int64) * skm_n, mask=ok, other=0)
            vis = vis & (km != 0)[None, :]
        s = tl.where(vis, s, float("-inf"))
        p, m_new, l_i, acc = _softmax_step(s, m_i, l_i, acc)
        v = tl.load(VC + voff[:, None] + offs_d[None, :], mask=ok[:, None] & dmask[None, :], other=0.0)
        acc = _mm(_cvt(p, v.dtype), v, acc)
        m_i = m_new

    empty = l_i == 0.0
    out = acc / tl.where(empty, 1.0, l_i)[:, None]
    lse2 = tl.where(empty, float("-inf"), m_i + tl.log2(tl.where(empty, 1.0, l_i)))
    if NUM_SPLITS == 1:
        obase = O + b.to(tl.int64) * sob + qi[:, None].to(tl.int64) * son + h[:, None] * soh
        tl.store(obase + offs_d[None, :], out.to(O.dtype.element_ty), mask=row_ok[:, None] & dmask[None, :])
        lse = tl.where(empty, float("inf"), lse2 * LN2)
        tl.store(LSE + (b * heads_q + h) * seqlen_q + qi, lse, mask=row_ok)
    else:
        # partials: OP (batch * heads_k, NUM_SPLITS, rows, BLOCK_D), LP (batch * heads_k, NUM_SPLITS, rows)
        prow = (bh * NUM_SPLITS + split).to(tl.int64) * rows + offs_m
        tl.store(OP + prow[:, None] * BLOCK_D + offs_d[None, :], out, mask=row_ok[:, None])
        tl.store(LP + prow, lse2, mask=row_ok)


@triton.jit
def _combine_kernel(OP, LP, O, LSE, sob, son, soh, seqlen_q, heads_q, heads_k,
                    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                    NUM_SPLITS: tl.constexpr, BLOCK_S: tl.constexpr):
    """One program per (sequence * kv head, row)."""
    bh = tl.program_id(0)
    r = tl.program_id(1)
    rows = GROUP * seqlen_q
    b = bh // heads_k
    h = (bh % heads_k) * GROUP + r // seqlen_q
    qi = r % seqlen_q
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    smask = offs_s < NUM_SPLITS
    prow = (bh * NUM_SPLITS + offs_s).to(tl.int64) * rows + r
    l2 = tl.load(LP + prow, mask=smask, other=float("-inf"))
    mx = tl.max(l2, 0)
    mx_use = tl.where(mx == float("-inf"), 0.0, mx)
    w = tl.math.exp2(l2 - mx_use)
    total = tl.sum(w, 0)
    empty = total == 0.0
    w = w / tl.where(empty, 1.0, total)
    parts = tl.load(OP + prow[:, None] * BLOCK_D + offs_d[None, :], mask=smask[:, None], other=0.0)
    out = tl.sum(parts * w[:, None], 0)
    tl.store(O + b.to(tl.int64) * sob + qi.to(tl.int64) * son + h * soh + offs_d, out.to(O.dtype.element_ty),
             mask=offs_d < HEAD_DIM)
    lse = tl.where(empty, float("inf"), (mx_use + tl.log2(tl.where(empty, 1.0, total))) * LN2)
    tl.store(LSE + (b * heads_q + h) * seqlen_q + qi, lse)


def _split_stages(splits, block_d):
    """Software-pipeline depth of _split_kernel: 3 when the keys are split (the decode shapes,
    a few programs per SM streaming long runs of K/V: one H200, GQA 32:8, d128, per layer in a
    CUDA graph, batch 1 cache 32k 49.6 -> 41.4 us, batch 8 cache 4k 46.6 -> 39.7 us;
    benchmarks/results/h200_kvcache_split_sweep.log), else 2."""
    return 3 if splits > 1 and block_d <= 128 else 2


def _sm_count(device):
    """Programs that run at once: two per SM (as flash-attn counts them)."""
    if device.type == "cuda":
        return 2 * torch.cuda.get_device_properties(device).multi_processor_count
    return 8  # the interpreter: a small machine, so that tests exercise the heuristic's splits


def pick_num_splits(programs, n_tiles, sms, max_splits=128):
    """flash-attn's heuristic: no split when the (row block, sequence, kv head) programs fill
    80% of the `sms` program slots; else the fewest splits whose wave efficiency is within 85%
    of the best."""
    if programs >= 0.8 * sms:
        return 1
    max_splits = max(1, min(max_splits, sms, n_tiles))
    eff = []
    for n in range(1, max_splits + 1):
        waves = programs * n / sms
        eff.append(waves / -(-waves // 1))
    best = max(eff)
    for n in range(1, max_splits + 1):
        if eff[n - 1] >= 0.85 * best:
            return n
    return 1


def kvcache_forward(q, k_cache, v_cache, k=None, v=None, *, rotary_cos=None, rotary_sin=None,
                    cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                    softmax_scale, causal=False, window_left=-1, window_right=-1, softcap=0.0,
                    rotary_interleaved=True, alibi_slopes=None, num_splits=0, key_mask=None):
    """Inputs checked by the caller (mytorch_ext/ops/kvcache.py). Returns (out, lse) and
    writes k, v into the caches."""
    batch, seqlen_q, heads_q, d = q.shape
    heads_k = k_cache.shape[2]
    group = heads_q // heads_k
    paged = block_table is not None
    block_size = k_cache.shape[1] if paged else 1
    capacity = block_table.shape[1] * block_size if paged else k_cache.shape[1]
    batch_cache = k_cache.shape[0]
    seqlen_new = 0 if k is None else k.shape[1]
    dev = q.device
    if cache_seqlens is None:  # the whole cache is filled
        cache_seqlens = torch.full((batch,), capacity, dtype=torch.int32, device=dev)
    dummy = cache_seqlens
    block_d = max(16, triton.next_power_of_2(d))
    rotary = rotary_cos is not None
    if rotary and rotary_cos.stride(0) != rotary_sin.stride(0):  # the kernels read both with one row stride
        rotary_cos, rotary_sin = rotary_cos.contiguous(), rotary_sin.contiguous()
    half = rotary_cos.shape[1] if rotary else 0
    sro = rotary_cos.stride(0) if rotary else 0
    seqlen_ro = rotary_cos.shape[0] if rotary else 0
    cos, sin = (rotary_cos, rotary_sin) if rotary else (dummy, dummy)
    lp = cache_leftpad if cache_leftpad is not None else dummy
    bidx = cache_batch_idx if cache_batch_idx is not None else dummy
    bt = block_table if paged else dummy
    sbt = block_table.stride(0) if paged else 0

    if seqlen_new > 0 and batch > 0:
        note_launch("append", {}, _append_kernel[(batch * seqlen_new, heads_k)](
            k, v, k_cache, v_cache, cache_seqlens, lp, bidx, bt, cos, sin,
            k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            v_cache.stride(0), v_cache.stride(1), v_cache.stride(2), sbt, sro, seqlen_ro,
            seqlen_new, capacity, batch_cache, block_size,
            HEAD_DIM=d, BLOCK_D=block_d, PAGED=paged, HAS_LEFTPAD=cache_leftpad is not None,
            HAS_BIDX=cache_batch_idx is not None, ROTARY=rotary, HALF=half,
            INTERLEAVED=rotary_interleaved, num_warps=1 if block_d <= 64 else 2))

    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty((batch, heads_q, seqlen_q), dtype=torch.float32, device=dev)
    if out.numel() == 0:
        return out, lse
    rows = group * seqlen_q
    block_m = max(16, min(64, triton.next_power_of_2(rows)))
    m_blocks = triton.cdiv(rows, block_m)
    # keys per tile: a divisor of the page (a multiple of 16); smaller for wide heads
    block_n = 64 if d <= 128 else 32
    if paged:
        while block_size % block_n:
            block_n //= 2
    if _INTERPRET:
        block_n = 16
    n_tiles = triton.cdiv(capacity + seqlen_new, block_n)
    programs = m_blocks * batch * heads_k
    if num_splits > 0:
        splits = max(1, min(num_splits, n_tiles))
    else:
        splits = pick_num_splits(programs, n_tiles, _sm_count(dev))
    if splits > 1:
        opart = torch.empty((batch * heads_k, splits, rows, block_d), dtype=torch.float32, device=dev)
        lpart = torch.empty((batch * heads_k, splits, rows), dtype=torch.float32, device=dev)
    else:
        opart = lpart = lse
    slopes = alibi_slopes if alibi_slopes is not None else lse
    slope_b = heads_q if alibi_slopes is not None and alibi_slopes.dim() == 2 else 0
    wl, wr = window_left, window_right
    left = wl >= 0
    right = causal or wr >= 0
    if causal:
        wr = min(wr, 0) if wr >= 0 else 0
    km = key_mask if key_mask is not None else dummy
    skm = key_mask.stride() if key_mask is not None else (0, 0)
    cfg = {"BLOCK_M": block_m, "BLOCK_N": block_n}
    note_launch("split", cfg, _split_kernel[(m_blocks, batch * heads_k, splits)](
        q, k_cache, v_cache, out, lse, opart, lpart, cache_seqlens, lp, bidx, bt, cos, sin, slopes, km,
        q.stride(0), q.stride(1), q.stride(2),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        out.stride(0), out.stride(1), out.stride(2), skm[0], skm[1], sbt, sro, seqlen_ro, slope_b,
        seqlen_q, seqlen_new, heads_q, heads_k, capacity, batch_cache, block_size,
        float(softmax_scale), float(softcap), max(wl, 0), max(wr, 0),
        GROUP=group, HEAD_DIM=d, BLOCK_D=block_d, BLOCK_M=block_m, BLOCK_N=block_n,
        NUM_SPLITS=splits, PAGED=paged, HAS_LEFTPAD=cache_leftpad is not None,
        HAS_BIDX=cache_batch_idx is not None, ROTARY=rotary, HALF=half,
        INTERLEAVED=rotary_interleaved, Q_PER_TOKEN=causal or window_left >= 0 or window_right >= 0,
        LEFT=left, RIGHT=right, SOFTCAP=softcap > 0, ALIBI=alibi_slopes is not None,
        KEY_MASK=key_mask is not None, num_warps=4 if block_d <= 128 else 8,
        num_stages=_split_stages(splits, block_d)))
    if splits > 1:
        note_launch("combine", {}, _combine_kernel[(batch * heads_k, rows)](
            opart, lpart, out, lse, out.stride(0), out.stride(1), out.stride(2), seqlen_q, heads_q,
            heads_k, GROUP=group, HEAD_DIM=d, BLOCK_D=block_d, NUM_SPLITS=splits,
            BLOCK_S=max(2, triton.next_power_of_2(splits)), num_warps=1 if block_d <= 64 else 2))
    return out, lse


__all__ = ["kvcache_forward", "pick_num_splits"]
