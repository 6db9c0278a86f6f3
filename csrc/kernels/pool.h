// The pooling family: max_pool2d (with indices), avg_pool2d, adaptive_avg_pool2d and their
// backwards, over (N, C, H, W) or (C, H, W) inputs. The checks and window arithmetic both
// backends share (output sizes as ATen's, ceil_mode and padding included), and the entry
// points of each (kernels/cpu/pool.cpp, kernels/cuda/pool.cu). Host code only.
#pragma once
#include <optional>
#include <tuple>
#include <vector>

#include "checks.h"

namespace mytorch {
namespace pool {

struct Shape {
  int64_t planes, H, W, OH, OW;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

inline void check_input(const char* op, const at::Tensor& x) {
  check_floating(op, "x", x);
  TORCH_CHECK(x.dim() == 3 || x.dim() == 4, op, ": expected x to be 3-D (C, H, W) or 4-D (N, C, H, W), got a ",
              x.dim(), "-D tensor of shape ", shape_str(x.sizes()));
  TORCH_CHECK(x.size(-1) > 0 && x.size(-2) > 0, op, ": expected non-empty spatial dims, got x of shape ",
              shape_str(x.sizes()));
}

// Output positions along one dim, as ATen's pooling_output_shape.
inline int64_t out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil) {
  const int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil && (out - 1) * stride >= in + pad) --out;
  return out;
}

// The window geometry of a checked input (check_input); an empty stride is the kernel size.
inline Shape shape(const char* op, const at::Tensor& x, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                   at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  auto k = int_pair(op, "kernel_size", kernel_size, 1);
  auto st = int_pair(op, "stride", stride, 1, kernel_size);
  auto pd = int_pair(op, "padding", padding, 0);
  auto dl = int_pair(op, "dilation", dilation, 1);
  TORCH_CHECK(pd[0] <= k[0] / 2 && pd[1] <= k[1] / 2, op, ": expected padding (", pd[0], ", ", pd[1],
              ") to be at most half the kernel size (", k[0], ", ", k[1], ")");
  Shape s{};
  s.H = x.size(-2);
  s.W = x.size(-1);
  s.planes = x.numel() / (s.H * s.W);  // H, W > 0 (check_input)
  s.kh = k[0], s.kw = k[1], s.sh = st[0], s.sw = st[1], s.ph = pd[0], s.pw = pd[1];
  s.dh = dl[0], s.dw = dl[1];
  const int64_t ekh = s.dh * (s.kh - 1) + 1, ekw = s.dw * (s.kw - 1) + 1;
  TORCH_CHECK(ekh <= s.H + 2 * s.ph && ekw <= s.W + 2 * s.pw, op, ": expected the kernel (", ekh, "x", ekw,
              " with dilation) to fit in the padded input (", s.H + 2 * s.ph, "x", s.W + 2 * s.pw,
              "), got x of shape ", shape_str(x.sizes()));
  s.OH = out_size(s.H, s.kh, s.ph, s.sh, s.dh, ceil_mode);
  s.OW = out_size(s.W, s.kw, s.pw, s.sw, s.dw, ceil_mode);
  return s;
}

// x's shape with the last two dims replaced by (OH, OW).
inline std::vector<int64_t> out_sizes(const at::Tensor& x, int64_t OH, int64_t OW) {
  std::vector<int64_t> v(x.sizes().begin(), x.sizes().end());
  v[v.size() - 2] = OH;
  v[v.size() - 1] = OW;
  return v;
}

inline void check_grad(const char* op, const at::Tensor& grad, const at::Tensor& x, at::IntArrayRef expect) {
  check_same_dtype(op, grad, "grad", x, "x");
  check_same_device(op, grad, "grad", x, "x");
  TORCH_CHECK(grad.sizes() == expect, op, ": expected grad of shape ", shape_str(expect),
              " (the output shape), got ", shape_str(grad.sizes()));
}

inline void check_divisor(const char* op, std::optional<int64_t> divisor_override) {
  TORCH_CHECK(!divisor_override.has_value() || *divisor_override != 0, op,
              ": expected divisor_override to be non-zero, got 0");
}

// max_pool2d_backward's indices (int64, x's leading dims) and grad (their shape).
inline void check_max_backward(const char* op, const at::Tensor& grad, const at::Tensor& x,
                               const at::Tensor& indices) {
  check_dtype(op, "indices", indices, {at::kLong});
  check_same_device(op, indices, "indices", x, "x");
  TORCH_CHECK(indices.dim() == x.dim() && indices.sizes().slice(0, x.dim() - 2) == x.sizes().slice(0, x.dim() - 2),
              op, ": expected indices with the leading dims of x ", shape_str(x.sizes()), ", got ",
              shape_str(indices.sizes()));
  check_grad(op, grad, x, indices.sizes());
}

// adaptive_avg_pool2d_backward's grad: x's leading dims, a non-empty output size.
inline void check_adaptive_backward(const char* op, const at::Tensor& grad, const at::Tensor& x) {
  TORCH_CHECK(grad.dim() == x.dim() && grad.sizes().slice(0, x.dim() - 2) == x.sizes().slice(0, x.dim() - 2) &&
                  grad.size(-1) > 0 && grad.size(-2) > 0,
              op, ": expected grad with the leading dims of x ", shape_str(x.sizes()),
              " and a non-empty output size, got ", shape_str(grad.sizes()));
  check_grad(op, grad, x, grad.sizes());
}

}  // namespace pool

// ---- entry points: the registered ops (cpu/register.cpp, cuda/register.cpp) ----
#define MYTORCH_POOL_OPS                                                                                       \
  /* an empty stride is the kernel size (as ATen) */                                                          \
  std::tuple<at::Tensor, at::Tensor> max_pool2d(const at::Tensor& x, at::IntArrayRef kernel_size,             \
                                                at::IntArrayRef stride, at::IntArrayRef padding,              \
                                                at::IntArrayRef dilation, bool ceil_mode);                    \
  at::Tensor max_pool2d_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& indices);     \
  at::Tensor avg_pool2d(const at::Tensor& x, at::IntArrayRef kernel_size, at::IntArrayRef stride,             \
                        at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,                      \
                        std::optional<int64_t> divisor_override);                                             \
  at::Tensor avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& x, at::IntArrayRef kernel_size,    \
                                 at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,             \
                                 bool count_include_pad, std::optional<int64_t> divisor_override);            \
  at::Tensor adaptive_avg_pool2d(const at::Tensor& x, at::IntArrayRef output_size);                           \
  at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad, const at::Tensor& x);

namespace cpu {
MYTORCH_POOL_OPS
}  // namespace cpu
namespace cuda {
MYTORCH_POOL_OPS
}  // namespace cuda

#undef MYTORCH_POOL_OPS

}  // namespace mytorch
