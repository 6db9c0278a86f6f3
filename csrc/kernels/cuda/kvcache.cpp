// mytorch::flash_attn_with_kvcache on CUDA: the Triton kernels of
// mytorch_ext/triton/kvcache.py (append, split, combine), launched from here.
//
// This file does on every call what kvcache_forward does in Python: the shape checks of
// kernels/kvcache_checks.h (the values of cache_seqlens, cache_leftpad, cache_batch_idx and
// block_table stay on the device: the kernels mask every cache access instead), the
// outputs, the split count (pick_num_splits below: kvcache.py's heuristic, the same
// arithmetic), each kernel's argument list and grid. It then launches the compiled
// functions itself (triton_launch.h): no host synchronization, no allocation besides the
// outputs, the split partials and, without cache_seqlens, the filled-cache lengths.
//
// A call's plan is cached (triton_launch.h's Plans) under a key made of everything that
// picks the compiled kernels: the device, dtype, every constexpr of the three kernels,
// which of them the call launches, and the specialization class of every argument. The
// first call with a new key runs kvcache_forward through launch_record.kvcache, which
// compiles, launches and reports the compiled kernels; later calls with that key go
// straight to the driver.
#ifdef MYTORCH_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/triton_launch.h"
#include "kernels/kvcache_checks.h"

namespace mytorch {
namespace cuda {
namespace {

using namespace mytorch::kvcache;
namespace tr = mytorch::cuda::triton;
namespace py = pybind11;
using OptTensor = std::optional<at::Tensor>;

constexpr const char* kOp = "mytorch::flash_attn_with_kvcache";

tr::Plans& plans() {
  static auto* p = new tr::Plans(kOp, /*require_triton=*/true);
  return *p;
}

// pick_num_splits of mytorch_ext/triton/kvcache.py (flash-attn's heuristic), in the same
// double arithmetic: no split when the programs fill 80% of the `sms` program slots; else
// the fewest splits whose wave efficiency is within 85% of the best.
int64_t pick_num_splits(int64_t programs, int64_t n_tiles, int64_t sms, int64_t max_splits = 128) {
  if (static_cast<double>(programs) >= 0.8 * static_cast<double>(sms)) return 1;
  max_splits = std::max<int64_t>(1, std::min({max_splits, sms, n_tiles}));
  auto efficiency = [&](int64_t n) {
    const double waves = static_cast<double>(programs * n) / static_cast<double>(sms);
    return waves / std::ceil(waves);
  };
  double best = efficiency(1);
  for (int64_t n = 2; n <= max_splits; ++n) best = std::max(best, efficiency(n));
  for (int64_t n = 1; n <= max_splits; ++n)
    if (efficiency(n) >= 0.85 * best) return n;
  return 1;
}

// Programs that run at once: two per SM (kvcache.py's _sm_count).
int64_t program_slots(const at::Device& device) {
  return 2 * static_cast<int64_t>(at::cuda::getDeviceProperties(device.index())->multiProcessorCount);
}

void push_strides3(std::vector<tr::Arg>& a, const at::Tensor& t) {
  for (int i = 0; i < 3; ++i) a.push_back(tr::Arg::integer(t.stride(i)));
}

std::tuple<at::Tensor, at::Tensor> flash_attn_with_kvcache(
    const at::Tensor& q, at::Tensor& k_cache, at::Tensor& v_cache, const OptTensor& k, const OptTensor& v,
    const OptTensor& rotary_cos, const OptTensor& rotary_sin, const OptTensor& cache_seqlens,
    const OptTensor& cache_batch_idx, const OptTensor& cache_leftpad, const OptTensor& block_table,
    std::optional<double> softmax_scale, bool causal, int64_t window_left, int64_t window_right, double softcap,
    bool rotary_interleaved, const OptTensor& alibi_slopes, int64_t num_splits, const OptTensor& key_mask) {
  const Shapes s = check_shapes(kOp, q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens,
                                cache_batch_idx, cache_leftpad, block_table, alibi_slopes, softcap, num_splits,
                                key_mask, Rules::kTriton);
  c10::cuda::CUDAGuard guard(q.device());
  const double scale = attention::softmax_scale(softmax_scale, s.head_dim);

  // kvcache_forward's geometry, in its order
  const int64_t batch = s.batch, seqlen_q = s.seqlen_q, heads_q = s.heads_q, heads_k = s.heads_k;
  const int64_t d = s.head_dim, group = heads_q / heads_k;
  const bool paged = s.paged;
  const int64_t block_size = paged ? s.block_size : 1;
  const int64_t capacity = s.capacity, batch_cache = s.batch_cache, seqlen_new = s.seqlen_new;
  // without cache_seqlens the whole cache is filled; this tensor also stands in for the
  // pointers a call does not have (as in kvcache_forward)
  const at::Tensor seqlens =
      cache_seqlens.has_value() ? *cache_seqlens : at::full({batch}, capacity, q.options().dtype(at::kInt));
  const int64_t block_d = std::max<int64_t>(16, tr::next_pow2(d));
  const bool rotary = rotary_cos.has_value();
  // The kernels read cos and sin with one row stride: tables whose row strides differ are
  // copied contiguous (seqlen_ro x rotary_dim / 2 elements each).
  const bool same_stride = !rotary || rotary_cos->stride(0) == rotary_sin->stride(0);
  const OptTensor cos_t = same_stride ? rotary_cos : OptTensor(rotary_cos->contiguous());
  const OptTensor sin_t = same_stride ? rotary_sin : OptTensor(rotary_sin->contiguous());
  const int64_t half = rotary ? cos_t->size(1) : 0;
  const int64_t sro = rotary ? cos_t->stride(0) : 0;
  const int64_t seqlen_ro = rotary ? cos_t->size(0) : 0;
  const at::Tensor& cos = rotary ? *cos_t : seqlens;
  const at::Tensor& sin = rotary ? *sin_t : seqlens;
  const at::Tensor& leftpad = cache_leftpad.has_value() ? *cache_leftpad : seqlens;
  const at::Tensor& bidx = cache_batch_idx.has_value() ? *cache_batch_idx : seqlens;
  const at::Tensor& bt = paged ? *block_table : seqlens;
  const int64_t sbt = paged ? block_table->stride(0) : 0;
  const bool has_append = seqlen_new > 0 && batch > 0;

  std::vector<tr::Arg> app;  // _append_kernel
  if (has_append) {
    app.reserve(29);
    tr::push_ptrs(app, {&*k, &*v, &k_cache, &v_cache, &seqlens, &leftpad, &bidx, &bt, &cos, &sin});
    push_strides3(app, *k);
    push_strides3(app, *v);
    push_strides3(app, k_cache);
    push_strides3(app, v_cache);
    tr::push_ints(app, {sbt, sro, seqlen_ro, seqlen_new, capacity, batch_cache, block_size});
  }

  at::Tensor out = at::empty(q.sizes(), q.options());
  at::Tensor lse = at::empty({batch, heads_q, seqlen_q}, q.options().dtype(at::kFloat));
  const bool has_split = out.numel() > 0;
  const int64_t rows = group * seqlen_q;
  const int64_t block_m = std::max<int64_t>(16, std::min<int64_t>(64, tr::next_pow2(rows)));
  const int64_t m_blocks = tr::cdiv(rows, block_m);
  // keys per tile: a divisor of the page (a multiple of 16); smaller for wide heads
  int64_t block_n = d <= 128 ? 64 : 32;
  if (paged)
    while (block_n > 1 && block_size % block_n) block_n /= 2;
  int64_t splits = 1;
  std::vector<tr::Arg> sp, cb;  // _split_kernel, _combine_kernel
  at::Tensor opart, lpart;
  if (has_split) {
    const int64_t n_tiles = tr::cdiv(capacity + seqlen_new, block_n);
    const int64_t programs = m_blocks * batch * heads_k;
    splits = num_splits > 0 ? std::max<int64_t>(1, std::min(num_splits, n_tiles))
                            : pick_num_splits(programs, n_tiles, program_slots(q.device()));
    if (splits > 1) {
      opart = at::empty({batch * heads_k, splits, rows, block_d}, q.options().dtype(at::kFloat));
      lpart = at::empty({batch * heads_k, splits, rows}, q.options().dtype(at::kFloat));
    }
    const at::Tensor& op = splits > 1 ? opart : lse;
    const at::Tensor& lp = splits > 1 ? lpart : lse;
    const at::Tensor& slopes = alibi_slopes.has_value() ? *alibi_slopes : lse;
    const int64_t slope_b = alibi_slopes.has_value() && alibi_slopes->dim() == 2 ? heads_q : 0;
    int64_t wr = window_right;
    if (causal) wr = wr >= 0 ? std::min<int64_t>(wr, 0) : 0;
    sp.reserve(44);
    const at::Tensor& km = key_mask.has_value() ? *key_mask : seqlens;  // the mask, or a stand-in
    tr::push_ptrs(sp, {&q, &k_cache, &v_cache, &out, &lse, &op, &lp, &seqlens, &leftpad, &bidx, &bt, &cos, &sin,
                   &slopes, &km});
    push_strides3(sp, q);
    push_strides3(sp, k_cache);
    push_strides3(sp, v_cache);
    push_strides3(sp, out);
    const int64_t skm0 = key_mask.has_value() ? km.stride(0) : 0, skm1 = key_mask.has_value() ? km.stride(1) : 0;
    tr::push_ints(sp, {skm0, skm1, sbt, sro, seqlen_ro, slope_b, seqlen_q, seqlen_new, heads_q, heads_k, capacity, batch_cache,
                   block_size});
    sp.push_back(tr::Arg::real(scale));
    sp.push_back(tr::Arg::real(softcap));
    tr::push_ints(sp, {std::max<int64_t>(window_left, 0), std::max<int64_t>(wr, 0)});
    if (splits > 1) {
      cb.reserve(10);
      tr::push_ptrs(cb, {&opart, &lpart, &out, &lse});
      push_strides3(cb, out);
      tr::push_ints(cb, {seqlen_q, heads_q, heads_k});
    }
  }

  // the key: device, dtype, the constexprs (BLOCK_D, BLOCK_S, num_warps and num_stages follow
  // from head_dim and the split count), the launches, then each launch's argument classes
  std::string key;
  key.reserve(160);
  for (int64_t x : {static_cast<int64_t>(q.get_device()), static_cast<int64_t>(q.scalar_type()), d, group, block_m,
                    block_n, splits, half}) {
    key += std::to_string(x);
    key += ':';
  }
  const bool q_per_token = causal || window_left >= 0 || window_right >= 0;
  for (bool b : {paged, cache_leftpad.has_value(), cache_batch_idx.has_value(), rotary, rotary_interleaved,
                 q_per_token, window_left >= 0, causal || window_right >= 0, softcap > 0.0, alibi_slopes.has_value(),
                 key_mask.has_value(), has_append, has_split})
    key += b ? '1' : '0';
  key += '|';
  tr::spec_key(key, app);
  key += '|';
  tr::spec_key(key, sp);
  key += '|';
  tr::spec_key(key, cb);

  std::vector<at::Tensor> r;
  auto plan = plans().find_or_run(key, "kvcache", [&] {
    using tr::py_optional;
    return py::make_tuple(q, k_cache, v_cache, py_optional(k), py_optional(v), py_optional(cos_t),
                          py_optional(sin_t), py_optional(cache_seqlens), py_optional(cache_batch_idx),
                          py_optional(cache_leftpad), py_optional(block_table), scale, causal, window_left,
                          window_right, softcap, rotary_interleaved, py_optional(alibi_slopes), num_splits,
                          py_optional(key_mask));
  }, r, {has_append ? "append" : nullptr, has_split ? "split" : nullptr, splits > 1 ? "combine" : nullptr});
  if (!plan) return {r[0], r[1]};
  if (has_append) tr::launch(plan->kernels.at("append"), batch * seqlen_new, heads_k, 1, app, q.device());
  if (!has_split) return {out, lse};
  tr::launch(plan->kernels.at("split"), m_blocks, batch * heads_k, splits, sp, q.device());
  if (splits > 1) tr::launch(plan->kernels.at("combine"), batch * heads_k, rows, 1, cb, q.device());
  return {out, lse};
}

}  // namespace
}  // namespace cuda
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, CUDA, m) {
  m.impl("flash_attn_with_kvcache", &mytorch::cuda::flash_attn_with_kvcache);
}
#endif  // MYTORCH_WITH_CUDA
