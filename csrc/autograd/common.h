// Shared by the C++ autograd kernels of the hot ops (csrc/autograd/<family>.cpp).
//
// Each op's Autograd kernel runs the op below autograd and, when an input needs a gradient,
// attaches a backward node: a torch::autograd::Node subclass whose members hold what the
// backward needs, the pattern of ATen's generated nodes. The backward calls the op's backward
// op. No Python runs on the training path, and no AutogradContext, string-keyed saved_data map
// or output wrapping of torch::autograd::Function is paid for on every call.
//
// Contract of a kernel (see softmax.cpp for the shortest one):
//   y = fwd.call(...) under BelowAutograd;
//   if (auto node = make_node<N>(op, inputs that get a gradient...)) {
//     attach(node, {differentiable outputs...});  // in the order of the node's grads
//     node->... = saved state (outputs saved after attach, with SavedVariable(t, true));
//     created(node);
//   }
// The backward returns one gradient per input given to make_node (undefined: none), and gets
// undefined gradients for outputs that were not used (no zero-filled stand-ins).
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace mytorch {
namespace autograd {

using torch::autograd::SavedVariable;
using torch::autograd::variable_list;
using OptTensor = std::optional<at::Tensor>;
using BelowAutograd = at::AutoDispatchBelowADInplaceOrView;

// The typed handle of a mytorch op; call sites keep it in a function-local static.
template <typename Sig>
c10::TypedOperatorHandle<Sig> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").template typed<Sig>();
}

inline at::Tensor or_undefined(const OptTensor& t) { return t.has_value() ? *t : at::Tensor(); }
inline OptTensor optional(const at::Tensor& t) { return t.defined() ? OptTensor(t) : std::nullopt; }

// ------------------------------------------------------------------ backward nodes
// Nodes are owned by std::shared_ptr in older torch releases and by c10::intrusive_ptr in
// newer ones; the helpers below take whichever this torch has.
constexpr bool kIntrusiveNodes = std::is_base_of_v<c10::intrusive_ptr_target, torch::autograd::Node>;
template <typename N>
using NodePtr = std::conditional_t<kIntrusiveNodes, c10::intrusive_ptr<N>, std::shared_ptr<N>>;

// Base of the backward nodes: the name autograd reports (e.g. in anomaly mode and
// torch.autograd.graph), and the saved tensors freed after a backward without retain_graph.
template <typename Derived>
struct BackwardNode : torch::autograd::Node {
  std::string name() const override { return Derived::kName; }
  // Saved tensors as the backward reads them (an output saved with is_output needs its node).
  at::Tensor unpack(const SavedVariable& v) { return v.unpack(this->getptr()); }
};

template <typename T>
inline bool has_forward_grad(const T& t) {
  return torch::autograd::isFwGradDefined(t);
}

// A new node of type N with edges to `inputs` (the inputs that get a gradient, in the order
// the backward returns them), or null when grad mode is off or none of them requires grad.
// An input with a forward gradient (a dual tensor) is refused whether or not it requires grad
// and in any grad mode: the nodes have no forward formula, so its tangent would be dropped.
template <typename N, typename... Inputs>
NodePtr<N> make_node(const char* op, const Inputs&... inputs) {
  TORCH_CHECK(!(has_forward_grad(inputs) || ...), op,
              ": forward-mode AD (dual tensors) is not supported; got an input with a forward gradient");
  if (!torch::autograd::compute_requires_grad(inputs...)) return nullptr;
  NodePtr<N> node;
  if constexpr (kIntrusiveNodes) {
    node = c10::make_intrusive<N>();
  } else {
    // deleteNode frees long chains of nodes without deep recursion (found by argument lookup)
    node = NodePtr<N>(new N(), [](auto* n) { deleteNode(n); });
  }
  node->set_next_edges(torch::autograd::collect_next_edges(inputs...));
  return node;
}

// Makes `node` the grad_fn of `outputs`: fresh tensors the op made, never one of its inputs.
template <typename Ptr>
void attach(const Ptr& node, std::initializer_list<at::Tensor> outputs) {
  for (const at::Tensor& out : outputs) torch::autograd::set_history(out, node);
}

namespace compat {
// torch releases without node-creation hooks: nothing to fire. torch's own
// fire_node_creation_hooks(const intrusive_ptr<Node>&), where it exists, is found by argument
// lookup and, being no template, wins over this one.
template <typename P>
void fire_node_creation_hooks(const P&) {}
}  // namespace compat

// Lets torch.autograd.graph's node-creation hooks (where this torch has them) see the node,
// once its outputs and saved tensors are in place.
template <typename Ptr, typename Base = torch::autograd::Node>
void created(const Ptr& node) {
  if constexpr (kIntrusiveNodes) {
    using compat::fire_node_creation_hooks;
    const c10::intrusive_ptr<Base> base(node);
    fire_node_creation_hooks(base);
  }
}

// Around a backward op's call in a backward: below autograd unless a graph of the backward
// itself is being recorded (create_graph=True), so that the call skips the autograd fallback
// of the backward op (a boxed call that records nothing when grad mode is off).
struct BackwardCall {
  std::optional<BelowAutograd> below;
  BackwardCall() {
    if (!torch::autograd::GradMode::is_enabled()) below.emplace();
  }
};

}  // namespace autograd
}  // namespace mytorch
