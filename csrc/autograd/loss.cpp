// Autograd of the large-vocabulary cross-entropies, in C++ (see common.h): fused_cross_entropy
// (its lse is an output without a gradient), fused_cross_entropy_grad and
// fused_linear_cross_entropy (their gradients are outputs of the forward).
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

// fused_cross_entropy_grad and fused_linear_cross_entropy: the forward writes the loss and the
// inputs' gradients for a loss gradient of 1; the backward hands those gradients over, times
// the loss gradient.
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

struct HandOverBackward : torch::autograd::Node {
  const char* op_name = "";
  std::vector<SavedVariable> grads;  // one per input of the node, in order
  std::optional<T> first_scale;      // the loss gradient of the first backward (eager)

  std::string name() const override { return op_name; }
  variable_list apply(variable_list&& in) override {
    const T& grad = in[0];
    variable_list out(grads.size());
    if (!grad.defined()) return out;  // the loss is not part of what is differentiated
    std::vector<T> saved;
    for (const SavedVariable& g : grads) saved.push_back(g.unpack());
    if (!eager(saved[0]) || !eager(grad)) {
      for (size_t i = 0; i < saved.size(); ++i) out[i] = saved[i] * grad.to(saved[i].scalar_type());
      return out;
    }
    if (!first_scale) {
      static const auto scale = find_op<void(const T&, const T&)>("mytorch::scale_");
      first_scale = grad.detach().to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
      for (size_t i = 0; i < saved.size(); ++i) {
        out[i] = saved[i].variable_data();  // its own version counter: the saved tensor stays unpackable
        scale.call(out[i], grad);
      }
      return out;
    }
    const T ratio = grad.to(at::kFloat) / *first_scale;
    for (size_t i = 0; i < saved.size(); ++i) out[i] = saved[i] * ratio.to(saved[i].scalar_type());
    return out;
  }
  void release_variables() override {
    for (SavedVariable& g : grads) g.reset_data();
  }
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
  if (auto node = make_node<HandOverBackward>("mytorch::fused_cross_entropy_grad", logits)) {
    attach(node, {loss});
    node->op_name = "mytorch::FusedCrossEntropyGradBackward";
    node->grads.emplace_back(grad_logits, false);
    created(node);
  }
  return {loss, grad_logits};
}

std::tuple<T, T, T> fused_linear_cross_entropy(const T& input, const T& weight, const T& target, int64_t ignore_index,
                                               double label_smoothing, int64_t reduction, int64_t chunk_size,
                                               const OptTensor& divisor) {
  static const auto fwd = find_op<std::tuple<T, T, T>(const T&, const T&, const T&, int64_t, double, int64_t,
                                                      int64_t, const OptTensor&)>(
      "mytorch::fused_linear_cross_entropy");
  T loss, grad_input, grad_weight;
  {
    BelowAutograd below;
    std::tie(loss, grad_input, grad_weight) =
        fwd.call(input, weight, target, ignore_index, label_smoothing, reduction, chunk_size, divisor);
  }
  if (auto node = make_node<HandOverBackward>("mytorch::fused_linear_cross_entropy", input, weight)) {
    attach(node, {loss});
    node->op_name = "mytorch::FusedLinearCrossEntropyBackward";
    node->grads.emplace_back(grad_input, false);
    node->grads.emplace_back(grad_weight, false);
    created(node);
  }
  return {loss, grad_input, grad_weight};
}

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("fused_cross_entropy", &mytorch::autograd::fused_cross_entropy);
  m.impl("fused_cross_entropy_grad", &mytorch::autograd::fused_cross_entropy_grad);
  m.impl("fused_linear_cross_entropy", &mytorch::autograd::fused_linear_cross_entropy);
}
