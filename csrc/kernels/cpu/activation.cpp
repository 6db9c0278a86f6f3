// The activation family (OpenMP): gelu, hardswish / hardsigmoid, bias + GELU and SwiGLU, forward
// and backward, in the compute type (float for bf16/fp16). The template op family: pure kernels
// over raw pointers, then the ATen glue that checks and allocates (registered in
// kernels/cpu/register.cpp).
//
// The gelu loops are also compiled for AVX2 and AVX-512 (kernels/cpu/isa/activation_*.cpp):
// gelu_loop and gelu_backward_loop run the widest copy the CPU has. They also serve the aten
// gelu ops of the mytorch device, through the elementwise glue (unary(Un::Gelu),
// binary(Bin::GeluBwd)). Everything else here is compiled once (#ifndef MYTORCH_ISA_VARIANT).
#include "kernels/cpu/activation.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "checks.h"
#ifndef MYTORCH_ISA_VARIANT
#include "kernels/activation.h"  // the glue's checks and entry points
#endif
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/vec_math.h"

MYTORCH_ISA_DECLARE(gelu_loop)
MYTORCH_ISA_DECLARE(gelu_backward_loop)

namespace mytorch {
namespace cpu {
namespace {

// ---- kernels: pointers and sizes only ----
// The loops run in functions of their own with `omp simd` and the vectorizable float math of
// elementwise.h (m_exp, gelu_*): gcc inlines that math (and so vectorizes) only in a loop that
// has the function to itself.
template <bool TANH, typename C>
inline C gelu_value(C v) {
  if constexpr (TANH) return gelu_tanh<C>(v);
  else return gelu_erf<C>(v);
}
template <bool TANH, typename C>
inline C gelu_slope(C v) {
  if constexpr (TANH) return gelu_tanh_grad<C>(v);
  else return gelu_erf_grad<C>(v);
}

// y = gelu(x), n contiguous elements. erf-GELU in float32 takes vec_math.h's hand-written
// vectors (gcc leaves erfc's loop scalar); the scalar formula finishes the tail.
template <bool TANH, typename T>
__attribute__((noinline)) void gelu_span(const T* x, T* y, int64_t n) {
  using C = compute_t<T>;
  int64_t start = 0;
  if constexpr (!TANH && std::is_same_v<T, float>) start = gelu_erf_vec(x, y, n);
#pragma omp simd
  for (int64_t i = start; i < n; ++i) y[i] = T(gelu_value<TANH, C>(C(x[i])));
}

// dx = g * gelu'(x), n contiguous elements.
template <bool TANH, typename T>
__attribute__((noinline)) void gelu_backward_span(const T* g, const T* x, T* dx, int64_t n) {
  using C = compute_t<T>;
  int64_t start = 0;
  if constexpr (!TANH && std::is_same_v<T, float>) start = gelu_erf_backward_vec(g, x, dx, n);
#pragma omp simd
  for (int64_t i = start; i < n; ++i) dx[i] = T(C(g[i]) * gelu_slope<TANH, C>(C(x[i])));
}

// Operands (y, x): contiguous runs take gelu_span, others the same formula element by element.
template <bool TANH, typename T>
void gelu_strided(const Strided& it) {
  using C = compute_t<T>;
  for_each(it, [](char** d, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(T) && s[1] == sizeof(T))
      return gelu_span<TANH, T>(reinterpret_cast<const T*>(d[1]), reinterpret_cast<T*>(d[0]), n);
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<T*>(d[0] + i * s[0]) =
          T(gelu_value<TANH, C>(C(*reinterpret_cast<const T*>(d[1] + i * s[1]))));
  });
}

// Operands (dx, g, x); a broadcast operand (stride 0) takes the element-by-element path.
template <bool TANH, typename T>
void gelu_backward_strided(const Strided& it) {
  using C = compute_t<T>;
  for_each(it, [](char** d, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(T) && s[1] == sizeof(T) && s[2] == sizeof(T))
      return gelu_backward_span<TANH, T>(reinterpret_cast<const T*>(d[1]), reinterpret_cast<const T*>(d[2]),
                                         reinterpret_cast<T*>(d[0]), n);
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<T*>(d[0] + i * s[0]) =
          T(C(*reinterpret_cast<const T*>(d[1] + i * s[1])) *
            gelu_slope<TANH, C>(C(*reinterpret_cast<const T*>(d[2] + i * s[2]))));
  });
}

}  // namespace

void gelu_loop(const Strided& it, at::ScalarType dtype, bool tanh_approx) {
  MYTORCH_ISA_DISPATCH(gelu_loop, it, dtype, tanh_approx)
  dispatch_floating("mytorch::gelu", "x", dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (tanh_approx) gelu_strided<true, T>(it);
    else gelu_strided<false, T>(it);
  });
}

void gelu_backward_loop(const Strided& it, at::ScalarType dtype, bool tanh_approx) {
  MYTORCH_ISA_DISPATCH(gelu_backward_loop, it, dtype, tanh_approx)
  dispatch_floating("mytorch::gelu_backward", "x", dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (tanh_approx) gelu_backward_strided<true, T>(it);
    else gelu_backward_strided<false, T>(it);
  });
}

}  // namespace cpu
}  // namespace mytorch

#ifndef MYTORCH_ISA_VARIANT
namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;  // elements below which a row loop stays on one thread

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

// ---- kernels: hardswish / hardsigmoid ----
// hardswish(x) = x * relu6(x + 3) / 6, hardsigmoid(x) = relu6(x + 3) / 6. Backward boundaries
// follow ATen: hardswish' = x / 3 + 1/2 on (-3, 3), 0 below, 1 above; hardsigmoid' = 1/6 on (-3, 3).
template <typename T>
void hardact_kernel(const T* x, T* y, int64_t n, bool swish) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for simd if (n > kElemGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const Acc v = static_cast<Acc>(x[i]);
    const Acc s = std::min(std::max(v + Acc(3), Acc(0)), Acc(6)) / Acc(6);
    y[i] = static_cast<T>(swish ? v * s : s);
  }
}

template <typename T>
void hardact_backward_kernel(const T* g, const T* x, T* dx, int64_t n, bool swish) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for simd if (n > kElemGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const Acc v = static_cast<Acc>(x[i]), gv = static_cast<Acc>(g[i]);
    Acc d;
    // NaN x gives a NaN gradient (ATen's vector path does; its scalar tail returns g)
    if (swish) d = v != v ? v : v <= Acc(-3) ? Acc(0) : (v < Acc(3) ? gv * (v / Acc(3) + Acc(0.5)) : gv);
    else d = (v > Acc(-3) && v < Acc(3)) ? gv / Acc(6) : Acc(0);
    dx[i] = static_cast<T>(d);
  }
}

// ---- kernels: bias + GELU ----
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

// ---- kernels: SwiGLU, silu(a) * b ----
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

#define MYTORCH_DISPATCH_CPU(TYPE, NAME, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, TYPE, NAME, __VA_ARGS__)

// ---- ATen glue: checks, layout, allocation ----
using activation::check_grad_like;
using activation::parse_approximate;

at::Tensor hardact_forward(const char* op, const at::Tensor& x, HardAct act) {
  check_floating(op, "x", x);
  at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  hardact_into(act, xc, y);
  return y;
}

at::Tensor hardact_backward(const char* op, const at::Tensor& grad, const at::Tensor& x, bool swish) {
  check_floating(op, "x", x);
  check_grad_like(op, grad, x, "x");
  at::Tensor gc = grad.contiguous(), xc = x.contiguous();
  at::Tensor dx = at::empty_like(xc);
  MYTORCH_DISPATCH_CPU(x.scalar_type(), "mytorch_hardact_bwd", [&] {
    hardact_backward_kernel<scalar_t>(gc.const_data_ptr<scalar_t>(), xc.const_data_ptr<scalar_t>(),
                                      dx.mutable_data_ptr<scalar_t>(), xc.numel(), swish);
  });
  return dx;
}

}  // namespace

at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) {
  const char* op = "mytorch::gelu";
  bool tanh_approx = parse_approximate(op, approximate);
  check_floating(op, "x", x);
  at::Tensor y = at::empty(x.sizes(), x.options());
  auto it = at::TensorIteratorConfig().add_output(y).add_const_input(x).resize_outputs(false).build();
  gelu_loop(strided_from(it), x.scalar_type(), tanh_approx);
  return y;
}

at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& x, c10::string_view approximate) {
  const char* op = "mytorch::gelu_backward";
  bool tanh_approx = parse_approximate(op, approximate);
  check_floating(op, "x", x);
  check_grad_like(op, grad, x, "x");
  at::Tensor dx = at::empty(x.sizes(), x.options());
  auto it = at::TensorIteratorConfig()
                .add_output(dx)
                .add_const_input(grad)
                .add_const_input(x)
                .resize_outputs(false)
                .build();
  gelu_backward_loop(strided_from(it), x.scalar_type(), tanh_approx);
  return dx;
}

void hardact_into(HardAct act, const at::Tensor& x, const at::Tensor& out) {
  MYTORCH_DISPATCH_CPU(x.scalar_type(), "mytorch_hardact", [&] {
    hardact_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), x.numel(),
                             act == HardAct::kSwish);
  });
}

at::Tensor hardswish(const at::Tensor& x) { return hardact_forward("mytorch::hardswish", x, HardAct::kSwish); }
at::Tensor hardsigmoid(const at::Tensor& x) {
  return hardact_forward("mytorch::hardsigmoid", x, HardAct::kSigmoid);
}
at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& x) {
  return hardact_backward("mytorch::hardswish_backward", grad, x, true);
}
at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& x) {
  return hardact_backward("mytorch::hardsigmoid_backward", grad, x, false);
}

at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias, c10::string_view approximate) {
  const char* op = "mytorch::bias_gelu";
  bool tanh_approx = parse_approximate(op, approximate);
  activation::check_bias_gelu(op, x, bias, check_floating);
  at::Tensor xc = x.contiguous(), bc = bias.contiguous(), y = at::empty_like(xc);
  int64_t cols = x.size(-1), rows = cols == 0 ? 0 : x.numel() / cols;
  MYTORCH_DISPATCH_CPU(x.scalar_type(), "mytorch_bias_gelu", [&] {
    bias_gelu_kernel<scalar_t>(nullptr, xc.const_data_ptr<scalar_t>(), bc.const_data_ptr<scalar_t>(),
                               y.mutable_data_ptr<scalar_t>(), nullptr, rows, cols, tanh_approx);
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& grad, const at::Tensor& x,
                                                      const at::Tensor& bias, c10::string_view approximate) {
  const char* op = "mytorch::bias_gelu_backward";
  bool tanh_approx = parse_approximate(op, approximate);
  activation::check_bias_gelu(op, x, bias, check_floating);
  check_grad_like(op, grad, x, "x");
  at::Tensor gc = grad.contiguous(), xc = x.contiguous(), bc = bias.contiguous();
  at::Tensor dx = at::empty_like(xc), db = at::empty_like(bc);
  int64_t cols = x.size(-1), rows = cols == 0 ? 0 : x.numel() / cols;
  MYTORCH_DISPATCH_CPU(x.scalar_type(), "mytorch_bias_gelu_bwd", [&] {
    bias_gelu_kernel<scalar_t>(gc.const_data_ptr<scalar_t>(), xc.const_data_ptr<scalar_t>(),
                               bc.const_data_ptr<scalar_t>(), dx.mutable_data_ptr<scalar_t>(),
                               db.mutable_data_ptr<scalar_t>(), rows, cols, tanh_approx);
  });
  return {dx, db};
}

at::Tensor swiglu(const at::Tensor& a, const at::Tensor& b) {
  const char* op = "mytorch::swiglu";
  activation::check_swiglu(op, a, b, check_floating);
  at::Tensor ac = a.contiguous(), bc = b.contiguous(), y = at::empty_like(ac);
  MYTORCH_DISPATCH_CPU(a.scalar_type(), "mytorch_swiglu", [&] {
    swiglu_kernel<scalar_t>(nullptr, ac.const_data_ptr<scalar_t>(), bc.const_data_ptr<scalar_t>(),
                            y.mutable_data_ptr<scalar_t>(), nullptr, ac.numel());
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b) {
  const char* op = "mytorch::swiglu_backward";
  activation::check_swiglu(op, a, b, check_floating);
  check_grad_like(op, grad, a, "a");
  at::Tensor gc = grad.contiguous(), ac = a.contiguous(), bc = b.contiguous();
  at::Tensor da = at::empty_like(ac), db = at::empty_like(bc);
  MYTORCH_DISPATCH_CPU(a.scalar_type(), "mytorch_swiglu_bwd", [&] {
    swiglu_kernel<scalar_t>(gc.const_data_ptr<scalar_t>(), ac.const_data_ptr<scalar_t>(),
                            bc.const_data_ptr<scalar_t>(), da.mutable_data_ptr<scalar_t>(),
                            db.mutable_data_ptr<scalar_t>(), ac.numel());
  });
  return {da, db};
}

}  // namespace cpu
}  // namespace mytorch

#endif  // MYTORCH_ISA_VARIANT
