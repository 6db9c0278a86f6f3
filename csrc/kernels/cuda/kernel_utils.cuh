// Helpers of the loss, embedding, dropout and optimizer-step kernels (CUDA):
// accurate exp/log (--use_fast_math, where a build sets it, turns expf/logf into
// the approximate intrinsics), IEEE-rounded division and sqrt, block reductions
// in any accumulation type, a deterministic two-stage sum, and a device flag that
// reports the first out-of-range index back to the host.
#pragma once
#include <ATen/OpMathType.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/common.cuh"

namespace mytorch {
namespace cuda {

template <typename T>
using acc_t = at::opmath_type<T>;  // float for float/half/bfloat16, double for double

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over n items, `per_block` items per block.
inline int grid_for(int64_t n, int64_t per_block) {
  const int64_t cap = (int64_t)num_sms() * 32;
  return (int)std::max<int64_t>(1, std::min(ceil_div(n, per_block), cap));
}

// ---- accurate math ----
// e^x as the CPU kernels' vec_math.h: x = n*ln2 + r, |r| <= ln2/2, a degree-6
// polynomial for e^r, a scale by 2^n (two factors, so n = 128 overflows to inf).
// ~2 ulp; results below FLT_MIN are 0.
__device__ __forceinline__ float exp_acc(float x) {
  if (isnan(x)) return x;
  if (x < -87.33f) return 0.f;
  if (x > 88.8f) return INFINITY;
  const float n = rintf(x * 1.44269504088896341f);
  float r = fmaf(-n, 0.693359375f, x);
  r = fmaf(-n, -2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  p = fmaf(p, r * r, r + 1.f);
  const int e = (int)n, e1 = e >> 1, e2 = e - e1;  // e in [-126, 128]
  return p * __int_as_float((e1 + 127) << 23) * __int_as_float((e2 + 127) << 23);
}
__device__ __forceinline__ double exp_acc(double x) { return exp(x); }  // double math is exact-rounding

// log through double (correctly rounded to float); used once per row.
__device__ __forceinline__ float log_acc(float x) { return (float)log((double)x); }
__device__ __forceinline__ double log_acc(double x) { return log(x); }

__device__ __forceinline__ float max_nan_skip(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double max_nan_skip(double a, double b) { return fmax(a, b); }

// ---- block reductions in type A; every thread gets the result ----
// `buf` holds >= 33 values; safe to call repeatedly with the same buffer.
template <typename A, typename Op>
__device__ __forceinline__ A block_reduce(A v, A* buf, A identity, Op op) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A w = lane < nwarps ? buf[lane] : identity;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) w = op(w, __shfl_xor_sync(0xffffffffu, w, o));
    if (lane == 0) buf[32] = w;
  }
  __syncthreads();
  return buf[32];
}

struct SumOp {
  template <typename A>
  __device__ A operator()(A a, A b) const { return a + b; }
};
struct MaxOp {  // skips NaN, as std::max(m, x) over a row
  template <typename A>
  __device__ A operator()(A a, A b) const { return max_nan_skip(a, b); }
};

template <typename A>
__device__ __forceinline__ A block_sum_t(A v, A* buf) { return block_reduce(v, buf, A(0), SumOp{}); }
template <typename A>
__device__ __forceinline__ A block_max_t(A v, A* buf) { return block_reduce(v, buf, A(-INFINITY), MaxOp{}); }

// ---- deterministic two-stage sum of K values per item, in double ----
// Stage 1: f(i, acc) adds item i's K values into acc; each block writes K partials.
// Stage 2: one block adds the partials and calls fin(sums). The grid depends only
// on n, so the result is the same on every run.
constexpr int kSumThreads = 256;
constexpr int kSumMaxBlocks = 512;

template <int K>
__device__ __forceinline__ void block_sum_k(double (&v)[K], double* buf) {
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = block_sum_t<double>(v[k], buf);
}

template <int K, typename F>
__global__ void __launch_bounds__(kSumThreads) partial_sums_kernel(F f, int64_t n, double* __restrict__ partial) {
  __shared__ double buf[33];
  double acc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = 0.0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    f(i, acc);
  block_sum_k<K>(acc, buf);
  if (threadIdx.x == 0)
#pragma unroll
    for (int k = 0; k < K; ++k) partial[blockIdx.x * K + k] = acc[k];
}

template <int K, typename Fin>
__global__ void __launch_bounds__(kSumThreads) finish_sums_kernel(const double* __restrict__ partial, int parts,
                                                                  Fin fin) {
  __shared__ double buf[33];
  double acc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = 0.0;
  for (int p = threadIdx.x; p < parts; p += blockDim.x)
#pragma unroll
    for (int k = 0; k < K; ++k) acc[k] += partial[p * K + k];
  block_sum_k<K>(acc, buf);
  if (threadIdx.x == 0) fin(acc);
}

// Runs both stages on the current stream (also for n == 0: fin then sees zeros).
template <int K, typename F, typename Fin>
void sum_then(int64_t n, const F& f, const Fin& fin, const at::Tensor& like) {
  const int blocks = (int)std::max<int64_t>(1, std::min<int64_t>(ceil_div(n, kSumThreads * 4), kSumMaxBlocks));
  at::Tensor partial = aten::empty({(int64_t)blocks * K}, like.options().dtype(at::kDouble));
  auto stream = at::cuda::getCurrentCUDAStream();
  partial_sums_kernel<K><<<blocks, kSumThreads, 0, stream>>>(f, n, partial.mutable_data_ptr<double>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  finish_sums_kernel<K><<<1, kSumThreads, 0, stream>>>(partial.const_data_ptr<double>(), blocks, fin);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace mytorch
