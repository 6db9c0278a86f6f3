// hardswish(x) = x * relu6(x + 3) / 6, hardsigmoid(x) = relu6(x + 3) / 6 (OpenMP).
// Backward boundaries follow ATen: hardswish' = x / 3 + 1/2 on (-3, 3), 0 below, 1 above;
// hardsigmoid' = 1/6 on (-3, 3).
#include "kernels/cpu/hardact.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <algorithm>

#include "checks.h"

namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kParallelGrain = 1 << 15;

template <typename T>
void hardact_kernel(const T* x, T* y, int64_t n, bool swish) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for simd if (n > kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const Acc v = static_cast<Acc>(x[i]);
    const Acc s = std::min(std::max(v + Acc(3), Acc(0)), Acc(6)) / Acc(6);
    y[i] = static_cast<T>(swish ? v * s : s);
  }
}

template <typename T>
void hardact_backward_kernel(const T* g, const T* x, T* dx, int64_t n, bool swish) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for simd if (n > kParallelGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const Acc v = static_cast<Acc>(x[i]), gv = static_cast<Acc>(g[i]);
    Acc d;
    // NaN x gives a NaN gradient (ATen's vector path does; its scalar tail returns g)
    if (swish) d = v != v ? v : v <= Acc(-3) ? Acc(0) : (v < Acc(3) ? gv * (v / Acc(3) + Acc(0.5)) : gv);
    else d = (v > Acc(-3) && v < Acc(3)) ? gv / Acc(6) : Acc(0);
    dx[i] = static_cast<T>(d);
  }
}

at::Tensor backward(const char* op, const at::Tensor& grad, const at::Tensor& x, bool swish) {
  check_floating(op, "x", x);
  check_same_dtype(op, grad, "grad", x, "x");
  check_same_device(op, grad, "grad", x, "x");
  check_same_shape(op, grad, "grad", x, "x");
  at::Tensor gc = grad.contiguous(), xc = x.contiguous();
  at::Tensor dx = at::empty_like(xc);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_hardact_bwd", [&] {
    hardact_backward_kernel<scalar_t>(gc.const_data_ptr<scalar_t>(), xc.const_data_ptr<scalar_t>(),
                                      dx.mutable_data_ptr<scalar_t>(), xc.numel(), swish);
  });
  return dx;
}

at::Tensor forward(const char* op, const at::Tensor& x, HardAct act) {
  check_floating(op, "x", x);
  at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  hardact_into(act, xc, y);
  return y;
}

}  // namespace

void hardact_into(HardAct act, const at::Tensor& x, const at::Tensor& out) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_hardact", [&] {
    hardact_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(),
                             x.numel(), act == HardAct::kSwish);
  });
}

at::Tensor hardswish(const at::Tensor& x) { return forward("mytorch::hardswish", x, HardAct::kSwish); }
at::Tensor hardsigmoid(const at::Tensor& x) {
  return forward("mytorch::hardsigmoid", x, HardAct::kSigmoid);
}
at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& x) {
  return backward("mytorch::hardswish_backward", grad, x, true);
}
at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& x) {
  return backward("mytorch::hardsigmoid_backward", grad, x, false);
}

}  // namespace cpu
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, CPU, m) {
  m.impl("hardswish", &mytorch::cpu::hardswish);
  m.impl("hardswish_backward", &mytorch::cpu::hardswish_backward);
  m.impl("hardsigmoid", &mytorch::cpu::hardsigmoid);
  m.impl("hardsigmoid_backward", &mytorch::cpu::hardsigmoid_backward);
}
TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) {
  m.impl("hardswish", &mytorch::cpu::hardswish);
  m.impl("hardswish_backward", &mytorch::cpu::hardswish_backward);
  m.impl("hardsigmoid", &mytorch::cpu::hardsigmoid);
  m.impl("hardsigmoid_backward", &mytorch::cpu::hardsigmoid_backward);
}
