// Embedding lookup and its dense backward (CUDA), as kernels/cpu/embedding.cpp.
//
// Forward copies rows (any weight strides). Backward scatters each position's
// gradient row into its weight row with atomicAdd (fp32 accumulation for
// half/bfloat16, then one cast), then scales by 1/count with scale_grad_by_freq;
// the padding_idx row stays zero. The order of the atomic adds varies, so float
// results can differ in the last bits between runs.
// Indices are checked in the kernels (IndexCheck): an out-of-range one is not read; the
// kernel prints it with the valid range and asserts on the device, so nothing is read back
// on the host.
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/embedding.h"

namespace mytorch {
namespace cuda {
namespace {

// Rows of the block: blockDim.y rows at a time, blockDim.x threads along D.
dim3 row_block(int64_t D) {
  const int tx = (int)std::min<int64_t>(256, std::max<int64_t>(32, round_up(D, 32)));
  return dim3(tx, 256 / tx);
}

int row_grid(int64_t n, const dim3& block) { return grid_for(n, block.y); }

// out[i, :] = w[idx[i], :]
template <typename T, typename I>
__global__ void embedding_kernel(const T* __restrict__ w, int64_t sw0, int64_t sw1, const I* __restrict__ idx,
                                 T* __restrict__ out, int64_t n, int64_t D, int64_t V, IndexCheck check) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; i < n; i += (int64_t)gridDim.x * blockDim.y) {
    const int64_t r = static_cast<int64_t>(idx[i]);
    if (r < 0 || r >= V) {
      if (threadIdx.x == 0) check.fail(r, V);
      continue;
    }
    const T* src = w + r * sw0;
    T* dst = out + i * D;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) dst[j] = src[j * sw1];
  }
}

__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) { atomicAdd(p, v); }

// acc[idx[i], :] += g[i, :] (padding_idx skipped); counts[idx[i]] += 1 when counting.
template <typename T, typename I>
__global__ void embedding_scatter_kernel(const T* __restrict__ g, const I* __restrict__ idx,
                                         acc_t<T>* __restrict__ acc, unsigned long long* __restrict__ counts,
                                         int64_t n, int64_t D, int64_t V, int64_t padding_idx,
                                         IndexCheck check) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; i < n; i += (int64_t)gridDim.x * blockDim.y) {
    const int64_t r = static_cast<int64_t>(idx[i]);
    if (r < 0 || r >= V) {
      if (threadIdx.x == 0) check.fail(r, V);
      continue;
    }
    if (r == padding_idx) continue;
    if (counts && threadIdx.x == 0) atomicAdd(counts + r, 1ull);
    const T* src = g + i * D;
    acc_t<T>* dst = acc + r * D;
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x) atomic_add(dst + j, static_cast<acc_t<T>>(src[j]));
  }
}

// gw[r, :] = acc[r, :] * (counts ? 1 / counts[r] : 1); padding_idx and unused rows: 0.
// acc may be gw itself (float, double).
template <typename T>
__global__ void embedding_finish_kernel(const acc_t<T>* acc, const unsigned long long* __restrict__ counts, T* gw,
                                        int64_t V, int64_t D, int64_t padding_idx) {
  using A = acc_t<T>;
  for (int64_t r = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; r < V; r += (int64_t)gridDim.x * blockDim.y) {
    const unsigned long long cnt = counts ? counts[r] : 1ull;
    const bool zero = r == padding_idx || cnt == 0;
    const A s = counts && !zero ? div_rn(A(1), A(cnt)) : A(1);
    for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
      gw[r * D + j] = zero ? T(0) : static_cast<T>(acc[r * D + j] * s);
  }
}

}  // namespace

at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices, int64_t padding_idx) {
  const char* op = "mytorch::embedding";
  check_floating(op, "weight", weight);
  embedding::check_padding_idx(op, weight, padding_idx);
  check_same_device(op, weight, "weight", indices, "indices");
  check_cuda(op, "weight", weight);
  embedding::check_indices_dtype(op, indices);
  c10::cuda::CUDAGuard guard(weight.device());
  at::Tensor ic = indices.contiguous();
  const int64_t n = ic.numel(), V = weight.size(0), D = weight.size(1);
  at::Tensor out = aten::empty(embedding::out_shape(indices, D),
                               weight.options().memory_format(at::MemoryFormat::Contiguous));
  if (n == 0) return out;
  const IndexCheck check(op, "index");
  const dim3 block = row_block(D);
  auto stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, weight.scalar_type(), "mytorch_embedding_cuda", [&] {
    using T = scalar_t;
    const T* wp = weight.const_data_ptr<T>();
    if (ic.scalar_type() == at::kLong)
      embedding_kernel<T, int64_t><<<row_grid(n, block), block, 0, stream>>>(
          wp, weight.stride(0), weight.stride(1), ic.const_data_ptr<int64_t>(), out.mutable_data_ptr<T>(), n, D, V,
          check);
    else
      embedding_kernel<T, int32_t><<<row_grid(n, block), block, 0, stream>>>(
          wp, weight.stride(0), weight.stride(1), ic.const_data_ptr<int32_t>(), out.mutable_data_ptr<T>(), n, D, V,
          check);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor embedding_backward(const at::Tensor& grad, const at::Tensor& indices, int64_t num_weights,
                              int64_t padding_idx, bool scale_grad_by_freq) {
  const char* op = "mytorch::embedding_backward";
  embedding::check_backward(op, grad, indices, num_weights);
  embedding::check_indices_dtype(op, indices);
  check_cuda(op, "grad", grad);
  c10::cuda::CUDAGuard guard(grad.device());
  at::Tensor ic = indices.contiguous(), g = grad.contiguous();
  const int64_t n = ic.numel(), D = grad.size(-1), V = num_weights;
  auto opts = grad.options().memory_format(at::MemoryFormat::Contiguous);
  at::Tensor gw;
  try {
    gw = aten::empty({V, D}, opts);
  } catch (const std::exception& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, op, ": cannot allocate the gradient of shape [", V, ", ", D,
                     "] for num_weights=", num_weights, ": ", e.what());
  }
  auto stream = at::cuda::getCurrentCUDAStream();
  const bool direct = grad.scalar_type() == at::kFloat || grad.scalar_type() == at::kDouble;  // acc is gw
  at::Tensor acc = direct ? gw : aten::empty({V, D}, opts.dtype(at::kFloat));
  if (acc.numel() > 0)
    C10_CUDA_CHECK(cudaMemsetAsync(acc.mutable_data_ptr(), 0, acc.nbytes(), stream));  // +0.0
  at::Tensor counts;
  if (scale_grad_by_freq && V > 0) {
    counts = aten::empty({V}, grad.options().dtype(at::kLong));
    C10_CUDA_CHECK(cudaMemsetAsync(counts.mutable_data_ptr(), 0, counts.nbytes(), stream));
  }
  unsigned long long* cp = counts.defined() ? reinterpret_cast<unsigned long long*>(counts.data_ptr()) : nullptr;
  const dim3 block = row_block(D);
  if (n > 0) {  // also with D == 0: the indices are checked
    const IndexCheck check(op, "index");
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad.scalar_type(), "mytorch_embedding_bwd_cuda", [&] {
      using T = scalar_t;
      using A = acc_t<T>;
      A* ap = static_cast<A*>(acc.data_ptr());
      if (ic.scalar_type() == at::kLong)
        embedding_scatter_kernel<T, int64_t><<<row_grid(n, block), block, 0, stream>>>(
            g.const_data_ptr<T>(), ic.const_data_ptr<int64_t>(), ap, cp, n, D, V, padding_idx, check);
      else
        embedding_scatter_kernel<T, int32_t><<<row_grid(n, block), block, 0, stream>>>(
            g.const_data_ptr<T>(), ic.const_data_ptr<int32_t>(), ap, cp, n, D, V, padding_idx, check);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  if (gw.numel() > 0 && (!direct || cp)) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad.scalar_type(), "mytorch_embedding_bwd_cuda", [&] {
      using T = scalar_t;
      embedding_finish_kernel<T><<<row_grid(V, block), block, 0, stream>>>(
          static_cast<const acc_t<T>*>(acc.const_data_ptr()), cp, gw.mutable_data_ptr<T>(), V, D, padding_idx);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return gw;
}

}  // namespace cuda
}  // namespace mytorch
