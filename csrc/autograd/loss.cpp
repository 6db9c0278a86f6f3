// Autograd of the large-vocabulary cross-entropies, in C++ (see common.h): fused_cross_entropy
// (its lse is an output without a gradient) and fused_cross_entropy_grad.
#include <c10/core/impl/TorchDispatchModeTLS.h>

#include "autograd/common.h"

namespace mytorch {
namespace autograd {
namespace {

using T = at::Tensor;

struct CrossEntropy : public torch::autograd::Function<CrossEntropy> {
  static variable_list forward(AutogradContext* ctx, const T& logits, const T& target, int64_t ignore_index,
                               double label_smoothing, int64_t reduction) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<std::tuple<T, T>(const T&, const T&, int64_t, double, int64_t)>(
        "mytorch::fused_cross_entropy");
    auto [loss, lse] = fwd.call(logits, target, ignore_index, label_smoothing, reduction);
    ctx->save_for_backward({logits, target, lse});
    ctx->saved_data["ignore_index"] = ignore_index;
    ctx->saved_data["label_smoothing"] = label_smoothing;
    ctx->saved_data["reduction"] = reduction;
    ctx->mark_non_differentiable({lse});
    return {loss, lse};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static const auto bwd =
        find_op<T(const T&, const T&, const T&, const T&, int64_t, double, int64_t)>(
            "mytorch::fused_cross_entropy_backward");
    const auto s = ctx->get_saved_variables();
    auto& d = ctx->saved_data;
    return {bwd.call(grads[0], s[0], s[1], s[2], d["ignore_index"].toInt(), d["label_smoothing"].toDouble(),
                     d["reduction"].toInt()),
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
                               double label_smoothing, int64_t reduction, const OptTensor& divisor) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<std::tuple<T, T>(const T&, const T&, int64_t, double, int64_t,
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

std::tuple<T, T> fused_cross_entropy(const T& logits, const T& target, int64_t ignore_index, double label_smoothing,
                                     int64_t reduction) {
  auto r = CrossEntropy::apply(logits, target, ignore_index, label_smoothing, reduction);
  return {r[0], r[1]};
}
std::tuple<T, T> fused_cross_entropy_grad(const T& logits, const T& target, int64_t ignore_index,
                                          double label_smoothing, int64_t reduction,
                                          const OptTensor& divisor) {
  auto r = CrossEntropyGrad::apply(logits, target, ignore_index, label_smoothing, reduction, divisor);
  return {r[0], r[1]};
}

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("fused_cross_entropy", &mytorch::autograd::fused_cross_entropy);
  m.impl("fused_cross_entropy_grad", &mytorch::autograd::fused_cross_entropy_grad);
}
