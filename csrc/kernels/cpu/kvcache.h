// mytorch::flash_attn_with_kvcache on the CPU: the entry point of kernels/cpu/kvcache.cpp
// (and of its AVX2 / AVX-512 copies in kernels/cpu/isa/).
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <tuple>

namespace mytorch {
namespace cpu {

// The op's arguments (csrc/ops.cpp documents them). k_cache and v_cache are written in
// place when k and v are given.
struct KvcacheArgs {
  const at::Tensor& q;
  const at::Tensor& k_cache;
  const at::Tensor& v_cache;
  std::optional<at::Tensor> k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, cache_leftpad,
      block_table, alibi_slopes, key_mask;
  std::optional<double> softmax_scale;
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  bool rotary_interleaved = true;
  int64_t num_splits = 0;
};

// Returns (out, lse): out (batch, seqlen_q, heads_q, head_dim) contiguous, lse float32
// (batch, heads_q, seqlen_q).
std::tuple<at::Tensor, at::Tensor> kvcache_forward(const KvcacheArgs& a);

// The registered op mytorch::flash_attn_with_kvcache (schema in ops.cpp; registered in
// kernels/cpu/register.cpp), over kvcache_forward.
inline std::tuple<at::Tensor, at::Tensor> flash_attn_with_kvcache_op(
    const at::Tensor& q, at::Tensor& k_cache, at::Tensor& v_cache, const std::optional<at::Tensor>& k,
    const std::optional<at::Tensor>& v, const std::optional<at::Tensor>& rotary_cos,
    const std::optional<at::Tensor>& rotary_sin, const std::optional<at::Tensor>& cache_seqlens,
    const std::optional<at::Tensor>& cache_batch_idx, const std::optional<at::Tensor>& cache_leftpad,
    const std::optional<at::Tensor>& block_table, std::optional<double> softmax_scale, bool causal,
    int64_t window_left, int64_t window_right, double softcap, bool rotary_interleaved,
    const std::optional<at::Tensor>& alibi_slopes, int64_t num_splits, const std::optional<at::Tensor>& key_mask) {
  KvcacheArgs a{q, k_cache, v_cache};
  a.k = k, a.v = v, a.rotary_cos = rotary_cos, a.rotary_sin = rotary_sin;
  a.cache_seqlens = cache_seqlens, a.cache_batch_idx = cache_batch_idx, a.cache_leftpad = cache_leftpad;
  a.block_table = block_table, a.softmax_scale = softmax_scale, a.causal = causal;
  a.window_left = window_left, a.window_right = window_right, a.softcap = softcap;
  a.rotary_interleaved = rotary_interleaved, a.alibi_slopes = alibi_slopes, a.num_splits = num_splits;
  a.key_mask = key_mask;
  return kvcache_forward(a);
}

}  // namespace cpu
}  // namespace mytorch
