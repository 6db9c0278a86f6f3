// Input checks of mytorch::flash_attn / flash_attn_backward, shared by the CPU kernel
// (kernels/cpu/attention.cpp) and the CUDA launcher (kernels/cuda/attention.cpp), so that
// both raise the messages of check_inputs in mytorch_ext/ops/attention.py. Host code only.
//
// The two kernels accept different inputs (Rules): the OpenMP kernel any head_dim in
// [1, 256] (v's may differ from q's) and float64; the Triton kernels a head_dim that is a
// multiple of 8 in [8, 256], the same for q, k and v, and no float64.
#pragma once
#include <ATen/ATen.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace mytorch {
namespace attention {

constexpr int64_t kMaxHeadDim = 256;

// The softmax scale of a call: softmax_scale, or 1/sqrt(head_dim) (q's) when it is None. The
// schemas keep softmax_scale optional; the kernels, the autograd and the SDPA routes resolve it
// here (Python through _C._attention.softmax_scale).
inline double softmax_scale(std::optional<double> softmax_scale, int64_t head_dim) {
  return softmax_scale.has_value() ? *softmax_scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

enum class Rules { kOpenMP, kTriton };

// Shapes, dtypes and numbers spelled as Python spells them.
inline std::string py_tuple(c10::IntArrayRef s) {
  std::string o = "(";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + (s.size() == 1 ? ",)" : ")");
}

inline std::string py_list(const std::vector<int64_t>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? ", " : "") + std::to_string(v[i]);
  return o + "]";
}

inline std::string py_float(double x) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), x);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // 1 -> 1.0; 1e+20, inf, nan stay
  return s;
}

inline std::string desc(const char* name, const at::Tensor& t) {
  return std::string(name) + " " + py_tuple(t.sizes()) + " " +
         std::string(c10::getDtypeNames(t.scalar_type()).first);
}

// q, k, v in the order of check_inputs.
inline void check_qkv(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      bool varlen, Rules rules) {
  const bool triton = rules == Rules::kTriton;
  const int64_t want = varlen ? 3 : 4;
  const char* layout = varlen ? "(total_tokens, heads, head_dim)" : "(batch, seqlen, heads, head_dim)";
  auto qkv = [&] { return desc("q", q) + ", " + desc("k", k) + ", " + desc("v", v); };
  TORCH_CHECK_VALUE(q.dim() == want && k.dim() == want && v.dim() == want, op,
                    ": expected q, k, v of layout ", layout, ", got ", qkv());
  auto accepted = [&](const at::Tensor& t) {
    const auto s = t.scalar_type();
    return s == at::kHalf || s == at::kBFloat16 || s == at::kFloat || (!triton && s == at::kDouble);
  };
  auto fp8 = [](const at::Tensor& t) { return t.scalar_type() == at::kFloat8_e4m3fn; };
  TORCH_CHECK_VALUE(accepted(q) && accepted(k) && accepted(v), op, ": expected q, k, v of dtype ",
                    triton ? "float16, bfloat16 or float32" : "float16, bfloat16, float32 or float64",
                    ", got ", qkv(),
                    fp8(q) || fp8(k) || fp8(v) ? " (float8_e4m3fn inputs go to mytorch::flash_attn_fp8)" : "");
  TORCH_CHECK_VALUE(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(), op,
                    ": expected q, k, v of one dtype, got ", qkv());
  TORCH_CHECK(q.device() == k.device() && q.device() == v.device(), op,
              ": expected q, k, v on one device, got q on ", q.device(), ", k on ", k.device(),
              ", v on ", v.device());
  if (!triton)
    TORCH_CHECK(q.device().is_cpu() || q.device().is_privateuseone(), op,
                ": the CPU kernel expects tensors on cpu or mytorch, got ", q.device());
  if (!varlen)
    TORCH_CHECK_VALUE(q.size(0) == k.size(0) && q.size(0) == v.size(0), op,
                      ": expected q, k, v with the same batch size, got ", qkv());
  const int64_t d = q.size(-1), dv = v.size(-1);
  if (triton) {
    TORCH_CHECK_VALUE(k.sizes() == v.sizes(), op, ": expected k and v of the same shape, got ", qkv());
    TORCH_CHECK_VALUE(k.size(-1) == d, op, ": expected q, k, v with the same head_dim, got ", qkv());
    TORCH_CHECK_VALUE(d % 8 == 0 && d <= kMaxHeadDim && d != 0, op,
                      ": expected head_dim a multiple of 8 in [8, 256], got ", d, " (", qkv(), ")");
  } else {
    TORCH_CHECK_VALUE(k.sizes().slice(0, want - 1) == v.sizes().slice(0, want - 1), op,
                      ": expected k and v of the same shape but for head_dim, got ", qkv());
    TORCH_CHECK_VALUE(k.size(-1) == d, op, ": expected q and k with the same head_dim, got ", qkv());
    TORCH_CHECK_VALUE(d >= 1 && d <= kMaxHeadDim, op, ": expected head_dim in [1, ", kMaxHeadDim,
                      "], got ", d, " (", qkv(), ")");
    TORCH_CHECK_VALUE(dv >= 1 && dv <= kMaxHeadDim, op, ": expected the head_dim of v in [1, ",
                      kMaxHeadDim, "], got ", dv, " (", qkv(), ")");
  }
  const int64_t hq = q.size(-2), hk = k.size(-2);
  TORCH_CHECK_VALUE(hk > 0 && hq % hk == 0, op, ": expected the heads of k, v to divide the heads of q, got ",
                    hq, " and ", hk, " (", qkv(), ")");
  for (auto [t, n] : {std::pair<const at::Tensor*, const char*>{&q, "q"}, {&k, "k"}, {&v, "v"}})
    TORCH_CHECK_VALUE(t->stride(-1) == 1 || t->size(-1) <= 1, op, ": expected ", n,
                      " with a contiguous last dim, got strides ", py_tuple(t->strides()));
}

inline void check_scalars(const char* op, double dropout_p, double softcap) {
  TORCH_CHECK_VALUE(dropout_p >= 0 && dropout_p < 1, op, ": expected dropout_p in [0, 1), got ",
                    py_float(dropout_p));
  TORCH_CHECK_VALUE(!(softcap < 0), op, ": expected softcap >= 0, got ", py_float(softcap));
}

// alibi_slopes: float32, (heads_q,) or (batch, heads_q), on q's device.
inline void check_alibi(const char* op, const at::Tensor& a, const at::Tensor& q, int64_t batch) {
  const int64_t hq = q.size(-2);
  const bool ok_shape = (a.dim() == 1 && a.size(0) == hq) ||
                        (a.dim() == 2 && a.size(0) == batch && a.size(1) == hq);
  TORCH_CHECK_VALUE(a.scalar_type() == at::kFloat && ok_shape, op,
                    ": expected alibi_slopes float32 of shape (", hq, ",) or (batch, ", hq,
                    "), got ", desc("alibi_slopes", a));
  TORCH_CHECK(a.device() == q.device(), op, ": expected alibi_slopes on ", q.device(), ", got ",
              a.device());
  TORCH_CHECK_VALUE(a.stride(-1) == 1, op, ": expected alibi_slopes with a contiguous last dim");
}

// attn_mask: bool or float, broadcastable (from the right, as SDPA's) to
// (batch, heads_q, seqlen_q, seqlen_k); not with cu_seqlens. Returns that full shape.
inline std::vector<int64_t> check_mask(const char* op, const at::Tensor& mask, const at::Tensor& q,
                                       const at::Tensor& k, bool varlen, Rules rules) {
  TORCH_CHECK_VALUE(!varlen, op, ": attn_mask is not supported with cu_seqlens");
  TORCH_CHECK(mask.device() == q.device(), op, ": expected attn_mask on ", q.device(), ", got ",
              mask.device());
  const auto mt = mask.scalar_type();
  TORCH_CHECK_VALUE(mt == at::kBool || mt == at::kHalf || mt == at::kBFloat16 || mt == at::kFloat ||
                        (rules == Rules::kOpenMP && mt == at::kDouble),
                    op, ": expected attn_mask of dtype bool or float, got ", desc("attn_mask", mask));
  const std::vector<int64_t> full{q.size(0), q.size(-2), q.size(1), k.size(1)};
  bool ok = mask.dim() <= 4;
  for (int64_t i = 1; ok && i <= mask.dim(); ++i)
    ok = mask.size(-i) == 1 || mask.size(-i) == full[4 - i];
  TORCH_CHECK_VALUE(ok, op, ": expected attn_mask broadcastable to ", py_tuple(full), ", got ",
                    desc("attn_mask", mask));
  return full;
}

// cu_seqlens_{name}: int32, (batch + 1,), on x's device. With values, also: starting at 0,
// never decreasing, ending at x.size(0), no sequence longer than max_seqlen. Returns the
// values when read. Values are read only where they are in host memory (CPU, the mytorch
// device); CUDA checks them on the stream (check_cu_seqlens_on_device, cuda/ops.h).
inline std::vector<int64_t> check_cu(const char* op, const char* name, const at::Tensor& cu,
                                     const at::Tensor& x, int64_t max_seqlen, bool values) {
  const std::string cname = std::string("cu_seqlens_") + name;
  TORCH_CHECK_VALUE(cu.scalar_type() == at::kInt && cu.dim() == 1 && cu.numel() >= 1, op, ": expected ",
                    cname, " a 1-D int32 tensor of batch+1 offsets, got ", desc(cname.c_str(), cu));
  TORCH_CHECK(cu.device() == x.device(), op, ": expected ", cname, " on ", x.device(), ", got ",
              cu.device());
  TORCH_CHECK_VALUE(max_seqlen >= 0, op, ": expected max_seqlen_", name, " >= 0, got ", max_seqlen);
  if (!values) return {};
  TORCH_INTERNAL_ASSERT(!cu.device().is_cuda(), op, ": cu_seqlens values are checked on the device on CUDA");
  // mytorch device tensors live in host memory: read them through a CPU alias
  const at::Tensor host = cu.device().is_cpu() ? cu
                                               : at::from_blob(cu.data_ptr(), cu.sizes(), cu.strides(),
                                                               cu.options().device(at::kCPU));
  const at::Tensor c = host.to(at::kLong).contiguous();
  std::vector<int64_t> vals(c.const_data_ptr<int64_t>(), c.const_data_ptr<int64_t>() + c.numel());
  int64_t longest = 0;
  bool ok = vals[0] == 0;
  for (size_t b = 1; b < vals.size(); ++b) {
    ok = ok && vals[b] >= vals[b - 1];
    longest = std::max(longest, vals[b] - vals[b - 1]);
  }
  TORCH_CHECK_VALUE(ok, op, ": expected ", cname, " to start at 0 and never decrease, got ", py_list(vals));
  TORCH_CHECK_VALUE(vals.back() == x.size(0), op, ": expected ", cname, "[-1] == ", name, ".shape[0], got ",
                    vals.back(), " and ", x.size(0), " (", desc(name, x), ")");
  TORCH_CHECK_VALUE(longest <= max_seqlen, op, ": expected max_seqlen_", name,
                    " >= the longest sequence, got ", max_seqlen, " < ", longest);
  return vals;
}

// seed_tensor: a one-element int64 tensor on q's device (the dropout seed the kernels read).
inline void check_seed_tensor(const char* op, const at::Tensor& t, const at::Tensor& q) {
  TORCH_CHECK_VALUE(t.scalar_type() == at::kLong && t.numel() == 1, op,
                    ": expected seed_tensor a one-element int64 tensor, got ", desc("seed_tensor", t));
  TORCH_CHECK(t.device() == q.device(), op, ": expected seed_tensor on ", q.device(), ", got ", t.device());
}

inline void check_cu_pair(const char* op, const at::Tensor& cq, const at::Tensor& ck) {
  TORCH_CHECK_VALUE(cq.numel() == ck.numel(), op, ": expected cu_seqlens_q and cu_seqlens_k of one length, got ",
                    cq.numel(), " and ", ck.numel());
}

// The output's shape: q's with the head_dim of v.
inline std::vector<int64_t> out_shape(const at::Tensor& q, const at::Tensor& v) {
  std::vector<int64_t> s(q.sizes().begin(), q.sizes().end());
  s.back() = v.size(-1);
  return s;
}

// The backward's own inputs, as _check_bwd_shapes in mytorch_ext/ops/attention.py.
inline void check_backward(const char* op, const at::Tensor& grad_out, const at::Tensor& q,
                           const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                           c10::IntArrayRef lse_shape) {
  const std::vector<int64_t> oshape = out_shape(q, v);
  auto go_out = [&] { return desc("grad_out", grad_out) + ", " + desc("out", out); };
  TORCH_CHECK_VALUE(grad_out.sizes() == at::IntArrayRef(oshape) && out.sizes() == at::IntArrayRef(oshape), op,
                    ": expected grad_out and out of shape ", py_tuple(oshape),
                    " (q's with the head_dim of v), got ", go_out());
  TORCH_CHECK_VALUE(grad_out.scalar_type() == q.scalar_type() && out.scalar_type() == q.scalar_type(), op,
                    ": expected grad_out and out of q's dtype, got ", go_out(), ", ", desc("q", q));
  TORCH_CHECK_VALUE(lse.scalar_type() == at::kFloat && lse.sizes() == lse_shape, op,
                    ": expected lse float32 of shape ", py_tuple(lse_shape), ", got ", desc("lse", lse));
  TORCH_CHECK(grad_out.device() == q.device() && out.device() == q.device() && lse.device() == q.device(),
              op, ": expected grad_out, out and lse on ", q.device(), ", got ", grad_out.device(), ", ",
              out.device(), " and ", lse.device());
}

}  // namespace attention
}  // namespace mytorch
