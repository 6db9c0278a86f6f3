// conv1d / conv2d, forward and backward (CUDA): im2col + cuBLAS GEMM (blas.cuh) with
// groups, stride, padding and dilation; conv1d is conv2d with a height of 1.
//
// Images go in chunks whose column buffer stays under kColBytes. The buffer of a chunk
// of cn images is laid out (C * kH * kW, cn, OH * OW): group g owns rows [g*K, (g+1)*K),
// a K x (cn * OH*OW) row-major matrix col_g (K = C/G * kH * kW). With gyT = grad as
// (O, N, OH*OW):
//   forward:      y[n, g] = W_g @ col_g[:, n]            batched GEMM (over images or groups)
//   grad input:   col_g = W_g^T @ gyT_g, then col2im gathers col back into gx (no atomics)
//   grad weight:  gW_g (+)= gyT_g @ col_g^T              one GEMM per chunk, batched over groups
// 1x1 stride-1 unpadded forward reads the input in place. bf16/fp16 run in fp32 and
// round once, as the CPU kernel (kernels/cpu/conv.cpp); the checks are kernels/conv.h's.
#include <array>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "kernels/conv.h"
#include "kernels/cuda/blas.cuh"
#include "kernels/cuda/common.cuh"

namespace mytorch {
namespace cuda {
namespace {

constexpr int64_t kColBytes = int64_t(256) << 20;  // column buffer budget per chunk

// The shared geometry (kernels/conv.h) plus the column-buffer chunking.
struct ConvShape : conv::ConvGeometry {
  // images per chunk: the column buffer (C*KH*KW x cn x OHW) stays under kColBytes
  int64_t chunk(size_t elem) const {
    const int64_t per_image = std::max<int64_t>(1, C * KH * KW * OHW() * static_cast<int64_t>(elem));
    return std::max<int64_t>(1, std::min<int64_t>(N, kColBytes / per_image));
  }
};

// ---- kernels ----
template <typename I>
struct Geom {
  I C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw;
};

template <typename I>
Geom<I> geom(const ConvShape& s) {
  return {I(s.C), I(s.H), I(s.W), I(s.KH), I(s.KW), I(s.OH), I(s.OW),
          I(s.sh), I(s.sw), I(s.ph), I(s.pw), I(s.dh), I(s.dw)};
}

// col[(((c*KH + i)*KW + j)*nc + n)*P + p] = x[n, c, ih, iw] (0 in the padding), for the
// nc images at x; p = oh*OW + ow, ih = oh*sh - ph + i*dh, iw = ow*sw - pw + j*dw.
template <typename T, typename I>
__global__ void im2col_kernel(const T* __restrict__ x, T* __restrict__ col, Geom<I> g, I nc,
                              I total) {
  const I P = g.OH * g.OW;
  MYTORCH_GRID_LOOP(I, idx, total) {
    const I p = idx % P;
    I t = idx / P;
    const I n = t % nc;
    t /= nc;
    const I j = t % g.KW;
    t /= g.KW;
    const I i = t % g.KH, c = t / g.KH;
    const I oh = p / g.OW, ow = p - oh * g.OW;
    const I ih = oh * g.sh - g.ph + i * g.dh, iw = ow * g.sw - g.pw + j * g.dw;
    col[idx] = (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) ? x[((n * g.C + c) * g.H + ih) * g.W + iw]
                                                            : T(0);
  }
}

// The adjoint of im2col as a gather: gx[n, c, ih, iw] = the sum of the col entries that
// im2col copies from (n, c, ih, iw). One thread per input element.
template <typename T, typename I>
__global__ void col2im_kernel(const T* __restrict__ col, T* __restrict__ gx, Geom<I> g, I nc,
                              I total) {
  const I P = g.OH * g.OW;
  MYTORCH_GRID_LOOP(I, idx, total) {
    const I iw = idx % g.W;
    I t = idx / g.W;
    const I ih = t % g.H;
    t /= g.H;
    const I c = t % g.C, n = t / g.C;
    T acc = T(0);
    for (I i = 0; i < g.KH; ++i) {
      const I hh = ih + g.ph - i * g.dh;
      if (hh < 0) break;  // decreasing in i
      if (hh % g.sh != 0) continue;
      const I oh = hh / g.sh;
      if (oh >= g.OH) continue;
      for (I j = 0; j < g.KW; ++j) {
        const I ww = iw + g.pw - j * g.dw;
        if (ww < 0) break;
        if (ww % g.sw != 0) continue;
        const I ow = ww / g.sw;
        if (ow >= g.OW) continue;
        acc += col[(((c * g.KH + i) * g.KW + j) * nc + n) * P + oh * g.OW + ow];
      }
    }
    gx[idx] = acc;
  }
}

// y[n, o, p] = b[o]
template <typename T>
__global__ void bias_fill_kernel(const T* __restrict__ b, T* __restrict__ y, int64_t O, int64_t P,
                                 int64_t total) {
  MYTORCH_GRID_LOOP(int64_t, idx, total) y[idx] = b[(idx / P) % O];
}

// gb[o] = sum over n, p of gy[n, o, p]; one block per channel.
template <typename T>
__global__ void bias_grad_kernel(const T* __restrict__ gy, T* __restrict__ gb, int64_t N,
                                 int64_t O, int64_t P) {
  __shared__ T buf[33];
  const int64_t o = blockIdx.x;
  T acc = T(0);
  for (int64_t j = threadIdx.x; j < N * P; j += blockDim.x) {
    const int64_t n = j / P;
    acc += gy[(n * O + o) * P + (j - n * P)];
  }
  acc = block_sum(acc, buf);
  if (threadIdx.x == 0) gb[o] = acc;
}

// ---- launches ----
template <typename T>
void im2col(const T* x, T* col, const ConvShape& s, int64_t nc) {
  const int64_t total = s.C * s.KH * s.KW * nc * s.OHW();
  if (total == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  with_index_type(std::max(total, nc * s.C * s.HW()), [&](auto tag) {
    using I = decltype(tag);
    im2col_kernel<T, I><<<blocks_for(total), kThreads, 0, stream>>>(x, col, geom<I>(s), I(nc), I(total));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void col2im(const T* col, T* gx, const ConvShape& s, int64_t nc) {
  const int64_t total = nc * s.C * s.HW();
  if (total == 0) return;
  auto stream = at::cuda::getCurrentCUDAStream();
  with_index_type(std::max(total, s.C * s.KH * s.KW * nc * s.OHW()), [&](auto tag) {
    using I = decltype(tag);
    col2im_kernel<T, I><<<blocks_for(total), kThreads, 0, stream>>>(col, gx, geom<I>(s), I(nc), I(total));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void forward(const char* op, const T* x, const T* w, const T* b, T* y, const ConvShape& s,
             const at::TensorOptions& opts) {
  const int64_t K = s.K(), P = s.OHW(), HW = s.HW(), G = s.G, Og = s.Og(), O = s.O, N = s.N, C = s.C;
  auto stream = at::cuda::getCurrentCUDAStream();
  if (b) {
    bias_fill_kernel<T><<<blocks_for(N * O * P), kThreads, 0, stream>>>(b, y, O, P, N * O * P);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  const double beta = b ? 1.0 : 0.0;
  if (K == 0) {  // no input channels: the bias alone
    if (!b) C10_CUDA_CHECK(cudaMemsetAsync(y, 0, N * O * P * sizeof(T), stream));
    return;
  }
  if (s.pointwise()) {  // B = the input itself: x[n, g] is Cg x HW, HW == P
    if (G <= N) {
      for (int64_t g = 0; g < G; ++g)
        gemm_batched<T>(op, N, Og, P, K, 1.0, {w + g * Og * K, K, 1, 0}, {x + g * K * HW, HW, 1, C * HW},
                        beta, y + g * Og * P, P, O * P);
    } else {
      for (int64_t n = 0; n < N; ++n)
        gemm_batched<T>(op, G, Og, P, K, 1.0, {w, K, 1, Og * K}, {x + n * C * HW, HW, 1, K * HW}, beta,
                        y + n * O * P, P, Og * P);
    }
    return;
  }
  const int64_t nc = s.chunk(sizeof(T));
  at::Tensor colt = aten::empty({C * s.KH * s.KW * nc * P}, opts);
  T* col = colt.mutable_data_ptr<T>();
  for (int64_t n0 = 0; n0 < N; n0 += nc) {
    const int64_t cn = std::min(nc, N - n0), ld = cn * P;
    im2col<T>(x + n0 * C * HW, col, s, cn);
    if (G <= cn) {
      for (int64_t g = 0; g < G; ++g)
        gemm_batched<T>(op, cn, Og, P, K, 1.0, {w + g * Og * K, K, 1, 0}, {col + g * K * ld, ld, 1, P},
                        beta, y + (n0 * O + g * Og) * P, P, O * P);
    } else {
      for (int64_t n = 0; n < cn; ++n)
        gemm_batched<T>(op, G, Og, P, K, 1.0, {w, K, 1, Og * K}, {col + n * P, ld, 1, K * ld}, beta,
                        y + (n0 + n) * O * P, P, Og * P);
    }
  }
}

// gyT: grad as (O, N, P), contiguous (needed for gx or gw).
template <typename T>
void backward(const char* op, const T* gy, const T* gyT, const T* x, const T* w, T* gx, T* gw, T* gb,
              const ConvShape& s, const at::TensorOptions& opts) {
  const int64_t K = s.K(), P = s.OHW(), HW = s.HW(), G = s.G, Og = s.Og(), N = s.N, C = s.C;
  if (gb) {
    bias_grad_kernel<T><<<static_cast<unsigned>(s.O), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        gy, gb, N, s.O, P);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  if ((!gx && !gw) || K == 0) return;  // K == 0: gx and gw are empty
  const int64_t nc = s.chunk(sizeof(T));
  at::Tensor colt = aten::empty({C * s.KH * s.KW * nc * P}, opts);
  T* col = colt.mutable_data_ptr<T>();
  for (int64_t n0 = 0; n0 < N; n0 += nc) {
    const int64_t cn = std::min(nc, N - n0), ld = cn * P;
    const MatView gyt{gyT + n0 * P, N * P, 1, Og * N * P};  // gyT_g of this chunk: Og x ld
    if (gx) {
      gemm_batched<T>(op, G, K, ld, Og, 1.0, {w, 1, K, Og * K}, gyt, 0.0, col, ld, K * ld);
      col2im<T>(col, gx + n0 * C * HW, s, cn);
    }
    if (gw) {
      im2col<T>(x + n0 * C * HW, col, s, cn);
      gemm_batched<T>(op, G, Og, K, ld, 1.0, gyt, {col, 1, ld, K * ld}, n0 == 0 ? 0.0 : 1.0, gw, K,
                      Og * K);
    }
  }
}

// ---- ATen glue ----
using conv::is_half;

ConvShape conv_shape(const char* op, const at::Tensor& input, const at::Tensor& weight,
                     const at::Tensor* bias, at::IntArrayRef stride, at::IntArrayRef padding,
                     at::IntArrayRef dilation, int64_t groups, int64_t spatial_dims) {
  ConvShape s{conv::conv_geometry(op, input, weight, bias, stride, padding, dilation, groups, spatial_dims)};
  check_cuda(op, "input", input);
  return s;
}

}  // namespace

at::Tensor convolution(const char* op, const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                       at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                       int64_t spatial_dims) {
  const at::Tensor* b = bias.has_value() && bias->defined() ? &*bias : nullptr;
  ConvShape s = conv_shape(op, input, weight, b, stride, padding, dilation, groups, spatial_dims);
  if (is_half(input))  // bf16 / fp16 (autocast)
    return conv::forward_in_float(convolution, op, input, weight, b, stride, padding, dilation, groups, spatial_dims);
  c10::cuda::CUDAGuard guard(input.device());
  auto opts = contiguous_options(input);
  at::Tensor y = aten::empty(conv::out_shape(s, spatial_dims), opts);
  if (y.numel() == 0) return y;
  at::Tensor x = input.contiguous(), w = weight.contiguous();
  at::Tensor bc = b ? b->contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "mytorch_conv_cuda", [&] {
    forward<scalar_t>(op, x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
                      b ? bc.const_data_ptr<scalar_t>() : nullptr, y.mutable_data_ptr<scalar_t>(), s,
                      opts);
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const char* op, const at::Tensor& grad, const at::Tensor& input, const at::Tensor& weight,
    at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
    std::array<bool, 3> mask, int64_t spatial_dims) {
  ConvShape s = conv_shape(op, input, weight, nullptr, stride, padding, dilation, groups, spatial_dims);
  conv::check_grad(op, grad, input, s, spatial_dims);
  if (is_half(input))
    return conv::backward_in_float(convolution_backward, op, grad, input, weight, stride, padding, dilation, groups,
                                   mask, spatial_dims);
  c10::cuda::CUDAGuard guard(input.device());
  auto opts = contiguous_options(input);
  at::Tensor gx, gw, gb;
  if (mask[0]) gx = aten::empty(input.sizes(), opts);
  if (mask[1]) gw = aten::empty(weight.sizes(), opts);
  if (mask[2]) gb = aten::empty({s.O}, opts);
  if (grad.numel() == 0) {  // no output positions: every gradient is zero
    for (auto* t : {&gx, &gw, &gb})
      if (t->defined()) zero_fill(*t);
    return {gx, gw, gb};
  }
  at::Tensor gy = grad.contiguous(), x = input.contiguous(), w = weight.contiguous();
  // grad as (O, N, OH*OW): each group's rows are one matrix over all images
  at::Tensor gyT = (mask[0] || mask[1]) ? gy.reshape({s.N, s.O, s.OHW()}).transpose(0, 1).contiguous()
                                        : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "mytorch_conv_backward_cuda", [&] {
    auto mp = [](at::Tensor& t) { return t.defined() ? t.mutable_data_ptr<scalar_t>() : nullptr; };
    backward<scalar_t>(op, gy.const_data_ptr<scalar_t>(),
                       gyT.defined() ? gyT.const_data_ptr<scalar_t>() : nullptr,
                       x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(), mp(gx), mp(gw),
                       mp(gb), s, opts);
  });
  return {gx, gw, gb};
}

}  // namespace cuda
}  // namespace mytorch
