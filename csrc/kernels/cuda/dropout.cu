// Dropout (CUDA), as kernels/cpu/dropout.cpp (checks: kernels/dropout.h): out = x * mask / (1 - p),
// mask ~ Bernoulli(1 - p).
//
// The mask comes from Philox4_32_10 (curand): seed and offset are taken from the CUDA
// generator (the default one of the input's device, or the generator argument) under
// its lock, reserving the draws of this call, so consecutive calls differ and
// torch.manual_seed / CUDA graphs reproduce them. Each thread draws four uniforms per
// group of four elements. train=False or p=0: a copy and an all-true mask.
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/PhiloxUtils.cuh>
#include <curand_kernel.h>

#include <mutex>

#include "kernels/cuda/common.cuh"
#include "kernels/dropout.h"

namespace mytorch {
namespace cuda {
namespace {

template <typename T>
__global__ void __launch_bounds__(kThreads) dropout_kernel(const T* __restrict__ x, T* __restrict__ y,
                                                           bool* __restrict__ mask, int64_t n, float keep,
                                                           acc_t<T> scale, at::PhiloxCudaState philox) {
  using A = acc_t<T>;
  const auto seeds = at::cuda::philox::unpack(philox);
  const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x * 4;
  curandStatePhilox4_32_10_t state;
  curand_init(std::get<0>(seeds), tid, std::get<1>(seeds), &state);
  for (int64_t base = tid * 4; base < n; base += stride) {
    const float4 r = curand_uniform4(&state);  // (0, 1]
    const float u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t i = base + k;
      if (i < n) {
        const bool kept = u[k] < keep;
        mask[i] = kept;
        y[i] = kept ? static_cast<T>(static_cast<A>(x[i]) * scale) : T(0);
      }
    }
  }
}

// g * (mask * scale), as ATen: a dropped Inf or NaN gradient stays NaN, not 0
template <typename T>
__global__ void __launch_bounds__(kThreads) dropout_backward_kernel(const T* __restrict__ g,
                                                                    const bool* __restrict__ mask, T* __restrict__ gx,
                                                                    int64_t n, acc_t<T> s) {
  using A = acc_t<T>;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    gx[i] = static_cast<T>(static_cast<A>(g[i]) * (mask[i] ? s : A(0)));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> dropout(const at::Tensor& input, double p, bool train,
                                           const c10::optional<at::Generator>& generator) {
  const char* op = "mytorch::dropout";
  dropout::check_forward(op, input, p);
  check_cuda(op, "input", input);
  c10::cuda::CUDAGuard guard(input.device());
  at::Tensor x = input.contiguous();
  at::Tensor mask = aten::empty(x.sizes(), x.options().dtype(at::kBool));
  at::Tensor y = aten::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n = x.numel();
  if (n == 0) return {y, mask};
  auto stream = at::cuda::getCurrentCUDAStream();
  if (!train || p == 0.0) {  // bool true is the byte 1
    C10_CUDA_CHECK(cudaMemsetAsync(mask.mutable_data_ptr(), 1, n, stream));
    C10_CUDA_CHECK(cudaMemcpyAsync(y.mutable_data_ptr(), x.const_data_ptr(), n * x.element_size(),
                                   cudaMemcpyDeviceToDevice, stream));
    return {y, mask};
  }
  const int grid = grid_for(ceil_div(n, 4), kThreads);
  // draws per thread: four per group of four elements it handles
  const uint64_t per_thread = 4 * (uint64_t)ceil_div(n, (int64_t)grid * kThreads * 4);
  auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      generator, at::cuda::detail::getDefaultCUDAGenerator(input.device().index()));
  at::PhiloxCudaState philox;
  {
    std::lock_guard<std::mutex> lock(gen->mutex_);
    philox = gen->philox_cuda_state(per_thread);
  }
  const double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_dropout_cuda", [&] {
    using T = scalar_t;
    dropout_kernel<T><<<grid, kThreads, 0, stream>>>(x.const_data_ptr<T>(), y.mutable_data_ptr<T>(),
                                                     mask.mutable_data_ptr<bool>(), n, (float)(1.0 - p),
                                                     static_cast<acc_t<T>>(scale), philox);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return {y, mask};
}

at::Tensor dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  const char* op = "mytorch::dropout_backward";
  dropout::check_backward(op, grad, mask);
  check_cuda(op, "grad", grad);
  c10::cuda::CUDAGuard guard(grad.device());
  at::Tensor g = grad.contiguous(), m = mask.contiguous();
  at::Tensor gx = aten::empty_like(g, at::MemoryFormat::Contiguous);
  const int64_t n = g.numel();
  if (n == 0) return gx;
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, g.scalar_type(), "mytorch_dropout_bwd_cuda", [&] {
    using T = scalar_t;
    dropout_backward_kernel<T><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        g.const_data_ptr<T>(), m.const_data_ptr<bool>(), gx.mutable_data_ptr<T>(), n,
        static_cast<acc_t<T>>(scale));
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return gx;
}

}  // namespace cuda
}  // namespace mytorch
