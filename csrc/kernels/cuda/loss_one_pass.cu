// Cross-entropy's loss and gradient in one pass over the logits (CUDA): fused_cross_entropy_grad
// and each chunk of the fused linear + cross-entropy (the gradient written over the logits).
//
// The block form: one row per block, as much of the row held in shared memory as fits (the rest
// read twice); rows of 16-byte vectors longer than 64 KB take the streamed form on sm_90+
// (loss_stream.cu). The cluster form (sm_90+, rows of scalars, not 16-byte vectors): one row per
// cluster of 1-8 blocks, each holding its slice of the row in shared memory, so the logits are
// read once and the gradient written once; the blocks swap their partial log-sum-exp through
// distributed shared memory.
#include <ATen/cuda/CUDAContext.h>
#include <cooperative_groups.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/loss_one_pass.cuh"
#include "kernels/cuda/loss_row.cuh"

namespace mytorch {
namespace cuda {
namespace {

using namespace ce;

// The block form: forward and backward of a row in one kernel (dlogits may be the logits: the
// fused linear path writes over them), one to four blocks per multiprocessor. The first pass
// keeps the row's first `held` vectors in shared memory (the block's share: ~200 KB alone, 78%
// of a 128k-vocab bf16 row); the second pass reads them from there and the rest again from
// global memory, which few rows in flight leave in L2. Each thread reads back only the vectors
// it stored (no barrier). The gradient is for a loss gradient of 1 (divided by *denom when
// given). P: Words<T> (16-byte vectors, with the eviction policies above) or One<T>.
template <typename T, typename P>
__global__ void __launch_bounds__(1024) ce_fwd_bwd_kernel(const T* logits, T* dlogits,
                                                          const int64_t* __restrict__ target,
                                                          float* __restrict__ lse_out, float* __restrict__ loss_out,
                                                          const float* __restrict__ denom, int64_t rows, int64_t C,
                                                          int64_t ignore_index, float smoothing, int64_t held) {
  constexpr int U = 4;  // loads in flight per thread
  constexpr int N = P::N;
  __shared__ float buf[2 * 32 * 3];
  extern __shared__ uint4 held_raw[];
  P* held_row = reinterpret_cast<P*>(held_raw);
  const int64_t nv = C / N;
  const int step = blockDim.x;
  uint64_t keep = 0, drop = 0;
  if constexpr (N > 1) keep = l2_evict_last(), drop = l2_evict_first();
  const float scale = denom ? 1.f / *denom : 1.f;
  const float off = smoothing / (float)C, hit = 1.f - smoothing;
  const float identity[3] = {-INFINITY, 0.f, 0.f};
  int phase = 0;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = logits + row * C;
    T* dr = dlogits + row * C;
    LseRun run;
    for (int64_t j0 = threadIdx.x; j0 < nv; j0 += U * step) {
      P v[U];
      load_batch<T>(v, xr, j0, step, nv, keep);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t j = j0 + u * step;
        if (j < held) held_row[j] = v[u];
      }
      run.fold<T>(v, batch_size<U>(j0, step, nv), smoothing > 0.f);
    }
    block_allreduce<3>(run.st, identity, buf, phase, LseMerge{});
    const float lse = run.st[0] + __logf(run.st[1]);
    const int64_t t = target[row];
    const bool ignored = t == ignore_index;
    const bool bad = !ignored && (t < 0 || t >= C);  // check_targets has asserted on such a target: no read
    if (threadIdx.x == 0) {
      lse_out[row] = lse;
      loss_out[row] = bad ? NAN : ignored ? 0.f : lse - hit * (float)xr[t] - smoothing * run.st[2] / (float)C;
    }
    __syncthreads();  // thread 0 read xr[t] above; the pass below may overwrite the row
    const RowGrad<T> grad(lse, ignored ? -1 : t, N, bad ? NAN : scale, off, hit);
    for (int64_t j0 = threadIdx.x; j0 < nv; j0 += U * step) {
      P v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t j = j0 + u * step;
        if (j < held) v[u] = held_row[j];
        else if (j < nv && !ignored) {
          if constexpr (N > 1) load_hint(v[u], xr + j * N, drop);
          else v[u].load(xr + j);
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t j = j0 + u * step;
        if (j >= nv) break;
        const P o = ignored ? zeros<P>() : grad(v[u], j);  // ignored rows: exact zeros
        if constexpr (N > 1) store_hint(dr + j * N, o, drop);
        else o.store(dr + j);
      }
    }
  }
}

constexpr int kClusterThreads = 256;

// One row of scalars per cluster (sm_90+; the cluster size, 1-8 blocks, is the launch's). Block r
// of a cluster owns columns [r * part, (r + 1) * part) of each row: the first pass loads them into
// shared memory and folds them into (max, sum of exp, sum); the blocks post their states, one
// cluster barrier, and every block merges all of them (the same order everywhere, so the same
// lse); the second pass writes the gradient from shared memory. States are double-buffered by
// row parity: a block posts row i + 2's state only after the barrier of row i + 1, which every
// block reaches after reading row i's. The target's owner writes the loss, its logit taken from
// shared memory (dlogits may be the logits).
template <typename T>
__global__ void __launch_bounds__(kClusterThreads) ce_fwd_bwd_cluster_kernel(
    const T* logits, T* dlogits, const int64_t* __restrict__ target, float* __restrict__ lse_out,
    float* __restrict__ loss_out, const float* __restrict__ denom, int64_t rows, int64_t C, int64_t ignore_index,
    float smoothing, int64_t part) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  using P = One<T>;
  constexpr int U = 8;  // loads in flight per thread
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank(), ranks = (int)cluster.num_blocks();
  __shared__ float buf[2 * 32 * 3];
  __shared__ float posted[2][3];
  extern __shared__ uint4 held_raw[];
  P* held = reinterpret_cast<P*>(held_raw);
  const int64_t lo = std::min<int64_t>(C, rank * part);
  const int n = (int)(std::min<int64_t>(C, lo + part) - lo);
  const int step = blockDim.x;
  const float scale = denom ? 1.f / *denom : 1.f;
  const float off = smoothing / (float)C, hit = 1.f - smoothing;
  const float identity[3] = {-INFINITY, 0.f, 0.f};
  int phase = 0, parity = 0;
  for (int64_t row = blockIdx.x / ranks; row < rows; row += gridDim.x / ranks, parity ^= 1) {
    const T* xr = logits + row * C + lo;
    T* dr = dlogits + row * C + lo;
    LseRun run;
    for (int i0 = threadIdx.x; i0 < n; i0 += U * step) {
      P v[U];
      load_batch<T>(v, xr, i0, step, n, 0);
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (i0 + u * step < n) held[i0 + u * step] = v[u];
      run.fold<T>(v, batch_size<U>(i0, step, n), smoothing > 0.f);
    }
    block_allreduce<3>(run.st, identity, buf, phase, LseMerge{});  // a barrier: held[] is complete
    const ClusterTarget tg(target[row], ignore_index, C, lo, n, rank);
    const float xt = threadIdx.x == 0 && tg.reads_logit() ? held[tg.col].get(0) : 0.f;  // (before the barrier)
    const float lse = cluster_lse_and_loss(cluster, posted, parity, run.st, tg, xt, hit, smoothing, C,
                                           lse_out + row, loss_out + row);
    const RowGrad<T> grad(lse, tg.ignored ? -1 : tg.col, 1, tg.bad ? NAN : scale, off, hit);
    constexpr int U2 = 4;  // values a thread converts at once
    for (int i0 = threadIdx.x; i0 < n; i0 += U2 * step) {
      P v[U2];
#pragma unroll
      for (int u = 0; u < U2; ++u)
        if (i0 + u * step < n) v[u] = held[i0 + u * step];  // stored by this thread in the first pass
#pragma unroll
      for (int u = 0; u < U2; ++u) {
        const int i = i0 + u * step;
        if (i >= n) break;
        const P o = tg.ignored ? zeros<P>() : grad(v[u], i);  // ignored rows: exact zeros
        o.store(dr + i);
      }
    }
  }
  cluster.sync();  // no block leaves while another may still read its posted state
#endif
}

// 16-byte vectors when the rows are whole vectors and both pointers aligned.
template <typename T>
bool vector_rows(int64_t C, const T* xp, const T* dp) {
  return C % Words<T>::N == 0 && aligned16(xp) && aligned16(dp);
}

// The block form: 1024 threads per
// multiprocessor, the L2 policies, rows held in shared memory as far as a block's share goes.
// Measured: H100, the fused linear op (N 8192, H 4096, V 128k): one launch 38.9 ms against 40.9
// for separate forward and backward kernels (39.0 without the policies). H100, the op alone at
// 8192 x 128k bf16, one 1024-thread block: 1.86 ms holding ~200 KB of each row, 2.02 holding
// none, and 1.98 with 2 blocks of 512 (bench, another run). H200, 8192 rows: 1, 2, 4 blocks per
// multiprocessor 1.57-1.59 / 1.55 / 1.65 ms at 128k columns, 0.52-0.54 / 0.44 / 0.42 ms at 32k.
void launch_block_form(const at::Tensor& logits, at::Tensor& dlogits, const at::Tensor& target, at::Tensor& lse,
                       at::Tensor& loss_rows, const at::Tensor* denom, int64_t ignore_index, double smoothing) {
  int64_t rows = logits.size(0), C = logits.size(1);
  // rows of up to 64 KB: 4 blocks of 256 threads per multiprocessor; longer ones one of 1024
  const int per_sm = C * logits.element_size() <= 64 * 1024 ? 4 : 1;
  const int threads = 1024 / per_sm;
  auto stream = at::cuda::getCurrentCUDAStream();
  MYTORCH_DISPATCH_CUDA_FLOAT(logits.scalar_type(), "mytorch_ce_fwd_bwd_cuda", [&] {
    using T = scalar_t;
    const T* xp = logits.const_data_ptr<T>();
    T* dp = dlogits.data_ptr() == logits.data_ptr() ? const_cast<T*>(xp) : dlogits.mutable_data_ptr<T>();
    const bool vec = vector_rows<T>(C, xp, dp);
    auto k = vec ? ce_fwd_bwd_kernel<T, Words<T>> : ce_fwd_bwd_kernel<T, One<T>>;
    const size_t item = vec ? sizeof(Words<T>) : sizeof(T), items = vec ? C / Words<T>::N : C;
    const size_t sm_room = (size_t)at::cuda::getCurrentDeviceProperties()->sharedMemPerMultiprocessor / per_sm;
    const size_t block_room = std::min(max_block_smem(), sm_room);
    const size_t room = block_room > 2048 ? block_room - 2048 : 0;  // static buf, per-block reserve
    const int64_t held = (int64_t)std::min(items, room / item);
    const size_t smem = (size_t)held * item;
    if (smem > 48 * 1024) C10_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int fit = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, k, threads, smem));
    const int64_t grid = std::min<int64_t>(rows, (int64_t)std::max(fit, 1) * num_sms());
    k<<<grid, threads, smem, stream>>>(xp, dp, target.const_data_ptr<int64_t>(), lse.mutable_data_ptr<float>(),
                                    loss_rows.mutable_data_ptr<float>(),
                                    denom ? denom->const_data_ptr<float>() : nullptr, rows, C, ignore_index,
                                    (float)smoothing, held);
  });
}


// Blocks per multiprocessor the cluster form's slices are sized for: one block's loads overlap
// another's reductions and stores.
constexpr int kClusterBlocksPerSm = 3;

// The cluster form's blocks per row: the fewest (1-8) whose slices of `items` items of `bytes`
// each fit a block's share of shared memory; 0 when 8 do not, or before sm_90.
int cluster_blocks(int64_t items, size_t bytes) {
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  if (prop->major < 9) return 0;
  const size_t share = std::min(max_block_smem(), prop->sharedMemPerMultiprocessor / kClusterBlocksPerSm);
  const size_t room = share > 2048 ? share - 2048 : 0;  // static buffers, per-block reserve
  for (int r = 1; r <= kMaxClusterBlocks; ++r)
    if ((size_t)((items + r - 1) / r) * bytes <= room) return r;
  return 0;
}

// False (nothing launched) where no cluster of that shape fits the device at once.
template <typename T>
bool launch_cluster_form(const T* xp, T* dp, const at::Tensor& target, at::Tensor& lse, at::Tensor& loss_rows,
                         const at::Tensor* denom, int64_t rows, int64_t C, int64_t ignore_index, double smoothing,
                         int ranks) {
  auto k = ce_fwd_bwd_cluster_kernel<T>;
  const int64_t part = (C + ranks - 1) / ranks;
  ClusterLaunch launch(k, ranks, kClusterThreads, (size_t)part * sizeof(T));
  if (launch.fit == 0) return false;
  launch.cfg.gridDim = dim3((unsigned)(std::min<int64_t>(rows, launch.fit) * ranks));
  C10_CUDA_CHECK(cudaLaunchKernelEx(&launch.cfg, k, xp, dp, target.const_data_ptr<int64_t>(),
                                    lse.mutable_data_ptr<float>(), loss_rows.mutable_data_ptr<float>(),
                                    denom ? denom->const_data_ptr<float>() : nullptr, rows, C, ignore_index,
                                    (float)smoothing, part));
  return true;
}

}  // namespace

void launch_ce_fwd_bwd(const at::Tensor& logits, at::Tensor& dlogits, const at::Tensor& target, at::Tensor& lse,
                       at::Tensor& loss_rows, const at::Tensor* denom, int64_t ignore_index, double smoothing) {
  const int64_t rows = logits.size(0), C = logits.size(1);
  if (rows == 0) return;
  // rows of 16-byte vectors longer than 64 KB (sm_90+): the streamed form (loss_stream.cu)
  if (launch_ce_fwd_bwd_stream(logits, dlogits, target, lse, loss_rows, denom, ignore_index, smoothing)) {
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  int ranks = 0;
  MYTORCH_DISPATCH_CUDA_FLOAT(logits.scalar_type(), "mytorch_ce_fwd_bwd_cuda", [&] {
    using T = scalar_t;
    const T* xp = logits.const_data_ptr<T>();
    T* dp = dlogits.data_ptr() == logits.data_ptr() ? const_cast<T*>(xp) : dlogits.mutable_data_ptr<T>();
    // The cluster form takes rows of scalars (not 16-byte vectors): H100, 8192 x 50257 bf16, 1.10
    // ms against the block form's 1.38 (1024 threads with 4 scalar loads each in flight hold too
    // few bytes in flight). Rows of 16-byte vectors measured the same with it or slower (H100:
    // 0.98-1.04x at 32000-256000 bf16 columns, 0.94x at fp32 131072; H200, an earlier version:
    // 0.79x at 128k), so they keep the block form up to 64 KB and the streamed form beyond.
    if (vector_rows<T>(C, xp, dp)) return;
    ranks = cluster_blocks(C, sizeof(T));
    if (ranks > 0 &&
        !launch_cluster_form<T>(xp, dp, target, lse, loss_rows, denom, rows, C, ignore_index, smoothing, ranks))
      ranks = 0;
  });
  if (ranks == 0) launch_block_form(logits, dlogits, target, lse, loss_rows, denom, ignore_index, smoothing);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace cuda
}  // namespace mytorch
