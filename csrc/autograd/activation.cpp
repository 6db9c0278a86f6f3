// Autograd of the activation family, in C++ (see common.h): gelu, bias_gelu, swiglu.
#include "autograd/common.h"

namespace mytorch {
namespace autograd {
namespace {

using T = at::Tensor;

struct Swiglu : public torch::autograd::Function<Swiglu> {
  static variable_list forward(AutogradContext* ctx, const T& a, const T& b) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<T(const T&, const T&)>("mytorch::swiglu");
    ctx->save_for_backward({a, b});
    return {fwd.call(a, b)};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto bwd =
        find_op<std::tuple<T, T>(const T&, const T&, const T&)>("mytorch::swiglu_backward");
    const auto s = ctx->get_saved_variables();
    auto [da, db] = bwd.call(grads[0], s[0], s[1]);
    return {da, db};
  }
};

struct Gelu : public torch::autograd::Function<Gelu> {
  static variable_list forward(AutogradContext* ctx, const T& x, c10::string_view approximate) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<T(const T&, c10::string_view)>("mytorch::gelu");
    ctx->save_for_backward({x});
    ctx->saved_data["approximate"] = std::string(approximate);
    return {fwd.call(x, approximate)};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto bwd = find_op<T(const T&, const T&, c10::string_view)>("mytorch::gelu_backward");
    const std::string approximate = ctx->saved_data["approximate"].toStringRef();
    return {bwd.call(grads[0], ctx->get_saved_variables()[0], approximate), T()};
  }
};

struct BiasGelu : public torch::autograd::Function<BiasGelu> {
  static variable_list forward(AutogradContext* ctx, const T& x, const T& bias, c10::string_view approximate) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<T(const T&, const T&, c10::string_view)>("mytorch::bias_gelu");
    ctx->save_for_backward({x, bias});
    ctx->saved_data["approximate"] = std::string(approximate);
    return {fwd.call(x, bias, approximate)};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto bwd = find_op<std::tuple<T, T>(const T&, const T&, const T&, c10::string_view)>(
        "mytorch::bias_gelu_backward");
    const auto s = ctx->get_saved_variables();
    const std::string approximate = ctx->saved_data["approximate"].toStringRef();
    auto [dx, db] = bwd.call(grads[0], s[0], s[1], approximate);
    return {dx, db, T()};
  }
};

T swiglu(const T& a, const T& b) { return Swiglu::apply(a, b)[0]; }
T gelu(const T& x, c10::string_view approximate) { return Gelu::apply(x, approximate)[0]; }
T bias_gelu(const T& x, const T& bias, c10::string_view approximate) {
  return BiasGelu::apply(x, bias, approximate)[0];
}

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("swiglu", &mytorch::autograd::swiglu);
  m.impl("gelu", &mytorch::autograd::gelu);
  m.impl("bias_gelu", &mytorch::autograd::bias_gelu);
}
