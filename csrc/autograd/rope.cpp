// Autograd of rope, in C++ (see common.h): the backward is rope_backward (the inverse rotation).
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

T rope(const T& x, const T& cos, const T& sin, bool interleaved) { return Rope::apply(x, cos, sin, interleaved)[0]; }

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("rope", &mytorch::autograd::rope);
}
