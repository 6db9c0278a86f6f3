// Autograd of the fused transformer ops, in C++ (see common.h): rope, swiglu, gelu, bias_gelu,
// softmax, log_softmax, fused_cross_entropy (its lse is an output without a gradient) and
// fused_cross_entropy_grad.
#include <c10/core/impl/TorchDispatchModeTLS.h>

#include "autograd/common.h"

namespace mytorch {
namespace autograd {
namespace {

using T = at::Tensor;

struct Rope : public torch::autograd::Function<Rope> {
  static variable_list forward(AutogradContext* ctx, const T& x, const T& cos, const T& sin, bool interleaved) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<T(const T&, const T&, const T&, bool)>("mytorch::rope");
    ctx->save_for_backward({cos, sin});
    ctx->saved_data["interleaved"] = interleaved;
    return {fwd.call(x, cos, sin, interleaved)};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto bwd = find_op<T(const T&, const T&, const T&, bool)>("mytorch::rope_backward");
    const auto s = ctx->get_saved_variables();
    return {bwd.call(grads[0], s[0], s[1], ctx->saved_data["interleaved"].toBool()), T(), T(), T()};
  }
};

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

// softmax / log_softmax: the backward needs only the output
template <bool kLog>
struct Softmax : public torch::autograd::Function<Softmax<kLog>> {
  static variable_list forward(AutogradContext* ctx, const T& x, int64_t dim) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<T(const T&, int64_t)>(kLog ? "mytorch::log_softmax" : "mytorch::softmax");
    T y = fwd.call(x, dim);
    ctx->save_for_backward({y});
    ctx->saved_data["dim"] = dim;
    return {y};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto bwd = find_op<T(const T&, const T&, int64_t)>(
        kLog ? "mytorch::log_softmax_backward" : "mytorch::softmax_backward");
    return {bwd.call(grads[0], ctx->get_saved_variables()[0], ctx->saved_data["dim"].toInt()), T()};
  }
};

struct CrossEntropy : public torch::autograd::Function<CrossEntropy> {
  static variable_list forward(AutogradContext* ctx, const T& logits, const T& target, int64_t ignore_index,
                               double label_smoothing, c10::string_view reduction) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<std::tuple<T, T>(const T&, const T&, int64_t, double, c10::string_view)>(
        "mytorch::fused_cross_entropy");
    auto [loss, lse] = fwd.call(logits, target, ignore_index, label_smoothing, reduction);
    ctx->save_for_backward({logits, target, lse});
    ctx->saved_data["ignore_index"] = ignore_index;
    ctx->saved_data["label_smoothing"] = label_smoothing;
    ctx->saved_data["reduction"] = std::string(reduction);
    ctx->mark_non_differentiable({lse});
    return {loss, lse};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto bwd =
        find_op<T(const T&, const T&, const T&, const T&, int64_t, double, c10::string_view)>(
            "mytorch::fused_cross_entropy_backward");
    const auto s = ctx->get_saved_variables();
    auto& d = ctx->saved_data;
    const std::string reduction = d["reduction"].toStringRef();
    return {bwd.call(grads[0], s[0], s[1], s[2], d["ignore_index"].toInt(), d["label_smoothing"].toDouble(),
                     reduction),
            T(), T(), T(), T()};
  }
};

// fused_cross_entropy_grad: the forward writes the loss and the logits' gradient for a loss
// gradient of 1; the backward hands that gradient over, times the loss gradient.
//
// Eager, first backward: scaled in place (scale_: no work and no host sync when the loss
// gradient is 1) through a fresh alias, so that .grad takes it without a copy once autograd
// has freed the saved tensor, and the saved tensor's version stays valid. A later backward
// of a retained graph gets it times grad / the first grad, out of place (NaN where the
// first grad is 0 or not finite: only the scaled values are kept). Traced (torch.compile,
// make_fx, functorch): out of place, as a functional graph needs.
bool eager(const T& t) {
  const auto traced = c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::Functionalize,
                                           c10::DispatchKey::FuncTorchGradWrapper,
                                           c10::DispatchKey::FuncTorchBatched});
  return !t.key_set().has_any(traced) && !c10::impl::TorchDispatchModeTLS::any_modes_set();
}

struct CrossEntropyGrad : public torch::autograd::Function<CrossEntropyGrad> {
  static variable_list forward(AutogradContext* ctx, const T& logits, const T& target, int64_t ignore_index,
                               double label_smoothing, c10::string_view reduction, const OptTensor& divisor) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<std::tuple<T, T>(const T&, const T&, int64_t, double, c10::string_view,
                                                     const OptTensor&)>("mytorch::fused_cross_entropy_grad");
    auto [loss, grad_logits] = fwd.call(logits, target, ignore_index, label_smoothing, reduction, divisor);
    ctx->save_for_backward({grad_logits});
    ctx->mark_non_differentiable({grad_logits});
    ctx->set_materialize_grads(false);  // no zero-filled stand-in as large as the logits
    return {loss, grad_logits};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list out(6);
    const T& grad = grads[0];
    if (!grad.defined()) return out;  // the loss is not part of what is differentiated
    const T saved = ctx->get_saved_variables()[0];
    if (!eager(saved) || !eager(grad)) {
      out[0] = saved * grad.to(saved.scalar_type());
      return out;
    }
    auto& d = ctx->saved_data;
    if (d.find("first_scale") == d.end()) {
      static const auto scale = find_op<void(const T&, const T&)>("mytorch::scale_");
      d["first_scale"] = grad.detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
      T g = saved.variable_data();  // its own version counter: the saved tensor stays unpackable
      scale.call(g, grad);
      out[0] = g;
      return out;
    }
    const T ratio = grad.to(at::kFloat) / d.at("first_scale").toTensor();
    out[0] = saved * ratio.to(saved.scalar_type());
    return out;
  }
};

T rope(const T& x, const T& cos, const T& sin, bool interleaved) { return Rope::apply(x, cos, sin, interleaved)[0]; }
T swiglu(const T& a, const T& b) { return Swiglu::apply(a, b)[0]; }
T gelu(const T& x, c10::string_view approximate) { return Gelu::apply(x, approximate)[0]; }
T bias_gelu(const T& x, const T& bias, c10::string_view approximate) {
  return BiasGelu::apply(x, bias, approximate)[0];
}
T softmax(const T& x, int64_t dim) { return Softmax<false>::apply(x, dim)[0]; }
T log_softmax(const T& x, int64_t dim) { return Softmax<true>::apply(x, dim)[0]; }
std::tuple<T, T> fused_cross_entropy(const T& logits, const T& target, int64_t ignore_index, double label_smoothing,
                                     c10::string_view reduction) {
  auto r = CrossEntropy::apply(logits, target, ignore_index, label_smoothing, reduction);
  return {r[0], r[1]};
}
std::tuple<T, T> fused_cross_entropy_grad(const T& logits, const T& target, int64_t ignore_index,
                                          double label_smoothing, c10::string_view reduction,
                                          const OptTensor& divisor) {
  auto r = CrossEntropyGrad::apply(logits, target, ignore_index, label_smoothing, reduction, divisor);
  return {r[0], r[1]};
}

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("rope", &mytorch::autograd::rope);
  m.impl("swiglu", &mytorch::autograd::swiglu);
  m.impl("gelu", &mytorch::autograd::gelu);
  m.impl("bias_gelu", &mytorch::autograd::bias_gelu);
  m.impl("softmax", &mytorch::autograd::softmax);
  m.impl("log_softmax", &mytorch::autograd::log_softmax);
  m.impl("fused_cross_entropy", &mytorch::autograd::fused_cross_entropy);
  m.impl("fused_cross_entropy_grad", &mytorch::autograd::fused_cross_entropy_grad);
}
