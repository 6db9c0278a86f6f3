// aten LayerNorm / RMSNorm ops on the mytorch device -> kernels/cpu/norm.cpp.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/norm.h"

namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias, double eps) {
  return mytorch::cpu::layer_norm(input, C10_AS_INTARRAYREF_SLOW(normalized_shape), weight, bias,
                                  eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const c10::optional<at::Tensor>& weight,
    const c10::optional<at::Tensor>& bias, std::array<bool, 3> mask) {
  return mytorch::cpu::layer_norm_backward_masked(grad_out, input,
                                                  C10_AS_INTARRAYREF_SLOW(normalized_shape), mean,
                                                  rstd, weight, bias, mask);
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm(const at::Tensor& input,
                                                  c10::IntArrayRef normalized_shape,
                                                  const c10::optional<at::Tensor>& weight,
                                                  c10::optional<double> eps) {
  return mytorch::cpu::rms_norm(input, normalized_shape, weight, eps);
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef normalized_shape,
    const at::Tensor& rstd, const c10::optional<at::Tensor>& weight, std::array<bool, 2> mask) {
  return mytorch::cpu::rms_norm_backward_masked(grad_out, input, normalized_shape, rstd, weight,
                                                mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", &native_layer_norm);
  m.impl("native_layer_norm_backward", &native_layer_norm_backward);
  m.impl("_fused_rms_norm", &fused_rms_norm);
  m.impl("_fused_rms_norm_backward", &fused_rms_norm_backward);
}
