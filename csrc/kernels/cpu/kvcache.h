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
      block_table, alibi_slopes;
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

}  // namespace cpu
}  // namespace mytorch
