// RMSNorm and LayerNorm over the trailing `normalized_shape` dims (CUDA): the ops, their
// checks, and the forward kernels (the backward's are in norm_backward.cu).
// Forward: one block per row, the row held in registers as 16-byte vectors (kRowItems per
// thread, common.cuh); rows wider than a block holds take a cluster of blocks each on sm_90+
// (norm_wide.cu); unaligned rows, and wide rows elsewhere, a persistent kernel.
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/norm.h"

namespace mytorch {
namespace cuda {
namespace {

// ---- kernels ----
// The persistent forward's blocks: up to 1024 threads, 4 vectors each held in registers. (H100,
// LayerNorm bf16 at 24k-128k columns: 60-65% of copy against 48-52% with 512-thread blocks,
// which streamed rows past 16k columns three times from memory.)
constexpr int kFwdThreads = 1024;

// The saved row statistics (RMSNorm's rstd, LayerNorm's mean and rstd) are float32 for every
// input dtype (the ops' contract, as ATen's CUDA kernels): a 16-bit mean would move xhat by up
// to half its rounding step over the spread (rows about 300 with spread 0.5: a bf16 step is 2)
// and cost the backward its accuracy.

// Rows the one-row-per-block kernel does not take (unaligned, or wider than kRowMaxVecs
// vectors): a persistent grid; the row is held in registers (ITEMS vectors per thread) when
// it fits the block, otherwise each pass streams it from memory.
template <typename T, int VEC, int ITEMS, bool RMS>
__global__ void __launch_bounds__(kFwdThreads) norm_fwd_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                       const T* __restrict__ b, T* __restrict__ y,
                                                       float* __restrict__ mean_out,
                                                       float* __restrict__ rstd_out,
                                                       int64_t rows, int64_t cols, float eps) {
  __shared__ float buf[2 * 32 * 2];
  int phase = 0;
  const int64_t nv = cols / VEC;
  const bool cached = nv <= (int64_t)ITEMS * blockDim.x;
  const float inv_cols = 1.f / (float)cols;
  Vec<T, VEC> xv[ITEMS];
  const RowSlots<ITEMS, VEC> slots(nv, cached);
  const auto& col = slots.col;
  const auto& mine = slots.mine;
  // The block's sums of d = x - mean and d^2 -> the row's sum of squares about its mean
  // (LayerNorm: mean corrected by sum(d) / n) or of squares (RMSNorm, mean 0).
  auto reduce_centred = [&](float& mean, float s1, float s2) {
    if constexpr (RMS) {
      return block_sum1(s2, buf, phase);
    } else {
      float sums[2] = {s1, s2};
      const float zero[2] = {0.f, 0.f};
      block_allreduce<2>(sums, zero, buf, phase, SumMerge{});
      if (!isfinite(mean)) return sums[1];  // an infinite mean stays as it is
      const float dm = sums[0] * inv_cols;
      mean += dm;
      return fmaxf(sums[1] - sums[0] * dm, 0.f);
    }
  };
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    float mean = 0.f, ss;  // ss: sum of squares (RMSNorm) or of squares about the mean
    if (cached) {
      slots.load(xv, xr);
      // LayerNorm, corrected two-pass: a first mean m0, then the deviations d = x - m0 summed
      // and squared in one reduction: mean = m0 + sum(d) / n, var = sum(d^2) / n - (sum(d) / n)^2.
      float s1 = 0.f, s2 = 0.f;
      if constexpr (!RMS) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
          if (mine[i])
#pragma unroll
            for (int k = 0; k < VEC; ++k) s1 += (float)xv[i].v[k];
        mean = block_sum1(s1, buf, phase) * inv_cols;
        s1 = 0.f;
      }
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
        if (mine[i])
#pragma unroll
          for (int k = 0; k < VEC; ++k) {
            const float d = (float)xv[i].v[k] - mean;
            s1 += d;
            s2 += d * d;
          }
      ss = reduce_centred(mean, s1, s2);
    } else {  // streamed: the same two passes, each reading the row
      if (!RMS) {
        float s = 0.f;
        for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
          auto v = load_vec<T, VEC>(xr + j * VEC);
#pragma unroll
          for (int k = 0; k < VEC; ++k) s += (float)v.v[k];
        }
        mean = block_sum1(s, buf, phase) * inv_cols;
      }
      float s1 = 0.f, s2 = 0.f;
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
        auto v = load_vec<T, VEC>(xr + j * VEC);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float d = (float)v.v[k] - mean;
          s1 += d;
          s2 += d * d;
        }
      }
      ss = reduce_centred(mean, s1, s2);
    }
    const float rstd = rsqrtf(ss * inv_cols + eps);
    if (threadIdx.x == 0) {
      rstd_out[row] = rstd;
      if (!RMS) mean_out[row] = mean;
    }
    auto emit = [&](int64_t c, const Vec<T, VEC>& v) {
      Vec<T, VEC> wv, bv, o;
      if (w) wv = load_vec<T, VEC>(w + c);
      if (!RMS && b) bv = load_vec<T, VEC>(b + c);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float r = ((float)v.v[k] - mean) * rstd;
        if (w) r *= (float)wv.v[k];
        if (!RMS && b) r += (float)bv.v[k];
        o.v[k] = (T)r;
      }
      store_vec<T, VEC>(yr + c, o);
    };
    if (cached) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
        if (mine[i]) emit(col[i], xv[i]);
    } else {
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) emit(j * VEC, load_vec<T, VEC>(xr + j * VEC));
    }
  }
}

// One row per block, no persistence: the row sits in registers (kRowItems 16-byte vectors
// per thread), blocks are small (a quarter of the row's vectors in threads), so several
// share an SM and one block's loads overlap another's reductions. Offsets within a row are
// 32-bit, 64 registers. WARP: rows of at most 32 * ITEMS vectors; a block of (32, blockDim.y)
// threads, each warp a row, its reductions by shuffles only. FULL: every thread holds ITEMS
// vectors (no bounds checks). Sums run as per-item chains joined by a tree: short dependency
// chains and few instructions are what bound a row whose data sit in L2 (4096x1024 bf16:
// Nsight Compute counted twice Inductor's instructions per warp in the form before this).
// When a row's w and b are loaded, and how 16-bit LayerNorm holds x (64 registers do not hold x
// as floats and w, b as words at 4 vectors a thread):
enum class WbLoad {
  kEarly,        // w and b with x; 16-bit LayerNorm keeps x as words, converted at each use
  kLate,         // x as floats; w and b after the reductions, two items at a time
  kWEarly,       // x as floats; w with x, b after the reductions
  kEarlyFloats,  // x as floats, w and b with x (2 or 3 items a thread)
};

template <typename T, bool RMS, bool WARP, bool FULL, int ITEMS = kRowItems, WbLoad L = WbLoad::kEarly>
__global__ void __maxnreg__(64)
    norm_fwd_row_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                        T* __restrict__ y, float* __restrict__ mean_out,
                        float* __restrict__ rstd_out, int64_t rows, int cols, float eps) {
  using W = Words<T>;
  constexpr int N = W::N;
  // LayerNorm of fp32 rows: corrected two-pass (the first mean m0, then the deviations d = x -
  // m0 summed and squared in one reduction: mean = m0 + sum(d) / n, var = sum(d^2) / n -
  // (sum(d) / n)^2), as accurate as ATen's Welford with a mean 1e4 spreads wide. 16-bit rows:
  // plain two-pass; the correction is second order in the first mean's error, which fp32
  // sums of 16-bit values keep far below the output's rounding.
  constexpr bool CORRECTED = !RMS && sizeof(T) == 4;
  __shared__ float buf[WARP ? 1 : 2 * 32 * 2];
  int phase = 0;
  const int nv = cols / N;
  const float inv_cols = 1.f / (float)cols;
  const int64_t row = WARP ? (int64_t)blockIdx.x * blockDim.y + threadIdx.y : blockIdx.x;
  if (WARP && row >= rows) return;  // a whole warp: no block barrier in this form
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  const RowItems<T, ITEMS> items(nv);
  // x held as floats (converted once; x - mean once the mean is known), w and b as words.
  // 16-bit LayerNorm: all three would not fit 64 registers at 4 items; it loads b (kWEarly) or
  // w and b (kLate) after the reductions, two items at a time (FULL rows), or holds x as words
  // converted at each use (rows with bounds; in the FULL form the compiler hoists the
  // conversions and spills). H200, bf16, % of copy: words 76-94%, late 78-98% (one size 2
  // points lower), the branch-free words form 59-72% (spilled).
  constexpr bool HOLD = RMS || sizeof(T) == 4 || L != WbLoad::kEarly;
  constexpr bool LATE = L == WbLoad::kLate || L == WbLoad::kWEarly;  // b (and w) loaded late
  constexpr bool W_EARLY = L == WbLoad::kWEarly;
  float xf[HOLD ? ITEMS : 1][N];
  W xv[ITEMS], wv[ITEMS], bv[ITEMS];
  items.template load<FULL>(xv, xr);
  // w and b of items i0 .. i1 - 1 (1 and 0 where absent: no per-element branches on w or b
  // below, which would be predicated both ways)
  auto load_wb = [&](int i0, int i1) {
#pragma unroll
    for (int i = i0; i < i1; ++i) {
      if (!items.template has<FULL>(i)) continue;
      if (W_EARLY) wv[i].reload_barrier();  // (converted here, not held as floats since the load)
      else if (w) wv[i].load(w + items.col[i]);
      else wv[i].fill(1.f);
      if (!RMS && b) bv[i].load(b + items.col[i]);
      else bv[i].fill(0.f);
    }
  };
  if (!LATE) load_wb(0, ITEMS);
  if (W_EARLY)
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      if (!items.template has<FULL>(i)) continue;
      if (w) wv[i].load(w + items.col[i]);
      else wv[i].fill(1.f);
    }
  if constexpr (HOLD)
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
#pragma unroll
      for (int k = 0; k < N; ++k) xf[i][k] = items.template has<FULL>(i) ? xv[i].get(k) : 0.f;
  auto xat = [&](int i, int k) {
    if constexpr (HOLD) return xf[i][k];
    else return xv[i].get(k);
  };
  auto reload = [&] {  // (words: convert again after this instead of keeping floats live)
    if constexpr (!HOLD)
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) xv[i].reload_barrier();
  };
  float mean = 0.f, part[ITEMS];
  if constexpr (!RMS) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      part[i] = 0.f;
      if (items.template has<FULL>(i))
#pragma unroll
        for (int k = 0; k < N; ++k) part[i] += xat(i, k);
    }
    mean = row_sum1<WARP>(tree_sum(part), buf, phase) * inv_cols;
    reload();
  }
  float s1[ITEMS], s2[ITEMS];  // per item: sum of d = x - mean (CORRECTED only) and of d^2
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    s1[i] = s2[i] = 0.f;
    if (items.template has<FULL>(i))
#pragma unroll
      for (int k = 0; k < N; ++k) {
        const float d = xat(i, k) - mean;
        if constexpr (HOLD) xf[i][k] = d;
        if (CORRECTED) s1[i] += d;
        s2[i] = fmaf(d, d, s2[i]);
      }
  }
  float ss;
  if constexpr (CORRECTED) {
    float sums[2] = {tree_sum(s1), tree_sum(s2)};
    const float zero[2] = {0.f, 0.f};
    row_allreduce<WARP, 2>(sums, zero, buf, phase, SumMerge{});
    ss = sums[1];
    if (isfinite(mean)) {  // an infinite mean stays as it is
      const float dm = sums[0] * inv_cols;
      mean += dm;
      ss = fmaxf(sums[1] - sums[0] * dm, 0.f);
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
#pragma unroll
        for (int k = 0; k < N; ++k) xf[i][k] -= dm;
    }
  } else {
    ss = row_sum1<WARP>(tree_sum(s2), buf, phase);
  }
  reload();
  const float rstd = rsqrtf(ss * inv_cols + eps);
  if (threadIdx.x == 0) {
    rstd_out[row] = rstd;
    if (!RMS) mean_out[row] = mean;
  }
  // y = (x - mean) * (rstd * w) + b; LATE: b (and w) loaded here, two items at a time
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    if (LATE && i % 2 == 0) {
      asm volatile("" ::: "memory");  // (keeps the compiler from hoisting every load to here)
      load_wb(i, i + 2);
    }
    if (!items.template has<FULL>(i)) continue;
    W o;
#pragma unroll
    for (int k = 0; k < N; k += 2) {
      float r[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float d = HOLD ? xat(i, k + h) : xat(i, k + h) - mean;
        const float a = rstd * wv[i].get(k + h);
        r[h] = RMS ? d * a : fmaf(d, a, bv[i].get(k + h));
      }
      o.set_pair(k / 2, r[0], r[1]);
    }
    o.store(yr + items.col[i]);
  }
}

// ---- ATen glue ----
// The schemas and output contract are the CPU kernels' (kernels/cpu/norm.cpp):
// mean/rstd have shape x.shape[:axis] + [1] * len(normalized_shape) and dtype float32.
// The backwards always return grad_weight (and grad_bias) of
// normalized_shape: sum(g * xhat) (and sum(g)), with or without a weight.
norm::Rows check_norm_input(const char* op, const at::Tensor& x, at::IntArrayRef normalized_shape,
                          const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias) {
  check_cuda(op, "x", x);
  check_cuda_float(op, "x", x);
  int64_t k = (int64_t)normalized_shape.size();
  TORCH_CHECK(k >= 1 && x.dim() >= k, op, ": expected normalized_shape to name 1..", x.dim(),
              " trailing dims of x, got normalized_shape ", normalized_shape, " for x of shape ", x.sizes());
  TORCH_CHECK(x.sizes().slice(x.dim() - k) == normalized_shape, op, ": expected the trailing dims of x to equal ",
              "normalized_shape ", normalized_shape, ", got x of shape ", x.sizes());
  for (auto* t : {&weight, &bias}) {
    if (!t->has_value() || !(*t)->defined()) continue;
    const char* name = t == &weight ? "weight" : "bias";
    const at::Tensor& p = t->value();
    check_same_device(op, x, "x", p, name);
    check_same_dtype(op, x, "x", p, name);
    TORCH_CHECK(p.sizes() == normalized_shape, op, ": expected ", name, " of shape ", normalized_shape, ", got ",
                p.sizes());
  }
  return norm::rows_of(x, k);
}

// The backwards' x, weight and grad (x's shape, dtype and device).
norm::Rows check_backward_input(const char* op, const at::Tensor& grad, const at::Tensor& x,
                                at::IntArrayRef normalized_shape, const c10::optional<at::Tensor>& weight) {
  norm::Rows rs = check_norm_input(op, x, normalized_shape, weight, c10::nullopt);
  check_same_shape(op, grad, "grad", x, "x");
  check_same_dtype(op, grad, "grad", x, "x");
  check_same_device(op, grad, "grad", x, "x");
  return rs;
}

// A saved statistic as a contiguous tensor of dtype `want` on x's device, one value per row.
at::Tensor stat_in(const char* op, const char* name, const at::Tensor& s, const at::Tensor& x, at::ScalarType want,
                   int64_t rows) {
  check_same_device(op, x, "x", s, name);
  TORCH_CHECK(s.scalar_type() == want, op, ": expected ", name, " of dtype ", want, ", got ", s.scalar_type());
  TORCH_CHECK(s.numel() == rows, op, ": expected ", name, " with ", rows, " elements, got shape ", s.sizes());
  return s.contiguous();
}

at::Tensor opt_contiguous(const c10::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? t->contiguous() : at::Tensor();
}

// mean (LayerNorm only) and rstd: `rows` float32 values.
template <bool RMS>
void launch_norm_fwd(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, at::Tensor& y, at::Tensor* mean,
                     at::Tensor& rstd, int64_t rows, int64_t cols, double eps) {
  if (rows == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  MYTORCH_DISPATCH_CUDA_FLOAT(x.scalar_type(), "mytorch_norm_fwd_cuda", [&] {
    using T = scalar_t;
    const T* xp = x.const_data_ptr<T>();
    const T* wp = w.defined() ? w.const_data_ptr<T>() : nullptr;
    const T* bp = b.defined() ? b.const_data_ptr<T>() : nullptr;
    T* yp = y.mutable_data_ptr<T>();
    float* mp = mean ? mean->mutable_data_ptr<float>() : nullptr;
    float* rp = rstd.mutable_data_ptr<float>();
    constexpr int V = vec16<T>();
    const bool vec = pick_vec<T>(cols, {xp, wp, bp, yp}) > 1;
    if (vec && cols / V <= kRowMaxVecs && rows <= INT32_MAX) {
      // Rows of up to 64 vectors (512 bf16 columns): a warp each, 4 rows a block (measured on
      // H100 at 8192x512: 113% of copy against 83% for one 32-thread block a row, which caps
      // an SM at 32 warps; no gain at 1024 columns). Wider rows: a block each; every thread
      // holds kRowItems vectors when the width allows (FULL: no bounds).
      const int nv = (int)(cols / V);
      if (nv <= 64) {
        dim3 block(32, 4);
        norm_fwd_row_kernel<T, RMS, true, false, 2><<<(int)((rows + 3) / 4), block, 0, stream>>>(
            xp, wp, bp, yp, mp, rp, rows, (int)cols, (float)eps);
      } else {
        int threads = row_threads(nv);
        constexpr bool ln16 = !RMS && sizeof(T) < 4;  // 16-bit LayerNorm
        constexpr WbLoad late = ln16 ? WbLoad::kLate : WbLoad::kEarly;
        const bool full = nv == kRowItems * threads;
        auto kernel = full ? norm_fwd_row_kernel<T, RMS, false, true, kRowItems, late>
                           : norm_fwd_row_kernel<T, RMS, false, false>;
        if (!full && nv % 96 == 0) {
          // rows of 96k vectors (768, 1536, 2304 16-bit columns): 3 items a thread and no bounds
          // checks; 16-bit LayerNorm then holds x as floats with w and b (H100, bf16, % of copy
          // against 4 items with bounds: 4096x768 RMSNorm 109.8 vs 94.3, LayerNorm 92.1 vs 84.7;
          // 16384x768 +2.5-4; 1536 columns +0.3-2.8)
          kernel = norm_fwd_row_kernel<T, RMS, false, true, 3, ln16 ? WbLoad::kEarlyFloats : WbLoad::kEarly>;
          threads = (int)(nv / 3);
        } else if (ln16 && full && threads == 32) {
          // 1024 16-bit columns (H100, bf16, % of copy against the late form): rows all resident at
          // once (one wave, nothing overlaps the late loads) load w early, 4096 rows 112 vs 107;
          // x and y past the L2: 64-thread rows loading w and b with x, 16384-65536 rows
          // +1.3-2.5 points; in between the late form (8192 rows: 133 vs 125 and 120).
          auto w_early = norm_fwd_row_kernel<T, RMS, false, true, kRowItems, WbLoad::kWEarly>;
          if (2 * rows * cols * (int64_t)sizeof(T) > l2_bytes()) {
            kernel = norm_fwd_row_kernel<T, RMS, false, true, kRowItems / 2, WbLoad::kEarlyFloats>;
            threads = 64;
          } else if (persistent_grid(w_early, threads, rows) >= rows) {
            kernel = w_early;
          }
        }
        kernel<<<(int)rows, threads, 0, stream>>>(xp, wp, bp, yp, mp, rp, rows, (int)cols, (float)eps);
      }
      return;
    }
    // aligned rows wider than a block holds: a cluster of blocks a row (sm_90+)
    if (vec && launch_norm_fwd_cluster(x, w, b, y, mean, rstd, rows, cols, eps)) return;
    // elsewhere a persistent kernel; rows past 4 * 1024 vectors stream (8 items per thread
    // would spill registers)
    const int threads = row_shape(vec ? cols / V : cols, 4, kFwdThreads).second;
    auto kernel = vec ? norm_fwd_kernel<T, V, 4, RMS> : norm_fwd_kernel<T, 1, 4, RMS>;
    int64_t grid = persistent_grid(kernel, threads, rows);
    kernel<<<(int)grid, threads, 0, stream>>>(xp, wp, bp, yp, mp, rp, rows, cols, (float)eps);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> rms_norm(const at::Tensor& x, at::IntArrayRef normalized_shape,
                                            const c10::optional<at::Tensor>& weight, c10::optional<double> eps) {
  const char* op = "mytorch::rms_norm";
  auto rs = check_norm_input(op, x, normalized_shape, weight, c10::nullopt);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous(), wc = opt_contiguous(weight);
  at::Tensor y = aten::empty_like(xc, at::MemoryFormat::Contiguous);
  at::Tensor rstd = aten::empty(rs.stat_shape, x.options().dtype(at::kFloat));
  launch_norm_fwd<true>(xc, wc, at::Tensor(), y, nullptr, rstd, rs.rows, rs.cols,
                        eps.has_value() ? *eps : norm::default_eps(x.scalar_type()));
  return {y, rstd};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& x,
                                                     at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                     const c10::optional<at::Tensor>& weight) {
  const char* op = "mytorch::rms_norm_backward";
  auto rs = check_backward_input(op, grad, x, normalized_shape, weight);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor rc = stat_in(op, "rstd", rstd, x, at::kFloat, rs.rows);
  at::Tensor gc = grad.contiguous(), xc = x.contiguous(), wc = opt_contiguous(weight);
  at::Tensor dx = aten::empty_like(xc, at::MemoryFormat::Contiguous);
  at::Tensor dw = aten::empty(normalized_shape, x.options());
  launch_norm_bwd<true>(gc, xc, wc, nullptr, rc, dx, dw, nullptr, rs.rows, rs.cols);
  return {dx, dw};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& x, at::IntArrayRef normalized_shape,
                                                          const c10::optional<at::Tensor>& weight,
                                                          const c10::optional<at::Tensor>& bias, double eps) {
  const char* op = "mytorch::layer_norm";
  auto rs = check_norm_input(op, x, normalized_shape, weight, bias);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous(), wc = opt_contiguous(weight), bc = opt_contiguous(bias);
  at::Tensor y = aten::empty_like(xc, at::MemoryFormat::Contiguous);
  auto fopts = x.options().dtype(at::kFloat);
  at::Tensor mean = aten::empty(rs.stat_shape, fopts), rstd = aten::empty(rs.stat_shape, fopts);
  launch_norm_fwd<false>(xc, wc, bc, y, &mean, rstd, rs.rows, rs.cols, eps);
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(const at::Tensor& grad, const at::Tensor& x,
                                                                   at::IntArrayRef normalized_shape,
                                                                   const at::Tensor& mean, const at::Tensor& rstd,
                                                                   const c10::optional<at::Tensor>& weight) {
  const char* op = "mytorch::layer_norm_backward";
  auto rs = check_backward_input(op, grad, x, normalized_shape, weight);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor mc = stat_in(op, "mean", mean, x, at::kFloat, rs.rows);
  at::Tensor rc = stat_in(op, "rstd", rstd, x, at::kFloat, rs.rows);
  at::Tensor gc = grad.contiguous(), xc = x.contiguous(), wc = opt_contiguous(weight);
  at::Tensor dx = aten::empty_like(xc, at::MemoryFormat::Contiguous);
  at::Tensor dw = aten::empty(normalized_shape, x.options()), db = aten::empty(normalized_shape, x.options());
  launch_norm_bwd<false>(gc, xc, wc, &mc, rc, dx, dw, &db, rs.rows, rs.cols);
  return {dx, dw, db};
}

}  // namespace cuda
}  // namespace mytorch
