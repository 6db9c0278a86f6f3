// Autograd of mytorch::rms_norm and mytorch::layer_norm, in C++ (see common.h).
// mean / rstd are outputs without a gradient; the weight and bias get theirs only when given.
#include "autograd/common.h"

namespace mytorch {
namespace autograd {
namespace {

using T = at::Tensor;
using RmsSig = std::tuple<T, T>(const T&, c10::IntArrayRef, const OptTensor&, std::optional<double>);
using RmsBwdSig = std::tuple<T, T>(const T&, const T&, c10::IntArrayRef, const T&, const OptTensor&);
using LnSig = std::tuple<T, T, T>(const T&, c10::IntArrayRef, const OptTensor&, const OptTensor&, double);
using LnBwdSig = std::tuple<T, T, T>(const T&, const T&, c10::IntArrayRef, const T&, const T&, const OptTensor&);

struct RmsNormBackward : BackwardNode<RmsNormBackward> {
  static constexpr const char* kName = "mytorch::RmsNormBackward";
  SavedVariable x, rstd, weight;
  std::vector<int64_t> shape;
  variable_list apply(variable_list&& grads) override {
    static const auto bwd = find_op<RmsBwdSig>("mytorch::rms_norm_backward");
    if (!grads[0].defined()) return {T(), T()};
    const T sx = unpack(x), sr = unpack(rstd), sw = unpack(weight);
    BackwardCall call;
    auto [dx, dw] = bwd.call(grads[0], sx, shape, sr, optional(sw));
    return {dx, sw.defined() ? dw : T()};
  }
  void release_variables() override {
    x.reset_data();
    rstd.reset_data();
    weight.reset_data();
  }
};

struct LayerNormBackward : BackwardNode<LayerNormBackward> {
  static constexpr const char* kName = "mytorch::LayerNormBackward";
  SavedVariable x, mean, rstd, weight;
  std::vector<int64_t> shape;
  bool has_bias = false;
  variable_list apply(variable_list&& grads) override {
    static const auto bwd = find_op<LnBwdSig>("mytorch::layer_norm_backward");
    if (!grads[0].defined()) return {T(), T(), T()};
    const T sx = unpack(x), sm = unpack(mean), sr = unpack(rstd), sw = unpack(weight);
    BackwardCall call;
    auto [dx, dw, db] = bwd.call(grads[0], sx, shape, sm, sr, optional(sw));
    return {dx, sw.defined() ? dw : T(), has_bias ? db : T()};
  }
  void release_variables() override {
    x.reset_data();
    mean.reset_data();
    rstd.reset_data();
    weight.reset_data();
  }
};

std::tuple<T, T> rms_norm(const T& x, c10::IntArrayRef shape, const OptTensor& weight, std::optional<double> eps) {
  static const auto fwd = find_op<RmsSig>("mytorch::rms_norm");
  T y, rstd;
  {
    BelowAutograd below;
    std::tie(y, rstd) = fwd.call(x, shape, weight, eps);
  }
  if (auto node = make_node<RmsNormBackward>("mytorch::rms_norm", x, weight)) {
    attach(node, {y});
    node->x = SavedVariable(x, false);
    node->rstd = SavedVariable(rstd, false);
    node->weight = SavedVariable(or_undefined(weight), false);
    node->shape = shape.vec();
    created(node);
  }
  return {y, rstd};
}

std::tuple<T, T, T> layer_norm(const T& x, c10::IntArrayRef shape, const OptTensor& weight, const OptTensor& bias,
                               double eps) {
  static const auto fwd = find_op<LnSig>("mytorch::layer_norm");
  T y, mean, rstd;
  {
    BelowAutograd below;
    std::tie(y, mean, rstd) = fwd.call(x, shape, weight, bias, eps);
  }
  if (auto node = make_node<LayerNormBackward>("mytorch::layer_norm", x, weight, bias)) {
    attach(node, {y});
    node->x = SavedVariable(x, false);
    node->mean = SavedVariable(mean, false);
    node->rstd = SavedVariable(rstd, false);
    node->weight = SavedVariable(or_undefined(weight), false);
    node->shape = shape.vec();
    node->has_bias = bias.has_value() && bias->defined();
    created(node);
  }
  return {y, mean, rstd};
}

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("rms_norm", &mytorch::autograd::rms_norm);
  m.impl("layer_norm", &mytorch::autograd::layer_norm);
}
