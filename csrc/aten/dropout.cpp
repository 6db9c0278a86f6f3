// aten dropout ops on the mytorch device -> kernels/cpu/dropout.cpp.
#include "aten/ops.h"

#include "kernels/dropout.h"

namespace mytorch {
namespace aten {

std::tuple<Tensor, Tensor> native_dropout(const Tensor& input, double p, std::optional<bool> train) {
  return cpu::dropout(input, p, train.value_or(true), c10::nullopt);
}

Tensor native_dropout_backward(const Tensor& grad, const Tensor& mask, double scale) {
  return cpu::dropout_backward(grad, mask, scale);
}

}  // namespace aten
}  // namespace mytorch
