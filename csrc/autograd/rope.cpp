// Autograd of rope, in C++ (see common.h): the backward is rope_backward (the inverse
// rotation). cos and sin get no gradient.
#include "autograd/common.h"

namespace mytorch {
namespace autograd {
namespace {

using T = at::Tensor;

struct RopeBackward : BackwardNode<RopeBackward> {
  static constexpr const char* kName = "mytorch::RopeBackward";
  SavedVariable cos, sin;
  bool interleaved = false;
  variable_list apply(variable_list&& grads) override {
    static const auto bwd = find_op<T(const T&, const T&, const T&, bool)>("mytorch::rope_backward");
    if (!grads[0].defined()) return {T()};
    const T c = unpack(cos), s = unpack(sin);
    BackwardCall call;
    return {bwd.call(grads[0], c, s, interleaved)};
  }
  void release_variables() override {
    cos.reset_data();
    sin.reset_data();
  }
};

T rope(const T& x, const T& cos, const T& sin, bool interleaved) {
  static const auto fwd = find_op<T(const T&, const T&, const T&, bool)>("mytorch::rope");
  T y;
  {
    BelowAutograd below;
    y = fwd.call(x, cos, sin, interleaved);
  }
  if (auto node = make_node<RopeBackward>("mytorch::rope", x)) {
    attach(node, {y});
    node->cos = SavedVariable(cos, false);
    node->sin = SavedVariable(sin, false);
    node->interleaved = interleaved;
    created(node);
  }
  return y;
}

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("rope", &mytorch::autograd::rope);
}
