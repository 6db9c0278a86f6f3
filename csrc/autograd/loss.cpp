// Autograd of the large-vocabulary cross-entropies, in C++ (see common.h): fused_cross_entropy
// (its lse is an output without a gradient) and fused_cross_entropy_grad.
#include <c10/core/impl/TorchDispatchModeTLS.h>

#include "autograd/common.h"

namespace mytorch {
namespace autograd {
namespace {

using T = at::Tensor;

struct CrossEntropyBackward : BackwardNode<CrossEntropyBackward> {
  static constexpr const char* kName = "mytorch::FusedCrossEntropyBackward";
  SavedVariable logits, target, lse;
  int64_t ignore_index = -100, reduction = 1;
  double label_smoothing = 0.0;
  variable_list apply(variable_list&& grads) override {
    static const auto bwd = find_op<T(const T&, const T&, const T&, const T&, int64_t, double, int64_t)>(
        "mytorch::fused_cross_entropy_backward");
    if (!grads[0].defined()) return {T()};
    const T sl = unpack(logits), st = unpack(target), se = unpack(lse);
    BackwardCall call;
    return {bwd.call(grads[0], sl, st, se, ignore_index, label_smoothing, reduction)};
  }
  void release_variables() override {
    logits.reset_data();
    target.reset_data();
    lse.reset_data();
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

struct CrossEntropyGradBackward : BackwardNode<CrossEntropyGradBackward> {
  static constexpr const char* kName = "mytorch::FusedCrossEntropyGradBackward";
  SavedVariable grad_logits;
  std::optional<T> first_scale;  // the loss gradient of the first backward (eager)
  variable_list apply(variable_list&& grads) override {
    const T& grad = grads[0];
    if (!grad.defined()) return {T()};  // the loss is not part of what is differentiated
    const T saved = unpack(grad_logits);
    if (!eager(saved) || !eager(grad)) return {saved * grad.to(saved.scalar_type())};
    if (!first_scale) {
      static const auto scale = find_op<void(const T&, const T&)>("mytorch::scale_");
      first_scale = grad.detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
      T g = saved.variable_data();  // its own version counter: the saved tensor stays unpackable
      scale.call(g, grad);
      return {g};
    }
    const T ratio = grad.to(at::kFloat) / *first_scale;
    return {saved * ratio.to(saved.scalar_type())};
  }
  void release_variables() override { grad_logits.reset_data(); }
};

std::tuple<T, T> fused_cross_entropy(const T& logits, const T& target, int64_t ignore_index, double label_smoothing,
                                     int64_t reduction) {
  static const auto fwd = find_op<std::tuple<T, T>(const T&, const T&, int64_t, double, int64_t)>(
      "mytorch::fused_cross_entropy");
  T loss, lse;
  {
    BelowAutograd below;
    std::tie(loss, lse) = fwd.call(logits, target, ignore_index, label_smoothing, reduction);
  }
  if (auto node = make_node<CrossEntropyBackward>("mytorch::fused_cross_entropy", logits)) {
    attach(node, {loss});
    node->logits = SavedVariable(logits, false);
    node->target = SavedVariable(target, false);
    node->lse = SavedVariable(lse, false);
    node->ignore_index = ignore_index;
    node->label_smoothing = label_smoothing;
    node->reduction = reduction;
    created(node);
  }
  return {loss, lse};
}

std::tuple<T, T> fused_cross_entropy_grad(const T& logits, const T& target, int64_t ignore_index,
                                          double label_smoothing, int64_t reduction,
                                          const OptTensor& divisor) {
  static const auto fwd = find_op<std::tuple<T, T>(const T&, const T&, int64_t, double, int64_t,
                                                   const OptTensor&)>("mytorch::fused_cross_entropy_grad");
  T loss, grad_logits;
  {
    BelowAutograd below;
    std::tie(loss, grad_logits) = fwd.call(logits, target, ignore_index, label_smoothing, reduction, divisor);
  }
  if (auto node = make_node<CrossEntropyGradBackward>("mytorch::fused_cross_entropy_grad", logits)) {
    attach(node, {loss});
    node->grad_logits = SavedVariable(grad_logits, false);
    created(node);
  }
  return {loss, grad_logits};
}

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("fused_cross_entropy", &mytorch::autograd::fused_cross_entropy);
  m.impl("fused_cross_entropy_grad", &mytorch::autograd::fused_cross_entropy_grad);
}
