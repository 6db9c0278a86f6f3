// Softmax and log-softmax, forward and backward (OpenMP).
//
// The tensor is seen as (outer, D, inner) with the reduced dim D in the middle.
// inner == 1: one row at a time, vectorized along D. The row is read from memory
//   once: max, then exp(x - max) stored into y with its sum, then a scale, all
//   while the row sits in L1/L2.
// inner > 1: a (D x C) block of C neighbouring columns is gathered into a float
//   buffer and reduced along D with C lanes side by side.
// bf16/fp16 compute in float32; float32 uses a vectorized exp (vec_math.h).
#include "kernels/softmax.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/native/Resize.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "checks.h"
#include "kernels/cpu/vec_math.h"

namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;  // elements below which one thread does it all
constexpr int64_t kLanes = 64;       // columns per block when inner > 1

// ---- row kernels (contiguous, compute type A) ----
template <typename A>
void softmax_row(const A* x, A* y, int64_t n, bool log) {
  const A m = max_of(x, n);
  if (log) {
    // (x - m) - log(s), not x - (m + log(s)): keeps precision when |m| is large
    const A ls = std::log(exp_shift_sum_only(x, n, m));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - ls;
  } else {
    const A inv = A(1) / exp_shift_sum(x, y, n, m);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// softmax:      gx = y * (g - sum(g * y))
// log_softmax:  gx = g - exp(y) * sum(g)
template <typename A>
void softmax_backward_row(const A* g, const A* y, A* gx, int64_t n, bool log) {
  A s = 0;
  if (log) {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += g[i];
    exp_shift_sum(y, gx, n, A(0));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) gx[i] = g[i] - gx[i] * s;
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; ++i) s += g[i] * y[i];
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) gx[i] = y[i] * (g[i] - s);
  }
}

// ---- block kernels: buffers of D rows x c lanes (lane stride c) ----
template <typename A>
void softmax_block(const A* x, A* y, int64_t D, int64_t c, bool log, A* mx, A* sum) {
  std::fill(mx, mx + c, -std::numeric_limits<A>::infinity());
  std::fill(sum, sum + c, A(0));
  for (int64_t d = 0; d < D; ++d)
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) mx[j] = std::max(mx[j], x[d * c + j]);
  for (int64_t d = 0; d < D; ++d)
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) y[d * c + j] = x[d * c + j] - mx[j];
  if (log) {
    // y holds x - max; sum exp of it without overwriting
    for (int64_t d = 0; d < D; ++d)
      for (int64_t j = 0; j < c; ++j) sum[j] += std::exp(y[d * c + j]);
    for (int64_t j = 0; j < c; ++j) sum[j] = std::log(sum[j]);
    for (int64_t d = 0; d < D; ++d)
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) y[d * c + j] -= sum[j];
  } else {
    exp_shift_sum(y, y, D * c, A(0));
    for (int64_t d = 0; d < D; ++d)
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) sum[j] += y[d * c + j];
    for (int64_t j = 0; j < c; ++j) sum[j] = A(1) / sum[j];
    for (int64_t d = 0; d < D; ++d)
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) y[d * c + j] *= sum[j];
  }
}

template <typename A>
void softmax_backward_block(const A* g, const A* y, A* gx, int64_t D, int64_t c, bool log, A* s) {
  std::fill(s, s + c, A(0));
  for (int64_t d = 0; d < D; ++d)
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) s[j] += log ? g[d * c + j] : g[d * c + j] * y[d * c + j];
  if (log) {
    exp_shift_sum(y, gx, D * c, A(0));
    for (int64_t d = 0; d < D; ++d)
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) gx[d * c + j] = g[d * c + j] - gx[d * c + j] * s[j];
  } else {
    for (int64_t d = 0; d < D; ++d)
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) gx[d * c + j] = y[d * c + j] * (g[d * c + j] - s[j]);
  }
}

// ---- drivers over (outer, D, inner), contiguous storage of type T ----
template <typename T>
void softmax_forward(const T* x, T* y, int64_t outer, int64_t D, int64_t inner, bool log) {
  using A = at::opmath_type<T>;
  const int64_t total = outer * D * inner;
  if (inner == 1) {
#pragma omp parallel if (total > kGrain)
    {
      std::vector<A> buf(std::is_same<T, A>::value ? 0 : D);
#pragma omp for schedule(static)
      for (int64_t o = 0; o < outer; ++o) {
        if constexpr (std::is_same<T, A>::value) {
          softmax_row<A>(x + o * D, y + o * D, D, log);
        } else {
          for (int64_t d = 0; d < D; ++d) buf[d] = static_cast<A>(x[o * D + d]);
          softmax_row<A>(buf.data(), buf.data(), D, log);
          for (int64_t d = 0; d < D; ++d) y[o * D + d] = static_cast<T>(buf[d]);
        }
      }
    }
    return;
  }
  const int64_t nchunk = (inner + kLanes - 1) / kLanes;
#pragma omp parallel if (total > kGrain)
  {
    std::vector<A> bx(D * kLanes), by(D * kLanes), st(2 * kLanes);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < outer * nchunk; ++t) {
      const int64_t o = t / nchunk, c0 = (t % nchunk) * kLanes;
      const int64_t c = std::min(kLanes, inner - c0);
      const T* xs = x + o * D * inner + c0;
      for (int64_t d = 0; d < D; ++d)
        for (int64_t j = 0; j < c; ++j) bx[d * c + j] = static_cast<A>(xs[d * inner + j]);
      softmax_block<A>(bx.data(), by.data(), D, c, log, st.data(), st.data() + kLanes);
      T* ys = y + o * D * inner + c0;
      for (int64_t d = 0; d < D; ++d)
        for (int64_t j = 0; j < c; ++j) ys[d * inner + j] = static_cast<T>(by[d * c + j]);
    }
  }
}

template <typename T>
void softmax_backward(const T* g, const T* y, T* gx, int64_t outer, int64_t D, int64_t inner,
                      bool log) {
  using A = at::opmath_type<T>;
  const int64_t total = outer * D * inner;
  if (inner == 1) {
#pragma omp parallel if (total > kGrain)
    {
      const int64_t nb = std::is_same<T, A>::value ? 0 : D;
      std::vector<A> bg(nb), by(nb), bo(nb);
#pragma omp for schedule(static)
      for (int64_t o = 0; o < outer; ++o) {
        if constexpr (std::is_same<T, A>::value) {
          softmax_backward_row<A>(g + o * D, y + o * D, gx + o * D, D, log);
        } else {
          for (int64_t d = 0; d < D; ++d) {
            bg[d] = static_cast<A>(g[o * D + d]);
            by[d] = static_cast<A>(y[o * D + d]);
          }
          softmax_backward_row<A>(bg.data(), by.data(), bo.data(), D, log);
          for (int64_t d = 0; d < D; ++d) gx[o * D + d] = static_cast<T>(bo[d]);
        }
      }
    }
    return;
  }
  const int64_t nchunk = (inner + kLanes - 1) / kLanes;
#pragma omp parallel if (total > kGrain)
  {
    std::vector<A> bg(D * kLanes), by(D * kLanes), bo(D * kLanes), st(kLanes);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < outer * nchunk; ++t) {
      const int64_t o = t / nchunk, c0 = (t % nchunk) * kLanes;
      const int64_t c = std::min(kLanes, inner - c0);
      const int64_t base = o * D * inner + c0;
      for (int64_t d = 0; d < D; ++d)
        for (int64_t j = 0; j < c; ++j) {
          bg[d * c + j] = static_cast<A>(g[base + d * inner + j]);
          by[d * c + j] = static_cast<A>(y[base + d * inner + j]);
        }
      softmax_backward_block<A>(bg.data(), by.data(), bo.data(), D, c, log, st.data());
      for (int64_t d = 0; d < D; ++d)
        for (int64_t j = 0; j < c; ++j) gx[base + d * inner + j] = static_cast<T>(bo[d * c + j]);
    }
  }
}

// (outer, D, inner) of a contiguous tensor around dim.
void split_dims(const at::Tensor& t, int64_t dim, int64_t& outer, int64_t& D, int64_t& inner) {
  outer = 1;
  inner = 1;
  D = t.dim() == 0 ? 1 : t.size(dim);
  for (int64_t i = 0; i < dim; ++i) outer *= t.size(i);
  for (int64_t i = dim + 1; i < t.dim(); ++i) inner *= t.size(i);
}

// Where a result goes: `out` (the out= forms), resized to `like`'s shape, when it is contiguous,
// else a fresh contiguous tensor that finish() copies into `out`.
at::Tensor result_buffer(const at::Tensor* out, const at::Tensor& like) {
  if (out == nullptr) return at::empty_like(like, at::MemoryFormat::Contiguous);
  at::native::resize_output(const_cast<at::Tensor&>(*out), like.sizes());
  return out->is_contiguous() ? *out : at::empty_like(like);
}

at::Tensor finish(const at::Tensor* out, const at::Tensor& r) {
  if (out == nullptr) return r;
  if (!r.is_same(*out)) const_cast<at::Tensor&>(*out).copy_(r);
  return *out;
}

at::Tensor forward_impl(const char* op, const at::Tensor& x, int64_t dim, bool log,
                        const at::Tensor* out_opt) {
  check_floating(op, "self", x);
  const int64_t d = wrap_dim(op, dim, x.dim());
  at::Tensor xc = x.contiguous();
  if (out_opt != nullptr) {
    check_same_dtype(op, *out_opt, "out", x, "self");
    check_same_device(op, *out_opt, "out", x, "self");
  }
  at::Tensor y = result_buffer(out_opt, xc);
  if (x.numel() > 0) {
    int64_t outer, D, inner;
    split_dims(xc, d, outer, D, inner);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_softmax", [&] {
      softmax_forward<scalar_t>(xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(),
                                outer, D, inner, log);
    });
  }
  return finish(out_opt, y);
}

at::Tensor backward_impl(const char* op, const at::Tensor& grad, const at::Tensor& output,
                         int64_t dim, bool log, const at::Tensor* out_opt) {
  check_floating(op, "grad_output", grad);
  check_same_dtype(op, grad, "grad_output", output, "output");
  check_same_device(op, grad, "grad_output", output, "output");
  check_same_shape(op, grad, "grad_output", output, "output");
  const int64_t d = wrap_dim(op, dim, output.dim());
  at::Tensor gc = grad.contiguous(), yc = output.contiguous();
  if (out_opt != nullptr) check_same_dtype(op, *out_opt, "out", grad, "grad_output");
  at::Tensor gx = result_buffer(out_opt, gc);
  if (grad.numel() > 0) {
    int64_t outer, D, inner;
    split_dims(yc, d, outer, D, inner);
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad.scalar_type(), "mytorch_softmax_bwd", [&] {
      softmax_backward<scalar_t>(gc.const_data_ptr<scalar_t>(), yc.const_data_ptr<scalar_t>(),
                                 gx.mutable_data_ptr<scalar_t>(), outer, D, inner, log);
    });
  }
  return finish(out_opt, gx);
}

}  // namespace

at::Tensor softmax(const at::Tensor& x, int64_t dim) {
  return forward_impl("mytorch::softmax", x, dim, false, nullptr);
}
at::Tensor log_softmax(const at::Tensor& x, int64_t dim) {
  return forward_impl("mytorch::log_softmax", x, dim, true, nullptr);
}
at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim) {
  return backward_impl("mytorch::softmax_backward", grad, output, dim, false, nullptr);
}
at::Tensor log_softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim) {
  return backward_impl("mytorch::log_softmax_backward", grad, output, dim, true, nullptr);
}

at::Tensor& softmax_out(const at::Tensor& x, int64_t dim, bool log, at::Tensor& out) {
  forward_impl(log ? "mytorch::log_softmax" : "mytorch::softmax", x, dim, log, &out);
  return out;
}
at::Tensor& softmax_backward_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                 bool log, at::Tensor& out) {
  backward_impl(log ? "mytorch::log_softmax_backward" : "mytorch::softmax_backward", grad, output,
                dim, log, &out);
  return out;
}

}  // namespace cpu
}  // namespace mytorch
