// Shared by the C++ autograd kernels of the hot ops (csrc/autograd/<family>.cpp).
//
// Each op's Autograd kernel is a torch::autograd::Function whose forward redispatches below
// autograd and whose backward calls the op's backward op: no Python on the training path.
// A gradient is returned only for the inputs that are tensors (an absent optional tensor
// gets none), as the Function contract requires.
#pragma once
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <string>
#include <vector>

namespace mytorch {
namespace autograd {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using OptTensor = std::optional<at::Tensor>;

// The typed handle of a mytorch op; call sites keep it in a function-local static.
template <typename Sig>
c10::TypedOperatorHandle<Sig> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").template typed<Sig>();
}

inline at::Tensor or_undefined(const OptTensor& t) { return t.has_value() ? *t : at::Tensor(); }
inline OptTensor optional(const at::Tensor& t) { return t.defined() ? OptTensor(t) : std::nullopt; }

}  // namespace autograd
}  // namespace mytorch
