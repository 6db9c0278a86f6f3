// The normalization family: layer_norm, rms_norm and their backwards over the trailing
// normalized_shape dims of x (rows: the leading dims). The shape math both backends share and
// the entry points of each (kernels/cpu/norm.cpp; kernels/cuda/norm.cu, norm_backward.cu,
// norm_wide.cu). Each backend checks with its own messages. Host code only.
#pragma once
#include <array>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "checks.h"

namespace mytorch {
namespace norm {

// x as rows x cols, cols the product of the last k dims; the statistics' shape is
// x.shape[:-k] + [1] * k.
struct Rows {
  int64_t rows = 1, cols = 1;
  std::vector<int64_t> stat_shape;
};

inline Rows rows_of(const at::Tensor& x, int64_t k) {
  Rows r;
  const int64_t axis = x.dim() - k;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < axis) {
      r.rows *= x.size(i);
      r.stat_shape.push_back(x.size(i));
    } else {
      r.cols *= x.size(i);
      r.stat_shape.push_back(1);
    }
  }
  return r;
}

// rms_norm's eps=None: the dtype's machine epsilon, as torch.nn.functional.rms_norm.
inline double default_eps(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return 0.0078125;
    case at::kHalf: return 0.0009765625;
    case at::kDouble: return std::numeric_limits<double>::epsilon();
    default: return static_cast<double>(std::numeric_limits<float>::epsilon());
  }
}

}  // namespace norm

// ---- entry points: the registered ops (cpu/register.cpp, cuda/register.cpp) ----
// layer_norm: (out, mean, rstd); rms_norm: (out, rstd). The statistics have norm::Rows'
// stat_shape and the accumulation dtype (float32 for bf16/fp16 inputs). The backwards return
// every gradient.
#define MYTORCH_NORM_OPS                                                                                       \
  std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(                                                  \
      const at::Tensor& x, at::IntArrayRef normalized_shape, const std::optional<at::Tensor>& weight,         \
      const std::optional<at::Tensor>& bias, double eps);                                                     \
  std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(                                         \
      const at::Tensor& grad, const at::Tensor& x, at::IntArrayRef normalized_shape, const at::Tensor& mean,  \
      const at::Tensor& rstd, const std::optional<at::Tensor>& weight);                                       \
  std::tuple<at::Tensor, at::Tensor> rms_norm(const at::Tensor& x, at::IntArrayRef normalized_shape,          \
                                              const std::optional<at::Tensor>& weight, std::optional<double> eps); \
  std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad, const at::Tensor& x,           \
                                                       at::IntArrayRef normalized_shape, const at::Tensor& rstd, \
                                                       const std::optional<at::Tensor>& weight);

namespace cpu {
MYTORCH_NORM_OPS
// The backwards with a mask of the gradients to compute (unpicked ones undefined), for the
// aten routes of the mytorch device (csrc/aten/norm.cpp).
std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_masked(
    const at::Tensor& grad, const at::Tensor& x, at::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    std::array<bool, 3> mask);
std::tuple<at::Tensor, at::Tensor> rms_norm_backward_masked(const at::Tensor& grad, const at::Tensor& x,
                                                            at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                            const std::optional<at::Tensor>& weight,
                                                            std::array<bool, 2> mask);
}  // namespace cpu
namespace cuda {
MYTORCH_NORM_OPS
}  // namespace cuda

#undef MYTORCH_NORM_OPS

}  // namespace mytorch
