// Input checks of the CUDA losses (loss.cu), with the messages of the CPU kernel
// (kernels/cpu/loss.cpp), and the device-side target check.
#pragma once
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/loss_checks.h"

namespace mytorch {
namespace cuda {
namespace loss {

// ---- input checks: the CPU kernel's (kernels/loss_checks.h) ----
using namespace mytorch::loss;

// ---- targets: checked (and widened to int64) on the device ----
template <typename I>
__global__ void check_targets_kernel(const I* __restrict__ t, int64_t* __restrict__ out, int64_t n, int64_t C,
                                     IndexCheck check) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t v = static_cast<int64_t>(t[i]);
    check.ok(v, C);
    if (out) out[i] = v;
  }
}

// Contiguous int64 targets; each one outside [0, C) and not ignore_index stops the
// kernel with a device-side assert (IndexCheck).
inline at::Tensor checked_targets(const char* op, const at::Tensor& target, int64_t C, int64_t ignore_index) {
  at::Tensor t = target.contiguous();
  const int64_t n = t.numel();
  if (n == 0) return t.to(at::kLong);
  const bool wide = t.scalar_type() == at::kLong;
  at::Tensor out = wide ? t : aten::empty(t.sizes(), t.options().dtype(at::kLong));
  const IndexCheck check(op, "target", ignore_index);
  const int threads = 256;
  auto stream = at::cuda::getCurrentCUDAStream();
  int64_t* widened = wide ? nullptr : out.mutable_data_ptr<int64_t>();
  AT_DISPATCH_SWITCH(t.scalar_type(), "mytorch_targets_cuda",
                     AT_DISPATCH_CASE(at::kLong, [&] {
                       check_targets_kernel<int64_t><<<grid_for(n, threads), threads, 0, stream>>>(
                           t.const_data_ptr<int64_t>(), widened, n, C, check);
                     }) AT_DISPATCH_CASE(at::kInt, [&] {
                       check_targets_kernel<int32_t><<<grid_for(n, threads), threads, 0, stream>>>(
                           t.const_data_ptr<int32_t>(), widened, n, C, check);
                     }) AT_DISPATCH_CASE(at::kByte, [&] {
                       check_targets_kernel<uint8_t><<<grid_for(n, threads), threads, 0, stream>>>(
                           t.const_data_ptr<uint8_t>(), widened, n, C, check);
                     }));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

}  // namespace loss
}  // namespace cuda
}  // namespace mytorch
