// aten dropout ops on the mytorch device -> kernels/cpu/dropout.cpp.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/dropout.h"

namespace {

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  c10::optional<bool> train) {
  return mytorch::cpu::dropout(input, p, train.value_or(true), c10::nullopt);
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  return mytorch::cpu::dropout_backward(grad, mask, scale);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_dropout", &native_dropout);
  m.impl("native_dropout_backward", &native_dropout_backward);
}
