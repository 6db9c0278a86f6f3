// Cross-entropy's one pass for rows of 16-byte vectors longer than 64 KB (sm_90+): the streamed
// cluster form. One row per cluster of 2-8 blocks; block r holds its slice of the row (at most
// 64 KB, three blocks a multiprocessor) in shared memory, filled by bulk copies in two chunks,
// each with an mbarrier. The second pass hands each chunk back as soon as every thread has
// read it, and the same chunk of the cluster's next row is copied in at once: the next row's
// reads are in flight while this row's gradient is written, and nothing is read twice.
#include <ATen/cuda/CUDAContext.h>
#include <cooperative_groups.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/loss_one_pass.cuh"
#include "kernels/cuda/loss_row.cuh"

namespace mytorch {
namespace cuda {
namespace {

using namespace ce;

constexpr int kStreamThreads = 256;
constexpr int kStreamChunks = 2;                 // bulk copies (and mbarriers) per slice
constexpr size_t kStreamSliceBytes = 64 * 1024;  // a block's share: three blocks a multiprocessor

// Block r of a cluster owns vectors [r * part, (r + 1) * part) of each row. Pass 1 folds each
// chunk into (max, sum of exp, sum) once its copy lands; the blocks swap their states through
// distributed shared memory (one cluster barrier, double-buffered by row parity as in the
// cluster form of loss_one_pass.cu); pass 2 writes the gradient from shared memory,
// and after a block barrier a chunk is refilled with the next row's. Chunk k's mbarrier
// completes once per row: row iteration i waits on parity i & 1. The target's owner takes its
// logit from shared memory before any refill (dlogits may be the logits).
template <typename T>
__global__ void __launch_bounds__(kStreamThreads) ce_fwd_bwd_stream_kernel(
    const T* logits, T* dlogits, const int64_t* __restrict__ target, float* __restrict__ lse_out,
    float* __restrict__ loss_out, const float* __restrict__ denom, int64_t rows, int64_t C, int64_t ignore_index,
    float smoothing, int part) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using P = Words<T>;
  constexpr int N = P::N, U = 4;  // vectors a thread folds / converts at once
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank(), ranks = (int)cluster.num_blocks();
  __shared__ float buf[2 * 32 * 3];
  __shared__ float posted[2][3];
  __shared__ __align__(8) uint64_t landed[kStreamChunks];
  extern __shared__ __align__(128) uint4 slice_raw[];  // bulk copies land on 128-byte lines
  P* slice = reinterpret_cast<P*>(slice_raw);
  const int64_t nv = C / N;
  const int64_t lo = std::min<int64_t>(nv, (int64_t)rank * part);  // first vector of the slice
  const int n = (int)(std::min<int64_t>(nv, lo + part) - lo);
  const int chunk = (n + kStreamChunks - 1) / kStreamChunks;
  const uint64_t drop = l2_evict_first();
  const float scale = denom ? 1.f / *denom : 1.f;
  const float off = smoothing / (float)C, hit = 1.f - smoothing;
  const float identity[3] = {-INFINITY, 0.f, 0.f};
  auto bounds = [&](int k) { return std::make_pair(k * chunk, std::min(n, (k + 1) * chunk)); };
  auto fetch = [&](int64_t row, int k) {  // one thread
    const auto [a, b] = bounds(k);
    if (b > a)
      bulk_copy_to_shared(slice + a, logits + row * C + (lo + a) * N, (uint32_t)(b - a) * 16u, &landed[k], drop);
  };
  const int64_t first = blockIdx.x / ranks, step = gridDim.x / ranks;
  if (threadIdx.x == 0) {
    for (int k = 0; k < kStreamChunks; ++k) mbarrier_init(&landed[k], 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0 && first < rows)
    for (int k = 0; k < kStreamChunks; ++k) fetch(first, k);
  int phase = 0, parity = 0;
  for (int64_t row = first; row < rows; row += step, parity ^= 1) {
    LseRun run;
    for (int k = 0; k < kStreamChunks; ++k) {
      const auto [a, b] = bounds(k);
      if (b <= a) break;
      mbarrier_wait(&landed[k], parity);
      for (int j0 = a + threadIdx.x; j0 < b; j0 += U * kStreamThreads) {
        P v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int j = j0 + u * kStreamThreads;
          if (j < b) v[u] = slice[j];
          else v[u].fill(-INFINITY);
        }
        run.fold<T>(v, batch_size<U>(j0, kStreamThreads, b), smoothing > 0.f);
      }
    }
    block_allreduce<3>(run.st, identity, buf, phase, LseMerge{});
    const ClusterTarget tg(target[row], ignore_index, C, lo * N, (int64_t)n * N, rank);
    const float xt = threadIdx.x == 0 && tg.reads_logit() ? slice[tg.col / N].get((int)(tg.col % N)) : 0.f;
    const float lse = cluster_lse_and_loss(cluster, posted, parity, run.st, tg, xt, hit, smoothing, C,
                                           lse_out + row, loss_out + row);
    const RowGrad<T> grad(lse, tg.ignored ? -1 : tg.col, N, tg.bad ? NAN : scale, off, hit);
    T* dr = dlogits + row * C + lo * N;
    const int64_t next = row + step;
    for (int k = 0; k < kStreamChunks; ++k) {
      const auto [a, b] = bounds(k);
      if (b <= a) break;
      for (int j0 = a + threadIdx.x; j0 < b; j0 += U * kStreamThreads) {
        P v[U];
#pragma unroll
        for (int u = 0; u < U; ++u)
          if (j0 + u * kStreamThreads < b) v[u] = slice[j0 + u * kStreamThreads];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int j = j0 + u * kStreamThreads;
          if (j >= b) break;
          const P o = tg.ignored ? zeros<P>() : grad(v[u], j);  // ignored rows: exact zeros
          store_hint(dr + (int64_t)j * N, o, drop);
        }
      }
      __syncthreads();  // every thread has read chunk k
      if (threadIdx.x == 0 && next < rows) {
        bulk_copy_fence();
        fetch(next, k);
      }
    }
  }
  cluster.sync();  // no block leaves while another may still read its posted state
#endif
}

}  // namespace

// H100, the op alone (CUDA graph), 8192 rows (4096 at 256000 and fp32), % of the copy bandwidth,
// streamed against the block form: 131072 bf16 91.8 / 86.2, 128256 bf16 90.4 / 86.2, 50304 bf16
// 88.3 / 82.4, 256000 bf16 88.7 / 76.0, 131072 fp32 93.3 / 76.7; 65536 bf16 91.4 / 94.3, where
// the block form holds the row whole and its loads come out even. A standalone port measured
// slices of 32 KB (8 blocks) or 128 KB 2-12 points lower at 128k bf16, and a slice 16-byte but
// not 128-byte aligned in shared memory made the op 10-12% slower. Rows of 64 KB or less keep the
// block form.
bool launch_ce_fwd_bwd_stream(const at::Tensor& logits, at::Tensor& dlogits, const at::Tensor& target,
                              at::Tensor& lse, at::Tensor& loss_rows, const at::Tensor* denom, int64_t ignore_index,
                              double smoothing) {
  const int64_t rows = logits.size(0), C = logits.size(1);
  const size_t row_bytes = (size_t)C * logits.element_size();
  if (rows == 0 || at::cuda::getCurrentDeviceProperties()->major < 9 || row_bytes <= kStreamSliceBytes) return false;
  bool launched = false;
  MYTORCH_DISPATCH_CUDA_FLOAT(logits.scalar_type(), "mytorch_ce_fwd_bwd_stream_cuda", [&] {
    using T = scalar_t;
    const T* xp = logits.const_data_ptr<T>();
    T* dp = dlogits.data_ptr() == logits.data_ptr() ? const_cast<T*>(xp) : dlogits.mutable_data_ptr<T>();
    if (C % Words<T>::N != 0 || !aligned16(xp) || !aligned16(dp)) return;
    const int64_t nv = C / Words<T>::N;
    // the fewest blocks with slices of at most 64 KB; past 8 blocks, 8 with bigger slices
    const int ranks = (int)std::min<int64_t>(kMaxClusterBlocks, (row_bytes + kStreamSliceBytes - 1) / kStreamSliceBytes);
    const int part = (int)((nv + ranks - 1) / ranks);
    const size_t smem = (size_t)part * 16;
    if (smem + 2048 > max_block_smem()) return;  // static buffers, per-block reserve
    auto k = ce_fwd_bwd_stream_kernel<T>;
    ClusterLaunch launch(k, ranks, kStreamThreads, smem);
    if (launch.fit == 0) return;
    launch.cfg.gridDim = dim3((unsigned)(std::min<int64_t>(rows, launch.fit) * ranks));
    C10_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, k, xp, dp, target.const_data_ptr<int64_t>(),
                                      lse.mutable_data_ptr<float>(), loss_rows.mutable_data_ptr<float>(),
                                      denom ? denom->const_data_ptr<float>() : nullptr, rows, C, ignore_index,
                                      (float)smoothing, part));
    launched = true;
  });
  return launched;
}

}  // namespace cuda
}  // namespace mytorch
