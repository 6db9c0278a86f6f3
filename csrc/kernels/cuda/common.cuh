// Shared pieces of the CUDA kernels: 16-byte vectors, warp/block reductions, dtype dispatch,
// launch sizing and grid-stride loops, IEEE-rounded and accurate math, a deterministic
// two-stage sum and device-side index checks. Header-only; each family's .cu includes it.
#pragma once
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <type_traits>
#include <utility>

#include "checks.h"

namespace mytorch {
namespace cuda {

template <typename T>
using acc_t = at::opmath_type<T>;  // float for float/half/bfloat16, double for double

// ---- vectors ----
// VEC elements of T in one aligned chunk; VEC * sizeof(T) is 16 bytes on the fast path.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> load_vec(const T* p) {
  return *reinterpret_cast<const Vec<T, VEC>*>(p);
}

template <typename T, int VEC>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, VEC>& v) {
  *reinterpret_cast<Vec<T, VEC>*>(p) = v;
}

// Elements per 16-byte vector.
template <typename T>
constexpr int vec16() {
  return 16 / sizeof(T);
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// The vectors a thread owns on a row's register path: item i is vector threadIdx.x + i *
// blockDim.x (the same for every row); none when the row does not fit (`cached` false).
template <int ITEMS, int VEC>
struct RowSlots {
  int col[ITEMS];  // element offset of each owned vector
  bool mine[ITEMS];
  __device__ __forceinline__ RowSlots(int64_t nv, bool cached) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int64_t j = threadIdx.x + (int64_t)i * blockDim.x;
      mine[i] = cached && j < nv;
      col[i] = mine[i] ? (int)(j * VEC) : 0;
    }
  }
  template <typename T>
  __device__ __forceinline__ void load(Vec<T, VEC>* dst, const T* row) const {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (mine[i]) dst[i] = load_vec<T, VEC>(row + col[i]);
  }
};

// 16 bytes of T as four 32-bit words. Element access by shifts and masks keeps a vector in 4
// registers (a Vec of 16-bit elements may be split into 8 by the compiler, and spill).
template <typename T>
struct Words {
  static constexpr int N = 16 / sizeof(T);  // elements
  uint32_t w[4];
  __device__ __forceinline__ void load(const T* p) {
    const uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  }
  __device__ __forceinline__ void store(T* p) const {
    *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  }
  __device__ __forceinline__ float get(int k) const {
    if constexpr (sizeof(T) == 4) {
      return __uint_as_float(w[k]);
    } else {
      const uint32_t word = w[k >> 1];
      if constexpr (std::is_same<T, c10::BFloat16>::value)
        return __uint_as_float((k & 1) ? word & 0xffff0000u : word << 16);
      else
        return (float)T((uint16_t)((k & 1) ? word >> 16 : word & 0xffffu), T::from_bits());
    }
  }
  // Elements 2j and 2j + 1 (one word) from floats, rounded to T.
  __device__ __forceinline__ void set_pair(int j, float lo, float hi) {
    if constexpr (sizeof(T) == 4) {
      w[2 * j] = __float_as_uint(lo), w[2 * j + 1] = __float_as_uint(hi);
    } else {
      w[j] = (uint32_t)T(lo).x | ((uint32_t)T(hi).x << 16);
    }
  }
  // Every element v (rounded to T).
  __device__ __forceinline__ void fill(float v) {
#pragma unroll
    for (int j = 0; j < N / 2; ++j) set_pair(j, v, v);
  }
  // Hides the words' values from the compiler (no instruction): elements read after this are
  // converted again instead of being kept as floats from an earlier read, which would hold
  // 2-4x the registers across a reduction.
  __device__ __forceinline__ void reload_barrier() {
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(w[j]));
  }
  // Element k -> f(element k as float, k), rounded to T.
  template <typename F>
  __device__ __forceinline__ Words map(F f) const {
    Words o;
#pragma unroll
    for (int k = 0; k < N; k += 2) o.set_pair(k / 2, f(get(k), k), f(get(k + 1), k + 1));
    return o;
  }
};

// One element with the interface of Words<T> (rows whose vectors are not 16-byte aligned).
template <typename T>
struct One {
  static constexpr int N = 1;
  T x;
  __device__ __forceinline__ void load(const T* p) { x = *p; }
  __device__ __forceinline__ void store(T* p) const { *p = x; }
  __device__ __forceinline__ float get(int) const { return (float)x; }
  template <typename F>
  __device__ __forceinline__ One map(F f) const {
    One o;
    o.x = (T)f(get(0), 0);
    return o;
  }
};

// Shared-memory address of p, for the asynchronous-copy instructions below.
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// asm volatile(...) where the device code is compiled for sm_80+ (MYTORCH_ASM_SM80) or sm_90+
// (MYTORCH_ASM_SM90), the architectures with the instruction; nothing elsewhere.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MYTORCH_ASM_SM80(...) asm volatile(__VA_ARGS__)
#else
#define MYTORCH_ASM_SM80(...) ((void)0)
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MYTORCH_ASM_SM90(...) asm volatile(__VA_ARGS__)
#else
#define MYTORCH_ASM_SM90(...) ((void)0)
#endif

// 16-byte global -> shared copies that complete in the background (cp.async, sm_80+); the
// copying thread waits for its own copies and reads them back, so no barrier is needed.
__device__ __forceinline__ void copy16_async(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)), "l"(gmem) : "memory");
#else
  *reinterpret_cast<uint4*>(smem) = *reinterpret_cast<const uint4*>(gmem);
#endif
}
__device__ __forceinline__ void copy_async_commit() { MYTORCH_ASM_SM80("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void copy_async_wait() { MYTORCH_ASM_SM80("cp.async.wait_all;\n" ::: "memory"); }

// ---- bulk copies into shared memory (sm_90+) ----
// A block's mbarrier counts the bytes its bulk copies deliver; waiting on phase parity p returns
// once the copies armed for that phase have landed. Callers compile these for sm_90+ only.
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int arrivals) {
  MYTORCH_ASM_SM90("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}
// Makes initialized mbarriers visible to the bulk-copy unit (then a block barrier).
__device__ __forceinline__ void mbarrier_init_fence() {
  MYTORCH_ASM_SM90("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, int parity) {
  MYTORCH_ASM_SM90(
      "{\n .reg .pred done;\n"
      "WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}
// Copies `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to shared memory
// in the background, with an L2 cache policy (createpolicy); the barrier's current phase
// completes when they land (one arrival).
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                                    uint64_t policy) {
  MYTORCH_ASM_SM90("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
                   : "memory");
  MYTORCH_ASM_SM90(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}
// Orders this block's earlier shared-memory reads (after a block barrier) before bulk copies
// that overwrite them.
__device__ __forceinline__ void bulk_copy_fence() { MYTORCH_ASM_SM90("fence.proxy.async.shared::cta;" ::: "memory"); }

// 2^x (MUFU.EX2; inputs below -126 give 0 or a flushed denormal).
__device__ __forceinline__ float fast_exp2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// ---- reductions ----
// Maximum that skips NaN (as std::max(m, x) over a row).
__device__ __forceinline__ float max_nan_skip(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double max_nan_skip(double a, double b) { return fmax(a, b); }

struct AddOp {
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const { return a + b; }
};
struct MaxOp {  // skips NaN
  template <typename A>
  __device__ __forceinline__ A operator()(A a, A b) const { return max_nan_skip(a, b); }
};

// Over the warp in type A; every lane gets the result.
template <typename A, typename Op>
__device__ __forceinline__ A warp_reduce(A v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
template <typename A>
__device__ __forceinline__ A warp_sum(A v) { return warp_reduce(v, AddOp{}); }
template <typename A>
__device__ __forceinline__ A warp_max(A v) { return warp_reduce(v, MaxOp{}); }

// Inclusive prefix sum of v over the lanes of a full warp (lane = threadIdx.x & 31).
template <typename T>
__device__ __forceinline__ T warp_inclusive_sum(T v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T t = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += t;
  }
  return v;
}

// Over the block in type A; every thread gets the result. `buf` holds >= 33 values; safe to
// call repeatedly with the same buffer.
template <typename A, typename Op>
__device__ __forceinline__ A block_reduce(A v, A* buf, A identity, Op op) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v = warp_reduce(v, op);
  __syncthreads();  // buf may still be read by a previous call
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A w = lane < nwarps ? buf[lane] : identity;
    w = warp_reduce(w, op);
    if (lane == 0) buf[32] = w;
  }
  __syncthreads();
  return buf[32];
}
template <typename A>
__device__ __forceinline__ A block_sum(A v, A* buf) { return block_reduce(v, buf, A(0), AddOp{}); }
template <typename A>
__device__ __forceinline__ A block_max(A v, A* buf) { return block_reduce(v, buf, A(-INFINITY), MaxOp{}); }

// Block-wide all-reduce of an N-float state with one barrier: each warp merges its lanes by
// shuffles and posts one state; after the barrier every warp merges the posted states.
// `buf` holds 2 * 32 * N floats; calls alternate between its halves (`phase`), so a warp
// posting for the next reduction never overwrites a state another warp is still reading.
// Every lane of the warp gets the merge of the warp's 32 states (shuffles only).
template <int N, typename Merge>
__device__ __forceinline__ void warp_allreduce(float (&s)[N], Merge merge) {
  float o[N];
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
#pragma unroll
    for (int n = 0; n < N; ++n) o[n] = __shfl_xor_sync(0xffffffffu, s[n], off);
    merge(s, o);
  }
}

template <int N, typename Merge>
__device__ __forceinline__ void block_allreduce(float (&s)[N], const float (&identity)[N], float* buf, int& phase,
                                                Merge merge) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  float o[N];
  warp_allreduce<N>(s, merge);
  float* b = buf + phase * 32 * N;
  phase ^= 1;
  if (lane == 0)
#pragma unroll
    for (int n = 0; n < N; ++n) b[n * 32 + warp] = s[n];
  __syncthreads();
#pragma unroll
  for (int n = 0; n < N; ++n) s[n] = lane < nwarps ? b[n * 32 + lane] : identity[n];
  int span = 1;
  while (span < nwarps) span <<= 1;
  for (int off = span >> 1; off > 0; off >>= 1) {
#pragma unroll
    for (int n = 0; n < N; ++n) o[n] = __shfl_xor_sync(0xffffffffu, s[n], off);
    merge(s, o);
  }
#pragma unroll
  for (int n = 0; n < N; ++n) s[n] = __shfl_sync(0xffffffffu, s[n], 0);  // lanes >= span hold identity
}

struct SumMerge {
  template <int N>
  __device__ __forceinline__ void operator()(float (&a)[N], const float (&b)[N]) const {
#pragma unroll
    for (int n = 0; n < N; ++n) a[n] += b[n];
  }
};

// Sum over the block in one barrier (see block_allreduce).
__device__ __forceinline__ float block_sum1(float v, float* buf, int& phase) {
  float s[1] = {v};
  const float zero[1] = {0.f};
  block_allreduce<1>(s, zero, buf, phase, SumMerge{});
  return s[0];
}

// The all-reduce of a row kernel: over the warp when each warp owns a row (WARP), else over
// the block.
template <bool WARP, int N, typename Merge>
__device__ __forceinline__ void row_allreduce(float (&s)[N], const float (&identity)[N], float* buf, int& phase,
                                              Merge merge) {
  if constexpr (WARP) warp_allreduce<N>(s, merge);
  else block_allreduce<N>(s, identity, buf, phase, merge);
}

template <bool WARP>
__device__ __forceinline__ float row_sum1(float v, float* buf, int& phase) {
  float s[1] = {v};
  const float zero[1] = {0.f};
  row_allreduce<WARP, 1>(s, zero, buf, phase, SumMerge{});
  return s[0];
}

// (count, mean, M2) of two disjoint parts merged (Chan et al.); empty parts have count 0.
struct MeanM2Merge {
  __device__ __forceinline__ void operator()(float (&a)[3], const float (&b)[3]) const {
    const float n = a[0] + b[0];
    if (n == 0.f) return;
    const float d = b[1] - a[1], f = b[0] / n;
    a[1] += d * f;
    a[2] += b[2] + d * d * a[0] * f;
    a[0] = n;
  }
};

// ---- launch helpers ----
// Multiprocessors of the current device (gemm.cu: the device properties come with cuBLAS's
// context header, which the other files need not parse).
int num_sms();
// Shared memory one block may opt in to on the current device (bytes).
size_t max_block_smem();
// The current device's L2 cache (bytes).
int64_t l2_bytes();

inline int round_up(int64_t x, int64_t m) { return static_cast<int>((x + m - 1) / m * m); }
__host__ __device__ __forceinline__ int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr int kThreads = 256;  // the block of the grid-stride kernels

// Blocks for a grid-stride loop over n items, per_block items a block: enough to cover them,
// at most per_sm blocks a multiprocessor (the loop takes the rest), at least one.
inline int grid_for(int64_t n, int64_t per_block, int per_sm = 32) {
  const int64_t cap = static_cast<int64_t>(num_sms()) * per_sm;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(ceil_div(n, per_block), cap)));
}
// The launch of the elementwise GEMM and vision kernels (gemm, conv, pool, batchnorm, upsample).
inline int blocks_for(int64_t n, int threads = kThreads) { return grid_for(n, threads, 64); }

// Launches a grid-stride kernel over n items (blocks_for, kThreads a block) on the current
// stream and checks the launch.
template <typename K, typename... A>
void launch_grid(K kernel, int64_t n, A&&... args) {
  kernel<<<blocks_for(n), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(std::forward<A>(args)...);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Grid-stride loop over [0, n) with index type I.
#define MYTORCH_GRID_LOOP(I, i, n)                                                       \
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) +                 \
             static_cast<I>(threadIdx.x);                                               \
       i < (n); i += static_cast<I>(blockDim.x) * static_cast<I>(gridDim.x))

// Calls f(I{}) with I = int32_t when every index stays below `max_index` <= INT_MAX / 2
// (room for the grid stride), else with I = int64_t.
template <typename F>
void with_index_type(int64_t max_index, F&& f) {
  if (max_index <= INT_MAX / 2)
    f(int32_t{0});
  else
    f(int64_t{0});
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

// Register-path shape for a row of nv vectors: the fewest items per thread (2, 4, ...,
// max_items) that keep the block within `cap` threads; longer rows stream from memory.
// Returns {items, threads}.
inline std::pair<int, int> row_shape(int64_t nv, int max_items, int cap) {
  int items = 2;
  while (items < max_items && (nv + items - 1) / items > cap) items *= 2;
  int threads = std::min<int>(cap, std::max<int>(32, round_up((nv + items - 1) / items, 32)));
  return {items, threads};
}

// One-row-per-block kernels (norm and softmax forwards): each thread holds kRowItems vectors
// of the row, so a block has a quarter of the row's vectors in threads (32 to 512); rows up
// to kRowMaxVecs vectors. Measured on H100 against 1 and 2 items per thread: 4 reach 92-101% of
// copy from 4k to 16k bf16 columns, where fewer items (bigger blocks) stall on the reductions
// (softmax, one reduction a row, does better with 2 up to 8k columns).
constexpr int kRowItems = 4;
constexpr int kRowMaxVecs = kRowItems * 512;
// The vectors a thread owns in a one-row-per-block kernel: item i is vector threadIdx.x + i *
// blockDim.x of the row, at element offset col[i] (32-bit), if mine[i].
template <typename T, int ITEMS = kRowItems>
struct RowItems {
  int col[ITEMS];
  bool mine[ITEMS];
  __device__ __forceinline__ explicit RowItems(int nv) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int j = threadIdx.x + i * blockDim.x;
      mine[i] = j < nv;
      col[i] = j * Words<T>::N;
    }
  }
  // FULL: the launcher knows the row is exactly ITEMS vectors per thread (no bounds).
  template <bool FULL = false>
  __device__ __forceinline__ bool has(int i) const {
    return FULL || mine[i];
  }
  template <bool FULL = false>
  __device__ __forceinline__ void load(Words<T>* dst, const T* row) const {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
      if (has<FULL>(i)) dst[i].load(row + col[i]);
  }
};

// The largest power of 2 not above n (n >= 1).
constexpr int floor_pow2(int n) { return n < 2 ? 1 : 2 * floor_pow2(n / 2); }

// Sum / max of n values as a pairwise tree (values past the largest power of 2 folded in
// first); p is overwritten.
template <int n>
__device__ __forceinline__ float tree_sum(float (&p)[n]) {
  constexpr int m = floor_pow2(n);
#pragma unroll
  for (int k = m; k < n; ++k) p[k - m] += p[k];
#pragma unroll
  for (int span = m / 2; span > 0; span /= 2)
#pragma unroll
    for (int k = 0; k < span; ++k) p[k] += p[k + span];
  return p[0];
}
template <int n>
__device__ __forceinline__ float tree_max(float (&p)[n]) {
  constexpr int m = floor_pow2(n);
#pragma unroll
  for (int k = m; k < n; ++k) p[k - m] = fmaxf(p[k - m], p[k]);
#pragma unroll
  for (int span = m / 2; span > 0; span /= 2)
#pragma unroll
    for (int k = 0; k < span; ++k) p[k] = fmaxf(p[k], p[k + span]);
  return p[0];
}

// Threads of a one-row-per-block kernel for a row of nv vectors, `items` per thread.
inline int row_threads(int64_t nv, int items = kRowItems) {
  return std::min<int>(512, std::max<int>(32, round_up((nv + items - 1) / items, 32)));
}

// A persistent grid: as many blocks as fit on the device at once (rows beyond that loop).
template <typename K>
int64_t persistent_grid(K kernel, int threads, int64_t rows) {
  int per_sm = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
  return std::min<int64_t>(rows, (int64_t)std::max(per_sm, 1) * num_sms());
}

constexpr int kMaxClusterBlocks = 8;  // the portable cluster size

// The launch of a cluster kernel of `ranks`-block clusters; fit 0 where no such cluster fits the
// device at once.
struct ClusterLaunch {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr = {};
  int fit = 0;  // clusters resident at once
  template <typename K>
  ClusterLaunch(K kernel, int ranks, int threads, size_t smem) {
    // (set at every size: the static shared memory counts against the default 48 KB too)
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = ranks, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(ranks), cfg.blockDim = dim3(threads), cfg.dynamicSmemBytes = smem;
    cfg.stream = c10::cuda::getCurrentCUDAStream();
    cfg.attrs = &attr, cfg.numAttrs = 1;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&fit, kernel, &cfg));
  }
};

// float32, bfloat16, float16: the training dtypes the CUDA kernels take.
inline void check_cuda_float(const char* op, const char* name, const at::Tensor& t) {
  check_dtype(op, name, t, {at::kFloat, at::kBFloat16, at::kHalf});
}

inline void check_cuda(const char* op, const char* name, const at::Tensor& t) {
  TORCH_CHECK(t.is_cuda(), op, ": expected ", name, " on a CUDA device, got ", t.device());
}

// out[c] = sum_p partial[p, c] (partial: fp32 [parts, cols]); stage 2 of the two-stage column
// reductions (norm_backward.cu). partial2 / out2 (the same shapes and dtype): a second sum in
// the same launch.
void column_sum(const at::Tensor& partial, at::Tensor& out, const at::Tensor* partial2 = nullptr,
                at::Tensor* out2 = nullptr);

// ---- IEEE round-to-nearest arithmetic ----
// Never contracted into FMA, division and sqrt exact, also under --use_fast_math; one set for
// every family.
__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div_rn(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double sqrt_rn(double a) { return __dsqrt_rn(a); }
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

// ---- accurate math ----
// --use_fast_math, where a build sets it, turns expf/logf into the approximate intrinsics;
// these keep their accuracy under it.
// e^x as the CPU kernels' vec_math.h: x = n*ln2 + r, |r| <= ln2/2, a degree-6 polynomial for
// e^r, a scale by 2^n (two factors, so n = 128 overflows to inf). ~2 ulp; results below FLT_MIN
// are 0.
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

// ---- deterministic two-stage sum of K values per item, in double ----
// Stage 1: f(i, acc) adds item i's K values into acc; each block writes K partials.
// Stage 2: one block adds the partials and calls fin(sums). The grid depends only on n, so
// the result is the same on every run.
constexpr int kSumThreads = 256;
constexpr int kSumMaxBlocks = 512;

template <int K>
__device__ __forceinline__ void block_sum_k(double (&v)[K], double* buf) {
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = block_sum<double>(v[k], buf);
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

// ---- device-side index checks ----
// An out-of-range index stops the kernel with a device-side assert, as ATen's kernels do,
// after printing the op, what was indexed, the value and the valid range. Nothing is read
// back on the host, so a check costs no synchronisation and works inside a CUDA graph. CUDA
// reports the assert at the stream's next synchronisation (at the failing call with
// CUDA_LAUNCH_BLOCKING=1), and the process's CUDA context is unusable after it.
struct IndexCheck {
  char op[64];    // the op's name, held in the kernel's parameters (readable on the device)
  char what[24];  // what the index selects: "target", "index", ...
  int64_t ignore;     // a value that is allowed outside the range (ignore_index)
  bool has_ignore;
  IndexCheck(const char* op_name, const char* what_name, std::optional<int64_t> ignore_value = std::nullopt)
      : ignore(ignore_value.value_or(0)), has_ignore(ignore_value.has_value()) {
    std::snprintf(op, sizeof(op), "%s", op_name);
    std::snprintf(what, sizeof(what), "%s", what_name);
  }
  // Whether v is in [0, n) (or the allowed ignore value); asserts otherwise.
  __device__ __forceinline__ bool ok(int64_t v, int64_t n) const {
    if ((v >= 0 && v < n) || (has_ignore && v == ignore)) return true;
    fail(v, n);
    return false;
  }
  __device__ __noinline__ void fail(int64_t v, int64_t n) const {
    if (has_ignore)
      printf("%s: %s %lld is out of bounds (expected a value in [0, %lld) or ignore_index=%lld)\n", op, what,
             (long long)v, (long long)n, (long long)ignore);
    else
      printf("%s: %s %lld is out of bounds (expected a value in [0, %lld))\n", op, what, (long long)v,
             (long long)n);
    const bool index_in_bounds = false;
    CUDA_KERNEL_ASSERT(index_in_bounds);
  }
};

}  // namespace cuda
}  // namespace mytorch

// Dispatch over the CUDA training dtypes.
#define MYTORCH_DISPATCH_CUDA_FLOAT(TYPE, NAME, ...)                 \
  AT_DISPATCH_SWITCH(TYPE, NAME, AT_DISPATCH_CASE(at::kFloat, __VA_ARGS__) \
                         AT_DISPATCH_CASE(at::kBFloat16, __VA_ARGS__)      \
                             AT_DISPATCH_CASE(at::kHalf, __VA_ARGS__))
