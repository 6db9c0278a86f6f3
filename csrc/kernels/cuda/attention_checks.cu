// The value checks of a varlen attention call's cu_seqlens, on the device.
//
// check_cu in kernels/attention_checks.h checks offsets that live in host memory (CPU, the
// mytorch device). CUDA offsets are checked here by one single-block kernel on the stream,
// with no host read, as ATen checks indices. For a bad value it prints the op, the array, the
// index and the expected range, then stops the stream with a device-side assert. A CUDA graph
// can capture it.
#include <ATen/cuda/CUDAContext.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace mytorch {
namespace cuda {
namespace {

struct CuSeqlensCheck {
  char op[64];  // the op's name, held in the kernel's parameters (readable on the device)
};

// One offset array: cu[0] == 0, never decreasing, cu[n-1] == total, no sequence longer
// than max_seqlen. name is 'q' or 'k'. Prints each value that breaks a rule; returns
// whether none did.
__device__ bool check_offsets(const CuSeqlensCheck& c, char name, const int* cu, int64_t stride, int64_t n,
                              int64_t total, int64_t max_seqlen) {
  bool ok = true;
  if (threadIdx.x == 0) {
    const int first = cu[0];
    if (first != 0) {
      printf("%s: expected cu_seqlens_%c to start at 0 and never decrease, got cu_seqlens_%c[0] = %d\n", c.op,
             name, name, first);
      ok = false;
    }
    const int last = cu[(n - 1) * stride];
    if (last != total) {
      printf("%s: expected cu_seqlens_%c[-1] == %c.shape[0], got %d and %lld\n", c.op, name, name, last,
             (long long)total);
      ok = false;
    }
  }
  for (int64_t i = 1 + threadIdx.x; i < n; i += blockDim.x) {
    const int prev = cu[(i - 1) * stride], cur = cu[i * stride];
    if (cur < prev) {
      printf("%s: expected cu_seqlens_%c to start at 0 and never decrease, got cu_seqlens_%c[%lld] = %d after %d\n",
             c.op, name, name, (long long)i, cur, prev);
      ok = false;
    } else if (cur - prev > max_seqlen) {
      printf("%s: expected max_seqlen_%c >= the longest sequence, got %lld < %d (sequence %lld)\n", c.op, name,
             (long long)max_seqlen, cur - prev, (long long)(i - 1));
      ok = false;
    }
  }
  return ok;
}

__global__ void check_cu_seqlens_kernel(CuSeqlensCheck c, const int* cu_q, int64_t stride_q, const int* cu_k,
                                        int64_t stride_k, int64_t n, int64_t total_q, int64_t total_k,
                                        int64_t max_q, int64_t max_k) {
  const bool q_ok = check_offsets(c, 'q', cu_q, stride_q, n, total_q, max_q);
  const bool k_ok = check_offsets(c, 'k', cu_k, stride_k, n, total_k, max_k);
  const bool cu_seqlens_valid = q_ok && k_ok;  // both arrays reported before the assert
  CUDA_KERNEL_ASSERT(cu_seqlens_valid);
}

}  // namespace

void check_cu_seqlens_on_device(const char* op, const Tensor& cu_q, const Tensor& cu_k, int64_t total_q,
                                int64_t total_k, int64_t max_seqlen_q, int64_t max_seqlen_k) {
  // the shape checks (check_cu, check_cu_pair) ran first: 1-D int32, batch + 1 >= 1 each, one length
  CuSeqlensCheck c;
  std::snprintf(c.op, sizeof(c.op), "%s", op);
  const int64_t n = cu_q.numel();
  const int threads = (int)std::min<int64_t>(256, round_up(std::max<int64_t>(n, 1), 32));
  check_cu_seqlens_kernel<<<1, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      c, cu_q.const_data_ptr<int>(), cu_q.stride(0), cu_k.const_data_ptr<int>(), cu_k.stride(0), n, total_q,
      total_k, max_seqlen_q, max_seqlen_k);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace mytorch
