// The loss family's reductions on the device (CUDA), one launch each and no ATen op around the
// kernels: what a 'mean' divides by, and the summed loss divided by it in the loss's dtype.
// The cross-entropies of training call them on every step, where a chain of ATen ops (compare,
// sum, cast, divide, cast) would cost the host more than the kernels do.
//
// One block of kReduceThreads reads the whole vector: a training step's tokens (thousands to a
// few hundred thousand) take microseconds, and the sum has one fixed order (deterministic).
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/loss_reduce.h"

namespace mytorch {
namespace cuda {
namespace {

constexpr int kReduceThreads = 1024;

// *out = (count of t != ignore_index) * (*divisor, when given)
__global__ void __launch_bounds__(kReduceThreads)
    ce_count_kernel(const int64_t* __restrict__ t, int64_t n, int64_t ignore_index, const float* __restrict__ divisor,
                    float* __restrict__ out) {
  __shared__ long long buf[33];
  long long c = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) c += t[i] != ignore_index;
  c = block_sum<long long>(c, buf);
  if (threadIdx.x == 0) *out = (float)c * (divisor ? *divisor : 1.f);
}

// *out = sum(rows) / (*denom, when given), in T
template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    sum_div_kernel(const float* __restrict__ rows, int64_t n, const float* __restrict__ denom, T* __restrict__ out) {
  __shared__ float buf[33];
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += rows[i];
  s = block_sum<float>(s, buf);
  if (threadIdx.x == 0) *out = (T)(denom ? s / *denom : s);
}

}  // namespace

at::Tensor ce_denominator(at::Reduction::Reduction red, const at::Tensor& target, int64_t ignore_index,
                          const at::Tensor& divisor) {
  if (red != at::Reduction::Mean) return divisor;  // sum: the divisor alone (or nothing)
  at::Tensor out = aten::empty({}, target.options().dtype(at::kFloat));
  ce_count_kernel<<<1, kReduceThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      target.const_data_ptr<int64_t>(), target.numel(), ignore_index,
      divisor.defined() ? divisor.const_data_ptr<float>() : nullptr, out.mutable_data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor loss_total(const at::Tensor& loss_rows, const at::Tensor& denom, at::ScalarType dtype) {
  at::Tensor out = aten::empty({}, loss_rows.options().dtype(dtype));
  MYTORCH_DISPATCH_CUDA_FLOAT(dtype, "mytorch_loss_total", [&] {
    sum_div_kernel<scalar_t><<<1, kReduceThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        loss_rows.const_data_ptr<float>(), loss_rows.numel(), denom.defined() ? denom.const_data_ptr<float>() : nullptr,
        out.mutable_data_ptr<scalar_t>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace cuda
}  // namespace mytorch
