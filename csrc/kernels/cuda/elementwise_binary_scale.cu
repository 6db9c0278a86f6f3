// scale_ (CUDA), the elementwise_binary family's in-place self *= scale for a one-element scale:
// the scale is read on the device, and every block returns at once when it is 1 (no host sync),
// so that the fused linear + cross-entropy backward costs nothing for a loss gradient of 1.
#include <ATen/cuda/CUDAContext.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/elementwise.h"

namespace mytorch {
namespace cuda {
namespace {

// x *= *scale over n elements, skipped by every block when *scale is 1 (no host sync).
template <typename T, typename P>
__global__ void scale_kernel(T* x, int64_t n, const float* __restrict__ scale) {
  const float g = *scale;
  if (g == 1.f) return;
  const int64_t nv = n / P::N;
  for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < nv; j += (int64_t)gridDim.x * blockDim.x) {
    P v;
    v.load(x + j * P::N);
    v.map([&](float f, int) { return f * g; }).store(x + j * P::N);
  }
  for (int64_t i = nv * P::N + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    x[i] = (T)((float)x[i] * g);
}

}  // namespace

void scale_(const at::Tensor& self, const at::Tensor& scale) {
  const char* op = "mytorch::scale_";
  check_cuda(op, "self", self);
  check_cuda_float(op, "self", self);
  check_dtype(op, "scale", scale, {at::kFloat, at::kBFloat16, at::kHalf, at::kDouble});
  TORCH_CHECK(scale.numel() == 1, op, ": expected a one-element scale, got shape ", scale.sizes());
  check_same_device(op, self, "self", scale, "scale");
  if (self.numel() == 0) return;
  c10::cuda::CUDAGuard guard(self.device());
  at::Tensor g = scale.reshape({1}).to(at::kFloat);
  at::Tensor c = self.is_contiguous() ? self : self.contiguous();
  const int64_t n = c.numel();
  auto stream = at::cuda::getCurrentCUDAStream();
  MYTORCH_DISPATCH_CUDA_FLOAT(self.scalar_type(), "mytorch_scale_cuda", [&] {
    using T = scalar_t;
    T* p = c.mutable_data_ptr<T>();
    const bool vec = aligned16(p);
    const int64_t items = vec ? n / Words<T>::N + 1 : n;
    const int64_t grid = std::max<int64_t>(1, std::min<int64_t>((items + 255) / 256, (int64_t)num_sms() * 8));
    auto k = vec ? scale_kernel<T, Words<T>> : scale_kernel<T, One<T>>;
    k<<<grid, 256, 0, stream>>>(p, n, g.const_data_ptr<float>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (!c.is_same(self)) self.copy_(c);
}

}  // namespace cuda
}  // namespace mytorch
