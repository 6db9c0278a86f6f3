// CPU (OpenMP) kernels for the fused training ops (fused cross-entropy, fused
// linear + cross-entropy, bias + GELU, SwiGLU, RoPE, multi-tensor AdamW / SGD):
// simple row loops, computed in at::opmath_type (fp32 for bf16/fp16, fp64 for fp64).
// Also registered for the mytorch device, whose tensors live in host memory.
// layer_norm / rms_norm / softmax / log_softmax live in norm.cpp and softmax.cpp.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "checks.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/loss_checks.h"

namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;  // elements below which a loop stays on one thread

inline int n_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
inline int thread_id() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

#define MYTORCH_DISPATCH_CPU(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, TYPE, NAME, __VA_ARGS__)

// ---- kernels: pointers and sizes only ----

// Cross-entropy rows: lse, loss (0 for ignored rows).
template <typename T>
void ce_fwd_kernel(const T* x, const int64_t* target, at::opmath_type<T>* lse_out, double* loss_out, int64_t rows, int64_t C,
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
void ce_bwd_kernel(const T* x, const int64_t* target, const at::opmath_type<T>* lse, const double* scale, T* dx, int64_t rows,
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

// The loops below run in functions of their own with `omp simd`, and use the vectorizable
// float math of elementwise.h (m_exp, gelu_*), so that gcc emits vector code for them.
template <bool TANH, typename Acc>
inline Acc gelu_value(Acc v) {
  if constexpr (TANH) return gelu_tanh<Acc>(v);
  else return gelu_erf<Acc>(v);
}
template <bool TANH, typename Acc>
inline Acc gelu_slope(Acc v) {
  if constexpr (TANH) return gelu_tanh_grad<Acc>(v);
  else return gelu_erf_grad<Acc>(v);
}

// Forward and backward rows in separate functions: gcc inlines the float math (and so
// vectorizes) only in a loop that has the function to itself.
template <bool TANH, typename T, typename Acc>
__attribute__((noinline)) void bias_gelu_row_bwd(const T* g, const T* x, const T* bias, T* out, Acc* acc,
                                                 int64_t cols) {
#pragma omp simd
  for (int64_t j = 0; j < cols; ++j) {
    Acc v = (Acc)x[j] + (Acc)bias[j];
    Acc d = (Acc)g[j] * gelu_slope<TANH, Acc>(v);
    out[j] = (T)d;
    acc[j] += d;
  }
}

template <bool TANH, typename T, typename Acc>
__attribute__((noinline)) void bias_gelu_row_fwd(const T* x, const T* bias, T* out, int64_t cols) {
#pragma omp simd
  for (int64_t j = 0; j < cols; ++j) {
    Acc v = (Acc)x[j] + (Acc)bias[j];
    out[j] = (T)gelu_value<TANH, Acc>(v);
  }
}

// y = gelu(x + bias); backward also sums dx over rows into dbias (per thread, then across).
template <bool TANH, typename T>
void bias_gelu_rows(const T* g, const T* x, const T* bias, T* out, T* dbias, int64_t rows, int64_t cols) {
  using Acc = at::opmath_type<T>;
  int nt = rows * cols > kGrain ? n_threads() : 1;
  std::vector<Acc> part(dbias ? (size_t)nt * cols : 0, Acc(0));
#pragma omp parallel num_threads(nt)
  {
    Acc* acc = dbias ? part.data() + (size_t)thread_id() * cols : nullptr;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      if (g) bias_gelu_row_bwd<TANH, T, Acc>(g + r * cols, x + r * cols, bias, out + r * cols, acc, cols);
      else bias_gelu_row_fwd<TANH, T, Acc>(x + r * cols, bias, out + r * cols, cols);
  }
  if (dbias)
    for (int64_t j = 0; j < cols; ++j) {
      Acc s = 0;
      for (int t = 0; t < nt; ++t) s += part[(size_t)t * cols + j];
      dbias[j] = (T)s;
    }
}

template <typename T>
void bias_gelu_kernel(const T* g, const T* x, const T* bias, T* out, T* dbias, int64_t rows, int64_t cols,
                      bool tanh_approx) {
  if (tanh_approx) bias_gelu_rows<true, T>(g, x, bias, out, dbias, rows, cols);
  else bias_gelu_rows<false, T>(g, x, bias, out, dbias, rows, cols);
}

template <typename T, typename Acc>
__attribute__((noinline)) void swiglu_span(const T* g, const T* a, const T* b, T* out, T* db, int64_t n) {
  if (g) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      Acc af = (Acc)a[i], sg = Acc(1) / (Acc(1) + m_exp(-af)), gf = (Acc)g[i];
      out[i] = (T)(gf * (Acc)b[i] * sg * (Acc(1) + af * (Acc(1) - sg)));
      db[i] = (T)(gf * af * sg);
    }
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      Acc af = (Acc)a[i];
      out[i] = (T)(af / (Acc(1) + m_exp(-af)) * (Acc)b[i]);
    }
  }
}

template <typename T>
void swiglu_kernel(const T* g, const T* a, const T* b, T* out, T* db, int64_t n) {
  using Acc = at::opmath_type<T>;
  constexpr int64_t kSpan = 4096;
  const int64_t spans = (n + kSpan - 1) / kSpan;
#pragma omp parallel for if (n > kGrain) schedule(static)
  for (int64_t s = 0; s < spans; ++s) {
    const int64_t i = s * kSpan, len = std::min(kSpan, n - i);
    swiglu_span<T, Acc>(g ? g + i : nullptr, a + i, b + i, out + i, db ? db + i : nullptr, len);
  }
}

// Rotates the first 2*half features of each (token, head) row; out may alias x.
template <typename T>
void rope_kernel(const T* x, T* out, const double* cosv, const double* sinv, int64_t rows, int64_t heads, int64_t S,
                 int64_t D, int64_t half, bool interleaved, double sign) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for if (rows * D > kGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t s = (r / heads) % S;
    for (int64_t p = 0; p < half; ++p) {
      int64_t i1 = interleaved ? 2 * p : p, i2 = interleaved ? 2 * p + 1 : p + half;
      Acc c = (Acc)cosv[s * half + p], sn = (Acc)(sign * sinv[s * half + p]);
      Acc x1 = (Acc)x[r * D + i1], x2 = (Acc)x[r * D + i2];
      out[r * D + i1] = (T)(x1 * c - x2 * sn);
      out[r * D + i2] = (T)(x2 * c + x1 * sn);
    }
    if (out != x)
      for (int64_t j = 2 * half; j < D; ++j) out[r * D + j] = x[r * D + j];
  }
}

template <typename T>
void adamw_kernel(T* p, const T* g, T* m, T* v, int64_t n, double lr, double b1, double b2, double wd, double eps,
                  double bc1, double bc2_sqrt) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for if (n > kGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    Acc pf = (Acc)p[i], gf = (Acc)g[i];
    pf *= Acc(1 - lr * wd);
    Acc mf = (Acc)m[i] + Acc(1 - b1) * (gf - (Acc)m[i]);  // lerp, as torch's AdamW (fused and foreach)
    Acc vf = Acc(b2) * (Acc)v[i] + Acc(1 - b2) * gf * gf;
    pf -= Acc(lr / bc1) * mf / (std::sqrt(vf) / Acc(bc2_sqrt) + Acc(eps));
    p[i] = (T)pf;
    m[i] = (T)mf;
    v[i] = (T)vf;
  }
}

template <typename T>
void sgd_kernel(T* p, const T* g, T* buf, int64_t n, double lr, double momentum, double dampening, double wd,
                bool nesterov, bool first_step) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for if (n > kGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    Acc pf = (Acc)p[i], gf = (Acc)g[i];
    if (wd != 0) gf += Acc(wd) * pf;  // as torch.optim.SGD: no term at 0 (Inf * 0 would be NaN)
    if (buf) {
      Acc b = first_step ? gf : Acc(momentum) * (Acc)buf[i] + Acc(1 - dampening) * gf;
      buf[i] = (T)b;
      gf = nesterov ? gf + Acc(momentum) * b : b;
    }
    p[i] = (T)(pf - Acc(lr) * gf);
  }
}

// ---- ATen glue: checks, layout, allocation ----
at::ScalarType stat_dtype(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

enum class Reduction { None, Mean, Sum };

Reduction parse_reduction(const char* op, c10::string_view r, bool allow_none = true) {
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  TORCH_CHECK(allow_none && r == "none", op, ": expected reduction to be ",
              allow_none ? "'none', 'mean' or 'sum'" : "'mean' or 'sum'", ", got '", std::string(r), "'");
  return Reduction::None;
}

void check_targets(const char* op, const at::Tensor& target, int64_t rows, int64_t C, int64_t ignore_index,
                   double smoothing) {
  check_dtype(op, "target", target, {at::kLong});
  TORCH_CHECK(target.dim() == 1 && target.size(0) == rows, op, ": expected target of shape [", rows, "], got ",
              target.sizes());
  TORCH_CHECK(smoothing >= 0.0 && smoothing <= 1.0, op, ": expected label_smoothing in [0, 1], got ", smoothing);
  at::Tensor tc = target.contiguous();
  const int64_t* t = tc.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < rows; ++i)
    TORCH_CHECK_INDEX(t[i] == ignore_index || (t[i] >= 0 && t[i] < C), op, ": expected every target in [0, ", C,
                      ") or equal to ignore_index ", ignore_index, ", got target[", i, "] = ", t[i]);
}

std::tuple<at::Tensor, at::Tensor> ce_forward(const char* op, const at::Tensor& logits, const at::Tensor& target,
                                              int64_t ignore_index, double smoothing, c10::string_view reduction) {
  Reduction red = parse_reduction(op, reduction);
  check_floating(op, "logits", logits);
  check_dim(op, "logits", logits, 2);
  int64_t rows = logits.size(0), C = logits.size(1);
  TORCH_CHECK(C > 0 || rows == 0, op, ": expected at least one class, got logits of shape ", logits.sizes());
  check_same_device(op, logits, "logits", target, "target");
  check_targets(op, target, rows, C, ignore_index, smoothing);
  at::Tensor xc = logits.contiguous(), tc = target.contiguous();
  at::Tensor lse = at::empty({rows}, logits.options().dtype(stat_dtype(logits)));
  at::Tensor loss_rows = at::empty({rows}, logits.options().dtype(at::kDouble));
  MYTORCH_DISPATCH_CPU(logits.scalar_type(), "mytorch_ce", [&] {
    ce_fwd_kernel<scalar_t>(xc.const_data_ptr<scalar_t>(), tc.const_data_ptr<int64_t>(),
                            lse.mutable_data_ptr<at::opmath_type<scalar_t>>(), loss_rows.mutable_data_ptr<double>(),
                            rows, C, ignore_index, smoothing);
  });
  at::Tensor loss;
  if (red == Reduction::None) {
    loss = loss_rows.to(logits.scalar_type());
  } else {
    double total = 0;
    const double* lr = loss_rows.const_data_ptr<double>();
    const int64_t* t = tc.const_data_ptr<int64_t>();
    int64_t count = 0;
    for (int64_t i = 0; i < rows; ++i) {
      total += lr[i];
      count += t[i] != ignore_index;
    }
    if (red == Reduction::Mean) total /= (double)count;
    loss = at::scalar_tensor(total, logits.options());
  }
  return {loss, lse};
}

at::Tensor ce_backward(const char* op, const at::Tensor& grad, const at::Tensor& logits, const at::Tensor& target,
                       const at::Tensor& lse, int64_t ignore_index, double smoothing, c10::string_view reduction) {
  Reduction red = parse_reduction(op, reduction);
  check_floating(op, "logits", logits);
  check_dim(op, "logits", logits, 2);
  int64_t rows = logits.size(0), C = logits.size(1);
  check_same_device(op, logits, "logits", target, "target");
  check_same_device(op, logits, "logits", lse, "lse");
  check_same_device(op, logits, "logits", grad, "grad");
  check_targets(op, target, rows, C, ignore_index, smoothing);
  check_dtype(op, "lse", lse, {stat_dtype(logits)});
  TORCH_CHECK(lse.numel() == rows, op, ": expected lse with ", rows, " elements, got shape ", lse.sizes());
  if (red == Reduction::None) {
    TORCH_CHECK(grad.dim() == 1 && grad.size(0) == rows, op, ": expected grad of shape [", rows,
                "] for reduction 'none', got ", grad.sizes());
  } else {
    TORCH_CHECK(grad.numel() == 1, op, ": expected a scalar grad for reduction '", std::string(reduction), "', got ",
                grad.sizes());
  }
  at::Tensor xc = logits.contiguous(), tc = target.contiguous(), lc = lse.contiguous();
  at::Tensor gd = grad.to(at::kDouble).contiguous().reshape({-1});
  std::vector<double> scale(rows);
  const int64_t* t = tc.const_data_ptr<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < rows; ++i) count += t[i] != ignore_index;
  for (int64_t i = 0; i < rows; ++i) {
    double g = gd.const_data_ptr<double>()[red == Reduction::None ? i : 0];
    scale[i] = red == Reduction::Mean ? g / (double)count : g;
  }
  at::Tensor dx = at::empty_like(xc);
  MYTORCH_DISPATCH_CPU(logits.scalar_type(), "mytorch_ce_bwd", [&] {
    ce_bwd_kernel<scalar_t>(xc.const_data_ptr<scalar_t>(), t, lc.const_data_ptr<at::opmath_type<scalar_t>>(),
                            scale.data(), dx.mutable_data_ptr<scalar_t>(), rows, C, ignore_index, smoothing);
  });
  return dx;
}

std::tuple<at::Tensor, at::Tensor> fused_cross_entropy(const at::Tensor& logits, const at::Tensor& target,
                                                       int64_t ignore_index, double smoothing,
                                                       c10::string_view reduction) {
  return ce_forward("mytorch::fused_cross_entropy", logits, target, ignore_index, smoothing, reduction);
}

at::Tensor fused_cross_entropy_backward(const at::Tensor& grad, const at::Tensor& logits, const at::Tensor& target,
                                        const at::Tensor& lse, int64_t ignore_index, double smoothing,
                                        c10::string_view reduction) {
  return ce_backward("mytorch::fused_cross_entropy_backward", grad, logits, target, lse, ignore_index, smoothing,
                     reduction);
}

// The divisor's value on the host (1 when absent).
double divisor_value(const char* op, const c10::optional<at::Tensor>& divisor, const at::Tensor& like) {
  at::Tensor d = loss::ce_divisor(op, divisor, like);
  return d.defined() ? (double)d.cpu().item<float>() : 1.0;
}

// The loss and its gradient for a loss gradient of 1 (reduction 'mean' or 'sum'), both divided
// by the divisor when one is given.
std::tuple<at::Tensor, at::Tensor> fused_cross_entropy_grad(const at::Tensor& logits, const at::Tensor& target,
                                                            int64_t ignore_index, double smoothing,
                                                            c10::string_view reduction,
                                                            const c10::optional<at::Tensor>& divisor) {
  const char* op = "mytorch::fused_cross_entropy_grad";
  parse_reduction(op, reduction, /*allow_none=*/false);
  const double scale = 1.0 / divisor_value(op, divisor, logits);
  auto [loss, lse] = ce_forward(op, logits, target, ignore_index, smoothing, reduction);
  at::Tensor dx = ce_backward(op, at::full({}, scale, logits.options().dtype(at::kDouble)), logits, target, lse,
                              ignore_index, smoothing, reduction);
  if (divisor.has_value() && divisor->defined()) loss = (loss.to(at::kDouble) * scale).to(logits.scalar_type());
  return {loss, dx};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_linear_cross_entropy(const at::Tensor& input,
                                                                          const at::Tensor& weight,
                                                                          const at::Tensor& target,
                                                                          int64_t ignore_index, double smoothing,
                                                                          c10::string_view reduction,
                                                                          int64_t chunk_size,
                                                                          const c10::optional<at::Tensor>& divisor) {
  const char* op = "mytorch::fused_linear_cross_entropy";
  Reduction red = parse_reduction(op, reduction, /*allow_none=*/false);
  check_floating(op, "input", input);
  check_dim(op, "input", input, 2);
  check_dim(op, "weight", weight, 2);
  check_same_dtype(op, input, "input", weight, "weight");
  check_same_device(op, input, "input", weight, "weight");
  check_same_device(op, input, "input", target, "target");
  TORCH_CHECK(input.size(1) == weight.size(1), op, ": expected input [N, H] and weight [V, H] with the same H, got ",
              input.sizes(), " and ", weight.sizes());
  TORCH_CHECK(chunk_size >= 0, op, ": expected chunk_size >= 0 (0 picks one), got ", chunk_size);
  int64_t N = input.size(0), V = weight.size(0);
  TORCH_CHECK(V > 0 || N == 0, op, ": expected at least one class, got weight of shape ", weight.sizes());
  check_targets(op, target, N, V, ignore_index, smoothing);
  at::Tensor x = input.contiguous(), w = weight.contiguous(), tc = target.contiguous();
  const int64_t* t = tc.const_data_ptr<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) count += t[i] != ignore_index;
  double scale = (red == Reduction::Mean ? 1.0 / (double)count : 1.0) / divisor_value(op, divisor, input);
  if (chunk_size == 0) chunk_size = std::max<int64_t>(1, std::min<int64_t>(N, (int64_t(64) << 20) / std::max<int64_t>(1, V * x.element_size())));
  at::Tensor grad_input = at::empty_like(x), grad_weight = at::zeros_like(w);
  at::Tensor lse = at::empty({N}, x.options().dtype(stat_dtype(x)));
  at::Tensor loss_rows = at::empty({N}, x.options().dtype(at::kDouble));
  std::vector<double> scales((size_t)std::min<int64_t>(N, chunk_size), scale);
  for (int64_t s = 0; s < N; s += chunk_size) {
    int64_t e = std::min(N, s + chunk_size);
    at::Tensor xs = x.narrow(0, s, e - s);
    at::Tensor logits = at::mm(xs, w.t());
    MYTORCH_DISPATCH_CPU(x.scalar_type(), "mytorch_flce", [&] {
      using A = at::opmath_type<scalar_t>;
      scalar_t* lp = logits.mutable_data_ptr<scalar_t>();
      A* lsep = lse.mutable_data_ptr<A>() + s;
      ce_fwd_kernel<scalar_t>(lp, t + s, lsep, loss_rows.mutable_data_ptr<double>() + s, e - s, V, ignore_index,
                              smoothing);
      ce_bwd_kernel<scalar_t>(lp, t + s, lsep, scales.data(), lp, e - s, V, ignore_index, smoothing);
    });
    at::Tensor gi = grad_input.narrow(0, s, e - s);
    at::mm_out(gi, logits, w);
    grad_weight.addmm_(logits.t(), xs);
  }
  double total = 0;
  for (int64_t i = 0; i < N; ++i) total += loss_rows.const_data_ptr<double>()[i];
  return {at::scalar_tensor(total * scale, input.options()), grad_input, grad_weight};
}

template <typename T>
void scale_kernel(T* p, int64_t n, double g) {
  using A = at::opmath_type<T>;
  const A f = (A)g;
#pragma omp parallel for if (n > kGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = (T)((A)p[i] * f);
}

void check_scale_args(const char* op, const at::Tensor& self, const at::Tensor& scale) {
  check_floating(op, "self", self);
  check_floating(op, "scale", scale);
  TORCH_CHECK(scale.numel() == 1, op, ": expected a one-element scale, got shape ", scale.sizes());
  check_same_device(op, self, "self", scale, "scale");
}

void scale_(const at::Tensor& self, const at::Tensor& scale) {
  const char* op = "mytorch::scale_";
  check_scale_args(op, self, scale);
  const double g = scale.item<double>();  // host memory: no sync to avoid
  if (g == 1.0 || self.numel() == 0) return;
  at::Tensor c = self.is_contiguous() ? self : self.contiguous();
  MYTORCH_DISPATCH_CPU(self.scalar_type(), "mytorch_scale_",
                       [&] { scale_kernel<scalar_t>(c.mutable_data_ptr<scalar_t>(), c.numel(), g); });
  if (!c.is_same(self)) self.copy_(c);
}

void check_bias_gelu(const char* op, const at::Tensor& x, const at::Tensor& bias) {
  check_floating(op, "x", x);
  check_same_dtype(op, x, "x", bias, "bias");
  check_same_device(op, x, "x", bias, "bias");
  TORCH_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(-1), op,
              ": expected bias of shape [x.size(-1)], got x ", x.sizes(), " and bias ", bias.sizes());
}

bool parse_approx(const char* op, c10::string_view a) {
  TORCH_CHECK(a == "none" || a == "tanh", op, ": expected approximate to be 'none' or 'tanh', got '", std::string(a),
              "'");
  return a == "tanh";
}

at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias, c10::string_view approximate) {
  const char* op = "mytorch::bias_gelu";
  bool ta = parse_approx(op, approximate);
  check_bias_gelu(op, x, bias);
  at::Tensor xc = x.contiguous(), bc = bias.contiguous(), y = at::empty_like(xc);
  int64_t cols = x.size(-1), rows = cols == 0 ? 0 : x.numel() / cols;
  MYTORCH_DISPATCH_CPU(x.scalar_type(), "mytorch_bias_gelu", [&] {
    bias_gelu_kernel<scalar_t>(nullptr, xc.const_data_ptr<scalar_t>(), bc.const_data_ptr<scalar_t>(),
                               y.mutable_data_ptr<scalar_t>(), nullptr, rows, cols, ta);
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& grad, const at::Tensor& x,
                                                      const at::Tensor& bias, c10::string_view approximate) {
  const char* op = "mytorch::bias_gelu_backward";
  bool ta = parse_approx(op, approximate);
  check_bias_gelu(op, x, bias);
  check_same_shape(op, grad, "grad", x, "x");
  check_same_dtype(op, grad, "grad", x, "x");
  check_same_device(op, grad, "grad", x, "x");
  at::Tensor gc = grad.contiguous(), xc = x.contiguous(), bc = bias.contiguous();
  at::Tensor dx = at::empty_like(xc), db = at::empty_like(bc);
  int64_t cols = x.size(-1), rows = cols == 0 ? 0 : x.numel() / cols;
  MYTORCH_DISPATCH_CPU(x.scalar_type(), "mytorch_bias_gelu_bwd", [&] {
    bias_gelu_kernel<scalar_t>(gc.const_data_ptr<scalar_t>(), xc.const_data_ptr<scalar_t>(),
                               bc.const_data_ptr<scalar_t>(), dx.mutable_data_ptr<scalar_t>(),
                               db.mutable_data_ptr<scalar_t>(), rows, cols, ta);
  });
  return {dx, db};
}

void check_swiglu(const char* op, const at::Tensor& a, const at::Tensor& b) {
  check_floating(op, "a", a);
  check_same_dtype(op, a, "a", b, "b");
  check_same_device(op, a, "a", b, "b");
  check_same_shape(op, a, "a", b, "b");
}

at::Tensor swiglu(const at::Tensor& a, const at::Tensor& b) {
  const char* op = "mytorch::swiglu";
  check_swiglu(op, a, b);
  at::Tensor ac = a.contiguous(), bc = b.contiguous(), y = at::empty_like(ac);
  MYTORCH_DISPATCH_CPU(a.scalar_type(), "mytorch_swiglu", [&] {
    swiglu_kernel<scalar_t>(nullptr, ac.const_data_ptr<scalar_t>(), bc.const_data_ptr<scalar_t>(),
                            y.mutable_data_ptr<scalar_t>(), nullptr, ac.numel());
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b) {
  const char* op = "mytorch::swiglu_backward";
  check_swiglu(op, a, b);
  check_same_shape(op, grad, "grad", a, "a");
  check_same_dtype(op, grad, "grad", a, "a");
  check_same_device(op, grad, "grad", a, "a");
  at::Tensor gc = grad.contiguous(), ac = a.contiguous(), bc = b.contiguous();
  at::Tensor da = at::empty_like(ac), db = at::empty_like(bc);
  MYTORCH_DISPATCH_CPU(a.scalar_type(), "mytorch_swiglu_bwd", [&] {
    swiglu_kernel<scalar_t>(gc.const_data_ptr<scalar_t>(), ac.const_data_ptr<scalar_t>(),
                            bc.const_data_ptr<scalar_t>(), da.mutable_data_ptr<scalar_t>(),
                            db.mutable_data_ptr<scalar_t>(), ac.numel());
  });
  return {da, db};
}

void check_rope(const char* op, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  check_floating(op, "x", x);
  check_floating(op, "cos", cos);
  check_floating(op, "sin", sin);
  check_same_device(op, x, "x", cos, "cos");
  check_same_device(op, x, "x", sin, "sin");
  TORCH_CHECK(x.dim() >= 3, op, ": expected x of shape (..., seq, heads, head_dim), got ", x.sizes());
  check_dim(op, "cos", cos, 2);
  check_same_shape(op, cos, "cos", sin, "sin");
  TORCH_CHECK(cos.size(0) == x.size(-3) && 2 * cos.size(1) <= x.size(-1) && cos.size(1) >= 1, op,
              ": expected cos and sin of shape (seq, rotary_dim / 2) with seq = ", x.size(-3), " and rotary_dim <= ",
              x.size(-1), ", got ", cos.sizes());
}

void run_rope(const at::Tensor& x, at::Tensor& out, const at::Tensor& cos, const at::Tensor& sin, bool interleaved,
              double sign) {
  int64_t S = x.size(-3), H = x.size(-2), D = x.size(-1), half = cos.size(1);
  int64_t rows = D == 0 ? 0 : x.numel() / D;
  at::Tensor c = cos.to(at::kDouble).contiguous(), s = sin.to(at::kDouble).contiguous();
  MYTORCH_DISPATCH_CPU(x.scalar_type(), "mytorch_rope", [&] {
    rope_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), c.const_data_ptr<double>(),
                          s.const_data_ptr<double>(), rows, H, S, D, half, interleaved, sign);
  });
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  check_rope("mytorch::rope", x, cos, sin);
  at::Tensor xc = x.contiguous(), out = at::empty_like(xc);
  run_rope(xc, out, cos, sin, interleaved, 1.0);
  return out;
}

at::Tensor rope_backward(const at::Tensor& grad, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  check_rope("mytorch::rope_backward", grad, cos, sin);
  at::Tensor gc = grad.contiguous(), out = at::empty_like(gc);
  run_rope(gc, out, cos, sin, interleaved, -1.0);
  return out;
}

void rope_(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  const char* op = "mytorch::rope_";
  check_rope(op, x, cos, sin);
  TORCH_CHECK(x.is_contiguous(), op, ": expected a contiguous x for the in-place form, got strides ", x.strides());
  run_rope(x, x, cos, sin, interleaved, 1.0);
}

void check_opt_list(const char* op, const char* name, at::TensorList ts, at::TensorList params) {
  TORCH_CHECK(ts.size() == params.size(), op, ": expected ", name, " to have ", params.size(),
              " tensors (one per param), got ", ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    TORCH_CHECK(ts[i].device() == params[i].device(), op, ": expected ", name, "[", i, "] on ",
                params[i].device(), ", got ", ts[i].device());
    TORCH_CHECK(ts[i].scalar_type() == params[i].scalar_type() && ts[i].sizes() == params[i].sizes() &&
                    ts[i].is_contiguous(),
                op, ": expected ", name, "[", i, "] to be contiguous and match params[", i, "] (",
                params[i].scalar_type(), " ", params[i].sizes(), "), got ", ts[i].scalar_type(), " ", ts[i].sizes());
  }
}

void check_params(const char* op, at::TensorList params) {
  for (size_t i = 0; i < params.size(); ++i) {
    check_floating(op, "params", params[i]);
    TORCH_CHECK(params[i].is_contiguous(), op, ": expected params[", i, "] to be contiguous");
  }
}

void fused_adamw_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                  double lr, double beta1, double beta2, double weight_decay, double eps, int64_t step) {
  const char* op = "mytorch::fused_adamw_";
  TORCH_CHECK(step >= 1, op, ": expected step >= 1 (the count after this update), got ", step);
  check_params(op, params);
  check_opt_list(op, "grads", grads, params);
  check_opt_list(op, "exp_avgs", exp_avgs, params);
  check_opt_list(op, "exp_avg_sqs", exp_avg_sqs, params);
  double bc1 = 1.0 - std::pow(beta1, (double)step), bc2s = std::sqrt(1.0 - std::pow(beta2, (double)step));
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor p = params[i];
    MYTORCH_DISPATCH_CPU(p.scalar_type(), "mytorch_adamw", [&] {
      adamw_kernel<scalar_t>(p.mutable_data_ptr<scalar_t>(), grads[i].const_data_ptr<scalar_t>(),
                             exp_avgs[i].mutable_data_ptr<scalar_t>(), exp_avg_sqs[i].mutable_data_ptr<scalar_t>(),
                             p.numel(), lr, beta1, beta2, weight_decay, eps, bc1, bc2s);
    });
  }
}

void fused_sgd_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double lr,
                double momentum, double dampening, double weight_decay, bool nesterov, bool first_step) {
  const char* op = "mytorch::fused_sgd_";
  TORCH_CHECK(momentum != 0.0 || momentum_buffers.empty(), op,
              ": expected no momentum_buffers when momentum is 0, got ", momentum_buffers.size());
  TORCH_CHECK(momentum == 0.0 || !momentum_buffers.empty(), op,
              ": expected momentum_buffers (one per param) when momentum is ", momentum);
  check_params(op, params);
  check_opt_list(op, "grads", grads, params);
  if (!momentum_buffers.empty()) check_opt_list(op, "momentum_buffers", momentum_buffers, params);
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor p = params[i];
    MYTORCH_DISPATCH_CPU(p.scalar_type(), "mytorch_sgd", [&] {
      sgd_kernel<scalar_t>(p.mutable_data_ptr<scalar_t>(), grads[i].const_data_ptr<scalar_t>(),
                           momentum_buffers.empty() ? nullptr : momentum_buffers[i].mutable_data_ptr<scalar_t>(),
                           p.numel(), lr, momentum, dampening, weight_decay, nesterov, first_step);
    });
  }
}

}  // namespace
}  // namespace cpu
}  // namespace mytorch

#define MYTORCH_FUSED_IMPLS(m)                                              \
  m.impl("fused_cross_entropy", &mytorch::cpu::fused_cross_entropy);                   \
  m.impl("fused_cross_entropy_backward", &mytorch::cpu::fused_cross_entropy_backward); \
  m.impl("fused_cross_entropy_grad", &mytorch::cpu::fused_cross_entropy_grad);       \
  m.impl("fused_linear_cross_entropy", &mytorch::cpu::fused_linear_cross_entropy); \
  m.impl("scale_", &mytorch::cpu::scale_);                                   \
  m.impl("bias_gelu", &mytorch::cpu::bias_gelu);                             \
  m.impl("bias_gelu_backward", &mytorch::cpu::bias_gelu_backward);           \
  m.impl("swiglu", &mytorch::cpu::swiglu);                                   \
  m.impl("swiglu_backward", &mytorch::cpu::swiglu_backward);                 \
  m.impl("rope", &mytorch::cpu::rope);                                       \
  m.impl("rope_", &mytorch::cpu::rope_);                                     \
  m.impl("rope_backward", &mytorch::cpu::rope_backward);                     \
  m.impl("fused_adamw_", &mytorch::cpu::fused_adamw_);                       \
  m.impl("fused_sgd_", &mytorch::cpu::fused_sgd_)

TORCH_LIBRARY_IMPL(mytorch, CPU, m) { MYTORCH_FUSED_IMPLS(m); }
TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) { MYTORCH_FUSED_IMPLS(m); }
