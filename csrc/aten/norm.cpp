// aten LayerNorm / RMSNorm ops on the mytorch device -> kernels/cpu/norm.cpp.
#include "aten/ops.h"

#include "kernels/norm.h"

namespace mytorch {
namespace aten {

Tensors3 native_layer_norm(const Tensor& input, c10::SymIntArrayRef normalized_shape, const OptTensor& weight,
                           const OptTensor& bias, double eps) {
  return cpu::layer_norm(input, C10_AS_INTARRAYREF_SLOW(normalized_shape), weight, bias, eps);
}

Tensors3 native_layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                    c10::SymIntArrayRef normalized_shape, const Tensor& mean, const Tensor& rstd,
                                    const OptTensor& weight, const OptTensor& bias, std::array<bool, 3> mask) {
  return cpu::layer_norm_backward_masked(grad_out, input, C10_AS_INTARRAYREF_SLOW(normalized_shape), mean, rstd,
                                         weight, bias, mask);
}

std::tuple<Tensor, Tensor> fused_rms_norm(const Tensor& input, c10::IntArrayRef normalized_shape,
                                          const OptTensor& weight, std::optional<double> eps) {
  return cpu::rms_norm(input, normalized_shape, weight, eps);
}

std::tuple<Tensor, Tensor> fused_rms_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                   c10::IntArrayRef normalized_shape, const Tensor& rstd,
                                                   const OptTensor& weight, std::array<bool, 2> mask) {
  return cpu::rms_norm_backward_masked(grad_out, input, normalized_shape, rstd, weight, mask);
}

}  // namespace aten
}  // namespace mytorch
