// 2-D pooling kernels (OpenMP over planes). Window arithmetic and output sizes
// follow ATen's, so results match it exactly, including ceil_mode and padding.
#include "kernels/pool.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>

#include "kernels/cpu/isa.h"

// The kernels run the widest copy of this file the CPU has (kernels/cpu/isa/pool_*.cpp).
MYTORCH_ISA_DECLARE(max_pool2d)
MYTORCH_ISA_DECLARE(max_pool2d_backward)
MYTORCH_ISA_DECLARE(avg_pool2d)
MYTORCH_ISA_DECLARE(avg_pool2d_backward)
MYTORCH_ISA_DECLARE(adaptive_avg_pool2d)
MYTORCH_ISA_DECLARE(adaptive_avg_pool2d_backward)

namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kParallelGrain = 1 << 14;

using PoolShape = pool::Shape;

// ---- kernels: pointers and sizes only ----
template <typename T>
void max_pool_kernel(const T* x, T* y, int64_t* idx, const PoolShape& s) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for schedule(static) if (s.planes * s.OH * s.OW * s.kh * s.kw > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p) {
    const T* xp = x + p * s.H * s.W;
    T* yp = y + p * s.OH * s.OW;
    int64_t* ip = idx + p * s.OH * s.OW;
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      int64_t ih0 = oh * s.sh - s.ph;
      const int64_t ih1 = std::min(ih0 + (s.kh - 1) * s.dh + 1, s.H);
      while (ih0 < 0) ih0 += s.dh;
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        int64_t iw0 = ow * s.sw - s.pw;
        const int64_t iw1 = std::min(iw0 + (s.kw - 1) * s.dw + 1, s.W);
        while (iw0 < 0) iw0 += s.dw;
        int64_t best = ih0 * s.W + iw0;
        Acc m = -std::numeric_limits<Acc>::infinity();
        for (int64_t ih = ih0; ih < ih1; ih += s.dh) {
          for (int64_t iw = iw0; iw < iw1; iw += s.dw) {
            const Acc v = static_cast<Acc>(xp[ih * s.W + iw]);
            if (v > m || std::isnan(v)) {
              m = v;
              best = ih * s.W + iw;
            }
          }
        }
        yp[oh * s.OW + ow] = static_cast<T>(m);
        ip[oh * s.OW + ow] = best;
      }
    }
  }
}

// 2x2 windows, stride 2, no padding or dilation, every window inside the input (the usual CNN
// pool): max_pool_kernel's comparisons in the same order (the first of equal values wins, a
// NaN wins), without its general window bounds; parallel over output rows.
template <typename T>
void max_pool_2x2_kernel(const T* x, T* y, int64_t* idx, const PoolShape& s) {
  using Acc = at::opmath_type<T>;
  const int64_t rows = s.planes * s.OH;
#pragma omp parallel for schedule(static) if (rows * s.OW * 4 > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = 2 * (r % s.OH) * s.W;  // the window rows' offset in their plane
    const T* x0 = x + (r / s.OH) * s.H * s.W + base;
    const T* x1 = x0 + s.W;
    T* yr = y + r * s.OW;
    int64_t* ir = idx + r * s.OW;
    const int64_t W = s.W;
    // k: the winner's place in the window (0-3, row-major); selects, not branches (random data
    // mispredicts), so the loop vectorizes
#pragma omp simd
    for (int64_t ow = 0; ow < s.OW; ++ow) {
      const Acc a0 = static_cast<Acc>(x0[2 * ow]), a1 = static_cast<Acc>(x0[2 * ow + 1]);
      const Acc a2 = static_cast<Acc>(x1[2 * ow]), a3 = static_cast<Acc>(x1[2 * ow + 1]);
      Acc m = a0;
      int64_t k = 0;
      bool wins = (a1 > m) | (a1 != a1);
      m = wins ? a1 : m;
      k = wins ? 1 : k;
      wins = (a2 > m) | (a2 != a2);
      m = wins ? a2 : m;
      k = wins ? 2 : k;
      wins = (a3 > m) | (a3 != a3);
      m = wins ? a3 : m;
      k = wins ? 3 : k;
      yr[ow] = static_cast<T>(m);
      ir[ow] = base + (k >> 1) * W + 2 * ow + (k & 1);
    }
  }
}

// Returns false if an index falls outside its plane (nothing is written for it).
template <typename T>
bool max_pool_backward_kernel(const T* g, const int64_t* idx, T* gx, int64_t planes, int64_t in,
                              int64_t out) {
  using Acc = at::opmath_type<T>;
  std::atomic<bool> ok{true};
#pragma omp parallel for schedule(static) if (planes * (in + out) > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    T* xp = gx + p * in;
    for (int64_t i = 0; i < in; ++i) xp[i] = T(0);
    const T* gp = g + p * out;
    const int64_t* ip = idx + p * out;
    for (int64_t o = 0; o < out; ++o) {
      const int64_t k = ip[o];
      if (k < 0 || k >= in) {
        ok = false;
        continue;
      }
      xp[k] = static_cast<T>(static_cast<Acc>(xp[k]) + static_cast<Acc>(gp[o]));
    }
  }
  return ok;
}

// The window of output (oh, ow) clipped to the input, and its divisor (ATen's rule).
struct AvgWindow {
  int64_t h0, h1, w0, w1, div;
};
inline AvgWindow avg_window(const PoolShape& s, int64_t oh, int64_t ow, bool count_include_pad,
                            int64_t divisor_override) {
  int64_t h0 = oh * s.sh - s.ph, w0 = ow * s.sw - s.pw;
  int64_t h1 = std::min(h0 + s.kh, s.H + s.ph), w1 = std::min(w0 + s.kw, s.W + s.pw);
  const int64_t pool = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, s.H);
  w1 = std::min(w1, s.W);
  int64_t div = divisor_override ? divisor_override
                                 : (count_include_pad ? pool : (h1 - h0) * (w1 - w0));
  return {h0, h1, w0, w1, div};
}

template <typename T>
void avg_pool_kernel(const T* x, T* y, const PoolShape& s, bool count_include_pad, int64_t dov) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for schedule(static) if (s.planes * s.OH * s.OW * s.kh * s.kw > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p) {
    const T* xp = x + p * s.H * s.W;
    T* yp = y + p * s.OH * s.OW;
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        const AvgWindow a = avg_window(s, oh, ow, count_include_pad, dov);
        Acc sum = 0;
        for (int64_t ih = a.h0; ih < a.h1; ++ih)
          for (int64_t iw = a.w0; iw < a.w1; ++iw) sum += static_cast<Acc>(xp[ih * s.W + iw]);
        yp[oh * s.OW + ow] = static_cast<T>(a.div ? sum / Acc(a.div) : Acc(0));
      }
    }
  }
}

template <typename T>
void avg_pool_backward_kernel(const T* g, T* gx, const PoolShape& s, bool count_include_pad,
                              int64_t dov) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for schedule(static) if (s.planes * s.OH * s.OW * s.kh * s.kw > kParallelGrain)
  for (int64_t p = 0; p < s.planes; ++p) {
    T* xp = gx + p * s.H * s.W;
    for (int64_t i = 0; i < s.H * s.W; ++i) xp[i] = T(0);
    const T* gp = g + p * s.OH * s.OW;
    for (int64_t oh = 0; oh < s.OH; ++oh) {
      for (int64_t ow = 0; ow < s.OW; ++ow) {
        const AvgWindow a = avg_window(s, oh, ow, count_include_pad, dov);
        if (!a.div) continue;
        const Acc v = static_cast<Acc>(gp[oh * s.OW + ow]) / Acc(a.div);
        for (int64_t ih = a.h0; ih < a.h1; ++ih)
          for (int64_t iw = a.w0; iw < a.w1; ++iw)
            xp[ih * s.W + iw] = static_cast<T>(static_cast<Acc>(xp[ih * s.W + iw]) + v);
      }
    }
  }
}

inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

template <typename T>
void adaptive_avg_kernel(const T* x, T* y, int64_t planes, int64_t H, int64_t W, int64_t OH,
                         int64_t OW) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for schedule(static) if (planes * H * W > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * H * W;
    T* yp = y + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = adaptive_start(oh, H, OH), h1 = adaptive_end(oh, H, OH);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = adaptive_start(ow, W, OW), w1 = adaptive_end(ow, W, OW);
        Acc sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += static_cast<Acc>(xp[ih * W + iw]);
        yp[oh * OW + ow] = static_cast<T>(sum / Acc((h1 - h0) * (w1 - w0)));
      }
    }
  }
}

template <typename T>
void adaptive_avg_backward_kernel(const T* g, T* gx, int64_t planes, int64_t H, int64_t W,
                                  int64_t OH, int64_t OW) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for schedule(static) if (planes * H * W > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    T* xp = gx + p * H * W;
    for (int64_t i = 0; i < H * W; ++i) xp[i] = T(0);
    const T* gp = g + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = adaptive_start(oh, H, OH), h1 = adaptive_end(oh, H, OH);
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = adaptive_start(ow, W, OW), w1 = adaptive_end(ow, W, OW);
        const Acc v = static_cast<Acc>(gp[oh * OW + ow]) / Acc((h1 - h0) * (w1 - w0));
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw)
            xp[ih * W + iw] = static_cast<T>(static_cast<Acc>(xp[ih * W + iw]) + v);
      }
    }
  }
}

// ---- ATen glue ----
PoolShape pool_shape(const char* op, const at::Tensor& x, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                     at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  pool::check_input(op, x);
  return pool::shape(op, x, kernel_size, stride, padding, dilation, ceil_mode);
}

at::TensorOptions contiguous_like(const at::Tensor& x) {
  return x.options().memory_format(at::MemoryFormat::Contiguous);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> max_pool2d(const at::Tensor& x, at::IntArrayRef kernel_size,
                                              at::IntArrayRef stride, at::IntArrayRef padding,
                                              at::IntArrayRef dilation, bool ceil_mode) {
  MYTORCH_ISA_DISPATCH(max_pool2d, x, kernel_size, stride, padding, dilation, ceil_mode)
  const char* op = "mytorch::max_pool2d";
  PoolShape s = pool_shape(op, x, kernel_size, stride, padding, dilation, ceil_mode);
  at::Tensor xc = x.contiguous();
  auto size = pool::out_sizes(x, s.OH, s.OW);
  at::Tensor y = at::empty(size, contiguous_like(x));
  at::Tensor idx = at::empty(size, contiguous_like(x).dtype(at::kLong));
  if (y.numel() == 0) return {y, idx};
  const bool two_by_two = s.kh == 2 && s.kw == 2 && s.sh == 2 && s.sw == 2 && s.ph == 0 && s.pw == 0 &&
                          s.dh == 1 && s.dw == 1 && 2 * s.OH <= s.H && 2 * s.OW <= s.W;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_max_pool2d", [&] {
    auto kernel = two_by_two ? max_pool_2x2_kernel<scalar_t> : max_pool_kernel<scalar_t>;
    kernel(xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), idx.mutable_data_ptr<int64_t>(), s);
  });
  return {y, idx};
}

at::Tensor max_pool2d_backward(const at::Tensor& grad, const at::Tensor& x,
                               const at::Tensor& indices) {
  MYTORCH_ISA_DISPATCH(max_pool2d_backward, grad, x, indices)
  const char* op = "mytorch::max_pool2d_backward";
  pool::check_input(op, x);
  pool::check_max_backward(op, grad, x, indices);
  at::Tensor gc = grad.contiguous(), ic = indices.contiguous();
  at::Tensor gx = at::empty(x.sizes(), contiguous_like(x));
  const int64_t in = x.size(-1) * x.size(-2), out = indices.size(-1) * indices.size(-2);
  const int64_t planes = in ? x.numel() / in : 0;
  bool ok = true;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_max_pool2d_bwd", [&] {
    ok = max_pool_backward_kernel<scalar_t>(gc.const_data_ptr<scalar_t>(), ic.const_data_ptr<int64_t>(),
                                            gx.mutable_data_ptr<scalar_t>(), planes, in, out);
  });
  TORCH_CHECK_INDEX(ok, op, ": expected every index in [0, ", in,
                    ") (a position in its input plane), got one outside it");
  return gx;
}

at::Tensor avg_pool2d(const at::Tensor& x, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  MYTORCH_ISA_DISPATCH(avg_pool2d, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override)
  const char* op = "mytorch::avg_pool2d";
  PoolShape s = pool_shape(op, x, kernel_size, stride, padding, {1}, ceil_mode);
  pool::check_divisor(op, divisor_override);
  at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty(pool::out_sizes(x, s.OH, s.OW), contiguous_like(x));
  if (y.numel() == 0) return y;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_avg_pool2d", [&] {
    avg_pool_kernel<scalar_t>(xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), s,
                              count_include_pad, divisor_override.value_or(0));
  });
  return y;
}

at::Tensor avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& x,
                               at::IntArrayRef kernel_size, at::IntArrayRef stride,
                               at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                               std::optional<int64_t> divisor_override) {
  MYTORCH_ISA_DISPATCH(avg_pool2d_backward, grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                       divisor_override)
  const char* op = "mytorch::avg_pool2d_backward";
  PoolShape s = pool_shape(op, x, kernel_size, stride, padding, {1}, ceil_mode);
  pool::check_divisor(op, divisor_override);
  pool::check_grad(op, grad, x, pool::out_sizes(x, s.OH, s.OW));
  at::Tensor gc = grad.contiguous();
  at::Tensor gx = at::empty(x.sizes(), contiguous_like(x));
  if (gx.numel() == 0) return gx;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_avg_pool2d_bwd", [&] {
    avg_pool_backward_kernel<scalar_t>(gc.const_data_ptr<scalar_t>(), gx.mutable_data_ptr<scalar_t>(),
                                       s, count_include_pad, divisor_override.value_or(0));
  });
  return gx;
}

at::Tensor adaptive_avg_pool2d(const at::Tensor& x, at::IntArrayRef output_size) {
  MYTORCH_ISA_DISPATCH(adaptive_avg_pool2d, x, output_size)
  const char* op = "mytorch::adaptive_avg_pool2d";
  pool::check_input(op, x);
  auto os = int_pair(op, "output_size", output_size, 1);
  at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty(pool::out_sizes(x, os[0], os[1]), contiguous_like(x));
  if (y.numel() == 0) return y;
  const int64_t H = x.size(-2), W = x.size(-1);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_adaptive_avg_pool2d", [&] {
    adaptive_avg_kernel<scalar_t>(xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(),
                                  x.numel() / (H * W), H, W, os[0], os[1]);
  });
  return y;
}

at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& x) {
  MYTORCH_ISA_DISPATCH(adaptive_avg_pool2d_backward, grad, x)
  const char* op = "mytorch::adaptive_avg_pool2d_backward";
  pool::check_input(op, x);
  pool::check_adaptive_backward(op, grad, x);
  at::Tensor gc = grad.contiguous();
  at::Tensor gx = at::empty(x.sizes(), contiguous_like(x));
  if (gx.numel() == 0) return gx;
  const int64_t H = x.size(-2), W = x.size(-1);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_adaptive_avg_pool2d_bwd", [&] {
    adaptive_avg_backward_kernel<scalar_t>(gc.const_data_ptr<scalar_t>(),
                                           gx.mutable_data_ptr<scalar_t>(), x.numel() / (H * W), H,
                                           W, grad.size(-2), grad.size(-1));
  });
  return gx;
}

}  // namespace cpu
}  // namespace mytorch
