// Activation kernels (CUDA). Same family and checks as kernels/cpu/activation.cpp.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "checks.h"

namespace mytorch {
namespace cuda {

constexpr int kThreads = 256;

template <typename T, typename Acc>
__global__ void gelu_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, bool tanh_approx) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    Acc v = static_cast<Acc>(x[i]);
    Acc r;
    if (tanh_approx) {
      Acc inner = Acc(0.79788456080286535588) * (v + Acc(0.044715) * v * v * v);
      r = Acc(0.5) * v * (Acc(1) + tanh(inner));
    } else {
      r = Acc(0.5) * v * (Acc(1) + erf(v * Acc(0.70710678118654752440)));
    }
    y[i] = static_cast<T>(r);
  }
}

template <typename T, typename Acc>
__global__ void gelu_backward_kernel(const T* __restrict__ g, const T* __restrict__ x,
                                     T* __restrict__ dx, int64_t n, bool tanh_approx) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    Acc v = static_cast<Acc>(x[i]);
    Acc d;
    if (tanh_approx) {
      Acc v2 = v * v;
      Acc t = tanh(Acc(0.79788456080286535588) * (v + Acc(0.044715) * v2 * v));
      Acc dinner = Acc(0.79788456080286535588) * (Acc(1) + Acc(3 * 0.044715) * v2);
      d = Acc(0.5) * (Acc(1) + t) + Acc(0.5) * v * (Acc(1) - t * t) * dinner;
    } else {
      Acc cdf = Acc(0.5) * (Acc(1) + erf(v * Acc(0.70710678118654752440)));
      Acc pdf = exp(Acc(-0.5) * v * v) * Acc(0.39894228040143267794);
      d = cdf + v * pdf;
    }
    dx[i] = static_cast<T>(static_cast<Acc>(g[i]) * d);
  }
}

static int blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(b, 1), 65535 * 8));
}

static bool parse_approximate(const char* op, c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", op,
              ": expected approximate to be 'none' or 'tanh', got '", std::string(approximate), "'");
  return approximate == "tanh";
}

at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) {
  const char* op = "mytorch::gelu";
  bool tanh_approx = parse_approximate(op, approximate);
  check_floating(op, "x", x);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  int64_t n = xc.numel();
  if (n == 0) return y;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_gelu_cuda", [&] {
    gelu_kernel<scalar_t, at::opmath_type<scalar_t>><<<blocks_for(n), kThreads, 0, stream>>>(
        xc.const_data_ptr<scalar_t>(), y.mutable_data_ptr<scalar_t>(), n, tanh_approx);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& x, c10::string_view approximate) {
  const char* op = "mytorch::gelu_backward";
  bool tanh_approx = parse_approximate(op, approximate);
  check_floating(op, "x", x);
  check_same_dtype(op, grad, "grad", x, "x");
  check_same_device(op, grad, "grad", x, "x");
  check_same_shape(op, grad, "grad", x, "x");
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor gc = grad.contiguous(), xc = x.contiguous();
  at::Tensor dx = at::empty_like(xc);
  int64_t n = xc.numel();
  if (n == 0) return dx;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_gelu_bwd_cuda", [&] {
    gelu_backward_kernel<scalar_t, at::opmath_type<scalar_t>><<<blocks_for(n), kThreads, 0, stream>>>(
        gc.const_data_ptr<scalar_t>(), xc.const_data_ptr<scalar_t>(), dx.mutable_data_ptr<scalar_t>(),
        n, tanh_approx);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return dx;
}

}  // namespace cuda
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, CUDA, m) {
  m.impl("gelu", &mytorch::cuda::gelu);
  m.impl("gelu_backward", &mytorch::cuda::gelu_backward);
}
