// The upsampling family: upsample_nearest2d, upsample_bilinear2d and their backwards over
// (N, C, H, W). The checks and source-position scales both backends share (ATen's rules,
// align_corners and given scales included), and the entry points of each
// (kernels/cpu/upsample.cpp, kernels/cuda/upsample.cu). Host code only.
#pragma once
#include <array>
#include <limits>
#include <optional>

#include "checks.h"

namespace mytorch {
namespace upsample {

inline void check_x(const char* op, const at::Tensor& x) {
  check_floating(op, "x", x);
  TORCH_CHECK(x.dim() == 4, op, ": expected x to be 4-D (N, C, H, W), got a ", x.dim(), "-D tensor of shape ",
              shape_str(x.sizes()));
  TORCH_CHECK(x.size(2) > 0 && x.size(3) > 0, op, ": expected non-empty spatial dims, got x of shape ",
              shape_str(x.sizes()));
}

// (OH, OW), each positive and, as ATen (which takes these sizes as int), at most INT32_MAX:
// larger ones are refused, never allocated.
inline std::array<int64_t, 2> out_hw(const char* op, at::IntArrayRef output_size) {
  TORCH_CHECK(output_size.size() == 2, op, ": expected output_size to have 2 elements, got ",
              shape_str(output_size));
  TORCH_CHECK(output_size[0] > 0 && output_size[1] > 0, op, ": expected output_size to be positive, got ",
              shape_str(output_size));
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  TORCH_CHECK(output_size[0] <= kMax && output_size[1] <= kMax, op, ": expected output_size to be at most ", kMax,
              ", got ", shape_str(output_size));
  return {output_size[0], output_size[1]};
}

// A call's geometry: N * C planes, input (H, W), output (OH, OW).
struct Planes {
  int64_t planes, H, W, OH, OW;
};

// The forward's x and output_size.
inline Planes check_forward(const char* op, const at::Tensor& x, at::IntArrayRef output_size) {
  check_x(op, x);
  const auto o = out_hw(op, output_size);
  return {x.size(0) * x.size(1), x.size(2), x.size(3), o[0], o[1]};
}

// The backward's grad against input_size (N, C, H, W).
inline Planes check_backward(const char* op, const at::Tensor& grad, at::IntArrayRef input_size) {
  check_floating(op, "grad", grad);
  TORCH_CHECK(input_size.size() == 4, op, ": expected input_size to have 4 elements (N, C, H, W), got ",
              shape_str(input_size));
  TORCH_CHECK(input_size[2] > 0 && input_size[3] > 0 && input_size[0] >= 0 && input_size[1] >= 0, op,
              ": expected a non-empty input_size, got ", shape_str(input_size));
  TORCH_CHECK(grad.dim() == 4 && grad.size(0) == input_size[0] && grad.size(1) == input_size[1] &&
                  grad.size(2) > 0 && grad.size(3) > 0,
              op, ": expected grad of shape (", input_size[0], ", ", input_size[1], ", OH, OW), got ",
              shape_str(grad.sizes()));
  return {input_size[0] * input_size[1], input_size[2], input_size[3], grad.size(2), grad.size(3)};
}

// ATen's compute_scales_value: 1 / scale when a positive scale is given, else in / out.
template <typename A>
A scale_value(std::optional<double> scale, int64_t in, int64_t out) {
  return scale.has_value() && *scale > 0 ? static_cast<A>(1.0 / *scale) : static_cast<A>(in) / static_cast<A>(out);
}

// The bilinear source-position scale along one axis.
template <typename A>
A linear_scale(bool align_corners, std::optional<double> scale, int64_t in, int64_t out) {
  if (align_corners) return out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0);
  return scale_value<A>(scale, in, out);
}

}  // namespace upsample

// ---- entry points: the registered ops (cpu/register.cpp, cuda/register.cpp) ----
#define MYTORCH_UPSAMPLE_OPS                                                                               \
  at::Tensor upsample_nearest2d(const at::Tensor& x, at::IntArrayRef output_size,                         \
                                std::optional<double> scale_h, std::optional<double> scale_w);            \
  at::Tensor upsample_nearest2d_backward(const at::Tensor& grad, at::IntArrayRef input_size,              \
                                         std::optional<double> scale_h, std::optional<double> scale_w);   \
  at::Tensor upsample_bilinear2d(const at::Tensor& x, at::IntArrayRef output_size, bool align_corners,    \
                                 std::optional<double> scale_h, std::optional<double> scale_w);           \
  at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad, at::IntArrayRef input_size,             \
                                          bool align_corners, std::optional<double> scale_h,              \
                                          std::optional<double> scale_w);

namespace cpu {
MYTORCH_UPSAMPLE_OPS
}  // namespace cpu
namespace cuda {
MYTORCH_UPSAMPLE_OPS
}  // namespace cuda

#undef MYTORCH_UPSAMPLE_OPS

}  // namespace mytorch
