// Autograd of mytorch::flash_attn, in C++: a training step's attention forward and
// backward never enter Python (the hot-op rule of DESIGN.md).
//
// The forward saves q, k, v, out, lse and the optional tensors; the backward calls
// mytorch::flash_attn_backward with the resolved softmax scale. lse is an output without a
// gradient, and an absent gradient of out counts as zeros. The Autograd alias key serves
// CPU, CUDA and the mytorch device alike.
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

struct FlashAttn : public torch::autograd::Function<FlashAttn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, double dropout_p, std::optional<double> softmax_scale,
                               bool causal, int64_t window_left, int64_t window_right, double softcap,
                               const OptTensor& alibi, const OptTensor& cu_q, const OptTensor& cu_k,
                               int64_t max_q, int64_t max_k, int64_t seed, const OptTensor& mask,
                               bool deterministic, const OptTensor& seed_tensor) {
    at::AutoDispatchBelowADInplaceOrView below;
    static const auto fwd = find_op<FwdSig>("mytorch::flash_attn");
    auto [out, lse] = fwd.call(q, k, v, dropout_p, softmax_scale, causal, window_left,
                                        window_right, softcap, alibi, cu_q, cu_k, max_q, max_k, seed,
                                        mask, deterministic, seed_tensor);
    ctx->save_for_backward({q, k, v, out, lse, or_undefined(alibi), or_undefined(cu_q),
                            or_undefined(cu_k), or_undefined(mask), or_undefined(seed_tensor)});
    ctx->saved_data["dropout_p"] = dropout_p;
    ctx->saved_data["scale"] = mytorch::attention::softmax_scale(softmax_scale, q.size(-1));
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["window_left"] = window_left;
    ctx->saved_data["window_right"] = window_right;
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["max_q"] = max_q;
    ctx->saved_data["max_k"] = max_k;
    ctx->saved_data["seed"] = seed;
    ctx->saved_data["deterministic"] = deterministic;
    ctx->mark_non_differentiable({lse});
    ctx->set_materialize_grads(false);  // lse's (unused) zero gradient is never made
    return {out, lse};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    const at::Tensor &q = s[0], &k = s[1], &v = s[2], &out = s[3], &lse = s[4];
    at::Tensor grad_out = grads[0].defined() ? grads[0] : at::zeros_like(out);
    auto& d = ctx->saved_data;
    static const auto bwd = find_op<BwdSig>("mytorch::flash_attn_backward");
    auto [dq, dk, dv] = bwd.call(
        grad_out, q, k, v, out, lse, d["dropout_p"].toDouble(), d["scale"].toDouble(), d["causal"].toBool(),
        d["window_left"].toInt(), d["window_right"].toInt(), d["softcap"].toDouble(), optional(s[5]),
        optional(s[6]), optional(s[7]), d["max_q"].toInt(), d["max_k"].toInt(), d["seed"].toInt(),
        d["deterministic"].toBool(), optional(s[8]), optional(s[9]));
    variable_list g(18);
    g[0] = dq;
    g[1] = dk;
    g[2] = dv;
    return g;
  }
};

std::tuple<at::Tensor, at::Tensor> flash_attn_autograd(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
    std::optional<double> softmax_scale, bool causal, int64_t window_left, int64_t window_right,
    double softcap, const OptTensor& alibi, const OptTensor& cu_q, const OptTensor& cu_k, int64_t max_q,
    int64_t max_k, int64_t seed, const OptTensor& mask, bool deterministic, const OptTensor& seed_tensor) {
  auto r = FlashAttn::apply(q, k, v, dropout_p, softmax_scale, causal, window_left, window_right, softcap,
                            alibi, cu_q, cu_k, max_q, max_k, seed, mask, deterministic, seed_tensor);
  return {r[0], r[1]};
}

}  // namespace
}  // namespace autograd
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, Autograd, m) {
  m.impl("flash_attn", &mytorch::autograd::flash_attn_autograd);
}
