// F.scaled_dot_product_attention on the mytorch device: the SDPA composite asks
// _fused_sdp_choice_stub which backend to take; for PrivateUse1 we answer "overrideable"
// whenever attention::sdpa_supported (kernels/attention_sdpa.h, the decision patch() takes
// too) says the CPU flash kernel runs the call, and implement
// aten::_scaled_dot_product_fused_attention_overrideable (+ backward) with it, on
// attention::sdpa_call's rewrite of the call. Unlike flash_attn, this backend gives attn_mask a
// gradient. Anything else goes to SDPA's math path.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>

#include <mutex>

#include "aten/ops.h"
#include "kernels/attention_sdpa.h"
#include "kernels/cpu/attention.h"

namespace mytorch {
namespace aten {
namespace {

// (batch, heads, seqlen, head_dim) <-> (batch, seqlen, heads, head_dim), a view
inline Tensor bnhd(const Tensor& t) { return t.transpose(1, 2); }

// A dropout seed from the device's default generator (the mytorch device's generators
// are CPU generators underneath), advancing it.
int64_t draw_seed(const c10::Device& device) {
  at::Generator gen = device.is_cpu() ? at::detail::getDefaultCPUGenerator()
                                      : at::globalContext().defaultGenerator(device);
  auto* impl = dynamic_cast<at::CPUGeneratorImpl*>(gen.unsafeGetGeneratorImpl());
  if (impl == nullptr) {
    gen = at::detail::getDefaultCPUGenerator();
    impl = static_cast<at::CPUGeneratorImpl*>(gen.unsafeGetGeneratorImpl());
  }
  std::lock_guard<std::mutex> lock(gen.mutex());
  return static_cast<int64_t>(impl->random64() >> 1);
}

cpu::FlashOptions options(const attention::SdpaCall& c, double dropout_p, std::optional<double> scale,
                          int64_t seed) {
  cpu::FlashOptions o;
  o.dropout_p = dropout_p;
  o.softmax_scale = scale;
  o.causal = c.causal;
  o.window_right = c.window_right;
  o.bias = c.mask;
  o.seed = seed;
  return o;
}

}  // namespace

int64_t sdpa_choose_backend(const Tensor& q, const Tensor& k, const Tensor& v, const OptTensor& attn_mask,
                            double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  (void)scale;
  // torch.nn.attention.sdpa_kernel([SDPBackend.MATH]) turns the overrideable backend off
  const bool mine = at::globalContext().userEnabledOverrideableSDP() &&
                    attention::sdpa_supported(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa,
                                              /*mask_grad=*/true);
  return static_cast<int64_t>(mine ? at::SDPBackend::overrideable : at::SDPBackend::math);
}

std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor> sdpa_fused_forward(
    const Tensor& query, const Tensor& key, const Tensor& value, const OptTensor& attn_bias, double dropout_p,
    bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  const char* op = "aten::_scaled_dot_product_fused_attention_overrideable (mytorch)";
  TORCH_CHECK(!return_debug_mask, op, ": return_debug_mask=True is not supported");
  TORCH_CHECK(query.dim() == 4 && key.dim() == 4 && value.dim() == 4, op,
              ": expected 4-D (batch, heads, seqlen, head_dim) query, key, value, got ",
              query.sizes(), ", ", key.sizes(), ", ", value.sizes());
  const int64_t seed = dropout_p > 0 ? draw_seed(query.device()) : 0;
  const attention::SdpaCall c = attention::sdpa_call(query, key, value, attn_bias, is_causal);
  auto [out, lse] = cpu::flash_forward(op, c.q, c.k, c.v, options(c, dropout_p, scale, seed));
  auto cpu_long = at::TensorOptions().dtype(at::kLong);
  Tensor philox_seed = at::full({}, seed, cpu_long), philox_offset = at::zeros({}, cpu_long);
  return {bnhd(out), lse, Tensor(), Tensor(), c10::SymInt(query.size(2)), c10::SymInt(key.size(2)),
          philox_seed, philox_offset, Tensor()};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> sdpa_fused_backward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value,
    const Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const Tensor& out,
    const Tensor& logsumexp, const Tensor& cum_seq_q, const Tensor& cum_seq_k, int64_t max_q,
    int64_t max_k, double dropout_p, bool is_causal, const Tensor& philox_seed,
    const Tensor& philox_offset, std::optional<double> scale) {
  (void)cum_seq_q;
  (void)cum_seq_k;
  (void)max_q;
  (void)max_k;
  (void)philox_offset;
  const char* op = "aten::_scaled_dot_product_fused_attention_overrideable_backward (mytorch)";
  const int64_t seed = dropout_p > 0 && philox_seed.defined() ? philox_seed.item<int64_t>() : 0;
  const bool want_dbias = grad_input_mask[3] && attn_bias.defined();
  std::optional<Tensor> bias;
  if (attn_bias.defined()) bias = attn_bias;
  const attention::SdpaCall c = attention::sdpa_call(query, key, value, bias, is_causal);
  auto [dq, dk, dv, dbias] = cpu::flash_backward(op, bnhd(grad_out), c.q, c.k, c.v, bnhd(out), logsumexp,
                                                 options(c, dropout_p, scale, seed), want_dbias);
  Tensor grad_bias;
  if (want_dbias) {
    // sum the (batch, heads, seqlen_q, seqlen_k) gradient over the dims the bias broadcasts
    const int64_t lead = 4 - attn_bias.dim();
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < 4; ++d)
      if (d < lead || attn_bias.size(d - lead) == 1) dims.push_back(d);
    Tensor g = dims.empty() ? dbias : dbias.sum(dims, /*keepdim=*/true);
    grad_bias = g.reshape(attn_bias.sizes()).to(attn_bias.scalar_type());
  }
  return {bnhd(dq), attention::sdpa_key_grad(dk, key.sym_size(2)), attention::sdpa_key_grad(dv, key.sym_size(2)),
          grad_bias};
}

}  // namespace aten
}  // namespace mytorch

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &mytorch::aten::sdpa_choose_backend)
}  // namespace at::native
