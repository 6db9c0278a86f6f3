// FlashAttention on the CPU: the ATen-level entry points shared by the
// mytorch::flash_attn ops (kernels/cpu/attention.cpp) and the SDPA route of the
// mytorch device (aten/attention.cpp), and the registered ops (kernels/cpu/register.cpp).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <tuple>

#include "kernels/cpu/attention_amx.h"

namespace mytorch {
namespace cpu {

// Options of one attention call. Tensors are (batch, seqlen, heads, head_dim), or
// (total_tokens, heads, head_dim) with cu_seqlens_q/k; the last dim is contiguous.
// head_dim is any in [1, 256]; v's head_dim may differ from that of q and k.
struct FlashOptions {
  double dropout_p = 0.0;
  std::optional<double> softmax_scale;  // None: attention::softmax_scale's default
  bool causal = false;
  int64_t window_left = -1;   // < 0: unbounded
  int64_t window_right = -1;  // < 0: unbounded
  double softcap = 0.0;  // causal and windows are aligned bottom-right, as flash-attn's
  std::optional<at::Tensor> alibi_slopes;  // float32, (heads_q) or (batch, heads_q)
  // Additive score bias (SDPA attn_mask), broadcastable to (batch, heads_q, seqlen_q, seqlen_k).
  std::optional<at::Tensor> bias;
  std::optional<at::Tensor> cu_seqlens_q, cu_seqlens_k;
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;  // checked against cu_seqlens
  int64_t seed = 0;
};

// Returns (out, lse): out contiguous, (batch, seqlen_q, heads_q, head_dim of v),
// lse float32 (batch, heads_q, seqlen_q) or (heads_q, total_q).
std::tuple<at::Tensor, at::Tensor> flash_forward(const char* op, const at::Tensor& q,
                                                 const at::Tensor& k, const at::Tensor& v,
                                                 const FlashOptions& opt);

// Returns (dq, dk, dv) and, when want_dbias, the gradient of opt.bias expanded to
// (batch, heads_q, seqlen_q, seqlen_k) in float32 (undefined otherwise).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> flash_backward(
    const char* op, const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
    const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse, const FlashOptions& opt,
    bool want_dbias = false);

// The registered ops mytorch::flash_attn and mytorch::flash_attn_backward (schemas in ops.cpp),
// over flash_forward / flash_backward.
std::tuple<at::Tensor, at::Tensor> flash_attn_op(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
    std::optional<double> softmax_scale, bool causal, int64_t window_left, int64_t window_right,
    double softcap, const std::optional<at::Tensor>& alibi_slopes,
    const std::optional<at::Tensor>& cu_seqlens_q, const std::optional<at::Tensor>& cu_seqlens_k,
    int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t seed,
    const std::optional<at::Tensor>& attn_mask, bool deterministic,
    const std::optional<at::Tensor>& seed_tensor);
std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attn_backward_op(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, double dropout_p, double softmax_scale, bool causal,
    int64_t window_left, int64_t window_right, double softcap,
    const std::optional<at::Tensor>& alibi_slopes, const std::optional<at::Tensor>& cu_seqlens_q,
    const std::optional<at::Tensor>& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
    int64_t seed, bool deterministic, const std::optional<at::Tensor>& attn_mask,
    const std::optional<at::Tensor>& seed_tensor);

}  // namespace cpu
}  // namespace mytorch
