// 2-D pooling (CUDA): max (with indices), average, adaptive average; forward and backward.
// Forward: one thread per output element. The average-pool backwards gather, one thread
// per input element, over the windows that cover it (no atomics); max_pool2d_backward
// scatters grad through the indices with atomic adds (windows may overlap). Window
// arithmetic, output sizes, NaN propagation and the indices format (flat position in the
// H x W plane) are those of kernels/cpu/pool.cpp; the checks are kernels/pool.h's.
#include <ATen/cuda/Atomic.cuh>

#include <array>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/pool.h"

namespace mytorch {
namespace cuda {
namespace {

using PoolShape = pool::Shape;

__device__ __forceinline__ int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// ---- kernels ----
template <typename T>
__global__ void max_pool_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t* __restrict__ idx,
                                PoolShape s, int64_t total) {
  using Acc = at::opmath_type<T>;
  MYTORCH_GRID_LOOP(int64_t, o, total) {
    const int64_t ow = o % s.OW, t = o / s.OW, oh = t % s.OH, p = t / s.OH;
    const T* xp = x + p * s.H * s.W;
    int64_t ih0 = oh * s.sh - s.ph;
    const int64_t ih1 = min(ih0 + (s.kh - 1) * s.dh + 1, s.H);
    while (ih0 < 0) ih0 += s.dh;
    int64_t iw0 = ow * s.sw - s.pw;
    const int64_t iw1 = min(iw0 + (s.kw - 1) * s.dw + 1, s.W);
    while (iw0 < 0) iw0 += s.dw;
    int64_t best = ih0 * s.W + iw0;
    Acc m = -std::numeric_limits<Acc>::infinity();
    for (int64_t ih = ih0; ih < ih1; ih += s.dh)
      for (int64_t iw = iw0; iw < iw1; iw += s.dw) {
        const Acc v = static_cast<Acc>(xp[ih * s.W + iw]);
        if (v > m || isnan(v)) {
          m = v;
          best = ih * s.W + iw;
        }
      }
    y[o] = static_cast<T>(m);
    idx[o] = best;
  }
}

// gx (zeroed) += grad at the indexed positions; an index outside its input plane asserts on
// the device (IndexCheck).
template <typename T>
__global__ void max_pool_backward_kernel(const T* __restrict__ g, const int64_t* __restrict__ idx,
                                         T* __restrict__ gx, IndexCheck check, int64_t in, int64_t out,
                                         int64_t total) {
  MYTORCH_GRID_LOOP(int64_t, o, total) {
    const int64_t k = idx[o];
    if (!check.ok(k, in)) continue;
    gpuAtomicAdd(gx + (o / out) * in + k, g[o]);
  }
}

// The window of output (oh, ow) clipped to the input, and its divisor (ATen's rule).
struct AvgWindow {
  int64_t h0, h1, w0, w1, div;
};
__device__ __forceinline__ AvgWindow avg_window(const PoolShape& s, int64_t oh, int64_t ow,
                                                bool count_include_pad, int64_t divisor_override) {
  int64_t h0 = oh * s.sh - s.ph, w0 = ow * s.sw - s.pw;
  int64_t h1 = min(h0 + s.kh, s.H + s.ph), w1 = min(w0 + s.kw, s.W + s.pw);
  const int64_t pool = (h1 - h0) * (w1 - w0);
  h0 = max(h0, int64_t(0));
  w0 = max(w0, int64_t(0));
  h1 = min(h1, s.H);
  w1 = min(w1, s.W);
  const int64_t div = divisor_override ? divisor_override
                                       : (count_include_pad ? pool : (h1 - h0) * (w1 - w0));
  return {h0, h1, w0, w1, div};
}

template <typename T>
__global__ void avg_pool_kernel(const T* __restrict__ x, T* __restrict__ y, PoolShape s, bool cip,
                                int64_t dov, int64_t total) {
  using Acc = at::opmath_type<T>;
  MYTORCH_GRID_LOOP(int64_t, o, total) {
    const int64_t ow = o % s.OW, t = o / s.OW, oh = t % s.OH, p = t / s.OH;
    const T* xp = x + p * s.H * s.W;
    const AvgWindow a = avg_window(s, oh, ow, cip, dov);
    Acc sum = 0;
    for (int64_t ih = a.h0; ih < a.h1; ++ih)
      for (int64_t iw = a.w0; iw < a.w1; ++iw) sum += static_cast<Acc>(xp[ih * s.W + iw]);
    y[o] = static_cast<T>(a.div ? div_rn(sum, static_cast<Acc>(a.div)) : Acc(0));
  }
}

// gx[p, ih, iw] = sum over the windows (oh, ow) covering it of grad / divisor.
template <typename T>
__global__ void avg_pool_backward_kernel(const T* __restrict__ g, T* __restrict__ gx, PoolShape s,
                                         bool cip, int64_t dov, int64_t total) {
  using Acc = at::opmath_type<T>;
  MYTORCH_GRID_LOOP(int64_t, i, total) {
    const int64_t iw = i % s.W, t = i / s.W, ih = t % s.H, p = t / s.H;
    const T* gp = g + p * s.OH * s.OW;
    // windows start at o*s - pad and span k: the ones holding ih
    const int64_t oh0 = max(floor_div(ih + s.ph - s.kh, s.sh) + 1, int64_t(0));
    const int64_t oh1 = min((ih + s.ph) / s.sh + 1, s.OH);
    const int64_t ow0 = max(floor_div(iw + s.pw - s.kw, s.sw) + 1, int64_t(0));
    const int64_t ow1 = min((iw + s.pw) / s.sw + 1, s.OW);
    Acc acc = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const AvgWindow a = avg_window(s, oh, ow, cip, dov);
        if (!a.div || ih < a.h0 || ih >= a.h1 || iw < a.w0 || iw >= a.w1) continue;
        acc += div_rn(static_cast<Acc>(gp[oh * s.OW + ow]), static_cast<Acc>(a.div));
      }
    gx[i] = static_cast<T>(acc);
  }
}

__device__ __forceinline__ int64_t adaptive_start(int64_t o, int64_t in, int64_t out) {
  return (o * in) / out;
}
__device__ __forceinline__ int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

template <typename T>
__global__ void adaptive_avg_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t H, int64_t W,
                                    int64_t OH, int64_t OW, int64_t total) {
  using Acc = at::opmath_type<T>;
  MYTORCH_GRID_LOOP(int64_t, o, total) {
    const int64_t ow = o % OW, t = o / OW, oh = t % OH, p = t / OH;
    const T* xp = x + p * H * W;
    const int64_t h0 = adaptive_start(oh, H, OH), h1 = adaptive_end(oh, H, OH);
    const int64_t w0 = adaptive_start(ow, W, OW), w1 = adaptive_end(ow, W, OW);
    Acc sum = 0;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) sum += static_cast<Acc>(xp[ih * W + iw]);
    y[o] = static_cast<T>(div_rn(sum, static_cast<Acc>((h1 - h0) * (w1 - w0))));
  }
}

template <typename T>
__global__ void adaptive_avg_backward_kernel(const T* __restrict__ g, T* __restrict__ gx, int64_t H,
                                             int64_t W, int64_t OH, int64_t OW, int64_t total) {
  using Acc = at::opmath_type<T>;
  MYTORCH_GRID_LOOP(int64_t, i, total) {
    const int64_t iw = i % W, t = i / W, ih = t % H, p = t / H;
    const T* gp = g + p * OH * OW;
    // outputs whose [start, end) holds ih: [floor(ih*OH/H), ceil((ih+1)*OH/H))
    const int64_t oh0 = (ih * OH) / H, oh1 = min(((ih + 1) * OH + H - 1) / H, OH);
    const int64_t ow0 = (iw * OW) / W, ow1 = min(((iw + 1) * OW + W - 1) / W, OW);
    Acc acc = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh) {
      const int64_t h0 = adaptive_start(oh, H, OH), h1 = adaptive_end(oh, H, OH);
      if (ih < h0 || ih >= h1) continue;
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const int64_t w0 = adaptive_start(ow, W, OW), w1 = adaptive_end(ow, W, OW);
        if (iw < w0 || iw >= w1) continue;
        acc += div_rn(static_cast<Acc>(gp[oh * OW + ow]), static_cast<Acc>((h1 - h0) * (w1 - w0)));
      }
    }
    gx[i] = static_cast<T>(acc);
  }
}

// ---- ATen glue ----
void check_input(const char* op, const at::Tensor& x) {
  pool::check_input(op, x);
  check_cuda(op, "x", x);
}

PoolShape pool_shape(const char* op, const at::Tensor& x, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  check_input(op, x);
  return pool::shape(op, x, kernel_size, stride, padding, dilation, ceil_mode);
}

#define MYTORCH_POOL_DISPATCH(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, TYPE, NAME, __VA_ARGS__)

}  // namespace

std::tuple<at::Tensor, at::Tensor> max_pool2d(const at::Tensor& x, at::IntArrayRef kernel_size,
                                              at::IntArrayRef stride, at::IntArrayRef padding,
                                              at::IntArrayRef dilation, bool ceil_mode) {
  const char* op = "mytorch::max_pool2d";
  PoolShape s = pool_shape(op, x, kernel_size, stride, padding, dilation, ceil_mode);
  c10::cuda::CUDAGuard guard(x.device());
  auto size = pool::out_sizes(x, s.OH, s.OW);
  at::Tensor y = aten::empty(size, contiguous_options(x));
  at::Tensor idx = aten::empty(size, contiguous_options(x).dtype(at::kLong));
  if (y.numel() == 0) return {y, idx};
  at::Tensor xc = x.contiguous();
  const int64_t total = y.numel();
  MYTORCH_POOL_DISPATCH(x.scalar_type(), "mytorch_max_pool2d_cuda", [&] {
    launch_grid(max_pool_kernel<scalar_t>, total, xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(),
        idx.mutable_data_ptr<int64_t>(), s, total);
  });
  return {y, idx};
}

at::Tensor max_pool2d_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& indices) {
  const char* op = "mytorch::max_pool2d_backward";
  check_input(op, x);
  pool::check_max_backward(op, grad, x, indices);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor gx = aten::empty(x.sizes(), contiguous_options(x));
  zero_fill(gx);
  const int64_t in = x.size(-1) * x.size(-2), out = indices.size(-1) * indices.size(-2);
  const int64_t total = indices.numel();
  if (total == 0) return gx;
  at::Tensor gc = grad.contiguous(), ic = indices.contiguous();
  MYTORCH_POOL_DISPATCH(x.scalar_type(), "mytorch_max_pool2d_bwd_cuda", [&] {
    launch_grid(max_pool_backward_kernel<scalar_t>, total, gc.const_data_ptr<scalar_t>(), ic.const_data_ptr<int64_t>(),
        gx.mutable_data_ptr<scalar_t>(), IndexCheck(op, "index"), in, out, total);
  });
  return gx;
}

at::Tensor avg_pool2d(const at::Tensor& x, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  const char* op = "mytorch::avg_pool2d";
  PoolShape s = pool_shape(op, x, kernel_size, stride, padding, {1}, ceil_mode);
  pool::check_divisor(op, divisor_override);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = aten::empty(pool::out_sizes(x, s.OH, s.OW), contiguous_options(x));
  if (y.numel() == 0) return y;
  at::Tensor xc = x.contiguous();
  const int64_t total = y.numel();
  MYTORCH_POOL_DISPATCH(x.scalar_type(), "mytorch_avg_pool2d_cuda", [&] {
    launch_grid(avg_pool_kernel<scalar_t>, total, xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), s,
        count_include_pad, divisor_override.value_or(0), total);
  });
  return y;
}

at::Tensor avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& x, at::IntArrayRef kernel_size,
                               at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override) {
  const char* op = "mytorch::avg_pool2d_backward";
  PoolShape s = pool_shape(op, x, kernel_size, stride, padding, {1}, ceil_mode);
  pool::check_divisor(op, divisor_override);
  pool::check_grad(op, grad, x, pool::out_sizes(x, s.OH, s.OW));
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor gx = aten::empty(x.sizes(), contiguous_options(x));
  if (gx.numel() == 0) return gx;
  at::Tensor gc = grad.contiguous();
  const int64_t total = gx.numel();
  MYTORCH_POOL_DISPATCH(x.scalar_type(), "mytorch_avg_pool2d_bwd_cuda", [&] {
    launch_grid(avg_pool_backward_kernel<scalar_t>, total, gc.const_data_ptr<scalar_t>(),
        gx.mutable_data_ptr<scalar_t>(), s, count_include_pad, divisor_override.value_or(0), total);
  });
  return gx;
}

at::Tensor adaptive_avg_pool2d(const at::Tensor& x, at::IntArrayRef output_size) {
  const char* op = "mytorch::adaptive_avg_pool2d";
  check_input(op, x);
  auto os = int_pair(op, "output_size", output_size, 1);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = aten::empty(pool::out_sizes(x, os[0], os[1]), contiguous_options(x));
  if (y.numel() == 0) return y;
  at::Tensor xc = x.contiguous();
  const int64_t total = y.numel();
  MYTORCH_POOL_DISPATCH(x.scalar_type(), "mytorch_adaptive_avg_pool2d_cuda", [&] {
    launch_grid(adaptive_avg_kernel<scalar_t>, total, xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(),
        x.size(-2), x.size(-1), os[0], os[1], total);
  });
  return y;
}

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& x) {
  const char* op = "mytorch::adaptive_avg_pool2d_backward";
  check_input(op, x);
  pool::check_adaptive_backward(op, grad, x);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor gx = aten::empty(x.sizes(), contiguous_options(x));
  if (gx.numel() == 0) return gx;
  at::Tensor gc = grad.contiguous();
  const int64_t total = gx.numel();
  MYTORCH_POOL_DISPATCH(x.scalar_type(), "mytorch_adaptive_avg_pool2d_bwd_cuda", [&] {
    launch_grid(adaptive_avg_backward_kernel<scalar_t>, total, gc.const_data_ptr<scalar_t>(),
        gx.mutable_data_ptr<scalar_t>(), x.size(-2), x.size(-1), grad.size(-2), grad.size(-1), total);
  });
  return gx;
}

}  // namespace cuda
}  // namespace mytorch
