// F.scaled_dot_product_attention on mytorch::flash_attn: which calls the kernels serve, and
// SDPA's call rewritten as flash_attn's. One routine for every SDPA door: patch()'s route and the
// Hugging Face attention (patching/aten.cpp) and the mytorch device's SDPA backend
// (aten/attention.cpp); Python reads the decision through _C._attention.sdpa_supported.
//
// Host code. The decision reads metadata only (no allocation, no device sync) and takes symbolic
// sizes (torch.compile traces these calls with them).
#pragma once
#include <ATen/ATen.h>

#include <optional>

namespace mytorch {
namespace attention {

// Whether flash_attn's kernel for the tensors' device computes
// F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
// enable_gqa=enable_gqa) for query, key, value of (batch, heads, seqlen, head_dim):
// - the kernel: Triton on CUDA, for float16 and bfloat16 (float32 stays with PyTorch's SDPA,
//   whose kernels are the faster ones there) and one head_dim, a multiple of 8 in [8, 256];
//   OpenMP on the CPU and the mytorch device, for float16, bfloat16, float32 and float64 and any
//   head_dim in [1, 256] (v's may differ);
// - query, key, value of one dtype and device, none empty; key and value of one batch, heads and
//   seqlen, the batch of query; the heads of key equal to those of query, or dividing them with
//   enable_gqa;
// - attn_mask: not with is_causal; bool, float32 or query's dtype (SDPA's rule); on query's
//   device; at most 4 dims, broadcastable to (batch, heads, seqlen_q, seqlen_k); without a
//   gradient unless the caller computes one (mask_grad: the device's backend does, flash_attn
//   does not);
// - dropout_p in [0, 1).
// Strides do not matter: sdpa_call makes the last dims contiguous.
inline bool sdpa_supported(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                           const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                           bool enable_gqa, bool mask_grad = false) {
  if (query.dim() != 4 || key.dim() != 4 || value.dim() != 4) return false;
  const c10::Device device = query.device();
  if (key.device() != device || value.device() != device) return false;
  const bool triton = device.is_cuda();
  if (!triton && !device.is_cpu() && !device.is_privateuseone()) return false;
  const at::ScalarType dt = query.scalar_type();
  if (key.scalar_type() != dt || value.scalar_type() != dt) return false;
  const bool half = dt == at::kHalf || dt == at::kBFloat16;
  if (!half && (triton || (dt != at::kFloat && dt != at::kDouble))) return false;
  if (query.sym_numel() == 0 || key.sym_numel() == 0) return false;
  const c10::SymIntArrayRef q = query.sym_sizes(), k = key.sym_sizes(), v = value.sym_sizes();
  if (k[0] != q[0] || v[0] != q[0] || v[1] != k[1] || v[2] != k[2]) return false;
  const c10::SymInt &d = q[3], &dv = v[3];
  if (k[3] != d) return false;
  if (triton ? (dv != d || d % 8 != 0 || d > 256) : (d > 256 || dv < 1 || dv > 256)) return false;
  if (q[1] != k[1] && (!enable_gqa || q[1] % k[1] != 0)) return false;
  if (attn_mask.has_value() && attn_mask->defined()) {
    const at::Tensor& mask = *attn_mask;
    if (is_causal || (mask.requires_grad() && !mask_grad) || mask.device() != device) return false;
    const at::ScalarType mt = mask.scalar_type();
    if (mt != at::kBool && mt != at::kFloat && mt != dt) return false;
    if (mask.dim() > 4) return false;
    const c10::SymInt* full[4] = {&q[0], &q[1], &q[2], &k[2]};
    const c10::SymIntArrayRef m = mask.sym_sizes();
    const int64_t lead = 4 - mask.dim();
    for (int64_t i = lead; i < 4; ++i)
      if (m[i - lead] != 1 && m[i - lead] != *full[i]) return false;
  }
  return dropout_p >= 0.0 && dropout_p < 1.0;
}

// SDPA's call as flash_attn's, for a call sdpa_supported takes: q, k, v as (batch, seqlen, heads,
// head_dim) views with contiguous last dims, the mask made 4-D. SDPA's is_causal is top-left
// aligned and flash_attn's bottom-right: with seqlen_q <= seqlen_k the keys past seqlen_q are
// never attended, so they are cut off (sdpa_key_grad gives them a zero gradient); with
// seqlen_q > seqlen_k, top-left is bottom-right shifted right by seqlen_q - seqlen_k.
struct SdpaCall {
  at::Tensor q, k, v;
  std::optional<at::Tensor> mask;
  bool causal = false;
  int64_t window_right = -1;
};

inline at::Tensor last_dim_contiguous(const at::Tensor& t) {
  return t.stride(-1) == 1 || t.size(-1) <= 1 ? t : t.contiguous();
}

inline SdpaCall sdpa_call(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                          const std::optional<at::Tensor>& attn_mask, bool is_causal) {
  SdpaCall c;
  c.q = last_dim_contiguous(query).transpose(1, 2);
  c.k = last_dim_contiguous(key).transpose(1, 2);
  c.v = last_dim_contiguous(value).transpose(1, 2);
  if (is_causal) {
    const c10::SymInt n_q = query.sym_size(2), n_k = key.sym_size(2);
    if (n_q <= n_k) {
      if (n_q != n_k) {
        c.k = c.k.narrow_symint(1, 0, n_q);
        c.v = c.v.narrow_symint(1, 0, n_q);
      }
      c.causal = true;
    } else {
      c.window_right = (n_q - n_k).guard_int(__FILE__, __LINE__);
    }
  }
  if (attn_mask.has_value() && attn_mask->defined()) {
    at::Tensor m = *attn_mask;
    while (m.dim() < 4) m = m.unsqueeze(0);
    c.mask = m;
  }
  return c;
}

// The gradient of SDPA's key or value, (batch, heads, seqlen_k, head_dim), from flash_attn's
// gradient of the keys sdpa_call kept, (batch, kept, heads, head_dim): zero for the keys cut off.
inline at::Tensor sdpa_key_grad(const at::Tensor& grad, const c10::SymInt& seqlen_k) {
  if (grad.sym_size(1) == seqlen_k) return grad.transpose(1, 2);
  std::vector<c10::SymInt> shape = grad.sym_sizes().vec();
  shape[1] = seqlen_k;
  at::Tensor full = at::zeros_symint(shape, grad.options());
  full.narrow_symint(1, 0, grad.sym_size(1)).copy_(grad);
  return full.transpose(1, 2);
}

}  // namespace attention
}  // namespace mytorch
