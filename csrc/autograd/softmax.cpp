// Autograd of softmax and log_softmax, in C++ (see common.h): the backward needs only the output.
#include "autograd/common.h"

namespace mytorch {
namespace autograd {
namespace {

using T = at::Tensor;

template <bool kLog>
struct SoftmaxBackward : BackwardNode<SoftmaxBackward<kLog>> {
  static constexpr const char* kName = kLog ? "mytorch::LogSoftmaxBackward" : "mytorch::SoftmaxBackward";
  SavedVariable y;
  int64_t dim = 0;
  variable_list apply(variable_list&& grads) override {
    static const auto bwd = find_op<T(const T&, const T&, int64_t)>(
        kLog ? "mytorch::log_softmax_backward" : "mytorch::softmax_backward");
    if (!grads[0].defined()) return {T()};
    const T out = this->unpack(y);
    BackwardCall call;
    return {bwd.call(grads[0], out, dim)};
  }
  void release_variables() override { y.reset_data(); }
};

template <bool kLog>
T softmax_autograd(const T& x, int64_t dim) {
  static const auto fwd = find_op<T(const T&, int64_t)>(kLog ? "mytorch::log_softmax" : "mytorch::softmax");
  T y;
  {
    BelowAutograd below;
    y = fwd.call(x, dim);
  }
  if (auto node = make_node<SoftmaxBackward<kLog>>(kLog ? "mytorch::log_softmax" : "mytorch::softmax", x)) {
    attach(node, {y});
    node->y = SavedVariable(y, /*is_output=*/true);
    node->dim = dim;
    created(node);
  }
  return y;
}

T softmax(const T& x, int64_t dim) { return softmax_autograd<false>(x, dim); }
T log_softmax(const T& x, int64_t dim) { return softmax_autograd<true>(x, dim); }

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("softmax", &mytorch::autograd::softmax);
  m.impl("log_softmax", &mytorch::autograd::log_softmax);
}
