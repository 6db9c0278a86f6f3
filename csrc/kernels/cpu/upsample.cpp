// Upsampling kernels (OpenMP over planes). Index tables are built once per call;
// backward passes scatter into the input plane each thread owns.
#include "kernels/upsample.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <cmath>
#include <vector>


namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kParallelGrain = 1 << 14;

using upsample::Planes;
using upsample::scale_value;

std::vector<int64_t> nearest_index(int64_t in, int64_t out, std::optional<double> scale) {
  std::vector<int64_t> idx(out);
  const float sc = scale_value<float>(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    if (out == in) idx[o] = o;
    else if (out == 2 * in) idx[o] = o >> 1;
    else idx[o] = std::min(static_cast<int64_t>(std::floor(o * sc)), in - 1);
  }
  return idx;
}

// Bilinear taps along one axis: i0, i1 and their weights.
template <typename A>
struct Taps {
  std::vector<int64_t> i0, i1;
  std::vector<A> l0, l1;
};

template <typename A>
Taps<A> linear_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  Taps<A> t;
  t.i0.resize(out), t.i1.resize(out), t.l0.resize(out), t.l1.resize(out);
  const A sc = upsample::linear_scale<A>(align_corners, scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    A real = align_corners ? sc * o : std::max(sc * (o + A(0.5)) - A(0.5), A(0));
    int64_t i = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
    A lam = std::min(std::max(real - static_cast<A>(i), A(0)), A(1));
    t.i0[o] = i;
    t.i1[o] = i + (i < in - 1 ? 1 : 0);
    t.l1[o] = lam;
    t.l0[o] = A(1) - lam;
  }
  return t;
}

// ---- kernels ----
template <typename T>
void nearest_kernel(const T* x, T* y, int64_t planes, int64_t H, int64_t W, int64_t OH,
                    int64_t OW, const std::vector<int64_t>& ih, const std::vector<int64_t>& iw) {
#pragma omp parallel for schedule(static) if (planes * OH * OW > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * H * W;
    T* yp = y + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const T* xr = xp + ih[oh] * W;
      for (int64_t ow = 0; ow < OW; ++ow) yp[oh * OW + ow] = xr[iw[ow]];
    }
  }
}

template <typename T>
void nearest_backward_kernel(const T* g, T* gx, int64_t planes, int64_t H, int64_t W, int64_t OH,
                             int64_t OW, const std::vector<int64_t>& ih,
                             const std::vector<int64_t>& iw) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for schedule(static) if (planes * OH * OW > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    std::vector<Acc> acc(H * W, Acc(0));
    const T* gp = g + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      Acc* ar = acc.data() + ih[oh] * W;
      for (int64_t ow = 0; ow < OW; ++ow) ar[iw[ow]] += static_cast<Acc>(gp[oh * OW + ow]);
    }
    T* xp = gx + p * H * W;
    for (int64_t i = 0; i < H * W; ++i) xp[i] = static_cast<T>(acc[i]);
  }
}

template <typename T, typename A>
void bilinear_kernel(const T* x, T* y, int64_t planes, int64_t H, int64_t W, int64_t OH,
                     int64_t OW, const Taps<A>& th, const Taps<A>& tw) {
#pragma omp parallel for schedule(static) if (planes * OH * OW > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * H * W;
    T* yp = y + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const T* r0 = xp + th.i0[oh] * W;
      const T* r1 = xp + th.i1[oh] * W;
      const A h0 = th.l0[oh], h1 = th.l1[oh];
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t a = tw.i0[ow], b = tw.i1[ow];
        const A w0 = tw.l0[ow], w1 = tw.l1[ow];
        yp[oh * OW + ow] = static_cast<T>(
            h0 * (w0 * static_cast<A>(r0[a]) + w1 * static_cast<A>(r0[b])) +
            h1 * (w0 * static_cast<A>(r1[a]) + w1 * static_cast<A>(r1[b])));
      }
    }
  }
}

template <typename T, typename A>
void bilinear_backward_kernel(const T* g, T* gx, int64_t planes, int64_t H, int64_t W, int64_t OH,
                              int64_t OW, const Taps<A>& th, const Taps<A>& tw) {
#pragma omp parallel for schedule(static) if (planes * OH * OW > kParallelGrain)
  for (int64_t p = 0; p < planes; ++p) {
    std::vector<A> acc(H * W, A(0));
    const T* gp = g + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      A* r0 = acc.data() + th.i0[oh] * W;
      A* r1 = acc.data() + th.i1[oh] * W;
      const A h0 = th.l0[oh], h1 = th.l1[oh];
      for (int64_t ow = 0; ow < OW; ++ow) {
        const A v = static_cast<A>(gp[oh * OW + ow]);
        const int64_t a = tw.i0[ow], b = tw.i1[ow];
        const A w0 = tw.l0[ow], w1 = tw.l1[ow];
        r0[a] += h0 * w0 * v;
        r0[b] += h0 * w1 * v;
        r1[a] += h1 * w0 * v;
        r1[b] += h1 * w1 * v;
      }
    }
    T* xp = gx + p * H * W;
    for (int64_t i = 0; i < H * W; ++i) xp[i] = static_cast<T>(acc[i]);
  }
}

// ---- ATen glue ----
// The forward's output (N, C, OH, OW) and the backward's (input_size), contiguous.
at::Tensor forward_out(const at::Tensor& x, const Planes& p) {
  return at::empty({x.size(0), x.size(1), p.OH, p.OW}, x.options().memory_format(at::MemoryFormat::Contiguous));
}
at::Tensor backward_out(const at::Tensor& grad, at::IntArrayRef input_size) {
  return at::empty(input_size, grad.options().memory_format(at::MemoryFormat::Contiguous));
}

}  // namespace

at::Tensor upsample_nearest2d(const at::Tensor& x, at::IntArrayRef output_size, std::optional<double> scale_h,
                              std::optional<double> scale_w) {
  const Planes p = upsample::check_forward("mytorch::upsample_nearest2d", x, output_size);
  at::Tensor y = forward_out(x, p);
  if (y.numel() == 0) return y;
  at::Tensor xc = x.contiguous();
  auto ih = nearest_index(p.H, p.OH, scale_h), iw = nearest_index(p.W, p.OW, scale_w);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_upsample_nearest", [&] {
    nearest_kernel<scalar_t>(xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), p.planes, p.H, p.W,
                             p.OH, p.OW, ih, iw);
  });
  return y;
}

at::Tensor upsample_nearest2d_backward(const at::Tensor& grad, at::IntArrayRef input_size,
                                       std::optional<double> scale_h, std::optional<double> scale_w) {
  const Planes p = upsample::check_backward("mytorch::upsample_nearest2d_backward", grad, input_size);
  at::Tensor gx = backward_out(grad, input_size);
  if (gx.numel() == 0) return gx;
  at::Tensor gc = grad.contiguous();
  auto ih = nearest_index(p.H, p.OH, scale_h), iw = nearest_index(p.W, p.OW, scale_w);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad.scalar_type(), "mytorch_upsample_nearest_bwd", [&] {
    nearest_backward_kernel<scalar_t>(gc.const_data_ptr<scalar_t>(), gx.mutable_data_ptr<scalar_t>(), p.planes, p.H,
                                      p.W, p.OH, p.OW, ih, iw);
  });
  return gx;
}

at::Tensor upsample_bilinear2d(const at::Tensor& x, at::IntArrayRef output_size, bool align_corners,
                               std::optional<double> scale_h, std::optional<double> scale_w) {
  const Planes p = upsample::check_forward("mytorch::upsample_bilinear2d", x, output_size);
  at::Tensor y = forward_out(x, p);
  if (y.numel() == 0) return y;
  at::Tensor xc = x.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_upsample_bilinear", [&] {
    using A = at::opmath_type<scalar_t>;
    auto th = linear_taps<A>(p.H, p.OH, align_corners, scale_h);
    auto tw = linear_taps<A>(p.W, p.OW, align_corners, scale_w);
    bilinear_kernel<scalar_t, A>(xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), p.planes, p.H, p.W,
                                 p.OH, p.OW, th, tw);
  });
  return y;
}

at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad, at::IntArrayRef input_size, bool align_corners,
                                        std::optional<double> scale_h, std::optional<double> scale_w) {
  const Planes p = upsample::check_backward("mytorch::upsample_bilinear2d_backward", grad, input_size);
  at::Tensor gx = backward_out(grad, input_size);
  if (gx.numel() == 0) return gx;
  at::Tensor gc = grad.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad.scalar_type(), "mytorch_upsample_bilinear_bwd", [&] {
    using A = at::opmath_type<scalar_t>;
    auto th = linear_taps<A>(p.H, p.OH, align_corners, scale_h);
    auto tw = linear_taps<A>(p.W, p.OW, align_corners, scale_w);
    bilinear_backward_kernel<scalar_t, A>(gc.const_data_ptr<scalar_t>(), gx.mutable_data_ptr<scalar_t>(), p.planes,
                                          p.H, p.W, p.OH, p.OW, th, tw);
  });
  return gx;
}

}  // namespace cpu
}  // namespace mytorch
