// softmax and log_softmax over one dim, forward and backward (CUDA).
// Forward: one block per row, the row in registers as 16-byte vectors (2 or 4 per thread);
// unaligned and very wide rows take a persistent kernel, streaming rows that do not fit.
// Backward: the same one-row-per-block form (g and y in registers); unaligned and very wide
// rows take a persistent kernel.
#include "kernels/cuda/common.cuh"
#include "kernels/softmax.h"

namespace mytorch {
namespace cuda {
namespace {

// The row's (max, sum of exp(x - max)) from each thread's pair, with one barrier and one
// exp per level: a warp takes its max by shuffles, rescales each lane's sum to it once and
// sums them; the warps' pairs go through shared memory and the same steps again. Every
// thread gets the row's pair. `buf` holds 2 * 32 * 2 floats, its halves alternating by
// `phase` (as block_allreduce).
__device__ __forceinline__ void rescaled_warp_max_sum(float& m, float& s) {
  const float wm = warp_max(m);
  s = warp_sum(m == -INFINITY ? 0.f : s * __expf(m - wm));
  m = wm;
}

__device__ __forceinline__ void block_max_sum(float& m, float& s, float* buf, int& phase) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  rescaled_warp_max_sum(m, s);
  float* b = buf + phase * 64;
  phase ^= 1;
  if (lane == 0) {
    b[warp] = m;
    b[32 + warp] = s;
  }
  __syncthreads();
  m = lane < nwarps ? b[lane] : -INFINITY;
  s = lane < nwarps ? b[32 + lane] : 0.f;
  rescaled_warp_max_sum(m, s);
}

// Rows the one-row-per-block kernel does not take (unaligned, or wider than kRowMaxVecs
// vectors): a persistent grid; the row is held in registers (ITEMS vectors per thread) when
// it fits the block, otherwise streamed from memory. Each thread keeps a running (max, sum),
// so a row needs one block reduction.
template <typename T, int VEC, int ITEMS, bool LOG>
__global__ void __launch_bounds__(1024) softmax_fwd_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                                          int64_t cols) {
  __shared__ float buf[2 * 32 * 2];
  int phase = 0;
  const int64_t nv = cols / VEC;
  const bool cached = nv <= (int64_t)ITEMS * blockDim.x;
  Vec<T, VEC> xv[ITEMS];
  const RowSlots<ITEMS, VEC> slots(nv, cached);
  const auto& col = slots.col;
  const auto& mine = slots.mine;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    T* yr = y + row * cols;
    float mx = -INFINITY, s = 0.f;
    if (cached) {
      slots.load(xv, xr);
      // this thread's max, then one exp per element
      float m = -INFINITY;
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
        if (mine[i])
#pragma unroll
          for (int k = 0; k < VEC; ++k) m = fmaxf(m, (float)xv[i].v[k]);
#pragma unroll
      for (int i = 0; i < ITEMS; ++i)
#pragma unroll
        for (int k = 0; k < VEC; ++k) s += mine[i] && m != -INFINITY ? __expf((float)xv[i].v[k] - m) : 0.f;
      mx = m;
      block_max_sum(mx, s, buf, phase);
      const float inv = 1.f / s, lse = mx + __logf(s);
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        if (!mine[i]) continue;
        Vec<T, VEC> o;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float f = (float)xv[i].v[k];
          o.v[k] = LOG ? (T)(f - lse) : (T)(__expf(f - mx) * inv);
        }
        store_vec<T, VEC>(yr + col[i], o);
      }
    } else {  // streamed: a running (max, rescaled sum) per thread, then the row read again
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
        auto v = load_vec<T, VEC>(xr + j * VEC);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float f = (float)v.v[k];
          if (f > mx) {
            s = (mx == -INFINITY ? 0.f : s * __expf(mx - f)) + 1.f;
            mx = f;
          } else {
            s += __expf(f - mx);
          }
        }
      }
      block_max_sum(mx, s, buf, phase);
      const float inv = 1.f / s, lse = mx + __logf(s);
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) {
        auto v = load_vec<T, VEC>(xr + j * VEC);
        Vec<T, VEC> o;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float f = (float)v.v[k];
          o.v[k] = LOG ? (T)(f - lse) : (T)(__expf(f - mx) * inv);
        }
        store_vec<T, VEC>(yr + j * VEC, o);
      }
    }
  }
}

// One row per block, no persistence (as norm.cu's norm_fwd_row_kernel): ITEMS vectors per
// thread in registers, small blocks, so several share an SM and one block's loads overlap
// another's reduction. Offsets within a row are 32-bit. FULL: every thread holds ITEMS vectors.
// One exp per element: each thread keeps e = exp(x - m) for its own max m, and the output is
// e * exp(m - row max) / row sum (one more exp per thread). log_softmax keeps x instead.
template <typename T, bool LOG, int ITEMS, bool FULL>
__global__ void __maxnreg__(ITEMS > 2 ? 64 : LOG ? 32 : 48) softmax_fwd_row_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                                        int cols) {
  using W = Words<T>;
  constexpr int N = W::N;
  constexpr float kLog2e = 1.4426950408889634f;
  __shared__ float buf[2 * 32 * 2];
  int phase = 0;
  const int nv = cols / N;
  const T* xr = x + (int64_t)blockIdx.x * cols;
  T* yr = y + (int64_t)blockIdx.x * cols;
  const RowItems<T, ITEMS> items(nv);
  W xv[ITEMS];
  items.template load<FULL>(xv, xr);
  // softmax: x as floats, then exp(x - m); log_softmax: x stays in words (2x fewer registers),
  // converted at each use
  float v[LOG ? 1 : ITEMS][N];
  auto xat = [&](int i, int k) { return items.template has<FULL>(i) ? xv[i].get(k) : -INFINITY; };
  if constexpr (!LOG)
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
#pragma unroll
      for (int k = 0; k < N; ++k) v[i][k] = xat(i, k);
  float mi[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    float p[N];
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = LOG ? xat(i, k) : v[i][k];
    mi[i] = tree_max(p);
  }
  const float m = tree_max(mi);
  // exp(x - m) = 2^(x log2e - m log2e), one FMA for 16-bit rows; fp32 rows subtract first (m
  // log2e's rounding would scale each thread's values differently, up to ~|m| 1e-7).
  const float m0 = m == -INFINITY ? 0.f : m, m2 = m0 * kLog2e;
  float part[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    float p[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float f = LOG ? xat(i, k) : v[i][k];
      p[k] = fast_exp2(sizeof(T) == 4 ? (f - m0) * kLog2e : fmaf(f, kLog2e, -m2));
      if constexpr (!LOG) v[i][k] = p[k];
    }
    part[i] = tree_sum(p);
  }
  float mx = m, s = tree_sum(part);
  block_max_sum(mx, s, buf, phase);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) xv[i].reload_barrier();
  const float lse = mx + __logf(s);
  const float scale = (m == -INFINITY ? 0.f : fast_exp2((m - mx) * kLog2e)) / s;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    if (!items.template has<FULL>(i)) continue;
    W o;
#pragma unroll
    for (int k = 0; k < N; k += 2)
      if constexpr (LOG) o.set_pair(k / 2, xv[i].get(k) - lse, xv[i].get(k + 1) - lse);
      else o.set_pair(k / 2, v[i][k] * scale, v[i][k + 1] * scale);
    o.store(yr + items.col[i]);
  }
}

// softmax:     dx = y * (g - sum(g * y))
// log_softmax: dx = g - exp(y) * sum(g)
template <typename T, int VEC, int ITEMS, bool LOG>
__global__ void __launch_bounds__(1024) softmax_bwd_kernel(const T* __restrict__ g, const T* __restrict__ y,
                                                          T* __restrict__ dx, int64_t rows, int64_t cols) {
  __shared__ float buf[2 * 32];
  int phase = 0;
  const int64_t nv = cols / VEC;
  // (row_shape picks 2 items only for rows that fit: the streamed path is compiled out there)
  const bool cached = ITEMS == 2 || nv <= (int64_t)ITEMS * blockDim.x;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* gr = g + row * cols;
    const T* yr = y + row * cols;
    T* dr = dx + row * cols;
    Vec<T, VEC> gv[ITEMS], yv[ITEMS];
    float s = 0.f;
    auto accum = [&](const Vec<T, VEC>& gq, const Vec<T, VEC>& yq) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) s += LOG ? (float)gq.v[k] : (float)gq.v[k] * (float)yq.v[k];
    };
    if (cached) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) {
          gv[i] = load_vec<T, VEC>(gr + j * VEC);
          yv[i] = load_vec<T, VEC>(yr + j * VEC);
          accum(gv[i], yv[i]);
        }
      }
    } else {
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x)
        accum(load_vec<T, VEC>(gr + j * VEC), load_vec<T, VEC>(yr + j * VEC));
    }
    s = block_sum1(s, buf, phase);
    auto emit = [&](int64_t j, const Vec<T, VEC>& gq, const Vec<T, VEC>& yq) {
      Vec<T, VEC> o;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float gk = (float)gq.v[k], yk = (float)yq.v[k];
        o.v[k] = LOG ? (T)(gk - __expf(yk) * s) : (T)(yk * (gk - s));
      }
      store_vec<T, VEC>(dr + j * VEC, o);
    };
    if (cached) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
        if (j < nv) emit(j, gv[i], yv[i]);
      }
    } else {
      for (int64_t j = threadIdx.x; j < nv; j += blockDim.x)
        emit(j, load_vec<T, VEC>(gr + j * VEC), load_vec<T, VEC>(yr + j * VEC));
    }
  }
}

// One row per block, as softmax_fwd_row_kernel: g and y in registers as words (ITEMS vectors
// each per thread), one block reduction, no persistence (several blocks share an SM, so one
// block's loads overlap another's reduction). H200, bf16: 98-103% of copy from 1k to 16k
// columns, where the persistent kernel below reached 73-94%.
template <typename T, bool LOG, int ITEMS, bool FULL>
__global__ void __maxnreg__(ITEMS > 2 ? 64 : LOG ? 40 : 48) softmax_bwd_row_kernel(const T* __restrict__ g, const T* __restrict__ y,
                                                              T* __restrict__ dx, int cols) {
  using W = Words<T>;
  constexpr int N = W::N;
  constexpr float kLog2e = 1.4426950408889634f;
  __shared__ float buf[2 * 32];
  int phase = 0;
  const int nv = cols / N;
  const int64_t offset = (int64_t)blockIdx.x * cols;
  const RowItems<T, ITEMS> items(nv);
  W gv[ITEMS], yv[ITEMS];
  items.template load<FULL>(gv, g + offset);
  items.template load<FULL>(yv, y + offset);
  // sum(g y) or sum(g): two chains per item (few live temporaries), then a tree
  float part[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    float c[2] = {0.f, 0.f};
    if (items.template has<FULL>(i))
#pragma unroll
      for (int k = 0; k < N; ++k) c[k & 1] = LOG ? c[k & 1] + gv[i].get(k) : fmaf(gv[i].get(k), yv[i].get(k), c[k & 1]);
    part[i] = c[0] + c[1];
  }
  const float s = block_sum1(tree_sum(part), buf, phase);
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) gv[i].reload_barrier(), yv[i].reload_barrier();
  T* dr = dx + offset;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    if (!items.template has<FULL>(i)) continue;
    W o;
#pragma unroll
    for (int k = 0; k < N; k += 2) {
      float r[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float gk = gv[i].get(k + h), yk = yv[i].get(k + h);
        r[h] = LOG ? gk - fast_exp2(yk * kLog2e) * s : yk * (gk - s);
      }
      o.set_pair(k / 2, r[0], r[1]);
    }
    o.store(dr + items.col[i]);
  }
}

// The one-row-per-block form of a row of nv vectors, forward and backward: 2 vectors per
// thread up to 1024 vectors a row, then 4 (H100 forward: 2 are faster up to 8k bf16 columns, 4
// at 16k, where 2 would need 1024-thread blocks; H200 backward: 4 throughout measured the same
// or 0.3-1.4 points lower). Calls launch(items, full, threads) with items and full (every
// thread holds `items` vectors) as compile-time constants.
template <typename Launch>
void with_row_form(int nv, Launch launch) {
  const int items = nv <= 1024 ? 2 : 4, threads = row_threads(nv, items);
  const bool full = nv == items * threads;
  using I2 = std::integral_constant<int, 2>;
  using I4 = std::integral_constant<int, 4>;
  if (items == 2) full ? launch(I2{}, std::true_type{}, threads) : launch(I2{}, std::false_type{}, threads);
  else full ? launch(I4{}, std::true_type{}, threads) : launch(I4{}, std::false_type{}, threads);
}

template <typename T>
int pick_vec(int64_t cols, std::initializer_list<const void*> ptrs) {
  constexpr int V = vec16<T>();
  if (cols % V != 0) return 1;
  for (auto p : ptrs)
    if (!aligned16(p)) return 1;
  return V;
}

int threads_for(int64_t nv, int items) {
  return std::min<int>(1024, std::max<int>(32, round_up((nv + items - 1) / items, 32)));
}

// Moves `dim` last and makes the rows contiguous.
at::Tensor rows_last(const at::Tensor& t, int64_t dim) {
  return (dim == t.dim() - 1 || t.dim() == 0) ? t.contiguous() : t.movedim(dim, -1).contiguous();
}

at::Tensor restore(const at::Tensor& t, int64_t dim, int64_t ndim) {
  return (dim == ndim - 1 || ndim == 0) ? t : t.movedim(-1, dim).contiguous();
}

template <bool LOG>
at::Tensor softmax_fwd(const char* op, const at::Tensor& x, int64_t dim) {
  check_cuda(op, "x", x);
  check_cuda_float(op, "x", x);
  int64_t d = wrap_dim(op, dim, x.dim());
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = rows_last(x, d);
  at::Tensor y = aten::empty_like(xc);
  int64_t cols = x.dim() == 0 ? 1 : xc.size(-1);
  int64_t rows = cols == 0 ? 0 : xc.numel() / cols;
  if (rows > 0) {
    auto stream = at::cuda::getCurrentCUDAStream();
    MYTORCH_DISPATCH_CUDA_FLOAT(x.scalar_type(), "mytorch_softmax_cuda", [&] {
      using T = scalar_t;
      const T* xp = xc.const_data_ptr<T>();
      T* yp = y.mutable_data_ptr<T>();
      constexpr int V = vec16<T>();
      const bool vec = pick_vec<T>(cols, {xp, yp}) > 1;
      if (vec && cols / V <= kRowMaxVecs && rows <= INT32_MAX) {
        with_row_form((int)(cols / V), [&](auto items, auto full, int threads) {
          softmax_fwd_row_kernel<T, LOG, items(), full()><<<(int)rows, threads, 0, stream>>>(xp, yp, (int)cols);
        });
        return;
      }
      // 4 vectors per thread at most (8 would spill); wider rows stream from memory
      auto kernel = vec ? softmax_fwd_kernel<T, V, 4, LOG> : softmax_fwd_kernel<T, 1, 8, LOG>;
      const int threads = vec ? row_shape(cols / V, 4, 1024).second : threads_for(cols, 8);
      kernel<<<(int)persistent_grid(kernel, threads, rows), threads, 0, stream>>>(xp, yp, rows, cols);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return restore(y, d, x.dim());
}

template <bool LOG>
at::Tensor softmax_bwd(const char* op, const at::Tensor& grad, const at::Tensor& out, int64_t dim) {
  check_cuda(op, "out", out);
  check_cuda_float(op, "out", out);
  check_same_shape(op, grad, "grad", out, "out");
  check_same_dtype(op, grad, "grad", out, "out");
  check_same_device(op, grad, "grad", out, "out");
  int64_t d = wrap_dim(op, dim, out.dim());
  c10::cuda::CUDAGuard guard(out.device());
  at::Tensor gc = rows_last(grad, d), yc = rows_last(out, d);
  at::Tensor dx = aten::empty_like(yc);
  int64_t cols = out.dim() == 0 ? 1 : yc.size(-1);
  int64_t rows = cols == 0 ? 0 : yc.numel() / cols;
  if (rows > 0) {
    auto stream = at::cuda::getCurrentCUDAStream();
    MYTORCH_DISPATCH_CUDA_FLOAT(out.scalar_type(), "mytorch_softmax_bwd_cuda", [&] {
      using T = scalar_t;
      const T* gp = gc.const_data_ptr<T>();
      const T* yp = yc.const_data_ptr<T>();
      T* dp = dx.mutable_data_ptr<T>();
      constexpr int V = vec16<T>();
      const bool vec = pick_vec<T>(cols, {gp, yp, dp}) > 1;
      if (vec && cols / V <= kRowMaxVecs && rows <= INT32_MAX) {
        with_row_form((int)(cols / V), [&](auto items, auto full, int threads) {
          softmax_bwd_row_kernel<T, LOG, items(), full()><<<(int)rows, threads, 0, stream>>>(gp, yp, dp, (int)cols);
        });
        return;
      }
      auto [items, threads] = row_shape(vec ? cols / V : cols, 4, 1024);
      auto kernel = !vec ? softmax_bwd_kernel<T, 1, 4, LOG>
                    : items == 2 ? softmax_bwd_kernel<T, V, 2, LOG>
                                 : softmax_bwd_kernel<T, V, 4, LOG>;
      if (!vec) threads = threads_for(cols, 4);
      kernel<<<(int)persistent_grid(kernel, threads, rows), threads, 0, stream>>>(gp, yp, dp, rows, cols);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return restore(dx, d, out.dim());
}

}  // namespace

at::Tensor softmax(const at::Tensor& x, int64_t dim) { return softmax_fwd<false>("mytorch::softmax", x, dim); }
at::Tensor log_softmax(const at::Tensor& x, int64_t dim) {
  return softmax_fwd<true>("mytorch::log_softmax", x, dim);
}
at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& out, int64_t dim) {
  return softmax_bwd<false>("mytorch::softmax_backward", grad, out, dim);
}
at::Tensor log_softmax_backward(const at::Tensor& grad, const at::Tensor& out, int64_t dim) {
  return softmax_bwd<true>("mytorch::log_softmax_backward", grad, out, dim);
}

}  // namespace cuda
}  // namespace mytorch
