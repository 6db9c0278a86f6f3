// RMSNorm and LayerNorm backward (CUDA): a persistent grid of blocks of row groups; each group
// walks many rows, the next row copied into shared memory in the background, and keeps its
// share of the weight/bias gradient in registers; each block writes one fp32 partial row and a
// second kernel sums the partials over blocks (two-stage reduction, no atomics). Rows wider
// than a block holds take a cluster of blocks each on sm_90+ (norm_wide.cu); unaligned rows,
// and wide rows elsewhere, an older persistent kernel (one row per block at a time, in
// registers or streamed).
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm.cuh"

namespace mytorch {
namespace cuda {
namespace {

// ITEMS: vectors per thread held in registers (the persistent kernel).
constexpr int kBwdThreads = 512;  // caps the persistent backward's block (registers)

// dx for one row, and this row's contribution to dw (g * xhat) and db (g).
// partial_w/partial_b: this block's fp32 row of partial sums (cols wide).
template <typename T, int VEC, int ITEMS, bool RMS>
__global__ void __launch_bounds__(kBwdThreads) norm_bwd_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                                       const T* __restrict__ w,
                                                       const float* __restrict__ mean_in,
                                                       const float* __restrict__ rstd_in, T* __restrict__ dx,
                                                       float* __restrict__ partial_w, float* __restrict__ partial_b,
                                                       int64_t rows, int64_t cols) {
  __shared__ float buf[2 * 32 * 2];
  int phase = 0;
  const int64_t nv = cols / VEC;
  const bool cached = nv <= (int64_t)ITEMS * blockDim.x;
  const float inv_cols = 1.f / (float)cols;
  const bool want_w = partial_w != nullptr, want_b = partial_b != nullptr;
  float* pw = want_w ? partial_w + blockIdx.x * cols : nullptr;
  float* pb = want_b ? partial_b + blockIdx.x * cols : nullptr;
  float acc_w[ITEMS][VEC], acc_b[ITEMS][VEC];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc_w[i][k] = acc_b[i][k] = 0.f;
  if (!cached) {  // partial rows accumulate in place: zero them first
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      if (want_w) pw[j] = 0.f;
      if (want_b) pb[j] = 0.f;
    }
    __syncthreads();
  }

  Vec<T, VEC> gv[ITEMS], xv[ITEMS];
  auto load_row = [&](Vec<T, VEC>* gd, Vec<T, VEC>* xd, int64_t row) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
      if (j < nv) {
        gd[i] = load_vec<T, VEC>(g + row * cols + j * VEC);
        xd[i] = load_vec<T, VEC>(x + row * cols + j * VEC);
      }
    }
  };
  auto weight = [&](int64_t j) { return load_vec<T, VEC>(w + j * VEC); };

  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* gr = g + row * cols;
    const T* xr = x + row * cols;
    T* dxr = dx + row * cols;
    const float mean = RMS ? 0.f : (float)mean_in[row];
    const float rstd = (float)rstd_in[row];
    // Pass 1: sum(gw * xhat) and, for LayerNorm, sum(gw).
    float s_gx = 0.f, s_g = 0.f;
    auto accum = [&](const Vec<T, VEC>& gq, const Vec<T, VEC>& xq, int64_t j, int i) {
      Vec<T, VEC> wv;
      if (w) wv = weight(j);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float gw = (float)gq.v[k] * (w ? (float)wv.v[k] : 1.f);
        float xh = ((float)xq.v[k] - mean) * rstd;
        s_gx += gw * xh;
        s_g += gw;
      }
    };
    if (cached) {
      load_row(gv, xv, row);
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) accum(gv[i], xv[i], j, i);
      }
    } else {
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x)
        accum(load_vec<T, VEC>(gr + j * VEC), load_vec<T, VEC>(xr + j * VEC), j, 0);
    }
    float c_gx, c_g = 0.f;
    if constexpr (RMS) {
      c_gx = block_sum1(s_gx, buf, phase) * inv_cols;
    } else {
      float sums[2] = {s_gx, s_g};
      const float zero[2] = {0.f, 0.f};
      block_allreduce<2>(sums, zero, buf, phase, SumMerge{});
      c_gx = sums[0] * inv_cols;
      c_g = sums[1] * inv_cols;
    }
    // Pass 2: dx, and the weight/bias contributions.
    auto emit = [&](const Vec<T, VEC>& gq, const Vec<T, VEC>& xq, int64_t j, int i, float* aw, float* ab) {
      Vec<T, VEC> wv, o;
      if (w) wv = weight(j);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float gk = (float)gq.v[k];
        float gw = gk * (w ? (float)wv.v[k] : 1.f);
        float xh = ((float)xq.v[k] - mean) * rstd;
        o.v[k] = (T)(rstd * (gw - c_g - xh * c_gx));
        aw[k] += gk * xh;
        if (!RMS) ab[k] += gk;
      }
      store_vec<T, VEC>(dxr + j * VEC, o);
    };
    if (cached) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) emit(gv[i], xv[i], j, i, acc_w[i], acc_b[i]);
      }
    } else {
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
        float aw[VEC], ab[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) aw[k] = ab[k] = 0.f;
        emit(load_vec<T, VEC>(gr + j * VEC), load_vec<T, VEC>(xr + j * VEC), j, 0, aw, ab);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {  // this thread owns these columns: no race
          if (want_w) pw[j * VEC + k] += aw[k];
          if (want_b) pb[j * VEC + k] += ab[k];
        }
      }
    }
  }
  if (cached) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
      if (j < nv)
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          if (want_w) pw[j * VEC + k] = acc_w[i][k];
          if (want_b) pb[j * VEC + k] = acc_b[i][k];
        }
    }
  }
}

// The weight/bias gradients of rows the persistent backward streams (wider than its block
// holds), stage 1: grid (column tiles, row slabs); each thread owns one column vector and walks
// its slab's rows, summing g * xhat (and g) into an fp32 partial row. The persistent kernel
// then computes dx alone: accumulating each streamed row into a partial row in global memory
// (a read-modify-write of 4-8 bytes per element per row) ran at 7-23% of copy on the H200.
template <typename T, int VEC, bool RMS>
__global__ void __launch_bounds__(256) norm_param_grad_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                                              const float* __restrict__ mean_in,
                                                              const float* __restrict__ rstd_in,
                                                              float* __restrict__ partial_w, float* __restrict__ partial_b,
                                                              int64_t rows, int64_t cols, int64_t rows_per_slab) {
  const int64_t jv = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (jv * VEC >= cols) return;
  const int64_t c0 = jv * VEC;
  const int64_t r0 = blockIdx.y * rows_per_slab, r1 = min(rows, r0 + rows_per_slab);
  float acc_w[VEC], acc_b[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc_w[k] = acc_b[k] = 0.f;
  auto step = [&](const Vec<T, VEC>& gv, const Vec<T, VEC>& xv, int64_t r) {
    const float mean = RMS ? 0.f : mean_in[r], rstd = rstd_in[r];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float gk = (float)gv.v[k];
      acc_w[k] = fmaf(gk, ((float)xv.v[k] - mean) * rstd, acc_w[k]);
      if (!RMS) acc_b[k] += gk;
    }
  };
  constexpr int kRows = 4;  // rows per step, their loads issued before any math
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) {
    Vec<T, VEC> gv[kRows], xv[kRows];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      gv[u] = load_vec<T, VEC>(g + (r + u) * cols + c0);
      xv[u] = load_vec<T, VEC>(x + (r + u) * cols + c0);
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u) step(gv[u], xv[u], r + u);
  }
  for (; r < r1; ++r) step(load_vec<T, VEC>(g + r * cols + c0), load_vec<T, VEC>(x + r * cols + c0), r);
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    partial_w[blockIdx.y * cols + c0 + k] = acc_w[k];
    if (!RMS) partial_b[blockIdx.y * cols + c0 + k] = acc_b[k];
  }
}

// ---- the row-group backward ----
constexpr int kMaxGroups = 8;  // rows in flight per block
// Threads per block of the row-group backward: groups of a row's threads up to this many
// (measured on H100 against 128 and 512: within 1-2% everywhere, 256 best or tied at 5 of 6 sizes).
constexpr int kBwdBlockThreads = 256;

// Sums of N floats over the blockDim.x threads of this row group (threadIdx.y): shuffles,
// then (groups wider than a warp) one block barrier, so every thread of the block calls it
// equally often. `buf`: kMaxGroups * 2 * 16 * N floats; calls alternate halves (`phase`), as
// block_allreduce.
template <int N>
__device__ __forceinline__ void group_sum(float (&s)[N], float* buf, int& phase) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
#pragma unroll
    for (int n = 0; n < N; ++n) s[n] += __shfl_xor_sync(0xffffffffu, s[n], off);
  if (blockDim.x == 32) return;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  float* b = buf + (threadIdx.y * 2 + phase) * 16 * N;
  phase ^= 1;
  if (lane == 0)
#pragma unroll
    for (int n = 0; n < N; ++n) b[n * 16 + warp] = s[n];
  __syncthreads();
#pragma unroll
  for (int n = 0; n < N; ++n) s[n] = lane < nwarps ? b[n * 16 + lane] : 0.f;
#pragma unroll
  for (int off = 8; off > 0; off >>= 1)
#pragma unroll
    for (int n = 0; n < N; ++n) s[n] += __shfl_xor_sync(0xffffffffu, s[n], off);
#pragma unroll
  for (int n = 0; n < N; ++n) s[n] = __shfl_sync(0xffffffffu, s[n], 0);
}

// Block (S, R): R row groups of S threads, each group ROWS rows at a time (kRowItems 16-byte
// vectors per thread, 32-bit in-row offsets). The group's next rows of g and x are copied into
// shared memory in the background while it works on these, so loads stay in flight through
// the reductions; both passes read the rows from there, and the weight (as floats) from
// shared memory too. Each thread sums its columns' weight/bias gradient over the group's rows
// in registers; at the end the R groups' sums are added in shared memory and the block writes
// one fp32 partial row (column_sum finishes).
// Measured on H100 (bf16 fwd+bwd): 86-96% of copy from 4k to 16k columns, where the persistent
// kernel it replaces reached 56-96%. (Per-group named barriers, tried first, measured 1-5
// points lower in a separate run.) On the H200 the kernel issued ~28 instructions an element
// with 4 warps a scheduler; reading the weight from shared memory as floats and xhat / dx as
// FMAs took the backward alone from 68-83% to 79-91% of copy at 4k-16k columns; a third
// staging buffer measured 2-9 points lower (less L1 left; it was not waiting on memory).
template <typename T, bool RMS, int ROWS>
__global__ void __launch_bounds__(ROWS == 2 ? 256 : 512, 1) norm_bwd_row_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                                           const T* __restrict__ w,
                                                           const float* __restrict__ mean_in,
                                                           const float* __restrict__ rstd_in,
                                                           T* __restrict__ dx, float* __restrict__ partial_w,
                                                           float* __restrict__ partial_b, int64_t rows, int cols) {
  using W = Words<T>;
  constexpr int N = W::N, ITEMS = kRowItems, NS = RMS ? 1 : 2;
  // [R][2 buffers][ROWS][g, x][nv], then the weight as cols floats
  extern __shared__ uint4 stage[];
  __shared__ float red[kMaxGroups * 2 * 16 * 2 * ROWS];
  int phase = 0;
  const int nv = cols / N;
  const float inv_cols = 1.f / (float)cols;
  const RowItems<T> items(nv);
  const auto& mine = items.mine;
  uint4* my_stage = stage + threadIdx.y * 4 * ROWS * nv;
  // The weight as floats (1 without one), once per block: both passes read it from here (no
  // global loads and conversions per row, no branch on its absence).
  float* w_s = reinterpret_cast<float*>(stage + blockDim.y * 4 * ROWS * nv);
  for (int j = threadIdx.y * blockDim.x + threadIdx.x; j < nv; j += blockDim.x * blockDim.y) {
    W wv;
    if (w) wv.load(w + j * N);
    else wv.fill(1.f);
#pragma unroll
    for (int k = 0; k < N; k += 4)
      *reinterpret_cast<float4*>(w_s + j * N + k) = make_float4(wv.get(k), wv.get(k + 1), wv.get(k + 2), wv.get(k + 3));
  }
  __syncthreads();
  // The block walks rows in steps of R * ROWS, all groups together (the same number of steps,
  // so the block barriers of group_sum match); group y takes rows base + y ROWS + (0..ROWS-1)
  // while there are some.
  const int64_t step = (int64_t)gridDim.x * blockDim.y * ROWS;
  const int64_t first = (blockIdx.x * (int64_t)blockDim.y + threadIdx.y) * ROWS;
  float acc_w[ITEMS][N], acc_b[RMS ? 1 : ITEMS][N];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
#pragma unroll
    for (int k = 0; k < N; ++k) {
      acc_w[i][k] = 0.f;
      if (!RMS) acc_b[RMS ? 0 : i][k] = 0.f;
    }
  float mean_next[ROWS], rstd_next[ROWS];
  // The group's rows r0.. into a staging buffer (one commit group), their statistics into
  // mean_next / rstd_next.
  auto prefetch = [&](int64_t r0, int buffer) {
#pragma unroll
    for (int rr = 0; rr < ROWS; ++rr) {
      const int64_t r = r0 + rr;
      mean_next[rr] = rstd_next[rr] = 0.f;
      if (r >= rows) continue;
      uint4* sg = my_stage + (buffer * ROWS + rr) * 2 * nv;
      const T* gr = g + r * cols;
      const T* xr = x + r * cols;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
        if (mine[i]) {
          const int j = items.col[i] / N;
          copy16_async(sg + j, gr + items.col[i]);
          copy16_async(sg + nv + j, xr + items.col[i]);
        }
      if (!RMS) mean_next[rr] = mean_in[r];
      rstd_next[rr] = rstd_in[r];
    }
    copy_async_commit();
  };
  prefetch(first, 0);
  int buffer = 0;
  for (int64_t r0 = first; r0 - threadIdx.y * ROWS < rows; r0 += step, buffer ^= 1) {
    float mean[ROWS], rstd[ROWS], nmr[ROWS];
#pragma unroll
    for (int rr = 0; rr < ROWS; ++rr) mean[rr] = mean_next[rr], rstd[rr] = rstd_next[rr], nmr[rr] = -mean[rr] * rstd[rr];
    copy_async_wait();
    const uint4* sb = my_stage + buffer * ROWS * 2 * nv;
    if (r0 + step < rows) prefetch(r0 + step, buffer ^ 1);
    // g and x are read from the staging buffer in both passes (holding them in registers
    // as well would double the registers and halve the blocks per multiprocessor).
    auto fetch = [&](int i, int rr, W& gq, W& xq) {
      const uint4* sg = sb + rr * 2 * nv;
      const int j = items.col[i] / N;
      const uint4 a = sg[j], b = sg[nv + j];
      gq.w[0] = a.x, gq.w[1] = a.y, gq.w[2] = a.z, gq.w[3] = a.w;
      xq.w[0] = b.x, xq.w[1] = b.y, xq.w[2] = b.z, xq.w[3] = b.w;
    };
    auto fetch_w = [&](int i, float (&wf)[N]) {
#pragma unroll
      for (int k = 0; k < N; k += 4) {
        const float4 v = *reinterpret_cast<const float4*>(w_s + items.col[i] + k);
        wf[k] = v.x, wf[k + 1] = v.y, wf[k + 2] = v.z, wf[k + 3] = v.w;
      }
    };
    // xhat = (x - mean) rstd; 16-bit rows as one FMA (x rstd - mean rstd: its rounding, about
    // |mean| rstd 2^-24, is far below their precision); float32 rows subtract first.
    auto xhat = [&](float xk, int rr) {
      return sizeof(T) == 4 ? (xk - mean[rr]) * rstd[rr] : fmaf(xk, rstd[rr], nmr[rr]);
    };
    // f(i, rr, g, x, w) for each of the thread's items of each of the group's rows
    auto each = [&](auto f) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        if (!mine[i]) continue;
        float wf[N];
        fetch_w(i, wf);
#pragma unroll
        for (int rr = 0; rr < ROWS; ++rr) {
          if (r0 + rr >= rows) continue;
          W gq, xq;
          fetch(i, rr, gq, xq);
          f(i, rr, gq, xq, wf);
        }
      }
    };
    // Pass 1: per row, sum(g w xhat) and, for LayerNorm, sum(g w).
    float sums[ROWS * NS] = {};
    each([&](int, int rr, const W& gq, const W& xq, const float (&wf)[N]) {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float gw = gq.get(k) * wf[k];
        sums[rr * NS] = fmaf(gw, xhat(xq.get(k), rr), sums[rr * NS]);
        if (!RMS) sums[rr * NS + NS - 1] += gw;
      }
    });
    group_sum(sums, red, phase);
    // dx = rstd (g w - c_g - xhat c_gx) = g w rstd - xhat (c_gx rstd) - c_g rstd
    float a_gx[ROWS], a_g[ROWS];
#pragma unroll
    for (int rr = 0; rr < ROWS; ++rr) {
      a_gx[rr] = -sums[rr * NS] * inv_cols * rstd[rr];
      a_g[rr] = RMS ? 0.f : -sums[rr * NS + NS - 1] * inv_cols * rstd[rr];
    }
    // Pass 2: dx, and the weight/bias sums.
    each([&](int i, int rr, const W& gq, const W& xq, const float (&wf)[N]) {
      gq.map([&](float gk, int k) {
            const float xh = xhat(xq.get(k), rr);
            acc_w[i][k] = fmaf(gk, xh, acc_w[i][k]);
            if (!RMS) acc_b[RMS ? 0 : i][k] += gk;
            return fmaf(gk * wf[k], rstd[rr], fmaf(xh, a_gx[rr], a_g[rr]));
          })
          .store(dx + (r0 + rr) * cols + items.col[i]);
    });
  }
  // The block's partial rows: with one group, straight from registers; otherwise the groups'
  // sums are added in shared memory (the staging buffers, free now: no copies are pending).
  float* pw = partial_w + blockIdx.x * (int64_t)cols;
  float* pb = RMS ? nullptr : partial_b + blockIdx.x * (int64_t)cols;
  auto put = [&](float* dst, const float (&a)[N]) {
#pragma unroll
    for (int k = 0; k < N; k += 4) *reinterpret_cast<float4*>(dst + k) = make_float4(a[k], a[k + 1], a[k + 2], a[k + 3]);
  };
  if (blockDim.y == 1) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (mine[i]) {
        put(pw + items.col[i], acc_w[i]);
        if (!RMS) put(pb + items.col[i], acc_b[RMS ? 0 : i]);
      }
    return;
  }
  float* sums_w = reinterpret_cast<float*>(stage);  // [R][cols], then [R][cols] for the bias
  float* sums_b = sums_w + blockDim.y * cols;
  __syncthreads();
#pragma unroll
  for (int i = 0; i < ITEMS; ++i)
    if (mine[i]) {
      put(sums_w + threadIdx.y * cols + items.col[i], acc_w[i]);
      if (!RMS) put(sums_b + threadIdx.y * cols + items.col[i], acc_b[RMS ? 0 : i]);
    }
  __syncthreads();
  for (int c = threadIdx.y * blockDim.x + threadIdx.x; c < cols; c += blockDim.x * blockDim.y) {
    float sw = 0.f, sb = 0.f;
    for (int y = 0; y < (int)blockDim.y; ++y) {
      sw += sums_w[y * cols + c];
      if (!RMS) sb += sums_b[y * cols + c];
    }
    pw[c] = sw;
    if (!RMS) pb[c] = sb;
  }
}

}  // namespace

// Stage 2 of the column reduction: out[c] = sum_p partial[p, c], shared with other families.
// (H200: 32 row groups against 16 took 0.5-1.7 us off the L2-resident sizes' backwards, the same
// elsewhere; 8 loads in flight the same.)
constexpr int kSumRows = 32;

// Block (32, ROWS): 32 threads across 32 VEC columns (VEC 4: float4 loads, for wide rows), ROWS
// row groups with U loads in flight each, combined in shared memory. Two sums in one launch (a
// norm's weight and bias gradients) when partial2 is given: blockIdx.y picks the pair.
template <typename T, int VEC, int ROWS, int U>
__global__ void __launch_bounds__(32 * ROWS) column_sum_kernel(const float* __restrict__ partial1,
                                                                   T* __restrict__ out1,
                                                                   const float* __restrict__ partial2,
                                                                   T* __restrict__ out2, int64_t parts, int64_t cols) {
  using F = typename std::conditional<VEC == 4, float4, float>::type;
  __shared__ float s[ROWS][32 * VEC + 1];
  const float* partial = blockIdx.y ? partial2 : partial1;
  T* out = blockIdx.y ? out2 : out1;
  const int64_t tile = blockIdx.x * 32 * VEC, c = tile + threadIdx.x * VEC;
  float acc[VEC] = {};
  auto add = [&](const float* p) {
    const F v = *reinterpret_cast<const F*>(p);
    const float* f = reinterpret_cast<const float*>(&v);
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc[k] += f[k];
  };
  if (c < cols) {  // VEC 4: cols is a multiple of 4
    int64_t p = threadIdx.y;
    for (; p + (U - 1) * ROWS < parts; p += U * ROWS) {
      F v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = *reinterpret_cast<const F*>(partial + (p + u * ROWS) * cols + c);
#pragma unroll
      for (int u = 0; u < U; ++u) add(reinterpret_cast<const float*>(&v[u]));
    }
    for (; p < parts; p += ROWS) add(partial + p * cols + c);
  }
#pragma unroll
  for (int k = 0; k < VEC; ++k) s[threadIdx.y][threadIdx.x * VEC + k] = acc[k];
  __syncthreads();
  if (threadIdx.y < VEC) {
    const int col = threadIdx.y * 32 + threadIdx.x;
    if (tile + col < cols) {
      float t = 0.f;
#pragma unroll
      for (int r = 0; r < ROWS; ++r) t += s[r][col];
      out[tile + col] = (T)t;
    }
  }
}

void column_sum(const at::Tensor& partial, at::Tensor& out, const at::Tensor* partial2, at::Tensor* out2) {
  int64_t parts = partial.size(0), cols = partial.size(1);
  if (cols == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  // float4 columns from 4096 columns on, 16 row groups (fewer, fuller blocks, several a
  // multiprocessor; narrower rows keep more blocks)
  const int vec = cols % 4 == 0 && cols >= 4096 ? 4 : 1;
  dim3 block(32, vec == 4 ? 16 : kSumRows);
  dim3 grid(static_cast<unsigned>((cols + 32 * vec - 1) / (32 * vec)), partial2 ? 2 : 1);
  MYTORCH_DISPATCH_CUDA_FLOAT(out.scalar_type(), "mytorch_column_sum", [&] {
    // many parts a column (the bias + GELU backward's slabs at narrow rows): 8 loads in flight
    auto k = vec == 4                       ? column_sum_kernel<scalar_t, 4, 16, 4>
             : parts >= 16 * kSumRows       ? column_sum_kernel<scalar_t, 1, kSumRows, 8>
                                            : column_sum_kernel<scalar_t, 1, kSumRows, 4>;
    k<<<grid, block, 0, stream>>>(partial.const_data_ptr<float>(), out.mutable_data_ptr<scalar_t>(),
                                  partial2 ? partial2->const_data_ptr<float>() : nullptr,
                                  out2 ? out2->mutable_data_ptr<scalar_t>() : nullptr, parts, cols);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <bool RMS>
void launch_norm_bwd(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor* mean,
                     const at::Tensor& rstd, at::Tensor& dx, at::Tensor& dw, at::Tensor* db, int64_t rows,
                     int64_t cols) {
  if (rows == 0 || cols == 0) {
    dw.zero_();
    if (db) db->zero_();
    return;
  }
  auto stream = at::cuda::getCurrentCUDAStream();
  MYTORCH_DISPATCH_CUDA_FLOAT(x.scalar_type(), "mytorch_norm_bwd_cuda", [&] {
    using T = scalar_t;
    const T* gp = g.const_data_ptr<T>();
    const T* xp = x.const_data_ptr<T>();
    const T* wp = w.defined() ? w.const_data_ptr<T>() : nullptr;
    T* dxp = dx.mutable_data_ptr<T>();
    constexpr int V = vec16<T>();
    const bool vec = pick_vec<T>(cols, {gp, xp, wp, dxp}) > 1;
    const float* mp = mean ? mean->const_data_ptr<float>() : nullptr;
    const float* rp = rstd.const_data_ptr<float>();
    auto fopts = x.options().dtype(at::kFloat);
    const int nv = vec && cols / V <= kRowMaxVecs ? (int)(cols / V) : 0;
    const int group_threads = row_threads(nv);
    int groups = std::max(1, std::min(kMaxGroups, kBwdBlockThreads / group_threads));
    // Rows of 4k-8k bf16 columns: one group of two rows a block (H200, backward alone: RMSNorm
    // 88-97% of copy against 80-90% with one row a group, LayerNorm 82-84% against 76-78%, but
    // 2 points lower at 32768x8192; narrower rows measured lower with two)
    int rows_per_group = groups <= 2 ? 2 : 1;
    if (rows_per_group == 2 && (size_t)4 * 2 * nv * 16 + (size_t)cols * 4 > max_block_smem()) rows_per_group = 1;
    groups = std::max(1, groups / rows_per_group);
    // staging (a block of 2 buffers of g and x rows per group) and the weight as floats: up to
    // 192 KB (16k bf16 columns)
    const size_t smem = (size_t)groups * rows_per_group * 4 * nv * 16 + (size_t)cols * 4;
    if (nv > 0 && smem <= max_block_smem()) {  // (GPUs with less shared memory: the kernel below)
      auto kernel = rows_per_group == 2 ? norm_bwd_row_kernel<T, RMS, 2> : norm_bwd_row_kernel<T, RMS, 1>;
      C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
      int per_sm = 0;
      C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, group_threads * groups, smem));
      const int64_t per_block = (int64_t)groups * rows_per_group;
      const int64_t grid = std::min<int64_t>((int64_t)std::max(per_sm, 1) * num_sms(), (rows + per_block - 1) / per_block);
      at::Tensor pw = aten::empty({grid, cols}, fopts);
      at::Tensor pb = db ? aten::empty({grid, cols}, fopts) : at::Tensor();
      kernel<<<(int)grid, dim3(group_threads, groups), smem, stream>>>(
          gp, xp, wp, mp, rp, dxp,
          pw.mutable_data_ptr<float>(), db ? pb.mutable_data_ptr<float>() : nullptr, rows, (int)cols);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      column_sum(pw, dw, db ? &pb : nullptr, db);
      return;
    }
    // aligned rows wider than a block holds: a cluster of blocks a row (sm_90+)
    if (vec && launch_norm_bwd_cluster(g, x, w, mean, rstd, dx, dw, db, rows, cols)) return;
    // unaligned rows (in registers up to 4 elements a thread) and aligned rows wider than
    // kRowMaxVecs vectors or than the shared memory allows (one vector a thread in registers,
    // streamed when the row has more vectors than the block has threads: then the weight/bias
    // gradients come from norm_param_grad_kernel)
    auto kernel = vec ? norm_bwd_kernel<T, V, 1, RMS> : norm_bwd_kernel<T, 1, 4, RMS>;
    const int threads = vec ? kBwdThreads : std::min<int>(kBwdThreads, std::max<int>(32, round_up((cols + 3) / 4, 32)));
    int64_t grid = persistent_grid(kernel, threads, rows);
    const bool streamed = cols / (vec ? V : 1) > (int64_t)(vec ? 1 : 4) * threads;
    if (streamed) {
      // dx from the persistent kernel; the weight/bias gradients by column slabs
      kernel<<<(int)grid, threads, 0, stream>>>(gp, xp, wp, mp, rp, dxp, nullptr, nullptr, rows, cols);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      auto pg = vec ? norm_param_grad_kernel<T, V, RMS> : norm_param_grad_kernel<T, 1, RMS>;
      const int vec_len = vec ? V : 1;
      const int64_t col_tiles = (cols / vec_len + 255) / 256;
      int per_sm = 0;
      C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pg, 256, 0));
      int64_t slabs = std::min<int64_t>({rows, std::max<int64_t>(1, (int64_t)std::max(per_sm, 1) * num_sms() / col_tiles),
                                         65535});
      const int64_t per = (rows + slabs - 1) / slabs;
      slabs = (rows + per - 1) / per;
      at::Tensor pw = aten::empty({slabs, cols}, fopts);
      at::Tensor pb = db ? aten::empty({slabs, cols}, fopts) : at::Tensor();
      pg<<<dim3((unsigned)col_tiles, (unsigned)slabs), 256, 0, stream>>>(
          gp, xp, mp, rp, pw.mutable_data_ptr<float>(), db ? pb.mutable_data_ptr<float>() : nullptr, rows, cols, per);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      column_sum(pw, dw, db ? &pb : nullptr, db);
      return;
    }
    at::Tensor pw = aten::empty({grid, cols}, fopts);
    at::Tensor pb = db ? aten::empty({grid, cols}, fopts) : at::Tensor();
    kernel<<<(int)grid, threads, 0, stream>>>(gp, xp, wp, mp, rp, dxp, pw.mutable_data_ptr<float>(),
                                              db ? pb.mutable_data_ptr<float>() : nullptr, rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    column_sum(pw, dw, db ? &pb : nullptr, db);
  });
}

template void launch_norm_bwd<true>(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor*,
                                    const at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor*, int64_t, int64_t);
template void launch_norm_bwd<false>(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor*,
                                     const at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor*, int64_t, int64_t);

}  // namespace cuda
}  // namespace mytorch
