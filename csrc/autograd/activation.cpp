// Autograd of the activation family, in C++ (see common.h): gelu, bias_gelu, swiglu.
#include "autograd/common.h"

namespace mytorch {
namespace autograd {
namespace {

using T = at::Tensor;

struct SwigluBackward : BackwardNode<SwigluBackward> {
  static constexpr const char* kName = "mytorch::SwigluBackward";
  SavedVariable a, b;
  variable_list apply(variable_list&& grads) override {
    static const auto bwd = find_op<std::tuple<T, T>(const T&, const T&, const T&)>("mytorch::swiglu_backward");
    if (!grads[0].defined()) return {T(), T()};
    const T sa = unpack(a), sb = unpack(b);
    BackwardCall call;
    auto [da, db] = bwd.call(grads[0], sa, sb);
    return {da, db};
  }
  void release_variables() override {
    a.reset_data();
    b.reset_data();
  }
};

struct GeluBackward : BackwardNode<GeluBackward> {
  static constexpr const char* kName = "mytorch::GeluBackward";
  SavedVariable x;
  std::string approximate;
  variable_list apply(variable_list&& grads) override {
    static const auto bwd = find_op<T(const T&, const T&, c10::string_view)>("mytorch::gelu_backward");
    if (!grads[0].defined()) return {T()};
    const T sx = unpack(x);
    BackwardCall call;
    return {bwd.call(grads[0], sx, approximate)};
  }
  void release_variables() override { x.reset_data(); }
};

struct BiasGeluBackward : BackwardNode<BiasGeluBackward> {
  static constexpr const char* kName = "mytorch::BiasGeluBackward";
  SavedVariable x, bias;
  std::string approximate;
  variable_list apply(variable_list&& grads) override {
    static const auto bwd = find_op<std::tuple<T, T>(const T&, const T&, const T&, c10::string_view)>(
        "mytorch::bias_gelu_backward");
    if (!grads[0].defined()) return {T(), T()};
    const T sx = unpack(x), sb = unpack(bias);
    BackwardCall call;
    auto [dx, db] = bwd.call(grads[0], sx, sb, approximate);
    return {dx, db};
  }
  void release_variables() override {
    x.reset_data();
    bias.reset_data();
  }
};

T swiglu(const T& a, const T& b) {
  static const auto fwd = find_op<T(const T&, const T&)>("mytorch::swiglu");
  T y;
  {
    BelowAutograd below;
    y = fwd.call(a, b);
  }
  if (auto node = make_node<SwigluBackward>("mytorch::swiglu", a, b)) {
    attach(node, {y});
    node->a = SavedVariable(a, false);
    node->b = SavedVariable(b, false);
    created(node);
  }
  return y;
}

T gelu(const T& x, c10::string_view approximate) {
  static const auto fwd = find_op<T(const T&, c10::string_view)>("mytorch::gelu");
  T y;
  {
    BelowAutograd below;
    y = fwd.call(x, approximate);
  }
  if (auto node = make_node<GeluBackward>("mytorch::gelu", x)) {
    attach(node, {y});
    node->x = SavedVariable(x, false);
    node->approximate = std::string(approximate);
    created(node);
  }
  return y;
}

T bias_gelu(const T& x, const T& bias, c10::string_view approximate) {
  static const auto fwd = find_op<T(const T&, const T&, c10::string_view)>("mytorch::bias_gelu");
  T y;
  {
    BelowAutograd below;
    y = fwd.call(x, bias, approximate);
  }
  if (auto node = make_node<BiasGeluBackward>("mytorch::bias_gelu", x, bias)) {
    attach(node, {y});
    node->x = SavedVariable(x, false);
    node->bias = SavedVariable(bias, false);
    node->approximate = std::string(approximate);
    created(node);
  }
  return y;
}

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("swiglu", &mytorch::autograd::swiglu);
  m.impl("gelu", &mytorch::autograd::gelu);
  m.impl("bias_gelu", &mytorch::autograd::bias_gelu);
}
