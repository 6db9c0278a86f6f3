// LayerNorm and RMSNorm, forward and backward (OpenMP).
//
// The input is seen as M rows of N = prod(normalized_shape) elements. Forward:
// one row per iteration, statistics in float32/float64 (two passes over a row
// that sits in L1/L2). Backward computes grad_input row by row and, in the same
// pass, partial sums for grad_weight/grad_bias over fixed chunks of rows; the
// chunks are then added in a fixed order. The chunking depends only on M, so the
// weight gradients are bitwise identical for any thread count.
#include "kernels/norm.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/isa.h"

// The kernels run the widest copy of this file the CPU has (kernels/cpu/isa/norm_*.cpp).
MYTORCH_ISA_DECLARE(layer_norm)
MYTORCH_ISA_DECLARE(layer_norm_backward_masked)
MYTORCH_ISA_DECLARE(rms_norm)
MYTORCH_ISA_DECLARE(rms_norm_backward_masked)

namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;
constexpr int64_t kMaxChunks = 64;

// Row of T as a pointer to A: the row itself when T == A, else converted into buf.
template <typename T, typename A>
inline const A* as_acc(const T* p, int64_t n, A* buf) {
  if constexpr (std::is_same<T, A>::value) {
    return p;
  } else {
    for (int64_t i = 0; i < n; ++i) buf[i] = static_cast<A>(p[i]);
    return buf;
  }
}

// ---- forward ----
// rms: y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps)
// layer: y = (x - mean) * rstd * w + b, rstd = 1/sqrt(var + eps) (biased var)
template <typename T>
void norm_forward(const T* x, const T* w, const T* b, T* y, at::opmath_type<T>* mean_out,
                  at::opmath_type<T>* rstd_out, int64_t M, int64_t N, double eps,
                  bool rms) {
  using A = at::opmath_type<T>;
#pragma omp parallel if (M * N > kGrain)
  {
    std::vector<A> buf(std::is_same<T, A>::value ? 0 : N), wbuf, bbuf;
    const A* wa = nullptr;
    const A* ba = nullptr;
    if (w) {
      wbuf.resize(std::is_same<T, A>::value ? 0 : N);
      wa = as_acc<T, A>(w, N, wbuf.data());
    }
    if (b) {
      bbuf.resize(std::is_same<T, A>::value ? 0 : N);
      ba = as_acc<T, A>(b, N, bbuf.data());
    }
#pragma omp for schedule(static)
    for (int64_t r = 0; r < M; ++r) {
      const A* xr = as_acc<T, A>(x + r * N, N, buf.data());
      T* yr = y + r * N;
      A mu = 0, ss = 0;
      if (!rms) {
#pragma omp simd reduction(+ : mu)
        for (int64_t i = 0; i < N; ++i) mu += xr[i];
        mu /= A(N);
      }
      A sd = 0;  // corrected two-pass: the deviations' sum fixes the mean's rounding
#pragma omp simd reduction(+ : ss, sd)
      for (int64_t i = 0; i < N; ++i) {
        sd += xr[i] - mu;
        ss += (xr[i] - mu) * (xr[i] - mu);
      }
      if (!rms && std::isfinite(mu)) {  // (an infinite mean stays as it is)
        mu += sd / A(N);
        ss = std::max(ss - sd * sd / A(N), A(0));
      }
      const A rs = A(1) / std::sqrt(ss / A(N) + A(eps));
      if (wa && ba) {
#pragma omp simd
        for (int64_t i = 0; i < N; ++i) yr[i] = static_cast<T>((xr[i] - mu) * rs * wa[i] + ba[i]);
      } else if (wa) {
#pragma omp simd
        for (int64_t i = 0; i < N; ++i) yr[i] = static_cast<T>((xr[i] - mu) * rs * wa[i]);
      } else if (ba) {
#pragma omp simd
        for (int64_t i = 0; i < N; ++i) yr[i] = static_cast<T>((xr[i] - mu) * rs + ba[i]);
      } else {
#pragma omp simd
        for (int64_t i = 0; i < N; ++i) yr[i] = static_cast<T>((xr[i] - mu) * rs);
      }
      if (mean_out) mean_out[r] = mu;
      if (rstd_out) rstd_out[r] = rs;
    }
  }
}

// ---- backward ----
// xhat = (x - mean) * rstd (mean = 0 for rms), gw = g * w
// layer: dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))
// rms:   dx = rstd * (gw - xhat * mean(gw * xhat))
// dw = sum_rows g * xhat, db = sum_rows g
// mean_of(r) / rstd_of(r) give the saved statistics of row r in A.
template <typename T, typename MeanF, typename RstdF>
void norm_backward(const T* g, const T* x, const T* w, MeanF mean_of, RstdF rstd_of, T* dx, T* dw,
                   T* db, int64_t M, int64_t N, bool rms) {
  using A = at::opmath_type<T>;
  const int64_t nchunks = std::min<int64_t>(M, kMaxChunks);
  const int64_t rows_per = nchunks ? (M + nchunks - 1) / nchunks : 0;
  const bool need_w = dw != nullptr, need_b = db != nullptr;
  std::vector<A> pw(need_w ? nchunks * N : 0), pb(need_b ? nchunks * N : 0);
#pragma omp parallel if (M * N > kGrain)
  {
    std::vector<A> gbuf(std::is_same<T, A>::value ? 0 : N), xbuf(gbuf.size()), wbuf(gbuf.size());
    std::vector<A> gw(N), xh(N);
    const A* wa = w ? as_acc<T, A>(w, N, wbuf.data()) : nullptr;
#pragma omp for schedule(static)
    for (int64_t c = 0; c < nchunks; ++c) {
      A* cw = need_w ? pw.data() + c * N : nullptr;
      A* cb = need_b ? pb.data() + c * N : nullptr;
      if (cw) std::fill(cw, cw + N, A(0));
      if (cb) std::fill(cb, cb + N, A(0));
      const int64_t r1 = std::min(M, (c + 1) * rows_per);
      for (int64_t r = c * rows_per; r < r1; ++r) {
        const A* gr = as_acc<T, A>(g + r * N, N, gbuf.data());
        const A* xr = as_acc<T, A>(x + r * N, N, xbuf.data());
        const A mu = rms ? A(0) : mean_of(r), rs = rstd_of(r);
        A s1 = 0, s2 = 0;
#pragma omp simd reduction(+ : s1, s2)
        for (int64_t i = 0; i < N; ++i) {
          xh[i] = (xr[i] - mu) * rs;
          gw[i] = wa ? gr[i] * wa[i] : gr[i];
          s1 += gw[i];
          s2 += gw[i] * xh[i];
        }
        if (cw) {
#pragma omp simd
          for (int64_t i = 0; i < N; ++i) cw[i] += gr[i] * xh[i];
        }
        if (cb) {
#pragma omp simd
          for (int64_t i = 0; i < N; ++i) cb[i] += gr[i];
        }
        if (dx) {
          const A m1 = rms ? A(0) : s1 / A(N), m2 = s2 / A(N);
          T* dr = dx + r * N;
#pragma omp simd
          for (int64_t i = 0; i < N; ++i) dr[i] = static_cast<T>(rs * (gw[i] - m1 - xh[i] * m2));
        }
      }
    }
    // second stage: add the chunks in order, columns split across threads
#pragma omp for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      A sw = 0, sb = 0;
      for (int64_t c = 0; c < nchunks; ++c) {
        if (need_w) sw += pw[c * N + i];
        if (need_b) sb += pb[c * N + i];
      }
      if (need_w) dw[i] = static_cast<T>(sw);
      if (need_b) db[i] = static_cast<T>(sb);
    }
  }
}

// ---- glue helpers ----
struct NormDims {
  int64_t M, N;
  std::vector<int64_t> stat_shape;  // input.shape[:axis] + [1] * len(normalized_shape)
};

NormDims norm_dims(const char* op, const at::Tensor& x, at::IntArrayRef normalized_shape) {
  check_floating(op, "input", x);
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(nd >= 1, op, ": expected normalized_shape to have at least 1 dim, got ", normalized_shape);
  TORCH_CHECK(x.dim() >= nd && x.sizes().slice(x.dim() - nd).equals(normalized_shape), op,
              ": expected input with trailing shape ", normalized_shape, ", got input of shape ",
              x.sizes());
  norm::Rows r = norm::rows_of(x, nd);
  return {r.rows, r.cols, std::move(r.stat_shape)};
}

// The backwards' input and grad_out (input's dtype, shape and device).
NormDims backward_dims(const char* op, const at::Tensor& grad_out, const at::Tensor& input,
                       at::IntArrayRef normalized_shape) {
  NormDims d = norm_dims(op, input, normalized_shape);
  check_same_dtype(op, grad_out, "grad_out", input, "input");
  check_same_shape(op, grad_out, "grad_out", input, "input");
  check_same_device(op, grad_out, "grad_out", input, "input");
  return d;
}

at::Tensor param(const char* op, const char* name, const c10::optional<at::Tensor>& t,
                 const at::Tensor& x, at::IntArrayRef normalized_shape) {
  if (!t.has_value() || !t->defined()) return at::Tensor();
  check_same_dtype(op, *t, name, x, "input");
  check_same_device(op, *t, name, x, "input");
  TORCH_CHECK(t->sizes().equals(normalized_shape), op, ": expected ", name, " of shape ",
              normalized_shape, ", got ", t->sizes());
  return t->contiguous();
}

template <typename T>
const T* ptr_or_null(const at::Tensor& t) {
  return t.defined() ? t.const_data_ptr<T>() : nullptr;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm(const at::Tensor& input,
                                                          at::IntArrayRef normalized_shape,
                                                          const c10::optional<at::Tensor>& weight,
                                                          const c10::optional<at::Tensor>& bias,
                                                          double eps) {
  MYTORCH_ISA_DISPATCH(layer_norm, input, normalized_shape, weight, bias, eps)
  const char* op = "mytorch::layer_norm";
  NormDims d = norm_dims(op, input, normalized_shape);
  at::Tensor w = param(op, "weight", weight, input, normalized_shape);
  at::Tensor b = param(op, "bias", bias, input, normalized_shape);
  at::Tensor x = input.contiguous();
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  // mean and rstd in the accumulation dtype (float32 for 16-bit inputs), as rms_norm's rstd
  const at::ScalarType acc_t = at::toOpMathType(x.scalar_type());
  at::Tensor mean = at::empty(d.stat_shape, x.options().dtype(acc_t));
  at::Tensor rstd = at::empty(d.stat_shape, x.options().dtype(acc_t));
  if (d.M > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_layer_norm", [&] {
      using A = at::opmath_type<scalar_t>;
      norm_forward<scalar_t>(x.const_data_ptr<scalar_t>(), ptr_or_null<scalar_t>(w),
                             ptr_or_null<scalar_t>(b), y.mutable_data_ptr<scalar_t>(),
                             mean.mutable_data_ptr<A>(), rstd.mutable_data_ptr<A>(), d.M, d.N, eps, false);
    });
  }
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward_masked(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const c10::optional<at::Tensor>& weight,
    const c10::optional<at::Tensor>& bias, std::array<bool, 3> mask) {
  MYTORCH_ISA_DISPATCH(layer_norm_backward_masked, grad_out, input, normalized_shape, mean, rstd, weight, bias, mask)
  const char* op = "mytorch::layer_norm_backward";
  NormDims d = backward_dims(op, grad_out, input, normalized_shape);
  check_same_device(op, mean, "mean", input, "input");
  check_same_device(op, rstd, "rstd", input, "input");
  const at::ScalarType acc_t = at::toOpMathType(input.scalar_type());
  for (const at::Tensor* t : {&mean, &rstd})
    TORCH_CHECK(t->scalar_type() == acc_t, op, ": expected ", t == &mean ? "mean" : "rstd", " of dtype ", acc_t,
                ", got ", t->scalar_type());
  TORCH_CHECK(mean.numel() == d.M && rstd.numel() == d.M, op, ": expected mean and rstd with ",
              d.M, " elements, got ", mean.numel(), " and ", rstd.numel());
  at::Tensor w = param(op, "weight", weight, input, normalized_shape);
  (void)bias;
  at::Tensor g = grad_out.contiguous(), x = input.contiguous();
  at::Tensor mc = mean.contiguous(), rc = rstd.contiguous();
  at::Tensor dx, dw, db;
  if (mask[0]) dx = at::empty_like(x, at::MemoryFormat::Contiguous);
  if (mask[1]) dw = at::empty(normalized_shape, x.options());
  if (mask[2]) db = at::empty(normalized_shape, x.options());
  if (d.M == 0) {
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
    return {dx, dw, db};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_layer_norm_bwd", [&] {
    using A = at::opmath_type<scalar_t>;
    const A* mp = mc.const_data_ptr<A>();
    const A* rp = rc.const_data_ptr<A>();
    norm_backward<scalar_t>(
        g.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(), ptr_or_null<scalar_t>(w),
        [mp](int64_t r) { return mp[r]; }, [rp](int64_t r) { return rp[r]; },
        dx.defined() ? dx.mutable_data_ptr<scalar_t>() : nullptr,
        dw.defined() ? dw.mutable_data_ptr<scalar_t>() : nullptr,
        db.defined() ? db.mutable_data_ptr<scalar_t>() : nullptr, d.M, d.N, false);
  });
  return {dx, dw, db};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const c10::optional<at::Tensor>& weight) {
  return layer_norm_backward_masked(grad_out, input, normalized_shape, mean, rstd, weight,
                                    c10::nullopt, {true, true, true});
}

std::tuple<at::Tensor, at::Tensor> rms_norm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                            const c10::optional<at::Tensor>& weight,
                                            c10::optional<double> eps) {
  MYTORCH_ISA_DISPATCH(rms_norm, input, normalized_shape, weight, eps)
  const char* op = "mytorch::rms_norm";
  NormDims d = norm_dims(op, input, normalized_shape);
  at::Tensor w = param(op, "weight", weight, input, normalized_shape);
  at::Tensor x = input.contiguous();
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  const at::ScalarType acc_t = at::toOpMathType(x.scalar_type());
  at::Tensor rstd = at::empty(d.stat_shape, x.options().dtype(acc_t));
  if (d.M > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_rms_norm", [&] {
      const double e = eps.has_value() ? *eps : norm::default_eps(x.scalar_type());
      norm_forward<scalar_t>(x.const_data_ptr<scalar_t>(), ptr_or_null<scalar_t>(w), nullptr,
                             y.mutable_data_ptr<scalar_t>(), nullptr,
                             rstd.mutable_data_ptr<at::opmath_type<scalar_t>>(), d.M, d.N, e, true);
    });
  }
  return {y, rstd};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward_masked(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef normalized_shape,
    const at::Tensor& rstd, const c10::optional<at::Tensor>& weight, std::array<bool, 2> mask) {
  MYTORCH_ISA_DISPATCH(rms_norm_backward_masked, grad_out, input, normalized_shape, rstd, weight, mask)
  const char* op = "mytorch::rms_norm_backward";
  NormDims d = backward_dims(op, grad_out, input, normalized_shape);
  check_same_device(op, rstd, "rstd", input, "input");
  TORCH_CHECK(rstd.scalar_type() == at::toOpMathType(input.scalar_type()), op,
              ": expected rstd of dtype ", at::toOpMathType(input.scalar_type()), ", got ",
              rstd.scalar_type());
  TORCH_CHECK(rstd.numel() == d.M, op, ": expected rstd with ", d.M, " elements, got ", rstd.numel());
  at::Tensor w = param(op, "weight", weight, input, normalized_shape);
  at::Tensor g = grad_out.contiguous(), x = input.contiguous(), rc = rstd.contiguous();
  at::Tensor dx, dw;
  if (mask[0]) dx = at::empty_like(x, at::MemoryFormat::Contiguous);
  if (mask[1]) dw = at::empty(normalized_shape, x.options());
  if (d.M == 0) {
    if (dw.defined()) dw.zero_();
    return {dx, dw};
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_rms_norm_bwd", [&] {
    using A = at::opmath_type<scalar_t>;
    const A* rp = rc.const_data_ptr<A>();
    norm_backward<scalar_t>(
        g.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(), ptr_or_null<scalar_t>(w),
        [](int64_t) { return A(0); }, [rp](int64_t r) { return rp[r]; },
        dx.defined() ? dx.mutable_data_ptr<scalar_t>() : nullptr,
        dw.defined() ? dw.mutable_data_ptr<scalar_t>() : nullptr, nullptr, d.M, d.N, true);
  });
  return {dx, dw};
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out,
                                                     const at::Tensor& input,
                                                     at::IntArrayRef normalized_shape,
                                                     const at::Tensor& rstd,
                                                     const c10::optional<at::Tensor>& weight) {
  return rms_norm_backward_masked(grad_out, input, normalized_shape, rstd, weight, {true, true});
}

}  // namespace cpu
}  // namespace mytorch
