// Losses (OpenMP): nll_loss (any spatial dims), cross_entropy (log-softmax + nll + label
// smoothing, with class weights), mse_loss, forward and backward; and the large-vocabulary
// cross-entropies of training: fused_cross_entropy (saves only lse), fused_cross_entropy_grad
// (loss and gradient in one pass) and fused_linear_cross_entropy (chunked, without the logits).
//
// Targets are checked before any read: a target outside [0, C) that is not
// ignore_index raises IndexError naming the op, the value and the valid range.
// Reductions add in a fixed order (chunks of fixed size, then the chunks in
// sequence), so results do not depend on the thread count.
#include "kernels/loss_checks.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Reduction.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "checks.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/vec_math.h"

// The entry points run the widest copy of this file the CPU has (kernels/cpu/isa/loss_*.cpp).
MYTORCH_ISA_DECLARE(nll_loss)
MYTORCH_ISA_DECLARE(nll_loss_backward)
MYTORCH_ISA_DECLARE(cross_entropy)
MYTORCH_ISA_DECLARE(cross_entropy_backward)
MYTORCH_ISA_DECLARE(mse_loss)
MYTORCH_ISA_DECLARE(mse_loss_backward)

namespace mytorch {
namespace cpu {
using namespace loss;  // the input checks shared with the CUDA kernels
namespace {

constexpr int64_t kGrain = 1 << 14;
constexpr int64_t kChunk = 1 << 12;

// Deterministic parallel sum of f(i) for i in [0, n).
template <typename A, typename F>
A fixed_order_sum(int64_t n, F f) {
  const int64_t nch = (n + kChunk - 1) / kChunk;
  std::vector<A> part(nch, A(0));
#pragma omp parallel for schedule(static) if (n > kGrain)
  for (int64_t c = 0; c < nch; ++c) {
    A s = 0;
    const int64_t e = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < e; ++i) s += f(i);
    part[c] = s;
  }
  A s = 0;
  for (A p : part) s += p;
  return s;
}

// Target as int64, checked: every value is in [0, C) or equals ignore_index.
std::vector<int64_t> checked_targets(const char* op, const at::Tensor& target, int64_t C,
                                     int64_t ignore_index) {
  at::Tensor t = target.contiguous();
  const int64_t n = t.numel();
  std::vector<int64_t> out(n);
  AT_DISPATCH_SWITCH(t.scalar_type(), "mytorch_targets",
                     AT_DISPATCH_CASE(at::kLong, [&] {
                       const int64_t* p = t.const_data_ptr<int64_t>();
                       std::copy(p, p + n, out.begin());
                     }) AT_DISPATCH_CASE(at::kInt, [&] {
                       const int32_t* p = t.const_data_ptr<int32_t>();
                       std::copy(p, p + n, out.begin());
                     }) AT_DISPATCH_CASE(at::kByte, [&] {
                       const uint8_t* p = t.const_data_ptr<uint8_t>();
                       std::copy(p, p + n, out.begin());
                     }));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = out[i];
    TORCH_CHECK_INDEX(v == ignore_index || (v >= 0 && v < C), op, ": target ", v,
                      " is out of bounds for ", C, " classes (expected a value in [0, ", C - 1,
                      "] or ignore_index=", ignore_index, ")");
  }
  return out;
}

// ---- nll_loss ----
template <typename T>
void nll_forward_kernel(const T* x, const int64_t* t, const T* w, T* out, T* total_w, NllDims d,
                        int64_t reduction, int64_t ignore) {
  using A = at::opmath_type<T>;
  const int64_t n = d.N * d.S;
  auto term = [&](int64_t i, A& wt) -> A {
    const int64_t b = i / d.S, s = i % d.S, c = t[i];
    if (c == ignore) {
      wt = 0;
      return 0;
    }
    wt = w ? static_cast<A>(w[c]) : A(1);
    return -wt * static_cast<A>(x[(b * d.C + c) * d.S + s]);
  };
  if (reduction == at::Reduction::None) {
#pragma omp parallel for if (n > kGrain)
    for (int64_t i = 0; i < n; ++i) {
      A wt;
      out[i] = static_cast<T>(term(i, wt));
    }
    *total_w = T(0);
    return;
  }
  const A loss = fixed_order_sum<A>(n, [&](int64_t i) { A wt; return term(i, wt); });
  const A tw = fixed_order_sum<A>(n, [&](int64_t i) { A wt; term(i, wt); return wt; });
  *total_w = static_cast<T>(tw);
  *out = static_cast<T>(reduction == at::Reduction::Mean ? loss / tw : loss);
}

template <typename T>
void nll_backward_kernel(const T* g, const int64_t* t, const T* w, T* gi, const T* total_w,
                         NllDims d, int64_t reduction, int64_t ignore) {
  using A = at::opmath_type<T>;
  const int64_t n = d.N * d.S;
  std::fill(gi, gi + n * d.C, T(0));
  A scale = 0;
  if (reduction != at::Reduction::None) {
    scale = static_cast<A>(g[0]);
    if (reduction == at::Reduction::Mean) scale /= static_cast<A>(*total_w);
  }
#pragma omp parallel for if (n > kGrain)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = i / d.S, s = i % d.S, c = t[i];
    if (c == ignore) continue;
    const A gv = reduction == at::Reduction::None ? static_cast<A>(g[i]) : scale;
    gi[(b * d.C + c) * d.S + s] = static_cast<T>(-(w ? static_cast<A>(w[c]) : A(1)) * gv);
  }
}

// ---- cross entropy on (N, C) rows: fused log-softmax + nll + smoothing ----
// loss_i = (1-eps) * w[t] * (-lp[t]) + (eps/C) * sum_c w[c] * (-lp[c]); ignored rows: 0.
template <typename T>
void ce_forward_kernel(const T* x, const int64_t* t, const T* w, T* loss_rows, double* wt_rows,
                       int64_t N, int64_t C, int64_t ignore, double eps) {
  using A = at::opmath_type<T>;
#pragma omp parallel if (N * C > kGrain)
  {
    std::vector<A> buf(C);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      const int64_t c = t[i];
      if (c == ignore) {
        loss_rows[i] = T(0);
        wt_rows[i] = 0;
        continue;
      }
      const T* xr = x + i * C;
      A m = -std::numeric_limits<A>::infinity();
      for (int64_t j = 0; j < C; ++j) {
        buf[j] = static_cast<A>(xr[j]);
        m = std::max(m, buf[j]);
      }
      const A lse = m + std::log(exp_shift_sum_only(buf.data(), C, m));
      const A wt = w ? static_cast<A>(w[c]) : A(1);
      A l = (A(1) - A(eps)) * wt * (lse - buf[c]);
      if (eps > 0) {
        A sm = 0;
        for (int64_t j = 0; j < C; ++j) sm += (w ? static_cast<A>(w[j]) : A(1)) * (lse - buf[j]);
        l += A(eps) / A(C) * sm;
      }
      loss_rows[i] = static_cast<T>(l);
      wt_rows[i] = static_cast<double>(wt);
    }
  }
}

// dz_ic = s_i * [ p_ic * ((1-eps) w_t + (eps/C) W) - (1-eps) w_t [c==t] - (eps/C) w_c ]
template <typename T>
void ce_backward_kernel(const T* g, const T* x, const int64_t* t, const T* w, T* gi, int64_t N,
                        int64_t C, int64_t ignore, double eps, int64_t reduction, double denom) {
  using A = at::opmath_type<T>;
  A W = 0;
  for (int64_t j = 0; j < C; ++j) W += w ? static_cast<A>(w[j]) : A(1);
#pragma omp parallel if (N * C > kGrain)
  {
    std::vector<A> buf(C);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      const int64_t c = t[i];
      T* gr = gi + i * C;
      if (c == ignore) {
        std::fill(gr, gr + C, T(0));
        continue;
      }
      A s = reduction == at::Reduction::None ? static_cast<A>(g[i]) : static_cast<A>(g[0]);
      if (reduction == at::Reduction::Mean) s /= A(denom);
      const T* xr = x + i * C;
      A m = -std::numeric_limits<A>::infinity();
      for (int64_t j = 0; j < C; ++j) {
        buf[j] = static_cast<A>(xr[j]);
        m = std::max(m, buf[j]);
      }
      const A inv = A(1) / exp_shift_sum(buf.data(), buf.data(), C, m);  // buf = exp(x - m)
      const A wt = w ? static_cast<A>(w[c]) : A(1);
      const A tot = (A(1) - A(eps)) * wt + A(eps) / A(C) * W;
      for (int64_t j = 0; j < C; ++j) {
        A v = buf[j] * inv * tot;
        if (eps > 0) v -= A(eps) / A(C) * (w ? static_cast<A>(w[j]) : A(1));
        gr[j] = static_cast<T>(s * v);
      }
      gr[c] = static_cast<T>(static_cast<A>(gr[c]) - s * (A(1) - A(eps)) * wt);
    }
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> nll_loss(const at::Tensor& input, const at::Tensor& target,
                                            const c10::optional<at::Tensor>& weight,
                                            int64_t reduction, int64_t ignore_index) {
  MYTORCH_ISA_DISPATCH(nll_loss, input, target, weight, reduction, ignore_index)
  const char* op = "mytorch::nll_loss";
  check_reduction(op, reduction);
  NllDims d = nll_dims(op, input, target);
  at::Tensor w = class_weight(op, weight, input, d.C);
  std::vector<int64_t> t = checked_targets(op, target, d.C, ignore_index);
  at::Tensor x = input.contiguous();
  at::Tensor out = reduction == at::Reduction::None ? at::empty(out_shape_none(input), x.options())
                                                    : at::empty({}, x.options());
  at::Tensor tw = at::empty({}, x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_nll", [&] {
    nll_forward_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), t.data(),
                                 w.defined() ? w.const_data_ptr<scalar_t>() : nullptr,
                                 out.mutable_data_ptr<scalar_t>(), tw.mutable_data_ptr<scalar_t>(),
                                 d, reduction, ignore_index);
  });
  return {out, tw};
}

at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& input,
                             const at::Tensor& target, const c10::optional<at::Tensor>& weight,
                             int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  MYTORCH_ISA_DISPATCH(nll_loss_backward, grad_output, input, target, weight, reduction, ignore_index, total_weight)
  const char* op = "mytorch::nll_loss_backward";
  check_reduction(op, reduction);
  NllDims d = nll_dims(op, input, target);
  at::Tensor w = class_weight(op, weight, input, d.C);
  check_same_dtype(op, grad_output, "grad_output", input, "input");
  check_same_dtype(op, total_weight, "total_weight", input, "input");
  check_same_device(op, grad_output, "grad_output", input, "input");
  check_same_device(op, total_weight, "total_weight", input, "input");
  TORCH_CHECK(total_weight.numel() == 1, op, ": expected a 1-element total_weight, got shape ",
              total_weight.sizes());
  check_loss_grad_output(op, grad_output, input, reduction);
  std::vector<int64_t> t = checked_targets(op, target, d.C, ignore_index);
  at::Tensor g = grad_output.contiguous(), twc = total_weight.contiguous();
  at::Tensor gi = at::empty(input.sizes(), input.options().memory_format(at::MemoryFormat::Contiguous));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, input.scalar_type(), "mytorch_nll_bwd", [&] {
    nll_backward_kernel<scalar_t>(g.const_data_ptr<scalar_t>(), t.data(),
                                  w.defined() ? w.const_data_ptr<scalar_t>() : nullptr,
                                  gi.mutable_data_ptr<scalar_t>(), twc.const_data_ptr<scalar_t>(),
                                  d, reduction, ignore_index);
  });
  return gi;
}

at::Tensor cross_entropy(const at::Tensor& input, const at::Tensor& target,
                         const c10::optional<at::Tensor>& weight, int64_t reduction,
                         int64_t ignore_index, double label_smoothing) {
  MYTORCH_ISA_DISPATCH(cross_entropy, input, target, weight, reduction, ignore_index, label_smoothing)
  const char* op = "mytorch::cross_entropy";
  ce_checks(op, input, reduction, label_smoothing);
  NllDims d = nll_dims(op, input, target);
  at::Tensor w = class_weight(op, weight, input, d.C);
  std::vector<int64_t> t = checked_targets(op, target, d.C, ignore_index);
  at::Tensor x = input.contiguous();
  at::Tensor rows = at::empty(out_shape_none(input), x.options());
  std::vector<double> wt(d.N);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_ce", [&] {
    using A = at::opmath_type<scalar_t>;
    scalar_t* lr = rows.mutable_data_ptr<scalar_t>();
    ce_forward_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), t.data(),
                                w.defined() ? w.const_data_ptr<scalar_t>() : nullptr, lr,
                                wt.data(), d.N, d.C, ignore_index, label_smoothing);
    if (reduction != at::Reduction::None) {
      const A s = fixed_order_sum<A>(d.N, [&](int64_t i) { return static_cast<A>(lr[i]); });
      double denom = 0;
      for (double v : wt) denom += v;
      rows = at::empty({}, x.options());
      rows.mutable_data_ptr<scalar_t>()[0] =
          static_cast<scalar_t>(reduction == at::Reduction::Mean ? s / A(denom) : s);
    }
  });
  return rows;
}

at::Tensor cross_entropy_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                  const at::Tensor& target, const c10::optional<at::Tensor>& weight,
                                  int64_t reduction, int64_t ignore_index, double label_smoothing) {
  MYTORCH_ISA_DISPATCH(cross_entropy_backward, grad_output, input, target, weight, reduction, ignore_index, label_smoothing)
  const char* op = "mytorch::cross_entropy_backward";
  ce_checks(op, input, reduction, label_smoothing);
  NllDims d = nll_dims(op, input, target);
  at::Tensor w = class_weight(op, weight, input, d.C);
  check_same_dtype(op, grad_output, "grad_output", input, "input");
  check_same_device(op, grad_output, "grad_output", input, "input");
  check_loss_grad_output(op, grad_output, input, reduction);
  std::vector<int64_t> t = checked_targets(op, target, d.C, ignore_index);
  at::Tensor x = input.contiguous(), g = grad_output.contiguous();
  at::Tensor gi = at::empty(x.sizes(), x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_ce_bwd", [&] {
    const scalar_t* wp = w.defined() ? w.const_data_ptr<scalar_t>() : nullptr;
    double denom = 0;  // the mean's divisor: total weight of the non-ignored targets
    for (int64_t i = 0; i < d.N; ++i)
      if (t[i] != ignore_index) denom += wp ? static_cast<double>(wp[t[i]]) : 1.0;
    ce_backward_kernel<scalar_t>(g.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
                                 t.data(), w.defined() ? w.const_data_ptr<scalar_t>() : nullptr,
                                 gi.mutable_data_ptr<scalar_t>(), d.N, d.C, ignore_index,
                                 label_smoothing, reduction, denom);
  });
  return gi;
}

namespace {
template <typename T>
void mse_kernel(const T* xp, const T* yp, T* out, int64_t n, int64_t reduction) {
  using A = at::opmath_type<T>;
  auto sq = [&](int64_t i) {
    const A dlt = static_cast<A>(xp[i]) - static_cast<A>(yp[i]);
    return dlt * dlt;
  };
  if (reduction == at::Reduction::None) {
#pragma omp parallel for simd if (n > kGrain)
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(sq(i));
  } else {
    const A s = fixed_order_sum<A>(n, sq);
    out[0] = static_cast<T>(reduction == at::Reduction::Mean ? s / A(n) : s);
  }
}

template <typename T>
void mse_backward_kernel(const T* gp, const T* xp, const T* yp, T* o, int64_t n, int64_t reduction) {
  using A = at::opmath_type<T>;
  const bool none = reduction == at::Reduction::None;
  A s = none ? A(2) : A(2) * static_cast<A>(gp[0]);
  if (reduction == at::Reduction::Mean) s /= A(n);
#pragma omp parallel for simd if (n > kGrain)
  for (int64_t i = 0; i < n; ++i) {
    const A gv = none ? s * static_cast<A>(gp[i]) : s;
    o[i] = static_cast<T>(gv * (static_cast<A>(xp[i]) - static_cast<A>(yp[i])));
  }
}
}  // namespace

at::Tensor mse_loss(const at::Tensor& input, const at::Tensor& target, int64_t reduction) {
  MYTORCH_ISA_DISPATCH(mse_loss, input, target, reduction)
  mse_checks("mytorch::mse_loss", input, target, reduction);
  at::Tensor x = input.contiguous(), y = target.contiguous();
  at::Tensor out = reduction == at::Reduction::None ? at::empty(x.sizes(), x.options())
                                                    : at::empty({}, x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_mse", [&] {
    mse_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), y.const_data_ptr<scalar_t>(),
                         out.mutable_data_ptr<scalar_t>(), x.numel(), reduction);
  });
  return out;
}

at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& input,
                             const at::Tensor& target, int64_t reduction) {
  MYTORCH_ISA_DISPATCH(mse_loss_backward, grad_output, input, target, reduction)
  mse_backward_checks("mytorch::mse_loss_backward", grad_output, input, target, reduction);
  at::Tensor x = input.contiguous(), y = target.contiguous(), g = grad_output.contiguous();
  at::Tensor gi = at::empty(x.sizes(), x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_mse_bwd", [&] {
    mse_backward_kernel<scalar_t>(g.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
                                  y.const_data_ptr<scalar_t>(), gi.mutable_data_ptr<scalar_t>(),
                                  x.numel(), reduction);
  });
  return gi;
}

}  // namespace cpu
}  // namespace mytorch

// ---- fused_cross_entropy, fused_cross_entropy_grad, fused_linear_cross_entropy ----
// (N, C) logits, int64 targets; lse saved in at::opmath_type (fp32 for
// bf16/fp16, fp64 for fp64). Simple row loops, compiled in the baseline build only.
#ifndef MYTORCH_ISA_VARIANT
namespace mytorch {
namespace cpu {
namespace {

// Cross-entropy rows: lse, loss (0 for ignored rows).
template <typename T>
void fce_fwd_kernel(const T* x, const int64_t* target, at::opmath_type<T>* lse_out, double* loss_out, int64_t rows, int64_t C,
                    int64_t ignore_index, double smoothing) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for if (rows * C > kGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * C;
    Acc mx = -std::numeric_limits<Acc>::infinity(), s = 0, sx = 0;
    for (int64_t j = 0; j < C; ++j) mx = std::max(mx, (Acc)xr[j]);
    if (std::isinf(mx)) mx = 0;  // shift by 0 at an infinite max (as ATen): a row of -inf has lse -inf
    for (int64_t j = 0; j < C; ++j) {
      s += std::exp((Acc)xr[j] - mx);
      sx += (Acc)xr[j];
    }
    Acc lse = mx + std::log(s);
    lse_out[r] = lse;
    int64_t t = target[r];
    // no smoothing term at all when smoothing is 0: 0 * (-Inf in the row sum) would be NaN
    const Acc smooth = smoothing != 0 ? Acc(smoothing) * sx / (Acc)C : Acc(0);
    loss_out[r] = t == ignore_index ? 0.0 : (double)(lse - Acc(1 - smoothing) * (Acc)xr[t] - smooth);
  }
}

// dx[r] = (softmax - (1-eps) onehot - eps/C) * scale[r]; dx may alias x.
template <typename T>
void fce_bwd_kernel(const T* x, const int64_t* target, const at::opmath_type<T>* lse, const double* scale, T* dx, int64_t rows,
                    int64_t C, int64_t ignore_index, double smoothing) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for if (rows * C > kGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * C;
    T* dr = dx + r * C;
    int64_t t = target[r];
    if (t == ignore_index) {
      for (int64_t j = 0; j < C; ++j) dr[j] = T(0);
      continue;
    }
    Acc l = (Acc)lse[r], sc = (Acc)scale[r], off = Acc(smoothing / (double)C);
    for (int64_t j = 0; j < C; ++j) {
      Acc p = m_exp((Acc)xr[j] - l) - off;
      if (j == t) p -= Acc(1 - smoothing);
      dr[j] = (T)(p * sc);
    }
  }
}

at::ScalarType stat_dtype(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

using Reduction = at::Reduction::Reduction;

void check_targets(const char* op, const at::Tensor& target, int64_t rows, int64_t C, int64_t ignore_index,
                   double smoothing) {
  check_ce_target(op, target, rows, smoothing);
  at::Tensor tc = target.contiguous();
  const int64_t* t = tc.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < rows; ++i)
    TORCH_CHECK_INDEX(t[i] == ignore_index || (t[i] >= 0 && t[i] < C), op, ": expected every target in [0, ", C,
                      ") or equal to ignore_index ", ignore_index, ", got target[", i, "] = ", t[i]);
}

int64_t kept_rows(const int64_t* t, int64_t rows, int64_t ignore_index) {
  int64_t count = 0;
  for (int64_t i = 0; i < rows; ++i) count += t[i] != ignore_index;
  return count;
}

// Sum of the rows' losses, over the kept rows for 'mean'.
double reduced(const double* loss_rows, int64_t rows, Reduction red, int64_t count) {
  double total = 0;
  for (int64_t i = 0; i < rows; ++i) total += loss_rows[i];
  return red == at::Reduction::Mean ? total / (double)count : total;
}

// The logits and targets of a forward, checked, contiguous.
struct CeRows {
  int64_t rows, C;
  at::Tensor x, t;
};

CeRows ce_rows(const char* op, const at::Tensor& logits, const at::Tensor& target, int64_t ignore_index,
               double smoothing) {
  check_floating(op, "logits", logits);
  check_dim(op, "logits", logits, 2);
  const int64_t rows = logits.size(0), C = logits.size(1);
  TORCH_CHECK(C > 0 || rows == 0, op, ": expected at least one class, got logits of shape ", logits.sizes());
  check_same_device(op, logits, "logits", target, "target");
  check_targets(op, target, rows, C, ignore_index, smoothing);
  return {rows, C, logits.contiguous(), target.contiguous()};
}

std::tuple<at::Tensor, at::Tensor> ce_forward(const char* op, const at::Tensor& logits, const at::Tensor& target,
                                              int64_t ignore_index, double smoothing, int64_t reduction) {
  const Reduction red = check_reduction(op, reduction);
  const CeRows in = ce_rows(op, logits, target, ignore_index, smoothing);
  const int64_t rows = in.rows, C = in.C;  // plain locals: the dispatch lambda captures them
  const at::Tensor &xc = in.x, &tc = in.t;
  at::Tensor lse = at::empty({rows}, logits.options().dtype(stat_dtype(logits)));
  at::Tensor loss_rows = at::empty({rows}, logits.options().dtype(at::kDouble));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, logits.scalar_type(), "mytorch_ce", [&] {
    fce_fwd_kernel<scalar_t>(xc.const_data_ptr<scalar_t>(), tc.const_data_ptr<int64_t>(),
                             lse.mutable_data_ptr<at::opmath_type<scalar_t>>(), loss_rows.mutable_data_ptr<double>(),
                             rows, C, ignore_index, smoothing);
  });
  at::Tensor loss;
  if (red == at::Reduction::None) {
    loss = loss_rows.to(logits.scalar_type());
  } else {
    loss = at::scalar_tensor(reduced(loss_rows.const_data_ptr<double>(), rows, red,
                                     kept_rows(tc.const_data_ptr<int64_t>(), rows, ignore_index)),
                             logits.options());
  }
  return {loss, lse};
}

at::Tensor ce_backward(const char* op, const at::Tensor& grad, const at::Tensor& logits, const at::Tensor& target,
                       const at::Tensor& lse, int64_t ignore_index, double smoothing, int64_t reduction) {
  const Reduction red = check_reduction(op, reduction);
  check_floating(op, "logits", logits);
  check_dim(op, "logits", logits, 2);
  int64_t rows = logits.size(0), C = logits.size(1);
  check_same_device(op, logits, "logits", target, "target");
  check_same_device(op, logits, "logits", lse, "lse");
  check_same_device(op, logits, "logits", grad, "grad");
  check_targets(op, target, rows, C, ignore_index, smoothing);
  check_ce_backward(op, grad, lse, rows, red, stat_dtype(logits));
  at::Tensor xc = logits.contiguous(), tc = target.contiguous(), lc = lse.contiguous();
  at::Tensor gd = grad.to(at::kDouble).contiguous().reshape({-1});
  std::vector<double> scale(rows);
  const int64_t* t = tc.const_data_ptr<int64_t>();
  const int64_t count = kept_rows(t, rows, ignore_index);
  for (int64_t i = 0; i < rows; ++i) {
    double g = gd.const_data_ptr<double>()[red == at::Reduction::None ? i : 0];
    scale[i] = red == at::Reduction::Mean ? g / (double)count : g;
  }
  at::Tensor dx = at::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, logits.scalar_type(), "mytorch_ce_bwd", [&] {
    fce_bwd_kernel<scalar_t>(xc.const_data_ptr<scalar_t>(), t, lc.const_data_ptr<at::opmath_type<scalar_t>>(),
                             scale.data(), dx.mutable_data_ptr<scalar_t>(), rows, C, ignore_index, smoothing);
  });
  return dx;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> fused_cross_entropy(const at::Tensor& logits, const at::Tensor& target,
                                                       int64_t ignore_index, double smoothing,
                                                       int64_t reduction) {
  return ce_forward("mytorch::fused_cross_entropy", logits, target, ignore_index, smoothing, reduction);
}

at::Tensor fused_cross_entropy_backward(const at::Tensor& grad, const at::Tensor& logits, const at::Tensor& target,
                                        const at::Tensor& lse, int64_t ignore_index, double smoothing,
                                        int64_t reduction) {
  return ce_backward("mytorch::fused_cross_entropy_backward", grad, logits, target, lse, ignore_index, smoothing,
                     reduction);
}

namespace {
// The divisor's value on the host (1 when absent).
double divisor_value(const char* op, const c10::optional<at::Tensor>& divisor, const at::Tensor& like) {
  at::Tensor d = loss::ce_divisor(op, divisor, like);
  return d.defined() ? (double)d.cpu().item<float>() : 1.0;
}
}  // namespace

// The loss and its gradient for a loss gradient of 1 (reduction 'mean' or 'sum'), both divided
// by the divisor when one is given. One validation and one sweep of the rows (lse, then the
// gradient of the same rows), with the per-row statistics in host vectors: the bits of
// fused_cross_entropy followed by fused_cross_entropy_backward, without their second checks,
// copies and tensors.
std::tuple<at::Tensor, at::Tensor> fused_cross_entropy_grad(const at::Tensor& logits, const at::Tensor& target,
                                                            int64_t ignore_index, double smoothing,
                                                            int64_t reduction,
                                                            const c10::optional<at::Tensor>& divisor) {
  const char* op = "mytorch::fused_cross_entropy_grad";
  const Reduction red = check_reduction(op, reduction, /*allow_none=*/false);
  const double scale = 1.0 / divisor_value(op, divisor, logits);
  const CeRows in = ce_rows(op, logits, target, ignore_index, smoothing);
  const int64_t rows = in.rows, C = in.C;  // plain locals: the dispatch lambda captures them
  const at::Tensor &xc = in.x, &tc = in.t;
  const int64_t* t = tc.const_data_ptr<int64_t>();
  const int64_t count = kept_rows(t, rows, ignore_index);
  // the loss gradient of each row, as fused_cross_entropy_backward forms it from 1 / divisor
  std::vector<double> row_scale((size_t)rows, red == at::Reduction::Mean ? scale / (double)count : scale);
  std::vector<double> loss_rows((size_t)rows);
  at::Tensor dx = at::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, logits.scalar_type(), "mytorch_ce_grad", [&] {
    std::vector<at::opmath_type<scalar_t>> lse((size_t)rows);
    const scalar_t* x = xc.const_data_ptr<scalar_t>();
    fce_fwd_kernel<scalar_t>(x, t, lse.data(), loss_rows.data(), rows, C, ignore_index, smoothing);
    fce_bwd_kernel<scalar_t>(x, t, lse.data(), row_scale.data(), dx.mutable_data_ptr<scalar_t>(), rows, C,
                             ignore_index, smoothing);
  });
  at::Tensor loss = at::scalar_tensor(reduced(loss_rows.data(), rows, red, count), logits.options());
  if (divisor.has_value() && divisor->defined()) loss = (loss.to(at::kDouble) * scale).to(logits.scalar_type());
  return {loss, dx};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_linear_cross_entropy(const at::Tensor& input,
                                                                          const at::Tensor& weight,
                                                                          const at::Tensor& target,
                                                                          int64_t ignore_index, double smoothing,
                                                                          int64_t reduction,
                                                                          int64_t chunk_size,
                                                                          const c10::optional<at::Tensor>& divisor) {
  const char* op = "mytorch::fused_linear_cross_entropy";
  const Reduction red = check_reduction(op, reduction, /*allow_none=*/false);
  check_floating(op, "input", input);
  check_linear_ce(op, input, weight, chunk_size);
  check_same_device(op, input, "input", target, "target");
  int64_t N = input.size(0), V = weight.size(0);
  check_targets(op, target, N, V, ignore_index, smoothing);
  at::Tensor x = input.contiguous(), w = weight.contiguous(), tc = target.contiguous();
  const int64_t* t = tc.const_data_ptr<int64_t>();
  const int64_t count = kept_rows(t, N, ignore_index);
  double scale = (red == at::Reduction::Mean ? 1.0 / (double)count : 1.0) / divisor_value(op, divisor, input);
  if (chunk_size == 0) chunk_size = std::max<int64_t>(1, std::min<int64_t>(N, (int64_t(64) << 20) / std::max<int64_t>(1, V * x.element_size())));
  at::Tensor grad_input = at::empty_like(x), grad_weight = at::zeros_like(w);
  at::Tensor lse = at::empty({N}, x.options().dtype(stat_dtype(x)));
  at::Tensor loss_rows = at::empty({N}, x.options().dtype(at::kDouble));
  std::vector<double> scales((size_t)std::min<int64_t>(N, chunk_size), scale);
  for (int64_t s = 0; s < N; s += chunk_size) {
    int64_t e = std::min(N, s + chunk_size);
    at::Tensor xs = x.narrow(0, s, e - s);
    at::Tensor logits = at::mm(xs, w.t());
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_flce", [&] {
      using A = at::opmath_type<scalar_t>;
      scalar_t* lp = logits.mutable_data_ptr<scalar_t>();
      A* lsep = lse.mutable_data_ptr<A>() + s;
      fce_fwd_kernel<scalar_t>(lp, t + s, lsep, loss_rows.mutable_data_ptr<double>() + s, e - s, V, ignore_index,
                               smoothing);
      fce_bwd_kernel<scalar_t>(lp, t + s, lsep, scales.data(), lp, e - s, V, ignore_index, smoothing);
    });
    at::Tensor gi = grad_input.narrow(0, s, e - s);
    at::mm_out(gi, logits, w);
    grad_weight.addmm_(logits.t(), xs);
  }
  double total = 0;
  for (int64_t i = 0; i < N; ++i) total += loss_rows.const_data_ptr<double>()[i];
  return {at::scalar_tensor(total * scale, input.options()), grad_input, grad_weight};
}

}  // namespace cpu
}  // namespace mytorch
#endif  // MYTORCH_ISA_VARIANT
