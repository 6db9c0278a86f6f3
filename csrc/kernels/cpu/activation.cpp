// Activation kernels (OpenMP). The template op family: a pure kernel over raw
// pointers, then the ATen glue that checks and allocates, then the registration.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <cmath>

#include "checks.h"

namespace mytorch {
namespace cpu {

constexpr int64_t kParallelGrain = 1 << 15;
constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

// ---- kernels: pointers and sizes only ----
template <typename T, typename Acc>
void gelu_kernel(const T* x, T* y, int64_t n, bool tanh_approx) {
#pragma omp parallel for simd if (n > kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    Acc v = static_cast<Acc>(x[i]);
    Acc r;
    if (tanh_approx) {
      Acc inner = Acc(kSqrt2OverPi) * (v + Acc(0.044715) * v * v * v);
      r = Acc(0.5) * v * (Acc(1) + std::tanh(inner));
    } else {
      r = Acc(0.5) * v * (Acc(1) + std::erf(v * Acc(kSqrt1_2)));
    }
    y[i] = static_cast<T>(r);
  }
}

template <typename T, typename Acc>
void gelu_backward_kernel(const T* g, const T* x, T* dx, int64_t n, bool tanh_approx) {
#pragma omp parallel for simd if (n > kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    Acc v = static_cast<Acc>(x[i]);
    Acc d;
    if (tanh_approx) {
      Acc v2 = v * v;
      Acc inner = Acc(kSqrt2OverPi) * (v + Acc(0.044715) * v2 * v);
      Acc t = std::tanh(inner);
      Acc dinner = Acc(kSqrt2OverPi) * (Acc(1) + Acc(3 * 0.044715) * v2);
      d = Acc(0.5) * (Acc(1) + t) + Acc(0.5) * v * (Acc(1) - t * t) * dinner;
    } else {
      Acc cdf = Acc(0.5) * (Acc(1) + std::erf(v * Acc(kSqrt1_2)));
      Acc pdf = std::exp(Acc(-0.5) * v * v) * Acc(kSqrt1_2 * 0.56418958354775628695);  // 1/sqrt(2pi)
      d = cdf + v * pdf;
    }
    dx[i] = static_cast<T>(static_cast<Acc>(g[i]) * d);
  }
}

// ---- ATen glue: checks, layout, allocation ----
static bool parse_approximate(const char* op, c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", op,
              ": expected approximate to be 'none' or 'tanh', got '", std::string(approximate), "'");
  return approximate == "tanh";
}

at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) {
  const char* op = "mytorch::gelu";
  bool tanh_approx = parse_approximate(op, approximate);
  check_floating(op, "x", x);
  at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_gelu", [&] {
    gelu_kernel<scalar_t, at::opmath_type<scalar_t>>(xc.const_data_ptr<scalar_t>(),
                                                     y.mutable_data_ptr<scalar_t>(), xc.numel(),
                                                     tanh_approx);
  });
  return y;
}

at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& x, c10::string_view approximate) {
  const char* op = "mytorch::gelu_backward";
  bool tanh_approx = parse_approximate(op, approximate);
  check_floating(op, "x", x);
  check_same_dtype(op, grad, "grad", x, "x");
  check_same_device(op, grad, "grad", x, "x");
  check_same_shape(op, grad, "grad", x, "x");
  at::Tensor gc = grad.contiguous(), xc = x.contiguous();
  at::Tensor dx = at::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_gelu_bwd", [&] {
    gelu_backward_kernel<scalar_t, at::opmath_type<scalar_t>>(
        gc.const_data_ptr<scalar_t>(), xc.const_data_ptr<scalar_t>(),
        dx.mutable_data_ptr<scalar_t>(), xc.numel(), tanh_approx);
  });
  return dx;
}

}  // namespace cpu
}  // namespace mytorch

// The mytorch device keeps its tensors in host memory, so it runs the same kernels.
TORCH_LIBRARY_IMPL(mytorch, CPU, m) {
  m.impl("gelu", &mytorch::cpu::gelu);
  m.impl("gelu_backward", &mytorch::cpu::gelu_backward);
}
TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) {
  m.impl("gelu", &mytorch::cpu::gelu);
  m.impl("gelu_backward", &mytorch::cpu::gelu_backward);
}
