// Cross-entropy's loss and gradient in one pass over the logits (CUDA): fused_cross_entropy_grad
// and each chunk of the fused linear + cross-entropy (the gradient written over the logits).
//
// The block form: one row per block, as much of the row held in shared memory as fits (the rest
// read twice). The cluster form (sm_90+, rows of scalars, not 16-byte vectors): one row per
// cluster of 1-8 blocks, each holding its slice of the row in shared memory, so the logits are
// read once and the gradient written once; the blocks swap their partial log-sum-exp through
// distributed shared memory.
#include <ATen/cuda/CUDAContext.h>
#include <cooperative_groups.h>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cross_entropy.cuh"

namespace mytorch {
namespace cuda {
namespace {

// 16-byte loads and stores with an L2 eviction policy: the fused forward+backward reads a row
// (kept: evict_last), then re-reads it (evict_first) and writes its gradient (evict_first).
__device__ __forceinline__ uint64_t l2_evict_last() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ uint64_t l2_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
template <typename T>
__device__ __forceinline__ void load_hint(Words<T>& d, const T* p, uint64_t pol) {
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(d.w[0]), "=r"(d.w[1]), "=r"(d.w[2]), "=r"(d.w[3])
               : "l"(p), "l"(pol));
}
template <typename T>
__device__ __forceinline__ void store_hint(T* p, const Words<T>& v, uint64_t pol) {
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;" ::"l"(p), "r"(v.w[0]), "r"(v.w[1]),
               "r"(v.w[2]), "r"(v.w[3]), "l"(pol)
               : "memory");
}

constexpr float kLog2e = 1.4426950408889634f;

template <typename T>
__device__ __forceinline__ uint32_t max_pair(uint32_t a, uint32_t b) {
  uint32_t r;
  if constexpr (std::is_same<T, c10::BFloat16>::value) asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  else asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}

// The largest element of U vectors: 16-bit words compared in pairs across the vectors first.
template <typename T, int U>
__device__ __forceinline__ float batch_max(const Words<T> (&v)[U]) {
  if constexpr (sizeof(T) == 4) {
    float m = -INFINITY;
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < 4; ++k) m = fmaxf(m, v[u].get(k));
    return m;
  } else {
    Words<T> w = v[0];
#pragma unroll
    for (int u = 1; u < U; ++u)
#pragma unroll
      for (int j = 0; j < 4; ++j) w.w[j] = max_pair<T>(w.w[j], v[u].w[j]);
    w.w[0] = max_pair<T>(max_pair<T>(w.w[0], w.w[1]), max_pair<T>(w.w[2], w.w[3]));
    return fmaxf(w.get(0), w.get(1));
  }
}
template <typename T, int U>
__device__ __forceinline__ float batch_max(const One<T> (&v)[U]) {
  float m = -INFINITY;
#pragma unroll
  for (int u = 0; u < U; ++u) m = fmaxf(m, v[u].get(0));
  return m;
}

// Loads vectors i0, i0 + step, ... (U of them) of a row of n; those past the end hold -inf.
template <typename T, typename P, int U>
__device__ __forceinline__ void load_batch(P (&v)[U], const T* row, int64_t i0, int step, int64_t n, uint64_t pol) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = i0 + (int64_t)u * step;
    if (i < n) {
      if constexpr (P::N > 1) load_hint(v[u], row + i * P::N, pol);
      else v[u].load(row + i);
    } else {
      if constexpr (P::N > 1) v[u].fill(-INFINITY);
      else v[u].x = (T)-INFINITY;
    }
  }
}

// How many of vectors i0, i0 + step, ... (U of them) lie in a row of n.
template <int U>
__device__ __forceinline__ int batch_size(int64_t i0, int step, int64_t n) {
  int count = 0;
#pragma unroll
  for (int u = 0; u < U; ++u) count += i0 + (int64_t)u * step < n;
  return count;
}

// A thread's running (max m, sum of exp(x - m), sum of x) over its logits, a batch of vectors
// at a time: the batch's max first, then one rescale per batch and one exp per element.
struct LseRun {
  float st[3] = {-INFINITY, 0.f, 0.f};
  // The first `valid` of the U vectors are logits (the rest -inf fill).
  template <typename T, typename P, int U>
  __device__ __forceinline__ void fold(const P (&v)[U], int valid, bool smooth) {
    const float m = fmaxf(st[0], batch_max<T>(v));
    const float m0 = m == -INFINITY ? 0.f : m, m2 = m0 * kLog2e;  // all -inf so far: exp(-inf) = 0
    float acc = 0.f, sx = 0.f;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (u >= valid) break;
#pragma unroll
      for (int k = 0; k < P::N; ++k) {
        const float f = v[u].get(k);
        // 16-bit logits: one FMA; fp32 subtracts first (m2's rounding would scale each thread's
        // sum differently, up to ~|m| 1e-7)
        acc += fast_exp2(sizeof(T) == 4 ? (f - m0) * kLog2e : fmaf(f, kLog2e, -m2));
        if (smooth) sx += f;
      }
    }
    st[1] = (st[0] == -INFINITY ? 0.f : st[1] * fast_exp2((st[0] - m) * kLog2e)) + acc;
    st[0] = m;
    st[2] += sx;
  }
};

// (max, sum of exp(x - max), sum of x) of two disjoint parts of a row merged. Commutative, so
// every lane of a butterfly (and every block of a cluster) gets the same bits.
struct LseMerge {
  __device__ __forceinline__ void operator()(float (&a)[3], const float (&b)[3]) const {
    const float m = fmaxf(a[0], b[0]);
    a[1] = (a[0] == -INFINITY ? 0.f : a[1] * __expf(a[0] - m)) + (b[0] == -INFINITY ? 0.f : b[1] * __expf(b[0] - m));
    a[0] = m;
    a[2] += b[2];
  }
};

// A row's gradient, (softmax - (1 - eps) onehot - eps / C) * scale, one vector at a time:
// exp(x - lse) by one FMA and one EX2 (fp32: subtract first), then one FMA; the target's vector
// (jt, slot kt) subtracts (1 - eps) * scale from its slot.
template <typename T>
struct RowGrad {
  float lse, lse2, scale, off_scaled, hit_scaled;
  int64_t jt;
  int kt;
  __device__ __forceinline__ RowGrad(float lse_, int64_t t, int per_vec, float scale_, float off, float hit)
      : lse(lse_), lse2(lse_ * kLog2e), scale(scale_), off_scaled(off * scale_), hit_scaled(hit * scale_),
        jt(t >= 0 ? t / per_vec : -1), kt(t >= 0 ? (int)(t % per_vec) : -1) {}
  __device__ __forceinline__ float exp_lse(float x) const {
    return fast_exp2(sizeof(T) == 4 ? (x - lse) * kLog2e : fmaf(x, kLog2e, -lse2));
  }
  template <typename P>
  __device__ __forceinline__ P operator()(const P& v, int64_t j) const {
    if (j != jt) return v.map([&](float x, int) { return fmaf(exp_lse(x), scale, -off_scaled); });
    return v.map([&](float x, int k) {
      const float g = fmaf(exp_lse(x), scale, -off_scaled);
      return k == kt ? g - hit_scaled : g;
    });
  }
};

template <typename P>
__device__ __forceinline__ P zeros() {
  P z;
  if constexpr (P::N > 1) z.fill(0.f);
  else z.x = 0.f;
  return z;
}

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
    const bool bad = !ignored && (t < 0 || t >= C);  // only reachable where the host check is skipped
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
  const int step = blockDim.x, lane = threadIdx.x & 31;
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
    const int64_t t = target[row];
    const bool ignored = t == ignore_index;
    const bool bad = !ignored && (t < 0 || t >= C);  // only reachable where the host check is skipped
    const int64_t tv = t - lo;                       // the target's column in this block's slice
    const bool owner = (ignored || bad) ? rank == 0 : (tv >= 0 && tv < n);
    float xt = 0.f;
    if (threadIdx.x == 0) {
      if (owner && !ignored && !bad) xt = held[tv].get(0);  // before the barrier below
      posted[parity][0] = run.st[0], posted[parity][1] = run.st[1], posted[parity][2] = run.st[2];
    }
    cluster.sync();
    float all[3] = {-INFINITY, 0.f, 0.f};
    if (lane < ranks) {
      const float* theirs = cluster.map_shared_rank(&posted[parity][0], lane);
      all[0] = theirs[0], all[1] = theirs[1], all[2] = theirs[2];
    }
    warp_allreduce<3>(all, LseMerge{});
    const float lse = all[0] + __logf(all[1]);
    if (threadIdx.x == 0 && owner) {
      lse_out[row] = lse;
      loss_out[row] = bad ? NAN : ignored ? 0.f : lse - hit * xt - smoothing * all[2] / (float)C;
    }
    const RowGrad<T> grad(lse, ignored ? -1 : t - lo, 1, bad ? NAN : scale, off, hit);
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
        const P o = ignored ? zeros<P>() : grad(v[u], i);  // ignored rows: exact zeros
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
constexpr int kMaxClusterBlocks = 8;  // the portable cluster size

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
  const size_t smem = (size_t)part * sizeof(T);
  if (smem > 48 * 1024) C10_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = ranks, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(ranks), cfg.blockDim = dim3(kClusterThreads), cfg.dynamicSmemBytes = smem;
  cfg.stream = at::cuda::getCurrentCUDAStream();
  cfg.attrs = &cluster, cfg.numAttrs = 1;
  int fit = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&fit, k, &cfg));
  if (fit == 0) return false;
  cfg.gridDim = dim3((unsigned)(std::min<int64_t>(rows, fit) * ranks));
  C10_CUDA_CHECK(cudaLaunchKernelEx(&cfg, k, xp, dp, target.const_data_ptr<int64_t>(), lse.mutable_data_ptr<float>(),
                                    loss_rows.mutable_data_ptr<float>(),
                                    denom ? denom->const_data_ptr<float>() : nullptr, rows, C, ignore_index,
                                    (float)smoothing, part));
  return true;
}

}  // namespace

void launch_ce_fwd_bwd(const at::Tensor& logits, at::Tensor& dlogits, const at::Tensor& target, at::Tensor& lse,
                       at::Tensor& loss_rows, const at::Tensor* denom, int64_t ignore_index, double smoothing) {
  const int64_t rows = logits.size(0), C = logits.size(1);
  if (rows == 0) return;
  int ranks = 0;
  MYTORCH_DISPATCH_CUDA_FLOAT(logits.scalar_type(), "mytorch_ce_fwd_bwd_cuda", [&] {
    using T = scalar_t;
    const T* xp = logits.const_data_ptr<T>();
    T* dp = dlogits.data_ptr() == logits.data_ptr() ? const_cast<T*>(xp) : dlogits.mutable_data_ptr<T>();
    // The cluster form takes rows of scalars (not 16-byte vectors): H100, 8192 x 50257 bf16, 1.10
    // ms against the block form's 1.38 (1024 threads with 4 scalar loads each in flight hold too
    // few bytes in flight). Rows of 16-byte vectors measured the same with it or slower (H100:
    // 0.98-1.04x at 32000-256000 bf16 columns, 0.94x at fp32 131072; H200, an earlier version:
    // 0.79x at 128k), so they keep the block form.
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
