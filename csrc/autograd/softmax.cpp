// Autograd of softmax and log_softmax, in C++ (see common.h).
#include "autograd/common.h"

namespace mytorch {
namespace autograd {
namespace {

using T = at::Tensor;

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

T softmax(const T& x, int64_t dim) { return Softmax<false>::apply(x, dim)[0]; }
T log_softmax(const T& x, int64_t dim) { return Softmax<true>::apply(x, dim)[0]; }

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("softmax", &mytorch::autograd::softmax);
  m.impl("log_softmax", &mytorch::autograd::log_softmax);
}
