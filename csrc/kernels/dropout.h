// The dropout family: dropout (out = x * mask / (1 - p), mask ~ Bernoulli(1 - p); train=False
// or p=0: a copy and an all-true mask) and dropout_backward. The checks both backends share,
// and the entry points of each (kernels/cpu/dropout.cpp, kernels/cuda/dropout.cu). Host code only.
#pragma once
#include <ATen/core/Generator.h>

#include <optional>
#include <tuple>

#include "checks.h"

namespace mytorch {
namespace dropout {

inline void check_forward(const char* op, const at::Tensor& input, double p) {
  check_floating(op, "input", input);
  TORCH_CHECK_VALUE(p >= 0.0 && p <= 1.0, op, ": expected p in [0, 1], got ", p);
}

inline void check_backward(const char* op, const at::Tensor& grad, const at::Tensor& mask) {
  check_floating(op, "grad", grad);
  check_dtype(op, "mask", mask, {at::kBool});
  check_same_shape(op, grad, "grad", mask, "mask");
  check_same_device(op, grad, "grad", mask, "mask");
}

}  // namespace dropout

// ---- entry points: the registered ops (cpu/register.cpp, cuda/register.cpp) ----
// (out, mask), mask bool; the backward is grad * mask * scale.
#define MYTORCH_DROPOUT_OPS                                                                 \
  std::tuple<at::Tensor, at::Tensor> dropout(const at::Tensor& input, double p, bool train, \
                                             const std::optional<at::Generator>& generator); \
  at::Tensor dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale);

namespace cpu {
MYTORCH_DROPOUT_OPS
}  // namespace cpu
namespace cuda {
MYTORCH_DROPOUT_OPS
}  // namespace cuda

#undef MYTORCH_DROPOUT_OPS

}  // namespace mytorch
