// Autograd of mytorch::rms_norm and mytorch::layer_norm, in C++ (see common.h).
// mean / rstd are outputs without a gradient; the weight and bias get theirs only when given.
#include "autograd/common.h"

namespace mytorch {
namespace autograd {
namespace {

using RmsSig = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, c10::IntArrayRef, const OptTensor&,
                                                  std::optional<double>);
using RmsBwdSig = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, c10::IntArrayRef,
                                                     const at::Tensor&, const OptTensor&);
using LnSig = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, c10::IntArrayRef, const OptTensor&,
                                                             const OptTensor&, double);
using LnBwdSig = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                c10::IntArrayRef, const at::Tensor&,
                                                                const at::Tensor&, const OptTensor&);

struct RmsNorm : public torch::autograd::Function<RmsNorm> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, c10::IntArrayRef shape,
                               const OptTensor& weight, std::optional<double> eps) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<RmsSig>("mytorch::rms_norm");
    auto [y, rstd] = fwd.call(x, shape, weight, eps);
    ctx->save_for_backward({x, rstd, or_undefined(weight)});
    ctx->saved_data["shape"] = shape.vec();
    ctx->mark_non_differentiable({rstd});
    ctx->set_materialize_grads(false);  // rstd's (unused) zero gradient is never made
    return {y, rstd};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto bwd = find_op<RmsBwdSig>("mytorch::rms_norm_backward");
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const auto s = ctx->get_saved_variables();
    const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
    auto [dx, dw] = bwd.call(grads[0], s[0], shape, s[1], optional(s[2]));
    return {dx, at::Tensor(), s[2].defined() ? dw : at::Tensor(), at::Tensor()};
  }
};

struct LayerNorm : public torch::autograd::Function<LayerNorm> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, c10::IntArrayRef shape,
                               const OptTensor& weight, const OptTensor& bias, double eps) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<LnSig>("mytorch::layer_norm");
    auto [y, mean, rstd] = fwd.call(x, shape, weight, bias, eps);
    ctx->save_for_backward({x, mean, rstd, or_undefined(weight)});
    ctx->saved_data["shape"] = shape.vec();
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    ctx->mark_non_differentiable({mean, rstd});
    ctx->set_materialize_grads(false);  // nor are those of mean and rstd
    return {y, mean, rstd};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto bwd = find_op<LnBwdSig>("mytorch::layer_norm_backward");
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const auto s = ctx->get_saved_variables();
    const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
    auto [dx, dw, db] = bwd.call(grads[0], s[0], shape, s[1], s[2], optional(s[3]));
    return {dx, at::Tensor(), s[3].defined() ? dw : at::Tensor(),
            ctx->saved_data["has_bias"].toBool() ? db : at::Tensor(), at::Tensor()};
  }
};

std::tuple<at::Tensor, at::Tensor> rms_norm(const at::Tensor& x, c10::IntArrayRef shape, const OptTensor& weight,
                                            std::optional<double> eps) {
  auto r = RmsNorm::apply(x, shape, weight, eps);
  return {r[0], r[1]};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& x, c10::IntArrayRef shape,
                                                          const OptTensor& weight, const OptTensor& bias,
                                                          double eps) {
  auto r = LayerNorm::apply(x, shape, weight, bias, eps);
  return {r[0], r[1], r[2]};
}

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("rms_norm", &mytorch::autograd::rms_norm);
  m.impl("layer_norm", &mytorch::autograd::layer_norm);
}
