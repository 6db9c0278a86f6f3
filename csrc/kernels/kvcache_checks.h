// Input checks of mytorch::flash_attn_with_kvcache, shared by the CPU kernel
// (kernels/cpu/kvcache.cpp) and the CUDA kernel (kernels/cuda/kvcache.cpp). The fake kernel
// and the Python Triton kernel (mytorch_ext/ops/kvcache.py) run check_inputs there, which
// raises the same messages in the same order; tests/ops/test_kvcache.py holds the two to
// that. Host code only.
//
// Two levels:
//   check_shapes  shapes, dtypes, devices: what a fake tensor knows. Every device.
//   check_values  the values of cache_seqlens, cache_leftpad, cache_batch_idx and
//                 block_table against the cache's size and the rotary table's length.
//                 The CPU kernel runs it on every call (host memory: no sync). The CUDA
//                 kernels do not (reading the values would be a host sync per call);
//                 instead they mask every cache read and write to the cache's bounds and
//                 skip block_table entries outside [0, num_blocks).
#pragma once
#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "kernels/attention_checks.h"

namespace mytorch {
namespace kvcache {

using attention::desc;
using attention::py_tuple;
using attention::Rules;

// block_size of a paged cache: a multiple of this (the Triton kernel reads a page in tiles
// of 16 keys; the CPU kernel takes the same rule so that a cache works on both).
constexpr int64_t kPageTile = 16;

struct Shapes {
  int64_t batch = 0, seqlen_q = 0, heads_q = 0, heads_k = 0, head_dim = 0;
  int64_t seqlen_new = 0;     // new tokens per sequence (0 without k, v)
  int64_t capacity = 0;       // cache positions per sequence
  int64_t batch_cache = 0;    // k_cache.size(0): sequences, or pages with block_table
  bool paged = false;
  int64_t block_size = 0, max_blocks = 0;
  int64_t rotary_dim = 0, seqlen_ro = 0;
};

inline const char* accepted_names(Rules r) {
  return r == Rules::kTriton ? "float16, bfloat16 or float32" : "float16, bfloat16, float32 or float64";
}

inline bool accepted_dtype(const at::Tensor& t, Rules r) {
  const auto s = t.scalar_type();
  return s == at::kHalf || s == at::kBFloat16 || s == at::kFloat || (r == Rules::kOpenMP && s == at::kDouble);
}

// An optional int32 (batch,) tensor on q's device.
inline void check_index_vector(const char* op, const char* name, const at::Tensor& t, const at::Tensor& q,
                               int64_t batch) {
  TORCH_CHECK_VALUE(t.scalar_type() == at::kInt && t.dim() == 1 && t.size(0) == batch, op, ": expected ",
                    name, " an int32 tensor of shape (", batch, ",) (one per sequence), got ", desc(name, t));
  TORCH_CHECK(t.device() == q.device(), op, ": expected ", name, " on ", q.device(), ", got ", t.device());
}

inline Shapes check_shapes(const char* op, const at::Tensor& q, const at::Tensor& k_cache,
                           const at::Tensor& v_cache, const std::optional<at::Tensor>& k,
                           const std::optional<at::Tensor>& v, const std::optional<at::Tensor>& rotary_cos,
                           const std::optional<at::Tensor>& rotary_sin,
                           const std::optional<at::Tensor>& cache_seqlens,
                           const std::optional<at::Tensor>& cache_batch_idx,
                           const std::optional<at::Tensor>& cache_leftpad,
                           const std::optional<at::Tensor>& block_table,
                           const std::optional<at::Tensor>& alibi_slopes, double softcap, int64_t num_splits,
                           const std::optional<at::Tensor>& key_mask, Rules rules) {
  Shapes s;
  const bool paged = block_table.has_value();
  const char* layout = paged ? "(num_blocks, block_size, heads_k, head_dim) with block_table"
                             : "(batch_cache, seqlen_cache, heads_k, head_dim)";
  auto all = [&] { return desc("q", q) + ", " + desc("k_cache", k_cache) + ", " + desc("v_cache", v_cache); };
  TORCH_CHECK_VALUE(q.dim() == 4, op, ": expected q of layout (batch, seqlen_q, heads, head_dim), got ",
                    desc("q", q));
  TORCH_CHECK_VALUE(k_cache.dim() == 4 && v_cache.dim() == 4, op, ": expected k_cache and v_cache of layout ",
                    layout, ", got ", all());
  TORCH_CHECK_VALUE(accepted_dtype(q, rules) && accepted_dtype(k_cache, rules) && accepted_dtype(v_cache, rules),
                    op, ": expected q, k_cache, v_cache of dtype ", accepted_names(rules), ", got ", all());
  TORCH_CHECK_VALUE(q.scalar_type() == k_cache.scalar_type() && q.scalar_type() == v_cache.scalar_type(), op,
                    ": expected q, k_cache, v_cache of one dtype, got ", all());
  TORCH_CHECK(q.device() == k_cache.device() && q.device() == v_cache.device(), op,
              ": expected q, k_cache, v_cache on one device, got q on ", q.device(), ", k_cache on ",
              k_cache.device(), ", v_cache on ", v_cache.device());
  if (rules == Rules::kOpenMP)
    TORCH_CHECK(q.device().is_cpu() || q.device().is_privateuseone(), op,
                ": the CPU kernel expects tensors on cpu or mytorch, got ", q.device());
  TORCH_CHECK_VALUE(k_cache.sizes() == v_cache.sizes(), op, ": expected k_cache and v_cache of the same shape, got ",
                    all());
  s.batch = q.size(0);
  s.seqlen_q = q.size(1);
  s.heads_q = q.size(2);
  s.heads_k = k_cache.size(2);
  s.head_dim = q.size(3);
  const int64_t d = s.head_dim;
  TORCH_CHECK_VALUE(k_cache.size(3) == d, op, ": expected q and k_cache with the same head_dim, got ", all());
  if (rules == Rules::kTriton) {
    TORCH_CHECK_VALUE(d % 8 == 0 && d >= 8 && d <= attention::kMaxHeadDim, op,
                      ": expected head_dim a multiple of 8 in [8, 256], got ", d, " (", all(), ")");
  } else {
    TORCH_CHECK_VALUE(d >= 1 && d <= attention::kMaxHeadDim, op, ": expected head_dim in [1, 256], got ", d,
                      " (", all(), ")");
  }
  TORCH_CHECK_VALUE(s.heads_k > 0 && s.heads_q % s.heads_k == 0, op,
                    ": expected the heads of k_cache, v_cache to divide the heads of q, got ", s.heads_q, " and ",
                    s.heads_k, " (", all(), ")");
  for (auto [t, n] : {std::pair<const at::Tensor*, const char*>{&q, "q"}, {&k_cache, "k_cache"}, {&v_cache, "v_cache"}})
    TORCH_CHECK_VALUE(t->stride(-1) == 1 || t->size(-1) <= 1, op, ": expected ", n,
                      " with a contiguous last dim, got strides ", py_tuple(t->strides()));

  // new keys and values
  TORCH_CHECK_VALUE(k.has_value() == v.has_value(), op, ": expected k and v together or neither, got ",
                    k.has_value() ? "k without v" : "v without k");
  if (k.has_value()) {
    const std::vector<int64_t> want{s.batch, k->dim() >= 2 ? k->size(1) : 0, s.heads_k, d};
    auto kv = [&] { return desc("k", *k) + ", " + desc("v", *v); };
    TORCH_CHECK_VALUE(k->dim() == 4 && k->sizes() == v->sizes() && k->sizes() == at::IntArrayRef(want), op,
                      ": expected k and v of shape (batch, seqlen_new, heads_k, head_dim) = (", s.batch,
                      ", seqlen_new, ", s.heads_k, ", ", d, "), got ", kv());
    TORCH_CHECK_VALUE(k->scalar_type() == q.scalar_type() && v->scalar_type() == q.scalar_type(), op,
                      ": expected k and v of q's dtype, got ", kv(), ", ", desc("q", q));
    TORCH_CHECK(k->device() == q.device() && v->device() == q.device(), op, ": expected k and v on ", q.device(),
                ", got ", k->device(), " and ", v->device());
    TORCH_CHECK_VALUE((k->stride(-1) == 1 || d <= 1) && (v->stride(-1) == 1 || d <= 1), op,
                      ": expected k and v with a contiguous last dim, got strides ", py_tuple(k->strides()),
                      " and ", py_tuple(v->strides()));
    s.seqlen_new = k->size(1);
  }

  // the cache's geometry
  s.batch_cache = k_cache.size(0);
  if (paged) {
    const at::Tensor& bt = *block_table;
    TORCH_CHECK_VALUE(bt.scalar_type() == at::kInt && bt.dim() == 2 && bt.size(0) == s.batch, op,
                      ": expected block_table an int32 tensor of shape (", s.batch,
                      ", max_blocks_per_sequence), got ", desc("block_table", bt));
    TORCH_CHECK(bt.device() == q.device(), op, ": expected block_table on ", q.device(), ", got ", bt.device());
    TORCH_CHECK_VALUE(!cache_batch_idx.has_value(), op,
                      ": cache_batch_idx is not supported with block_table (the block table picks the pages)");
    s.paged = true;
    s.block_size = k_cache.size(1);
    s.max_blocks = bt.size(1);
    TORCH_CHECK_VALUE(s.block_size % kPageTile == 0 && s.block_size > 0, op,
                      ": expected the block_size of a paged k_cache (its dim 1) a multiple of ", kPageTile,
                      ", got ", s.block_size, " (", desc("k_cache", k_cache), ")");
    s.capacity = s.max_blocks * s.block_size;
  } else {
    s.capacity = k_cache.size(1);
    if (!cache_batch_idx.has_value())
      TORCH_CHECK_VALUE(s.batch_cache >= s.batch, op, ": expected k_cache with at least batch = ", s.batch,
                        " sequences (or cache_batch_idx), got ", desc("k_cache", k_cache));
  }
  if (cache_seqlens.has_value()) check_index_vector(op, "cache_seqlens", *cache_seqlens, q, s.batch);
  if (cache_batch_idx.has_value()) check_index_vector(op, "cache_batch_idx", *cache_batch_idx, q, s.batch);
  if (cache_leftpad.has_value()) check_index_vector(op, "cache_leftpad", *cache_leftpad, q, s.batch);
  // Without cache_seqlens the whole cache is taken as filled: there is no room for new tokens.
  const int64_t room = cache_seqlens.has_value() ? s.capacity : 0;
  TORCH_CHECK_VALUE(s.seqlen_new <= room, op, ": the cache is too short for the new tokens: ", s.seqlen_new,
                    " new tokens, ",
                    cache_seqlens.has_value() ? "cache length " + std::to_string(s.capacity)
                                              : std::string("no cache_seqlens (the whole cache is taken as filled)"),
                    " (", desc("k_cache", k_cache), ")");

  // rotary
  TORCH_CHECK_VALUE(rotary_cos.has_value() == rotary_sin.has_value(), op,
                    ": expected rotary_cos and rotary_sin together or neither");
  if (rotary_cos.has_value()) {
    const at::Tensor &c = *rotary_cos, &sn = *rotary_sin;
    TORCH_CHECK_VALUE(k.has_value(), op, ": rotary_cos and rotary_sin rotate the new k: they need k and v");
    auto cs = [&] { return desc("rotary_cos", c) + ", " + desc("rotary_sin", sn); };
    TORCH_CHECK_VALUE(c.dim() == 2 && c.sizes() == sn.sizes() && c.size(1) >= 1 && 2 * c.size(1) <= d, op,
                      ": expected rotary_cos and rotary_sin of one shape (seqlen_ro, rotary_dim / 2) with 0 < "
                      "rotary_dim <= head_dim = ",
                      d, ", got ", cs());
    TORCH_CHECK_VALUE(c.scalar_type() == q.scalar_type() && sn.scalar_type() == q.scalar_type(), op,
                      ": expected rotary_cos and rotary_sin of q's dtype, got ", cs(), ", ", desc("q", q));
    TORCH_CHECK(c.device() == q.device() && sn.device() == q.device(), op, ": expected rotary_cos and rotary_sin on ",
                q.device(), ", got ", c.device(), " and ", sn.device());
    TORCH_CHECK_VALUE(c.stride(-1) == 1 && sn.stride(-1) == 1, op,
                      ": expected rotary_cos and rotary_sin with a contiguous last dim");
    s.rotary_dim = 2 * c.size(1);
    s.seqlen_ro = c.size(0);
    TORCH_CHECK_VALUE(s.seqlen_ro >= s.seqlen_new, op, ": expected rotary_cos and rotary_sin with at least the ",
                      s.seqlen_new, " positions of the new tokens, got ", cs());
  }
  TORCH_CHECK_VALUE(!(softcap < 0), op, ": expected softcap >= 0, got ", attention::py_float(softcap));
  TORCH_CHECK_VALUE(num_splits >= 0, op, ": expected num_splits >= 0 (0: a heuristic picks), got ", num_splits);
  if (alibi_slopes.has_value()) attention::check_alibi(op, *alibi_slopes, q, s.batch);
  if (key_mask.has_value()) {
    const at::Tensor& km = *key_mask;
    TORCH_CHECK_VALUE(km.scalar_type() == at::kBool && km.dim() == 2 && km.size(0) == s.batch &&
                          km.size(1) == s.capacity,
                      op, ": expected key_mask a bool tensor of shape (batch, cache length) = (", s.batch, ", ",
                      s.capacity, "), got ", desc("key_mask", km));
    TORCH_CHECK(km.device() == q.device(), op, ": expected key_mask on ", q.device(), ", got ", km.device());
  }
  return s;
}

// Host copies of the per-sequence vectors (defaults filled in), checked against the cache.
struct Values {
  std::vector<int64_t> seqlens, leftpad, batch_idx;
  std::vector<int32_t> block_table;  // (batch, max_blocks), row-major
};

inline std::vector<int64_t> host_ints(const at::Tensor& t) {
  const at::Tensor h = (t.device().is_cpu() ? t
                        : t.device().is_cuda()
                            ? t.to(at::kCPU)
                            : at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU)))
                           .to(at::kLong)
                           .contiguous();
  return std::vector<int64_t>(h.const_data_ptr<int64_t>(), h.const_data_ptr<int64_t>() + h.numel());
}

inline Values check_values(const char* op, const Shapes& s, const std::optional<at::Tensor>& cache_seqlens,
                           const std::optional<at::Tensor>& cache_batch_idx,
                           const std::optional<at::Tensor>& cache_leftpad,
                           const std::optional<at::Tensor>& block_table, bool causal_or_local) {
  Values v;
  v.seqlens = cache_seqlens.has_value() ? host_ints(*cache_seqlens) : std::vector<int64_t>(s.batch, s.capacity);
  v.leftpad = cache_leftpad.has_value() ? host_ints(*cache_leftpad) : std::vector<int64_t>(s.batch, 0);
  if (cache_batch_idx.has_value()) {
    v.batch_idx = host_ints(*cache_batch_idx);
  } else {
    v.batch_idx.resize(s.batch);
    for (int64_t b = 0; b < s.batch; ++b) v.batch_idx[b] = b;
  }
  for (int64_t b = 0; b < s.batch; ++b) {
    const int64_t n = v.seqlens[b], lp = v.leftpad[b];
    TORCH_CHECK_VALUE(n >= 0, op, ": expected cache_seqlens >= 0, got cache_seqlens[", b, "] = ", n);
    TORCH_CHECK_VALUE(n + s.seqlen_new <= s.capacity, op, ": the cache is too short for cache_seqlens + the new tokens: cache_seqlens[",
                      b, "] = ", n, " + ", s.seqlen_new, " new tokens > cache length ", s.capacity);
    TORCH_CHECK_VALUE(lp >= 0 && lp <= n, op, ": expected 0 <= cache_leftpad <= cache_seqlens, got cache_leftpad[", b,
                      "] = ", lp, " and cache_seqlens[", b, "] = ", n);
    if (!s.paged)
      TORCH_CHECK_VALUE(v.batch_idx[b] >= 0 && v.batch_idx[b] < s.batch_cache, op,
                        ": expected cache_batch_idx in [0, ", s.batch_cache, ") (the sequences of k_cache), got cache_batch_idx[",
                        b, "] = ", v.batch_idx[b]);
    if (s.rotary_dim > 0) {
      // k at positions n - lp + i; q the same when causal or local, else all at n - lp
      const int64_t last = n - lp + std::max<int64_t>(s.seqlen_new, causal_or_local ? s.seqlen_q : 1) - 1;
      TORCH_CHECK_VALUE(last < s.seqlen_ro, op, ": rotary_cos and rotary_sin are too short: sequence ", b,
                        " uses position ", last, ", the table has ", s.seqlen_ro, " rows");
    }
  }
  if (s.paged) {
    const at::Tensor& bt = *block_table;
    const std::vector<int64_t> all = host_ints(bt);
    v.block_table.resize(all.size());
    for (int64_t b = 0; b < s.batch; ++b) {
      // the pages that hold positions [0, cache_seqlens + seqlen_new) are read or written
      const int64_t used = (v.seqlens[b] + s.seqlen_new + s.block_size - 1) / s.block_size;
      for (int64_t i = 0; i < s.max_blocks; ++i) {
        const int64_t x = all[b * s.max_blocks + i];
        if (i < used)
          TORCH_CHECK_VALUE(x >= 0 && x < s.batch_cache, op, ": expected block_table entries in [0, num_blocks = ",
                            s.batch_cache, "), got block_table[", b, "][", i, "] = ", x);
        v.block_table[b * s.max_blocks + i] = static_cast<int32_t>(x);
      }
    }
  }
  return v;
}

}  // namespace kvcache
}  // namespace mytorch
