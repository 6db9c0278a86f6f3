// Autograd of mytorch::flash_attn, in C++: a training step's attention forward and
// backward never enter Python (the hot-op rule of DESIGN.md).
//
// The forward saves q, k, v, out, lse and the optional tensors; the backward calls
// mytorch::flash_attn_backward with the resolved softmax scale. lse is an output without a
// gradient; q, k and v get gradients (the mask, ALiBi slopes and sequence offsets none), and
// none when out's gradient is absent. The Autograd alias key serves
// CPU, CUDA and the mytorch device alike. At the end: flash_attn_with_kvcache, which has no
// backward (flash_attn_fp8, which has none either, is in backward_ops.cpp).
#include <torch/csrc/autograd/variable.h>

#include "autograd/common.h"
#include "kernels/attention_checks.h"

namespace mytorch {
namespace autograd {
namespace {

using FwdSig = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&, double,
                                                  std::optional<double>, bool, int64_t, int64_t, double,
                                                  const OptTensor&, const OptTensor&, const OptTensor&, int64_t,
                                                  int64_t, int64_t, const OptTensor&, bool, const OptTensor&);
using BwdSig = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
    const at::Tensor&, double, double, bool, int64_t, int64_t, double, const OptTensor&, const OptTensor&,
    const OptTensor&, int64_t, int64_t, int64_t, bool, const OptTensor&, const OptTensor&);

struct FlashAttnBackward : BackwardNode<FlashAttnBackward> {
  static constexpr const char* kName = "mytorch::FlashAttnBackward";
  SavedVariable q, k, v, out, lse, alibi, cu_q, cu_k, mask, seed_tensor;
  double dropout_p = 0.0, scale = 1.0, softcap = 0.0;
  bool causal = false, deterministic = false;
  int64_t window_left = -1, window_right = -1, max_q = 0, max_k = 0, seed = 0;

  variable_list apply(variable_list&& grads) override {
    static const auto bwd = find_op<BwdSig>("mytorch::flash_attn_backward");
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const at::Tensor sq = unpack(q), sk = unpack(k), sv = unpack(v), so = unpack(out), sl = unpack(lse);
    const at::Tensor sa = unpack(alibi), scq = unpack(cu_q), sck = unpack(cu_k), sm = unpack(mask),
                     ss = unpack(seed_tensor);
    BackwardCall call;
    auto [dq, dk, dv] = bwd.call(grads[0], sq, sk, sv, so, sl, dropout_p, scale, causal, window_left, window_right,
                                 softcap, optional(sa), optional(scq), optional(sck), max_q, max_k, seed,
                                 deterministic, optional(sm), optional(ss));
    return {dq, dk, dv};
  }
  void release_variables() override {
    for (SavedVariable* s : {&q, &k, &v, &out, &lse, &alibi, &cu_q, &cu_k, &mask, &seed_tensor}) s->reset_data();
  }
};

std::tuple<at::Tensor, at::Tensor> flash_attn_autograd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
    std::optional<double> softmax_scale, bool causal, int64_t window_left, int64_t window_right,
    double softcap, const OptTensor& alibi, const OptTensor& cu_q, const OptTensor& cu_k, int64_t max_q,
    int64_t max_k, int64_t seed, const OptTensor& mask, bool deterministic, const OptTensor& seed_tensor) {
  static const auto fwd = find_op<FwdSig>("mytorch::flash_attn");
  at::Tensor out, lse;
  {
    BelowAutograd below;
    std::tie(out, lse) = fwd.call(q, k, v, dropout_p, softmax_scale, causal, window_left, window_right, softcap,
                                  alibi, cu_q, cu_k, max_q, max_k, seed, mask, deterministic, seed_tensor);
  }
  if (auto node = make_node<FlashAttnBackward>("mytorch::flash_attn", q, k, v)) {
    attach(node, {out});
    node->q = SavedVariable(q, false);
    node->k = SavedVariable(k, false);
    node->v = SavedVariable(v, false);
    node->out = SavedVariable(out, /*is_output=*/true);
    node->lse = SavedVariable(lse, false);
    node->alibi = SavedVariable(alibi, false);
    node->cu_q = SavedVariable(cu_q, false);
    node->cu_k = SavedVariable(cu_k, false);
    node->mask = SavedVariable(mask, false);
    node->seed_tensor = SavedVariable(seed_tensor, false);
    node->dropout_p = dropout_p;
    node->scale = mytorch::attention::softmax_scale(softmax_scale, q.size(-1));
    node->causal = causal;
    node->window_left = window_left;
    node->window_right = window_right;
    node->softcap = softcap;
    node->max_q = max_q;
    node->max_k = max_k;
    node->seed = seed;
    node->deterministic = deterministic;
    created(node);
  }
  return {out, lse};
}

}  // namespace

// flash_attn_with_kvcache has no backward (an inference op, as flash-attn's). Its autograd
// kernel runs the op, then, when an input needs a gradient, makes the output's grad_fn a node
// that raises at backward, naming the op, instead of leaving those gradients silently empty.
struct FlashAttnWithKvcacheBackward : BackwardNode<FlashAttnWithKvcacheBackward> {
  static constexpr const char* kName = "FlashAttnWithKvcacheBackward";
  torch::autograd::variable_list apply(torch::autograd::variable_list&&) override {
    TORCH_CHECK(false, "mytorch::flash_attn_with_kvcache has no backward (an inference op): call it under "
                       "torch.no_grad(), or on inputs that need no gradient");
  }
};

void kvcache_autograd(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t first = stack->size() - op.schema().arguments().size();
  auto arg = [&](size_t i) { return (*stack)[first + i].isTensor() ? (*stack)[first + i].toTensor() : at::Tensor(); };
  // q, k_cache, v_cache, k, v, rotary_cos, rotary_sin (the schema's first seven arguments)
  auto node = make_node<FlashAttnWithKvcacheBackward>("mytorch::flash_attn_with_kvcache", arg(0), arg(1), arg(2),
                                                       arg(3), arg(4), arg(5), arg(6));
  {
    at::AutoDispatchBelowAutograd below;  // on to ADInplaceOrView (the caches' version bump), then the kernel
    op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
  }
  if (node) {
    attach(node, {(*stack)[stack->size() - 2].toTensor()});  // out; lse gets no gradient
    created(node);
  }
}

// ADInplaceOrView kernel of flash_attn_with_kvcache: the op below it, then a version bump of
// the two caches it wrote (arguments 1 and 2), as an ATen in-place op bumps its self.
void kvcache_bump_versions(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t first = stack->size() - op.schema().arguments().size();
  const at::Tensor k_cache = (*stack)[first + 1].toTensor(), v_cache = (*stack)[first + 2].toTensor();
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.redispatchBoxed(ks & c10::after_ADInplaceOrView_keyset, stack);
  }
  torch::autograd::impl::bump_version(k_cache);
  torch::autograd::impl::bump_version(v_cache);
}

}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("flash_attn", &mytorch::autograd::flash_attn_autograd);
  m.impl("flash_attn_with_kvcache", torch::CppFunction::makeFromBoxedFunction<&mytorch::autograd::kvcache_autograd>());
}

// flash_attn_with_kvcache writes k_cache and v_cache in place (Tensor(a!), Tensor(b!)); this
// kernel bumps their version counters, so that autograd rejects a backward that reads a
// cache saved before the append.
TORCH_LIBRARY_IMPL(mytorch, ADInplaceOrView, m) {
  m.impl("flash_attn_with_kvcache", torch::CppFunction::makeFromBoxedFunction<&mytorch::autograd::kvcache_bump_versions>());
}
