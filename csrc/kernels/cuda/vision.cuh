// Shared pieces of the GEMM and vision CUDA kernels (gemm, conv, pool, batchnorm,
// upsample): grid-stride launch sizes, block sums in any accumulation type,
// IEEE-exact arithmetic (unchanged by --use_fast_math, so index math matches the
// CPU kernels bit for bit) and the choice of 32- or 64-bit indexing.
#pragma once
#include <climits>
#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace mytorch {
namespace cuda {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n >= 1 items.
inline int blocks_for(int64_t n, int threads = kThreads) {
  const int64_t want = (n + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(num_sms()) * 64;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(want, cap)));
}

// Calls f(I{}) with I = int32_t when every index stays below `max_index` <= INT_MAX / 2
// (room for the grid stride), else with I = int64_t.
template <typename F>
void with_index_type(int64_t max_index, F&& f) {
  if (max_index <= INT_MAX / 2)
    f(int32_t{0});
  else
    f(int64_t{0});
}

// Grid-stride loop over [0, n) with index type I.
#define MYTORCH_GRID_LOOP(I, i, n)                                                       \
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) +                 \
             static_cast<I>(threadIdx.x);                                               \
       i < (n); i += static_cast<I>(blockDim.x) * static_cast<I>(gridDim.x))

// ---- sums in float or double ----
template <typename A>
__device__ __forceinline__ A warp_sum_acc(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block; every thread gets it. `buf` holds >= 33 values.
template <typename A>
__device__ __forceinline__ A block_sum_acc(A v, A* buf) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum_acc(v);
  __syncthreads();  // buf may still be read by a previous call
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A w = lane < nwarps ? buf[lane] : A(0);
    w = warp_sum_acc(w);
    if (lane == 0) buf[32] = w;
  }
  __syncthreads();
  return buf[32];
}

// Sets every element of a contiguous tensor to zero (all-zero bytes) on the current stream.
inline void zero_fill(const at::Tensor& t) {
  TORCH_INTERNAL_ASSERT(t.is_contiguous());
  if (t.numel() == 0) return;
  C10_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(), at::cuda::getCurrentCUDAStream()));
}

inline at::TensorOptions contiguous_options(const at::Tensor& t) {
  return t.options().memory_format(at::MemoryFormat::Contiguous);
}

}  // namespace cuda
}  // namespace mytorch
