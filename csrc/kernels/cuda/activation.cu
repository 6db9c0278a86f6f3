// Activation kernels (CUDA): gelu, bias + GELU, SwiGLU. The checks are the family's
// (kernels/activation.h), shared with kernels/cpu/activation.cpp.
#include "kernels/activation.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mytorch {
namespace cuda {

template <typename T, typename Acc>
__global__ void gelu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, bool tanh_approx) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    Acc v = static_cast<Acc>(x[i]);
    Acc r;
    if (tanh_approx) {
      Acc inner = Acc(0.79788456080286535588) * (v + Acc(0.044715) * v * v * v);
      r = Acc(0.5) * v * (Acc(1) + tanh(inner));
    } else {
      r = Acc(0.5) * v * (Acc(1) + erf(v * Acc(0.70710678118654752440)));
    }
    y[i] = static_cast<T>(r);
  }
}

template <typename T, typename Acc>
__global__ void gelu_backward_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                     T* __restrict__ dx, int64_t n, bool tanh_approx) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    Acc v = static_cast<Acc>(x[i]);
    Acc d;
    if (tanh_approx) {
      Acc v2 = v * v;
      Acc t = tanh(Acc(0.79788456080286535588) * (v + Acc(0.044715) * v2 * v));
      Acc dinner = Acc(0.79788456080286535588) * (Acc(1) + Acc(3 * 0.044715) * v2);
      d = Acc(0.5) * (Acc(1) + t) + Acc(0.5) * v * (Acc(1) - t * t) * dinner;
    } else {
      Acc cdf = Acc(0.5) * (Acc(1) + erf(v * Acc(0.70710678118654752440)));
      Acc pdf = exp(Acc(-0.5) * v * v) * Acc(0.39894228040143267794);
      d = cdf + v * pdf;
    }
    dx[i] = static_cast<T>(static_cast<Acc>(g[i]) * d);
  }
}

using activation::check_grad_like;
using activation::parse_approximate;

at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) {
  const char* op = "mytorch::gelu";
  bool tanh_approx = parse_approximate(op, approximate);
  check_floating(op, "x", x);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous();
  at::Tensor y = aten::empty_like(xc);
  int64_t n = xc.numel();
  if (n == 0) return y;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_gelu_cuda", [&] {
    gelu_kernel<scalar_t, at::opmath_type<scalar_t>><<<blocks_for(n), kThreads, 0, stream>>>(
        xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), n, tanh_approx);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& x, c10::string_view approximate) {
  const char* op = "mytorch::gelu_backward";
  bool tanh_approx = parse_approximate(op, approximate);
  check_floating(op, "x", x);
  check_grad_like(op, grad, x, "x");
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor gc = grad.contiguous(), xc = x.contiguous();
  at::Tensor dx = aten::empty_like(xc);
  int64_t n = xc.numel();
  if (n == 0) return dx;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_gelu_bwd_cuda", [&] {
    gelu_backward_kernel<scalar_t, at::opmath_type<scalar_t>><<<blocks_for(n), kThreads, 0, stream>>>(
        gc.const_data_ptr<scalar_t>(), xc.const_data_ptr<scalar_t>(), dx.mutable_data_ptr<scalar_t>(),
        n, tanh_approx);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return dx;
}

}  // namespace cuda
}  // namespace mytorch

// ---- bias + GELU, SwiGLU ----
namespace mytorch {
namespace cuda {
namespace {

// exp: the fast approximation for 16-bit outputs, the accurate one for float32.
template <typename T>
__device__ __forceinline__ float exp_for(float v) {
  if constexpr (std::is_same<T, float>::value) return expf(v);
  else return __expf(v);
}

// a / b: IEEE for float32, the fast approximate division (2 ulp) for 16-bit outputs.
template <typename T>
__device__ __forceinline__ float div_for(float a, float b) {
  if constexpr (std::is_same<T, float>::value) return a / b;
  else return __fdividef(a, b);
}

// tanh GELU as 0.5 v (1 + tanh(u)) = v * sigmoid(2u): one exp, no cancellation.
template <typename T>
__device__ __forceinline__ float gelu_f(float v, bool tanh_approx) {
  if (tanh_approx) {
    const float two_u = 1.5957691216057308f * (v + 0.044715f * v * v * v);
    return div_for<T>(v, 1.f + exp_for<T>(-two_u));
  }
  return 0.5f * v * (1.f + erff(v * 0.70710678118654752440f));
}

// d/dv: with s = sigmoid(2u), 0.5 (1 + tanh u) = s and 0.5 (1 - tanh^2 u) = 2 s (1 - s).
template <typename T>
__device__ __forceinline__ float gelu_grad_f(float v, bool tanh_approx) {
  if (tanh_approx) {
    const float v2 = v * v;
    const float s = div_for<T>(1.f, 1.f + exp_for<T>(-1.5957691216057308f * (v + 0.044715f * v2 * v)));
    const float du = 0.79788456080286535588f * (1.f + 3.f * 0.044715f * v2);
    return s + 2.f * v * s * (1.f - s) * du;
  }
  float cdf = 0.5f * (1.f + erff(v * 0.70710678118654752440f));
  float pdf = __expf(-0.5f * v * v) * 0.39894228040143267794f;
  return cdf + v * pdf;
}

// Each thread handles kIlp vectors per step, all loads issued before any math, so more
// bytes are in flight per thread.
constexpr int kIlp = 2;

// Forward, rows of at least 32 vectors: grid (column tiles, row groups of R); each thread one
// column vector of R rows, its bias vector loaded once. Measured on H200 (bf16, % of
// copy): 93-101%, where a flat pass over the tensor (each vector's bias column by a 32-bit
// modulo) reached 68-77% and the same with the modulo replaced by a conditional subtract 74-84%.
template <typename T, int VEC, int R>
__global__ void bias_gelu_rows_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out,
                                      int64_t rows, int64_t row_vecs, bool tanh_approx) {
  const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= row_vecs) return;
  const Vec<T, VEC> bv = load_vec<T, VEC>(bias + c * VEC);
  const int64_t r0 = (int64_t)blockIdx.y * R;
  Vec<T, VEC> xv[R];
#pragma unroll
  for (int u = 0; u < R; ++u)
    if (r0 + u < rows) xv[u] = load_vec<T, VEC>(x + ((r0 + u) * row_vecs + c) * VEC);
#pragma unroll
  for (int u = 0; u < R; ++u) {
    if (r0 + u >= rows) break;
    Vec<T, VEC> o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) o.v[k] = (T)gelu_f<T>((float)xv[u].v[k] + (float)bv.v[k], tanh_approx);
    store_vec<T, VEC>(out + ((r0 + u) * row_vecs + c) * VEC, o);
  }
}

// Forward, narrow rows (and over 131070 rows): flat over the tensor as SwiGLU's kernel (one pass, ILP vectors per
// thread); each vector's bias by its column (32-bit modulo while the vector count fits).
template <typename T, int VEC, int ILP>
__global__ void bias_gelu_kernel(const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ out,
                                 int64_t nvec, int64_t row_vecs, bool tanh_approx) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  const bool narrow = nvec <= (int64_t)UINT32_MAX;
  auto column = [&](int64_t v) {
    return narrow ? (int64_t)((uint32_t)v % (uint32_t)row_vecs) * VEC : v % row_vecs * VEC;
  };
  auto gelu_vec = [&](const Vec<T, VEC>& xv, const Vec<T, VEC>& bv) {
    Vec<T, VEC> o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) o.v[k] = (T)gelu_f<T>((float)xv.v[k] + (float)bv.v[k], tanh_approx);
    return o;
  };
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  for (; i + (ILP - 1) * stride < nvec; i += ILP * stride) {
    Vec<T, VEC> xv[ILP], bv[ILP];
#pragma unroll
    for (int u = 0; u < ILP; ++u) {
      xv[u] = load_vec<T, VEC>(x + (i + u * stride) * VEC);
      bv[u] = load_vec<T, VEC>(bias + column(i + u * stride));
    }
#pragma unroll
    for (int u = 0; u < ILP; ++u) store_vec<T, VEC>(out + (i + u * stride) * VEC, gelu_vec(xv[u], bv[u]));
  }
  for (; i < nvec; i += stride)  // the tail
    store_vec<T, VEC>(out + i * VEC, gelu_vec(load_vec<T, VEC>(x + i * VEC), load_vec<T, VEC>(bias + column(i))));
}

// Backward. Grid (column tiles, row slabs); each thread owns one column vector, walks the
// rows of its slab and sums dx over them into an fp32 partial row (stage 1 of the bias
// gradient; column_sum is stage 2).
template <typename T, int VEC>
__global__ void bias_gelu_backward_kernel(const T* __restrict__ g, const T* __restrict__ x, const T* __restrict__ bias,
                                          T* __restrict__ dx, float* __restrict__ partial, int64_t rows, int64_t cols,
                                          int64_t rows_per_slab, bool tanh_approx) {
  const int64_t jv = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (jv * VEC >= cols) return;
  const int64_t c0 = jv * VEC;
  const int64_t r0 = blockIdx.y * rows_per_slab, r1 = min(rows, r0 + rows_per_slab);
  auto bv = load_vec<T, VEC>(bias + c0);
  float bf[VEC], acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    bf[k] = (float)bv.v[k];
    acc[k] = 0.f;
  }
  auto step = [&](const Vec<T, VEC>& xv, const Vec<T, VEC>& gv, int64_t off) {
    Vec<T, VEC> o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float d = (float)gv.v[k] * gelu_grad_f<T>((float)xv.v[k] + bf[k], tanh_approx);
      o.v[k] = (T)d;
      acc[k] += d;
    }
    store_vec<T, VEC>(dx + off, o);
  };
  // kRows rows per step, their loads issued before any math (more bytes in flight)
  constexpr int kRows = 2;
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) {
    Vec<T, VEC> xv[kRows], gv[kRows];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      xv[u] = load_vec<T, VEC>(x + (r + u) * cols + c0);
      gv[u] = load_vec<T, VEC>(g + (r + u) * cols + c0);
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u) step(xv[u], gv[u], (r + u) * cols + c0);
  }
  for (; r < r1; ++r) step(load_vec<T, VEC>(x + r * cols + c0), load_vec<T, VEC>(g + r * cols + c0), r * cols + c0);
#pragma unroll
  for (int k = 0; k < VEC; ++k) partial[blockIdx.y * cols + c0 + k] = acc[k];
}

template <typename T, int VEC, bool BWD>
__device__ __forceinline__ void swiglu_vec(const Vec<T, VEC>& av, const Vec<T, VEC>& bv, const Vec<T, VEC>* gv,
                                           Vec<T, VEC>& o, Vec<T, VEC>& o2) {
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    const float af = (float)av.v[k];
    const float sg = div_for<T>(1.f, 1.f + exp_for<T>(-af));
    if constexpr (BWD) {
      const float gf = (float)gv->v[k];
      o.v[k] = (T)(gf * (float)bv.v[k] * sg * (1.f + af * (1.f - sg)));  // da
      o2.v[k] = (T)(gf * af * sg);                                        // db
    } else {
      o.v[k] = (T)(af * sg * (float)bv.v[k]);
    }
  }
}

template <typename T, int VEC, bool BWD>
__global__ void swiglu_kernel(const T* __restrict__ g, const T* __restrict__ a, const T* __restrict__ b,
                              T* __restrict__ out, T* __restrict__ db, int64_t nvec) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  for (; i + (kIlp - 1) * stride < nvec; i += kIlp * stride) {
    Vec<T, VEC> av[kIlp], bv[kIlp], gv[BWD ? kIlp : 1], o[kIlp], o2[kIlp];
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      av[u] = load_vec<T, VEC>(a + (i + u * stride) * VEC);
      bv[u] = load_vec<T, VEC>(b + (i + u * stride) * VEC);
      if constexpr (BWD) gv[u] = load_vec<T, VEC>(g + (i + u * stride) * VEC);
    }
#pragma unroll
    for (int u = 0; u < kIlp; ++u) {
      swiglu_vec<T, VEC, BWD>(av[u], bv[u], BWD ? &gv[u] : nullptr, o[u], o2[u]);
      store_vec<T, VEC>(out + (i + u * stride) * VEC, o[u]);
      if constexpr (BWD) store_vec<T, VEC>(db + (i + u * stride) * VEC, o2[u]);
    }
  }
  for (; i < nvec; i += stride) {  // the tail
    Vec<T, VEC> gv, o, o2;
    if constexpr (BWD) gv = load_vec<T, VEC>(g + i * VEC);
    swiglu_vec<T, VEC, BWD>(load_vec<T, VEC>(a + i * VEC), load_vec<T, VEC>(b + i * VEC), &gv, o, o2);
    store_vec<T, VEC>(out + i * VEC, o);
    if constexpr (BWD) store_vec<T, VEC>(db + i * VEC, o2);
  }
}

template <typename T>
bool can_vec(int64_t n, std::initializer_list<const void*> ptrs) {
  if (n % vec16<T>() != 0) return false;
  for (auto p : ptrs)
    if (p && !aligned16(p)) return false;
  return true;
}

// g: null for the forward; dbias: the backward's bias gradient.
void launch_bias_gelu(const at::Tensor* g, const at::Tensor& x, const at::Tensor& bias, at::Tensor& out,
                      at::Tensor* dbias, bool tanh_approx) {
  int64_t cols = x.size(-1);
  int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  if (rows == 0 || cols == 0) {
    if (dbias) dbias->zero_();
    return;
  }
  auto stream = at::cuda::getCurrentCUDAStream();
  MYTORCH_DISPATCH_CUDA_FLOAT(x.scalar_type(), "mytorch_bias_gelu_cuda", [&] {
    using T = scalar_t;
    const T* gp = g ? g->const_data_ptr<T>() : nullptr;
    const T* xp = x.const_data_ptr<T>();
    const T* bp = bias.const_data_ptr<T>();
    T* op_ = out.mutable_data_ptr<T>();
    constexpr int V = vec16<T>();
    int vec = can_vec<T>(cols, {gp, xp, bp, op_}) ? V : 1;
    int64_t nv = cols / vec;
    if (!g) {
      constexpr int R = 2;  // rows per thread (4: the same at large sizes, 7 points lower at 4096x1024)
      if (nv >= 32 && (rows + R - 1) / R <= 65535) {  // (a row-group loop measured 8-10 points lower)
        const int threads = std::min<int>(256, round_up(nv, 32));
        dim3 grid((unsigned)((nv + threads - 1) / threads), (unsigned)((rows + R - 1) / R));
        auto kernel = vec > 1 ? bias_gelu_rows_kernel<T, V, R> : bias_gelu_rows_kernel<T, 1, R>;
        kernel<<<grid, threads, 0, stream>>>(xp, bp, op_, rows, nv, tanh_approx);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        return;
      }
      const int64_t nvec = rows * nv;
      auto kernel = vec > 1 ? bias_gelu_kernel<T, V, kIlp> : bias_gelu_kernel<T, 1, kIlp>;
      int blocks = (int)std::min<int64_t>((nvec + 256 * kIlp - 1) / (256 * kIlp), INT32_MAX);
      kernel<<<blocks, 256, 0, stream>>>(xp, bp, op_, nvec, nv, tanh_approx);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    int threads = std::min<int>(256, round_up(nv, 32));
    int64_t col_tiles = (nv + threads - 1) / threads;
    auto kernel = vec > 1 ? bias_gelu_backward_kernel<T, V> : bias_gelu_backward_kernel<T, 1>;
    // one full wave of resident blocks, each with a run of rows (a partial second wave
    // would leave most of the chip idle at the end)
    int per_sm = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
    int64_t want = (int64_t)std::max(per_sm, 1) * num_sms();
    int64_t slabs = std::min<int64_t>(rows, std::max<int64_t>(1, want / col_tiles));
    slabs = std::min<int64_t>(slabs, 65535);
    int64_t per = (rows + slabs - 1) / slabs;
    slabs = (rows + per - 1) / per;
    at::Tensor partial = aten::empty({slabs, cols}, x.options().dtype(at::kFloat));
    dim3 grid((unsigned)col_tiles, (unsigned)slabs);
    kernel<<<grid, threads, 0, stream>>>(gp, xp, bp, op_, partial.mutable_data_ptr<float>(), rows, cols, per,
                                         tanh_approx);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    column_sum(partial, *dbias);
  });
}

}  // namespace

at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias, c10::string_view approximate) {
  const char* op = "mytorch::bias_gelu";
  bool t = parse_approximate(op, approximate);
  check_cuda(op, "x", x);
  activation::check_bias_gelu(op, x, bias, check_cuda_float);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous(), bc = bias.contiguous();
  at::Tensor y = aten::empty_like(xc);
  launch_bias_gelu(nullptr, xc, bc, y, nullptr, t);
  return y;
}

std::tuple<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& grad, const at::Tensor& x,
                                                      const at::Tensor& bias, c10::string_view approximate) {
  const char* op = "mytorch::bias_gelu_backward";
  bool t = parse_approximate(op, approximate);
  check_cuda(op, "x", x);
  activation::check_bias_gelu(op, x, bias, check_cuda_float);
  check_grad_like(op, grad, x, "x");
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor gc = grad.contiguous(), xc = x.contiguous(), bc = bias.contiguous();
  at::Tensor dx = aten::empty_like(xc), db = aten::empty_like(bc);
  launch_bias_gelu(&gc, xc, bc, dx, &db, t);
  return {dx, db};
}

namespace {

template <bool BWD>
void launch_swiglu(const at::Tensor* g, const at::Tensor& a, const at::Tensor& b, at::Tensor& out, at::Tensor* db) {
  int64_t n = a.numel();
  if (n == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  MYTORCH_DISPATCH_CUDA_FLOAT(a.scalar_type(), "mytorch_swiglu_cuda", [&] {
    using T = scalar_t;
    const T* gp = g ? g->const_data_ptr<T>() : nullptr;
    const T* ap = a.const_data_ptr<T>();
    const T* bp = b.const_data_ptr<T>();
    T* op_ = out.mutable_data_ptr<T>();
    T* dbp = db ? db->mutable_data_ptr<T>() : nullptr;
    constexpr int V = vec16<T>();
    bool v = can_vec<T>(n, {gp, ap, bp, op_, dbp});
    int64_t nvec = v ? n / V : n;
    auto kernel = v ? swiglu_kernel<T, V, BWD> : swiglu_kernel<T, 1, BWD>;
    // kIlp vectors per thread, one pass over the tensor (measured on H100: faster than one
    // wave of resident blocks striding over it, which bias + GELU keeps for its column sums)
    int blocks = (int)std::min<int64_t>((nvec + 256 * kIlp - 1) / (256 * kIlp), INT32_MAX);
    kernel<<<blocks, 256, 0, stream>>>(gp, ap, bp, op_, dbp, nvec);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

at::Tensor swiglu(const at::Tensor& a, const at::Tensor& b) {
  const char* op = "mytorch::swiglu";
  check_cuda(op, "a", a);
  activation::check_swiglu(op, a, b, check_cuda_float);
  c10::cuda::CUDAGuard guard(a.device());
  at::Tensor ac = a.contiguous(), bc = b.contiguous();
  at::Tensor y = aten::empty_like(ac);
  launch_swiglu<false>(nullptr, ac, bc, y, nullptr);
  return y;
}

std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b) {
  const char* op = "mytorch::swiglu_backward";
  check_cuda(op, "a", a);
  activation::check_swiglu(op, a, b, check_cuda_float);
  check_grad_like(op, grad, a, "a");
  c10::cuda::CUDAGuard guard(a.device());
  at::Tensor gc = grad.contiguous(), ac = a.contiguous(), bc = b.contiguous();
  at::Tensor da = aten::empty_like(ac), db = aten::empty_like(bc);
  launch_swiglu<true>(&gc, ac, bc, da, &db);
  return {da, db};
}

}  // namespace cuda
}  // namespace mytorch
