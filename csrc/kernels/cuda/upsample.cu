// 2-D upsampling (CUDA): nearest and bilinear, forward and backward, (N, C, H, W).
// A small kernel builds the per-axis source tables (index and weights) with ATen's
// rules, in IEEE arithmetic so they equal the CPU kernel's (kernels/cpu/upsample.cpp; the
// checks and scales are kernels/upsample.h's). Forward: one thread per output element. Backward:
// the source index is monotone in the output position, so the outputs reading an input
// row/column form one range (found by binary search); one thread per input element
// gathers over them (no atomics).
#include <array>
#include <limits>
#include <optional>

#include "kernels/cuda/common.cuh"
#include "kernels/upsample.h"

namespace mytorch {
namespace cuda {
namespace {

using upsample::linear_scale;
using upsample::scale_value;

// Per-axis table: entry t < out_h is row t, the rest column t - out_h.
struct Axes {
  int64_t in_h, out_h, in_w, out_w;
};

__device__ __forceinline__ float floor_of(float v) { return floorf(v); }
__device__ __forceinline__ double floor_of(double v) { return ::floor(v); }

// ---- tables ----
__global__ void nearest_table_kernel(int64_t* __restrict__ idx, Axes ax, float sc_h, float sc_w) {
  MYTORCH_GRID_LOOP(int64_t, t, ax.out_h + ax.out_w) {
    const bool row = t < ax.out_h;
    const int64_t o = row ? t : t - ax.out_h, in = row ? ax.in_h : ax.in_w, out = row ? ax.out_h : ax.out_w;
    const float sc = row ? sc_h : sc_w;
    int64_t i;
    if (out == in) i = o;
    else if (out == 2 * in) i = o >> 1;
    else i = min(static_cast<int64_t>(floorf(mul_rn(static_cast<float>(o), sc))), in - 1);
    idx[t] = i;
  }
}

// i0 and the weights l0 = 1 - lam (on i0), l1 = lam (on i0 + 1, clamped to the edge).
template <typename A>
__global__ void linear_table_kernel(int64_t* __restrict__ i0, A* __restrict__ l0, A* __restrict__ l1,
                                    Axes ax, A sc_h, A sc_w, bool align_corners) {
  MYTORCH_GRID_LOOP(int64_t, t, ax.out_h + ax.out_w) {
    const bool row = t < ax.out_h;
    const int64_t o = row ? t : t - ax.out_h, in = row ? ax.in_h : ax.in_w;
    const A sc = row ? sc_h : sc_w;
    A real;
    if (align_corners) {
      real = mul_rn(sc, static_cast<A>(o));
    } else {
      real = add_rn(mul_rn(sc, add_rn(static_cast<A>(o), A(0.5))), A(-0.5));
      real = real < A(0) ? A(0) : real;  // std::max(real, 0)
    }
    const int64_t i = min(static_cast<int64_t>(floor_of(real)), in - 1);
    A lam = add_rn(real, -static_cast<A>(i));
    lam = lam < A(0) ? A(0) : lam;
    lam = A(1) < lam ? A(1) : lam;
    i0[t] = i;
    l1[t] = lam;
    l0[t] = A(1) - lam;
  }
}

__device__ __forceinline__ int64_t lower_bound(const int64_t* a, int64_t n, int64_t v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = (lo + hi) >> 1;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// For input row/column i: the outputs [lo, hi) whose taps may read it (i0 == i, or
// i0 == i - 1 for bilinear's second tap). Entry t < in_h is row t, the rest columns.
__global__ void input_range_kernel(const int64_t* __restrict__ i0, int64_t* __restrict__ lo,
                                   int64_t* __restrict__ hi, Axes ax, bool bilinear) {
  MYTORCH_GRID_LOOP(int64_t, t, ax.in_h + ax.in_w) {
    const bool row = t < ax.in_h;
    const int64_t i = row ? t : t - ax.in_h, n = row ? ax.out_h : ax.out_w;
    const int64_t* tab = row ? i0 : i0 + ax.out_h;
    lo[t] = lower_bound(tab, n, bilinear && i > 0 ? i - 1 : i);
    hi[t] = lower_bound(tab, n, i + 1);
  }
}

// ---- forward / backward ----
template <typename T>
__global__ void nearest_kernel(const T* __restrict__ x, T* __restrict__ y, const int64_t* __restrict__ idx,
                               Axes ax, int64_t total) {
  MYTORCH_GRID_LOOP(int64_t, o, total) {
    const int64_t ow = o % ax.out_w, t = o / ax.out_w, oh = t % ax.out_h, p = t / ax.out_h;
    y[o] = x[(p * ax.in_h + idx[oh]) * ax.in_w + idx[ax.out_h + ow]];
  }
}

template <typename T>
__global__ void nearest_backward_kernel(const T* __restrict__ g, T* __restrict__ gx,
                                        const int64_t* __restrict__ lo, const int64_t* __restrict__ hi,
                                        Axes ax, int64_t total) {
  using Acc = at::opmath_type<T>;
  MYTORCH_GRID_LOOP(int64_t, i, total) {
    const int64_t iw = i % ax.in_w, t = i / ax.in_w, ih = t % ax.in_h, p = t / ax.in_h;
    const T* gp = g + p * ax.out_h * ax.out_w;
    const int64_t w0 = lo[ax.in_h + iw], w1 = hi[ax.in_h + iw];
    Acc acc = 0;
    for (int64_t oh = lo[ih]; oh < hi[ih]; ++oh)
      for (int64_t ow = w0; ow < w1; ++ow) acc += static_cast<Acc>(gp[oh * ax.out_w + ow]);
    gx[i] = static_cast<T>(acc);
  }
}

template <typename T, typename A>
__global__ void bilinear_kernel(const T* __restrict__ x, T* __restrict__ y, const int64_t* __restrict__ i0,
                                const A* __restrict__ l0, const A* __restrict__ l1, Axes ax, int64_t total) {
  MYTORCH_GRID_LOOP(int64_t, o, total) {
    const int64_t ow = o % ax.out_w, t = o / ax.out_w, oh = t % ax.out_h, p = t / ax.out_h;
    const T* xp = x + p * ax.in_h * ax.in_w;
    const int64_t ha = i0[oh], hb = ha + (ha < ax.in_h - 1 ? 1 : 0);
    const int64_t c = ax.out_h + ow, a = i0[c], b = a + (a < ax.in_w - 1 ? 1 : 0);
    const T* r0 = xp + ha * ax.in_w;
    const T* r1 = xp + hb * ax.in_w;
    const A h0 = l0[oh], h1 = l1[oh], w0 = l0[c], w1 = l1[c];
    y[o] = static_cast<T>(h0 * (w0 * static_cast<A>(r0[a]) + w1 * static_cast<A>(r0[b])) +
                          h1 * (w0 * static_cast<A>(r1[a]) + w1 * static_cast<A>(r1[b])));
  }
}

// The weight of input i in output entry t's taps (both taps when they coincide at the edge).
template <typename A>
__device__ __forceinline__ A tap_weight(const int64_t* i0, const A* l0, const A* l1, int64_t t,
                                        int64_t i, int64_t in) {
  const int64_t a = i0[t], b = a + (a < in - 1 ? 1 : 0);
  return (a == i ? l0[t] : A(0)) + (b == i ? l1[t] : A(0));
}

template <typename T, typename A>
__global__ void bilinear_backward_kernel(const T* __restrict__ g, T* __restrict__ gx,
                                         const int64_t* __restrict__ i0, const A* __restrict__ l0,
                                         const A* __restrict__ l1, const int64_t* __restrict__ lo,
                                         const int64_t* __restrict__ hi, Axes ax, int64_t total) {
  MYTORCH_GRID_LOOP(int64_t, i, total) {
    const int64_t iw = i % ax.in_w, t = i / ax.in_w, ih = t % ax.in_h, p = t / ax.in_h;
    const T* gp = g + p * ax.out_h * ax.out_w;
    const int64_t w0 = lo[ax.in_h + iw], w1 = hi[ax.in_h + iw];
    A acc = 0;
    for (int64_t oh = lo[ih]; oh < hi[ih]; ++oh) {
      const A wh = tap_weight(i0, l0, l1, oh, ih, ax.in_h);
      for (int64_t ow = w0; ow < w1; ++ow) {
        const A ww = tap_weight(i0, l0, l1, ax.out_h + ow, iw, ax.in_w);
        acc += wh * ww * static_cast<A>(gp[oh * ax.out_w + ow]);
      }
    }
    gx[i] = static_cast<T>(acc);
  }
}

// ---- ATen glue ----
// The checked geometry as the kernels' axes (input and output sizes of rows and columns).
Axes forward_axes(const char* op, const at::Tensor& x, at::IntArrayRef output_size) {
  const upsample::Planes p = upsample::check_forward(op, x, output_size);
  check_cuda(op, "x", x);
  return {p.H, p.OH, p.W, p.OW};
}
Axes backward_axes(const char* op, const at::Tensor& grad, at::IntArrayRef input_size) {
  const upsample::Planes p = upsample::check_backward(op, grad, input_size);
  check_cuda(op, "grad", grad);
  return {p.H, p.OH, p.W, p.OW};
}

#define MYTORCH_UPSAMPLE_DISPATCH(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, TYPE, NAME, __VA_ARGS__)

// Source indices per axis (nearest): out_h + out_w entries.
at::Tensor nearest_table(const at::Tensor& like, const Axes& ax, std::optional<double> scale_h,
                         std::optional<double> scale_w) {
  at::Tensor idx = aten::empty({ax.out_h + ax.out_w}, like.options().dtype(at::kLong));
  launch_grid(nearest_table_kernel, idx.numel(), idx.mutable_data_ptr<int64_t>(), ax,
      scale_value<float>(scale_h, ax.in_h, ax.out_h), scale_value<float>(scale_w, ax.in_w, ax.out_w));
  return idx;
}

// Output ranges per input row/column: (lo, hi), in_h + in_w entries each.
std::array<at::Tensor, 2> input_ranges(const at::Tensor& i0, const Axes& ax, bool bilinear) {
  at::Tensor lo = aten::empty({ax.in_h + ax.in_w}, i0.options()), hi = aten::empty_like(lo);
  launch_grid(input_range_kernel, lo.numel(), i0.const_data_ptr<int64_t>(), lo.mutable_data_ptr<int64_t>(),
      hi.mutable_data_ptr<int64_t>(), ax, bilinear);
  return {lo, hi};
}

// Bilinear taps per axis: i0 (int64) and the weights (l0, l1) in the op-math dtype A.
template <typename A>
std::array<at::Tensor, 3> linear_tables(const at::Tensor& like, const Axes& ax, bool align_corners,
                                        std::optional<double> scale_h, std::optional<double> scale_w) {
  const int64_t n = ax.out_h + ax.out_w;
  at::Tensor i0 = aten::empty({n}, like.options().dtype(at::kLong));
  at::Tensor l0 = aten::empty({n}, like.options().dtype(c10::CppTypeToScalarType<A>::value));
  at::Tensor l1 = aten::empty_like(l0);
  launch_grid(linear_table_kernel<A>, n, i0.mutable_data_ptr<int64_t>(), l0.mutable_data_ptr<A>(),
      l1.mutable_data_ptr<A>(), ax, linear_scale<A>(align_corners, scale_h, ax.in_h, ax.out_h),
      linear_scale<A>(align_corners, scale_w, ax.in_w, ax.out_w), align_corners);
  return {i0, l0, l1};
}

}  // namespace

at::Tensor upsample_nearest2d(const at::Tensor& x, at::IntArrayRef output_size,
                              std::optional<double> scale_h, std::optional<double> scale_w) {
  const Axes ax = forward_axes("mytorch::upsample_nearest2d", x, output_size);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = aten::empty({x.size(0), x.size(1), ax.out_h, ax.out_w}, contiguous_options(x));
  if (y.numel() == 0) return y;
  at::Tensor xc = x.contiguous(), idx = nearest_table(x, ax, scale_h, scale_w);
  const int64_t total = y.numel();
  MYTORCH_UPSAMPLE_DISPATCH(x.scalar_type(), "mytorch_upsample_nearest_cuda", [&] {
    launch_grid(nearest_kernel<scalar_t>, total, xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(),
        idx.const_data_ptr<int64_t>(), ax, total);
  });
  return y;
}

at::Tensor upsample_nearest2d_backward(const at::Tensor& grad, at::IntArrayRef input_size,
                                       std::optional<double> scale_h, std::optional<double> scale_w) {
  const Axes ax = backward_axes("mytorch::upsample_nearest2d_backward", grad, input_size);
  c10::cuda::CUDAGuard guard(grad.device());
  at::Tensor gx = aten::empty(input_size, contiguous_options(grad));
  if (gx.numel() == 0) return gx;
  at::Tensor gc = grad.contiguous(), idx = nearest_table(grad, ax, scale_h, scale_w);
  auto range = input_ranges(idx, ax, false);
  const int64_t total = gx.numel();
  MYTORCH_UPSAMPLE_DISPATCH(grad.scalar_type(), "mytorch_upsample_nearest_bwd_cuda", [&] {
    launch_grid(nearest_backward_kernel<scalar_t>, total, gc.const_data_ptr<scalar_t>(),
        gx.mutable_data_ptr<scalar_t>(), range[0].const_data_ptr<int64_t>(), range[1].const_data_ptr<int64_t>(), ax,
        total);
  });
  return gx;
}

at::Tensor upsample_bilinear2d(const at::Tensor& x, at::IntArrayRef output_size, bool align_corners,
                               std::optional<double> scale_h, std::optional<double> scale_w) {
  const Axes ax = forward_axes("mytorch::upsample_bilinear2d", x, output_size);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = aten::empty({x.size(0), x.size(1), ax.out_h, ax.out_w}, contiguous_options(x));
  if (y.numel() == 0) return y;
  at::Tensor xc = x.contiguous();
  const int64_t total = y.numel();
  MYTORCH_UPSAMPLE_DISPATCH(x.scalar_type(), "mytorch_upsample_bilinear_cuda", [&] {
    using A = at::opmath_type<scalar_t>;
    auto tab = linear_tables<A>(x, ax, align_corners, scale_h, scale_w);
    launch_grid(bilinear_kernel<scalar_t, A>, total, xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(),
        tab[0].const_data_ptr<int64_t>(), tab[1].const_data_ptr<A>(), tab[2].const_data_ptr<A>(), ax, total);
  });
  return y;
}

at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad, at::IntArrayRef input_size,
                                        bool align_corners, std::optional<double> scale_h,
                                        std::optional<double> scale_w) {
  const Axes ax = backward_axes("mytorch::upsample_bilinear2d_backward", grad, input_size);
  c10::cuda::CUDAGuard guard(grad.device());
  at::Tensor gx = aten::empty(input_size, contiguous_options(grad));
  if (gx.numel() == 0) return gx;
  at::Tensor gc = grad.contiguous();
  const int64_t total = gx.numel();
  MYTORCH_UPSAMPLE_DISPATCH(grad.scalar_type(), "mytorch_upsample_bilinear_bwd_cuda", [&] {
    using A = at::opmath_type<scalar_t>;
    auto tab = linear_tables<A>(grad, ax, align_corners, scale_h, scale_w);
    auto range = input_ranges(tab[0], ax, true);
    launch_grid(bilinear_backward_kernel<scalar_t, A>, total, gc.const_data_ptr<scalar_t>(),
        gx.mutable_data_ptr<scalar_t>(), tab[0].const_data_ptr<int64_t>(), tab[1].const_data_ptr<A>(),
        tab[2].const_data_ptr<A>(), range[0].const_data_ptr<int64_t>(), range[1].const_data_ptr<int64_t>(), ax, total);
  });
  return gx;
}

}  // namespace cuda
}  // namespace mytorch
