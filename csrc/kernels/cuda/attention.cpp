// mytorch::flash_attn / flash_attn_backward on CUDA: the Triton kernels of
// mytorch_ext/triton/flash_attn.py, launched from here.
//
// The Triton source stays the one definition of the kernels; this file does what the
// Python launchers do on every call (the checks, the outputs, each kernel's argument
// list and grid) and launches the compiled functions itself (triton_launch.h).
//
// A call's plan (which kernels, with which launch configuration, compiled for which
// specialization) is cached under a key made of everything that picks it: the device,
// dtype, head_dim, the kernel's constexpr flags, the tuned-table family (masking, seqlen
// bucket), TMA eligibility and the specialization class of every argument. The first call
// with a new key runs the Python launcher instead, which chooses the configuration from
// the tuned table (falling back on GPUs where one does not fit), compiles, launches, and
// reports the compiled kernels (mytorch_ext/triton/launch_record.py); every later call with
// that key goes straight to the driver. A kernel the C++ side cannot replay (a Triton whose
// compiled kernels it does not understand) keeps the Python launcher, with one warning.
// The plan cache and the recording are triton_launch.h's Plans.
#ifdef MYTORCH_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <cmath>
#include <string>

#include "kernels/attention_checks.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/triton_launch.h"

namespace mytorch {
namespace cuda {
namespace {

using namespace mytorch::attention;
namespace tr = mytorch::cuda::triton;
namespace py = pybind11;
using OptTensor = std::optional<at::Tensor>;

constexpr const char* kFwd = "mytorch::flash_attn";
constexpr const char* kBwd = "mytorch::flash_attn_backward";

// The plans of both ops (their keys start with F or B).
tr::Plans& plans() {
  static auto* p = new tr::Plans(kFwd);
  return *p;
}

// ------------------------------------------------------------------- arguments

struct Call {
  int64_t B, H, HK, max_q, max_k, head_dim, block_d;
  bool varlen, left, right, softcap, alibi, dropout, masking;
  int64_t wl, wr, bucket, mask_kind = 0;
  at::Tensor mask;  // expanded to (B, H, max_q, max_k), bool viewed as uint8; or undefined
  int64_t sm[4] = {0, 0, 0, 0}, ssb = 0;
};

Call describe_call(const at::Tensor& q, const at::Tensor& k, bool causal, int64_t window_left,
                   int64_t window_right, double softcap, const OptTensor& alibi,
                   const OptTensor& cu_q, int64_t max_seqlen_q, int64_t max_seqlen_k,
                   double dropout_p, const OptTensor& attn_mask) {
  Call c;
  c.varlen = cu_q.has_value();
  c.B = c.varlen ? cu_q->numel() - 1 : q.size(0);
  c.max_q = c.varlen ? max_seqlen_q : q.size(1);
  c.max_k = c.varlen ? max_seqlen_k : k.size(1);
  c.H = q.size(-2);
  c.HK = k.size(-2);
  c.head_dim = q.size(-1);
  c.block_d = std::max<int64_t>(16, tr::next_pow2(c.head_dim));
  if (causal) window_right = 0;
  c.left = window_left >= 0;
  c.right = window_right >= 0;
  c.wl = c.left ? window_left : 0;
  c.wr = c.right ? window_right : 0;
  c.softcap = softcap > 0.0;
  c.alibi = alibi.has_value();
  c.ssb = c.alibi && alibi->dim() == 2 ? alibi->stride(0) : 0;
  c.dropout = dropout_p > 0.0;
  c.masking = causal || c.left || c.right;
  c.bucket = std::min<int64_t>(std::max<int64_t>(tr::next_pow2(std::max<int64_t>(std::max(c.max_q, c.max_k), 1)), 128),
                               16384);
  if (attn_mask.has_value()) {
    at::Tensor m = attn_mask->expand({q.size(0), c.H, c.max_q, c.max_k});
    c.mask_kind = m.scalar_type() == at::kBool ? 1 : 2;
    c.mask = c.mask_kind == 1 ? m.view(at::kByte) : m;
    for (int i = 0; i < 4; ++i) c.sm[i] = c.mask.stride(i);
  }
  return c;
}

void push_strides3(std::vector<tr::Arg>& a, const at::Tensor& x, bool varlen) {
  if (varlen) {
    a.push_back(tr::Arg::integer(0));
    a.push_back(tr::Arg::integer(x.stride(0)));
    a.push_back(tr::Arg::integer(x.stride(1)));
  } else {
    for (int i = 0; i < 3; ++i) a.push_back(tr::Arg::integer(x.stride(i)));
  }
}

void push_lse_strides(std::vector<tr::Arg>& a, const at::Tensor& lse, bool varlen) {
  a.push_back(tr::Arg::integer(varlen ? 0 : lse.stride(0)));
  a.push_back(tr::Arg::integer(varlen ? lse.stride(0) : lse.stride(1)));
}

// The trailing arguments of the forward and both dropout-aware backward kernels:
// sm_scale, softcap, p_drop, seed, wl, wr, SEED (the seed tensor, or any pointer).
void push_scalars(std::vector<tr::Arg>& a, double scale, double softcap, double dropout_p, int64_t seed,
                  const Call& c, const at::Tensor& seed_ptr) {
  a.push_back(tr::Arg::real(scale));
  a.push_back(tr::Arg::real(softcap));
  a.push_back(tr::Arg::real(dropout_p));
  a.push_back(tr::Arg::integer(seed));
  a.push_back(tr::Arg::integer(c.wl));
  a.push_back(tr::Arg::integer(c.wr));
  a.push_back(tr::Arg::ptr(seed_ptr));
}

void push_mask_strides(std::vector<tr::Arg>& a, const Call& c) {
  for (int i = 0; i < 4; ++i) a.push_back(tr::Arg::integer(c.sm[i]));
  a.push_back(tr::Arg::integer(c.ssb));
}

// The constexprs and the tuned-table family: the part of a plan key the arguments do not give.
std::string key_head(char kind, const at::Tensor& q, const Call& c) {
  std::string key;
  key.reserve(128);
  key += kind;
  key += std::to_string(q.get_device()) + ':' + std::to_string(static_cast<int>(q.scalar_type())) + ':' +
         std::to_string(c.head_dim) + ':' + std::to_string(c.bucket) + ':';
  for (bool b : {c.varlen, c.left, c.right, c.softcap, c.alibi, c.dropout, c.masking}) key += b ? '1' : '0';
  key += std::to_string(c.mask_kind);
  key += '|';
  return key;
}

// A (B, N, H, D) tensor the copy engine can read: 16-byte base and strides.
bool copy_engine_aligned(const at::Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16) return false;
  for (int i = 0; i < 3; ++i)
    if ((t.stride(i) * t.element_size()) % 16) return false;
  return true;
}

bool tma_eligible(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Call& c) {
  // a copy-engine descriptor needs every dimension non-empty
  if (q.numel() == 0 || k.numel() == 0 || c.varlen || c.mask_kind || c.dropout || c.head_dim != c.block_d ||
      (q.scalar_type() != at::kHalf && q.scalar_type() != at::kBFloat16))
    return false;
  return copy_engine_aligned(q) && copy_engine_aligned(k) && copy_engine_aligned(v);
}

// The checks of check_inputs in mytorch_ext/ops/attention.py, in its order. Returns varlen.
bool check_inputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  double dropout_p, double softcap, const OptTensor& alibi, const OptTensor& cu_q,
                  const OptTensor& cu_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
                  const OptTensor& attn_mask, const OptTensor& seed_tensor) {
  const bool varlen = cu_q.has_value() || cu_k.has_value();
  TORCH_CHECK_VALUE(cu_q.has_value() == cu_k.has_value(), op,
                    ": expected both cu_seqlens_q and cu_seqlens_k or neither");
  check_qkv(op, q, k, v, varlen, Rules::kTriton);
  check_scalars(op, dropout_p, softcap);
  const int64_t batch = varlen ? cu_q->numel() - 1 : q.size(0);
  if (alibi.has_value()) check_alibi(op, *alibi, q, batch);
  if (attn_mask.has_value()) check_mask(op, *attn_mask, q, k, varlen, Rules::kTriton);
  if (seed_tensor.has_value()) check_seed_tensor(op, *seed_tensor, q);
  if (varlen) {
    // shapes only: the values are read on the device (check_cu_seqlens_on_device)
    check_cu(op, "q", *cu_q, q, max_seqlen_q, /*values=*/false);
    check_cu(op, "k", *cu_k, k, max_seqlen_k, /*values=*/false);
    check_cu_pair(op, *cu_q, *cu_k);
  }
  return varlen;
}

// ---------------------------------------------------------------------- forward

std::tuple<at::Tensor, at::Tensor> forward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
    std::optional<double> softmax_scale, bool causal, int64_t window_left, int64_t window_right,
    double softcap, const OptTensor& alibi, const OptTensor& cu_q, const OptTensor& cu_k,
    int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t seed, const OptTensor& attn_mask,
    const OptTensor& seed_tensor) {
  const bool varlen = check_inputs(kFwd, q, k, v, dropout_p, softcap, alibi, cu_q, cu_k, max_seqlen_q,
                                   max_seqlen_k, attn_mask, seed_tensor);
  c10::cuda::CUDAGuard guard(q.device());
  // the cu_seqlens values are checked on the stream: a host read would synchronise every call
  if (varlen) check_cu_seqlens_on_device(kFwd, *cu_q, *cu_k, q.size(0), k.size(0), max_seqlen_q, max_seqlen_k);
  const Call c = describe_call(q, k, causal, window_left, window_right, softcap, alibi, cu_q,
                               max_seqlen_q, max_seqlen_k, dropout_p, attn_mask);
  const double scale = mytorch::attention::softmax_scale(softmax_scale, c.head_dim);
  at::Tensor out = at::empty(q.sizes(), q.options());
  at::Tensor lse = varlen ? at::empty({c.H, q.size(0)}, q.options().dtype(at::kFloat))
                          : at::empty({c.B, c.H, c.max_q}, q.options().dtype(at::kFloat));
  if (out.numel() == 0 || c.max_q == 0) return {out, lse.fill_(INFINITY)};

  const at::Tensor& slopes = c.alibi ? *alibi : q;
  const at::Tensor& cq = varlen ? *cu_q : q;
  const at::Tensor& ck = varlen ? *cu_k : q;
  const at::Tensor& mask = c.mask_kind ? c.mask : q;
  std::vector<tr::Arg> a;
  a.reserve(40);
  tr::push_ptrs(a, {&q, &k, &v, &out, &lse, &slopes, &cq, &ck, &mask});
  push_strides3(a, q, varlen);
  push_strides3(a, k, varlen);
  push_strides3(a, v, varlen);
  push_strides3(a, out, varlen);
  push_lse_strides(a, lse, varlen);
  push_mask_strides(a, c);
  tr::push_ints(a, {c.max_q, c.max_k, c.H, c.H / c.HK});
  push_scalars(a, scale, softcap, dropout_p, seed, c, seed_tensor.has_value() ? *seed_tensor : q);

  const bool tma = tma_eligible(q, k, v, c);
  std::string key = key_head('F', q, c);
  key += tma ? 'T' : 't';
  key += seed_tensor.has_value() ? 'S' : 's';
  tr::spec_key(key, a);
  std::vector<at::Tensor> r;
  auto plan = plans().find_or_run(key, "forward", [&] {
    return py::make_tuple(q, k, v, dropout_p, scale, causal, window_left, window_right, softcap,
                          tr::py_optional(alibi), tr::py_optional(cu_q), tr::py_optional(cu_k), max_seqlen_q,
                          max_seqlen_k, seed, tr::py_optional(attn_mask), tr::py_optional(seed_tensor));
  }, r);
  if (!plan) return {r[0], r[1]};
  auto it = plan->kernels.find("fwd_tma");
  if (it != plan->kernels.end()) {
    const tr::Kernel& kern = it->second;
    std::vector<tr::Arg> t;
    t.reserve(20);
    t.push_back(tr::Arg::desc(q));
    t.push_back(tr::Arg::desc(k));
    t.push_back(tr::Arg::desc(v));
    tr::push_ptrs(t, {&out, &lse, &slopes});
    for (int i = 0; i < 3; ++i) t.push_back(tr::Arg::integer(out.stride(i)));
    t.push_back(tr::Arg::integer(lse.stride(0)));
    t.push_back(tr::Arg::integer(lse.stride(1)));
    t.push_back(tr::Arg::integer(c.ssb));
    tr::push_ints(t, {c.max_q, c.max_k, c.H, c.H / c.HK});
    t.push_back(tr::Arg::real(scale));
    t.push_back(tr::Arg::real(softcap));
    t.push_back(tr::Arg::integer(c.wl));
    t.push_back(tr::Arg::integer(c.wr));
    const int64_t tiles_m = tr::cdiv(c.max_q, kern.block_m);
    if (kern.grid_cap > 0)  // the Hopper kernel: a 1-D grid, persistent when capped at the SMs
      tr::launch(kern, std::min<int64_t>(tiles_m * c.B * c.H, kern.grid_cap), 1, 1, t, q.device());
    else
      tr::launch(kern, tiles_m, c.B * c.H, 1, t, q.device());
    return {out, lse};
  }
  const tr::Kernel& kern = plan->kernels.at("fwd");
  tr::launch(kern, tr::cdiv(c.max_q, kern.block_m), c.B * c.H, 1, a, q.device());
  return {out, lse};
}

// --------------------------------------------------------------------- backward

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(
    const at::Tensor& grad_out_, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse_, double dropout_p, double softmax_scale, bool causal,
    int64_t window_left, int64_t window_right, double softcap, const OptTensor& alibi,
    const OptTensor& cu_q, const OptTensor& cu_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
    int64_t seed, bool deterministic, const OptTensor& attn_mask, const OptTensor& seed_tensor) {
  const bool varlen = check_inputs(kBwd, q, k, v, dropout_p, softcap, alibi, cu_q, cu_k, max_seqlen_q,
                                   max_seqlen_k, attn_mask, seed_tensor);
  const std::vector<int64_t> lse_shape =
      varlen ? std::vector<int64_t>{q.size(1), q.size(0)} : std::vector<int64_t>{q.size(0), q.size(2), q.size(1)};
  check_backward(kBwd, grad_out_, q, v, out, lse_, lse_shape);
  // the kernels step along the rows of lse one float at a time
  const at::Tensor lse = lse_.stride(-1) == 1 ? lse_ : lse_.contiguous();
  c10::cuda::CUDAGuard guard(q.device());
  const Call c = describe_call(q, k, causal, window_left, window_right, softcap, alibi, cu_q,
                               max_seqlen_q, max_seqlen_k, dropout_p, attn_mask);
  at::Tensor dk = at::empty(k.sizes(), k.options());
  at::Tensor dv = at::empty(v.sizes(), v.options());
  if (q.numel() == 0 || k.numel() == 0 || c.max_q == 0 || c.max_k == 0)
    return {at::zeros_like(q), dk.zero_(), dv.zero_()};
  const at::Tensor grad_out = grad_out_.stride(-1) == 1 ? grad_out_ : grad_out_.contiguous();
  at::Tensor dq = at::empty(q.sizes(), q.options());
  at::Tensor delta = at::empty_like(lse);

  const at::Tensor& slopes = c.alibi ? *alibi : q;
  const at::Tensor& cq = varlen ? *cu_q : q;
  const at::Tensor& ck = varlen ? *cu_k : q;
  const at::Tensor& mask = c.mask_kind ? c.mask : q;
  const at::Tensor& seed_ptr = seed_tensor.has_value() ? *seed_tensor : q;
  std::vector<tr::Arg> pre;  // _bwd_pre_kernel
  tr::push_ptrs(pre, {&out, &grad_out, &delta});
  push_strides3(pre, out, varlen);
  push_strides3(pre, grad_out, varlen);
  push_lse_strides(pre, lse, varlen);
  pre.push_back(tr::Arg::ptr(cq));
  pre.push_back(tr::Arg::integer(c.max_q));
  pre.push_back(tr::Arg::integer(c.H));

  std::vector<tr::Arg> kv;  // _bwd_kv_kernel
  kv.reserve(56);
  tr::push_ptrs(kv, {&q, &k, &v, &grad_out, &lse, &delta, &dk, &dv, &dq, &slopes, &cq, &ck, &mask});
  for (const at::Tensor* t : std::initializer_list<const at::Tensor*>{&q, &k, &v, &grad_out, &dk, &dv, &dq}) push_strides3(kv, *t, varlen);
  push_lse_strides(kv, lse, varlen);
  push_mask_strides(kv, c);
  tr::push_ints(kv, {c.max_q, c.max_k, c.H, c.HK, c.H / c.HK});
  push_scalars(kv, softmax_scale, softcap, dropout_p, seed, c, seed_ptr);

  std::vector<tr::Arg> qa;  // _bwd_q_kernel
  qa.reserve(48);
  tr::push_ptrs(qa, {&q, &k, &v, &grad_out, &lse, &delta, &dq, &slopes, &cq, &ck, &mask});
  for (const at::Tensor* t : std::initializer_list<const at::Tensor*>{&q, &k, &v, &grad_out, &dq}) push_strides3(qa, *t, varlen);
  push_lse_strides(qa, lse, varlen);
  push_mask_strides(qa, c);
  tr::push_ints(qa, {c.max_q, c.max_k, c.H, c.H / c.HK});
  push_scalars(qa, softmax_scale, softcap, dropout_p, seed, c, seed_ptr);

  // the copy engine's alignment for q, k, v and dO: the Hopper dK/dV kernel's condition
  const bool tma = tma_eligible(q, k, v, c) && copy_engine_aligned(grad_out);
  std::string key = key_head('B', q, c);
  key += tma ? 'T' : 't';
  key += seed_tensor.has_value() ? 'S' : 's';
  tr::spec_key(key, pre);
  key += '|';
  tr::spec_key(key, kv);
  key += '|';
  tr::spec_key(key, qa);
  std::vector<at::Tensor> r;
  auto plan = plans().find_or_run(key, "backward", [&] {
    return py::make_tuple(grad_out, q, k, v, out, lse, dropout_p, softmax_scale, causal, window_left,
                          window_right, softcap, tr::py_optional(alibi), tr::py_optional(cu_q),
                          tr::py_optional(cu_k), max_seqlen_q, max_seqlen_k, seed, deterministic,
                          tr::py_optional(attn_mask), tr::py_optional(seed_tensor));
  }, r);
  if (!plan) return {r[0], r[1], r[2]};
  const tr::Kernel& kp = plan->kernels.at("bwd_pre");
  tr::launch(kp, tr::cdiv(c.max_q, kp.block_m), c.B * c.H, 1, pre, q.device());
  // The Hopper kernels (flash_attn_hopper_bwd.py): q, k, v, dO descriptors, lse, delta, the
  // gradients they write and those gradients' strides, lse's strides, sizes, scale, window.
  auto hopper_args = [&](std::initializer_list<const at::Tensor*> grads, int64_t heads) {
    std::vector<tr::Arg> t;
    t.reserve(24);
    for (const at::Tensor* x : std::initializer_list<const at::Tensor*>{&q, &k, &v, &grad_out})
      t.push_back(tr::Arg::desc(*x));
    tr::push_ptrs(t, {&lse, &delta});
    for (const at::Tensor* g : grads) t.push_back(tr::Arg::ptr(*g));
    for (const at::Tensor* g : grads)
      for (int i = 0; i < 3; ++i) t.push_back(tr::Arg::integer(g->stride(i)));
    t.push_back(tr::Arg::integer(lse.stride(0)));
    t.push_back(tr::Arg::integer(lse.stride(1)));
    tr::push_ints(t, {c.max_q, c.max_k, heads, c.H / c.HK});
    t.push_back(tr::Arg::real(softmax_scale));
    t.push_back(tr::Arg::integer(c.wl));
    t.push_back(tr::Arg::integer(c.wr));
    return t;
  };
  auto kvt = plan->kernels.find("bwd_kv_tma");
  if (kvt != plan->kernels.end()) {
    const tr::Kernel& kern = kvt->second;
    tr::launch(kern, tr::cdiv(c.max_k, kern.block_n), c.B * c.HK, 1, hopper_args({&dk, &dv}, c.HK), q.device());
  } else {
    const tr::Kernel& kk = plan->kernels.at("bwd_kv");
    tr::launch(kk, tr::cdiv(c.max_k, kk.block_n), c.B * c.HK, 1, kv, q.device());
  }
  auto qt = plan->kernels.find("bwd_q_tma");
  if (qt != plan->kernels.end()) {
    const tr::Kernel& kern = qt->second;
    tr::launch(kern, tr::cdiv(c.max_q, kern.block_m), c.B * c.H, 1, hopper_args({&dq}, c.H), q.device());
    return {dq, dk, dv};
  }
  const tr::Kernel& kq = plan->kernels.at("bwd_q");
  tr::launch(kq, tr::cdiv(c.max_q, kq.block_m), c.B * c.H, 1, qa, q.device());
  return {dq, dk, dv};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> flash_attn(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
    std::optional<double> softmax_scale, bool causal, int64_t window_left, int64_t window_right,
    double softcap, const OptTensor& alibi_slopes, const OptTensor& cu_seqlens_q,
    const OptTensor& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t seed,
    const OptTensor& attn_mask, bool deterministic, const OptTensor& seed_tensor) {
  (void)deterministic;  // read by the autograd kernel: the backward is always deterministic here
  return forward(q, k, v, dropout_p, softmax_scale, causal, window_left, window_right, softcap,
                 alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seed, attn_mask,
                 seed_tensor);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attn_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, double dropout_p, double softmax_scale, bool causal,
    int64_t window_left, int64_t window_right, double softcap, const OptTensor& alibi_slopes,
    const OptTensor& cu_seqlens_q, const OptTensor& cu_seqlens_k, int64_t max_seqlen_q,
    int64_t max_seqlen_k, int64_t seed, bool deterministic, const OptTensor& attn_mask,
    const OptTensor& seed_tensor) {
  return backward(grad_out, q, k, v, out, lse, dropout_p, softmax_scale, causal, window_left,
                  window_right, softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                  max_seqlen_k, seed, deterministic, attn_mask, seed_tensor);
}

}  // namespace cuda
}  // namespace mytorch
#endif  // MYTORCH_WITH_CUDA
