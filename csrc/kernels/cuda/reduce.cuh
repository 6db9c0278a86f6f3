// Shared pieces of the reduction and indexing kernels (CUDA):
//  - a generic "reduce K elements per output" engine over an [outer, K, inner] view of a
//    contiguous tensor: one thread group per output, K split over blocks when the outputs
//    are too few to fill the GPU (partials then a finishing kernel);
//  - device checks that treat 0-dim CPU tensors as scalars (as the CPU kernels do);
//  - for the indexing kernels (index.cu, index_put.cu): atomic add for every dtype, and
//    the bounds check and row copy both files use.
#pragma once
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <type_traits>

#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/common.cuh"

namespace mytorch {
namespace cuda {
namespace red {

// Arithmetic type of the loads: float for half/bfloat16, the type itself otherwise.
using cpu::compute_t;

inline int64_t pow2_at_least(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

template <typename C>
__device__ __forceinline__ bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  else return false;
}

// ---- reduction ops: identity, per-element map (k: position along K, c: per-output
// centre), and an associative combine ----
enum class Map { Id, SqDev, ExpDev };

// sum of map(x): Acc is double for floating T, uint64 (wrapping) for int64.
template <typename T, typename Acc, Map MAP>
struct SumOp {
  using acc_t = Acc;
  const double* centre;  // SqDev: the mean, ExpDev: the max; per output
  __device__ double centre_of(int64_t o) const { return centre ? centre[o] : 0.0; }
  __device__ acc_t identity() const { return acc_t(0); }
  __device__ acc_t combine(acc_t a, acc_t b) const { return a + b; }
  __device__ acc_t map(T v, int64_t, double c) const {
    using C = compute_t<T>;
    if constexpr (MAP == Map::Id) {
      return static_cast<acc_t>(static_cast<C>(v));
    } else if constexpr (MAP == Map::SqDev) {
      double d = static_cast<double>(static_cast<C>(v)) - c;
      return d * d;
    } else if constexpr (std::is_same_v<C, float>) {
      return static_cast<double>(expf(static_cast<float>(v) - static_cast<float>(c)));
    } else {
      return exp(static_cast<double>(v) - c);
    }
  }
};

template <typename T, typename Acc>
struct ProdOp {
  using acc_t = Acc;
  __device__ double centre_of(int64_t) const { return 0.0; }
  __device__ acc_t identity() const { return acc_t(1); }
  __device__ acc_t combine(acc_t a, acc_t b) const { return a * b; }
  __device__ acc_t map(T v, int64_t, double) const { return static_cast<acc_t>(static_cast<compute_t<T>>(v)); }
};

// max/min with its position; i < 0 marks "no element yet". The combine picks NaN over
// numbers and the lower position on ties, so any reduction order gives the first extreme
// (NaN wins), as the CPU kernel's sequential scan.
template <typename C>
struct ValIdx {
  C v;
  int64_t i;
};

template <typename T, bool MAX>
struct ExtOp {
  using C = compute_t<T>;
  using acc_t = ValIdx<C>;
  __device__ double centre_of(int64_t) const { return 0.0; }
  __device__ acc_t identity() const { return {C(0), -1}; }
  __device__ acc_t map(T v, int64_t k, double) const { return {static_cast<C>(v), k}; }
  __device__ acc_t combine(acc_t a, acc_t b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    const bool an = is_nan(a.v), bn = is_nan(b.v);
    if (an || bn) return (an && bn) ? (a.i < b.i ? a : b) : (an ? a : b);
    if (a.v == b.v) return a.i < b.i ? a : b;
    return (MAX ? a.v > b.v : a.v < b.v) ? a : b;
  }
};

// ---- the kernels ----
// Row mode (inner == 1): threadIdx.x walks K, threadIdx.y picks the output.
// Column mode (inner > 1): threadIdx.x picks the output (coalesced along inner),
// threadIdx.y walks K. blockIdx.y selects a chunk of K (kchunk long); with more than
// one chunk each block writes its partial to `partial` ([chunks, M]) instead of `out`.
// Both block dims are powers of two. vec (row mode only): rows load as 16-byte vectors
// (K and kchunk are multiples of the vector, x is 16-byte aligned).
template <typename T, typename Op, typename Out>
__global__ void __launch_bounds__(256)
    reduce_kernel(const T* __restrict__ x, int64_t outer, int64_t K, int64_t inner, int64_t kchunk, bool vec, Op op,
                  Out out, typename Op::acc_t* __restrict__ partial) {
  constexpr int V = 16 / sizeof(T);
  using A = typename Op::acc_t;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  A* sh = reinterpret_cast<A*>(smem_raw);
  const bool row = inner == 1;
  const int tk = row ? threadIdx.x : threadIdx.y, nk = row ? blockDim.x : blockDim.y;
  const int to = row ? threadIdx.y : threadIdx.x, no = row ? blockDim.y : blockDim.x;
  const int slot = threadIdx.y * blockDim.x + threadIdx.x;
  const int kstep = row ? 1 : blockDim.x;  // slot distance between k-neighbours
  const int64_t M = outer * inner;
  const int64_t k0 = (int64_t)blockIdx.y * kchunk, k1 = k0 + kchunk < K ? k0 + kchunk : K;
  const int64_t ctiles = ceil_div(inner, no);
  const int64_t tiles = row ? ceil_div(M, no) : outer * ctiles;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int64_t o, base, stride;
    bool valid;
    if (row) {
      o = tile * no + to;
      valid = o < M;
      base = o * K;
      stride = 1;
    } else {
      const int64_t oo = tile / ctiles, j = (tile - oo * ctiles) * no + to;
      valid = j < inner;
      o = oo * inner + j;
      base = oo * K * inner + j;
      stride = inner;
    }
    A a[4] = {op.identity(), op.identity(), op.identity(), op.identity()};
    if (valid) {
      const double c = op.centre_of(o);
      const T* p = x + base;
      if (vec) {  // four 16-byte vectors in flight
        const int64_t u1 = k1 / V;
        int64_t u = k0 / V + tk;
        for (; u + 3 * (int64_t)nk < u1; u += 4 * (int64_t)nk) {
          Vec<T, V> q[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) q[i] = load_vec<T, V>(p + (u + i * nk) * V);
#pragma unroll
          for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < V; ++j) a[i] = op.combine(a[i], op.map(q[i].v[j], (u + i * nk) * V + j, c));
        }
        for (; u < u1; u += nk) {
          const Vec<T, V> q = load_vec<T, V>(p + u * V);
#pragma unroll
          for (int j = 0; j < V; ++j) a[0] = op.combine(a[0], op.map(q.v[j], u * V + j, c));
        }
      } else {  // four loads in flight
        int64_t k = k0 + tk;
        for (; k + 3 * (int64_t)nk < k1; k += 4 * (int64_t)nk) {
          T q[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) q[i] = p[(k + i * nk) * stride];
#pragma unroll
          for (int i = 0; i < 4; ++i) a[i] = op.combine(a[i], op.map(q[i], k + i * nk, c));
        }
        for (; k < k1; k += nk) a[0] = op.combine(a[0], op.map(p[k * stride], k, c));
      }
    }
    sh[slot] = op.combine(op.combine(a[0], a[1]), op.combine(a[2], a[3]));
    __syncthreads();
    for (int s = nk >> 1; s > 0; s >>= 1) {
      if (tk < s) sh[slot] = op.combine(sh[slot], sh[slot + s * kstep]);
      __syncthreads();
    }
    if (tk == 0 && valid) {
      if (partial) partial[(int64_t)blockIdx.y * M + o] = sh[slot];
      else out(o, sh[slot]);
    }
    __syncthreads();  // sh is rewritten by the next tile
  }
}

template <typename Op, typename Out>
__global__ void reduce_finish_kernel(const typename Op::acc_t* __restrict__ partial, int64_t M, int64_t chunks,
                                     Op op, Out out) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < M; o += (int64_t)gridDim.x * blockDim.x) {
    typename Op::acc_t a = op.identity();
    for (int64_t s = 0; s < chunks; ++s) a = op.combine(a, partial[s * M + o]);
    out(o, a);
  }
}

// Reduces x viewed as [outer, K, inner] (contiguous) to outer * inner outputs, calling
// out(o, acc) once per output (also for K == 0: out then sees the identity).
template <typename T, typename Op, typename Out>
void launch_reduce(const T* x, int64_t outer, int64_t K, int64_t inner, const Op& op, const Out& out,
                   const at::TensorOptions& device_opts) {
  using A = typename Op::acc_t;
  const int64_t M = outer * inner;
  if (M == 0) return;
  const bool row = inner == 1;
  constexpr int V = 16 / sizeof(T);
  const bool vec = row && K > 0 && K % V == 0 && aligned16(x);
  const int64_t per_step = vec ? 4 * V : 4;  // elements a thread loads per step
  // threads along K (nk) and over outputs (no), powers of two, 256 at most in all
  int64_t nk, no;
  if (row) {
    nk = std::min<int64_t>(256, pow2_at_least(ceil_div(K, per_step)));
    no = std::max<int64_t>(1, 256 / nk);
  } else {
    no = std::min<int64_t>(256, pow2_at_least(inner));
    nk = std::min<int64_t>(256 / no, pow2_at_least(ceil_div(K, 4)));
  }
  const int64_t tiles = row ? ceil_div(M, no) : outer * ceil_div(inner, no);
  // split K over blocks when the outputs alone leave the GPU idle
  const int64_t target = 4 * (int64_t)num_sms();
  int64_t chunks = 1;
  if (tiles < target && K > 0)
    chunks = std::clamp<int64_t>(std::min(ceil_div(target, tiles), ceil_div(K, nk * 4 * per_step)), 1, 1024);
  int64_t kchunk = K > 0 ? ceil_div(K, chunks) : 0;
  if (vec) kchunk = ceil_div(kchunk, V) * V;
  chunks = K > 0 ? ceil_div(K, kchunk) : 1;
  at::Tensor partial;
  A* pp = nullptr;
  if (chunks > 1) {
    partial = aten::empty({chunks * M * (int64_t)sizeof(A)}, device_opts.dtype(at::kByte));
    pp = reinterpret_cast<A*>(partial.mutable_data_ptr());
  }
  const dim3 block(row ? nk : no, row ? no : nk);
  const dim3 grid((unsigned)std::min<int64_t>(tiles, (int64_t)num_sms() * 16), (unsigned)chunks);
  const size_t smem = (size_t)(nk * no) * sizeof(A);
  auto stream = at::cuda::getCurrentCUDAStream();
  reduce_kernel<T, Op, Out><<<grid, block, smem, stream>>>(x, outer, K, inner, kchunk, vec, op, out, pp);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (chunks > 1) {
    reduce_finish_kernel<Op, Out><<<grid_for(M, 256), 256, 0, stream>>>(pp, M, chunks, op, out);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

// ---- devices ----
// The device of the tensors, ignoring 0-dim CPU tensors (scalars, as the CPU kernels
// take them); raises when they disagree or when it is not a CUDA device.
inline at::Device common_cuda_device(const char* op, std::initializer_list<at::Tensor> ts) {
  std::optional<at::Device> dev;
  for (const auto& t : ts) {
    if (!t.defined() || (t.dim() == 0 && t.device().is_cpu())) continue;
    if (!dev) dev = t.device();
    TORCH_CHECK(*dev == t.device(), op, ": expected all tensors on the same device, got ", *dev, " and ",
                t.device());
  }
  if (!dev)
    for (const auto& t : ts)
      if (t.defined()) {
        dev = t.device();
        break;
      }
  TORCH_CHECK(dev && dev->is_cuda(), op, ": expected tensors on a CUDA device, got ",
              dev ? dev->str() : std::string("none"));
  return *dev;
}

// t on `dev` (a 0-dim CPU scalar is copied there).
inline at::Tensor on_device(const at::Tensor& t, at::Device dev) { return t.device() == dev ? t : t.to(dev); }

}  // namespace red

// ---- indexing helpers (index.cu defines the host functions) ----
namespace ix {

constexpr int kMaxDims = 25;

__device__ __forceinline__ int64_t wrap_index(int64_t v, int64_t size) { return v < 0 ? v + size : v; }

// *p += v for every dtype of the CPU kernels (float sums then round in any order).
// Types narrower than 4 bytes: compare-and-swap on the aligned 32-bit word holding them.
template <typename T>
__device__ void cas_add(T* p, T v) {
  using C = red::compute_t<T>;
  using Bits = std::conditional_t<sizeof(T) == 1, uint8_t, uint16_t>;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  unsigned int* word = reinterpret_cast<unsigned int*>(a & ~uintptr_t(3));
  const unsigned int shift = (unsigned int)(a & 3) * 8;
  const unsigned int mask = (unsigned int)((1u << (8 * sizeof(T))) - 1) << shift;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    Bits bits = (Bits)((assumed & mask) >> shift);
    T cur;
    memcpy(&cur, &bits, sizeof(T));
    const T next = static_cast<T>(static_cast<C>(cur) + static_cast<C>(v));
    memcpy(&bits, &next, sizeof(T));
    old = atomicCAS(word, assumed, (assumed & ~mask) | ((unsigned int)bits << shift));
  } while (old != assumed);
}

template <typename T>
__device__ __forceinline__ void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    atomicAdd(p, v);
  } else if constexpr (std::is_same_v<T, int32_t>) {
    atomicAdd(reinterpret_cast<int*>(p), static_cast<int>(v));
  } else if constexpr (std::is_same_v<T, int64_t>) {  // two's complement: unsigned add wraps alike
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
  } else {
    static_assert(sizeof(T) <= 2, "atomic_add: unexpected type");
    cas_add(p, v);
  }
}

// int64, contiguous, on index's device.
at::Tensor contiguous_index(const at::Tensor& index);
// Copies device memory to the host on the current stream and waits for it.
void copy_to_host(void* dst, const void* src, size_t bytes);
// Raises IndexError naming the first index out of [0, size) (or [-size, size) with
// allow_neg); idx: int64, contiguous, on the device. Waits for the device once.
void check_bounds(const char* op, const at::Tensor& idx, int64_t size, int64_t dim, bool allow_neg);
// out[o, i, :] = x[o, idx[i], :] for x [outer, size, inner] and out [outer, n, inner], both
// contiguous; idx checked, int64, contiguous; any dtype.
void select_rows(const char* op, const at::Tensor& x, const at::Tensor& out, const at::Tensor& idx, int64_t outer,
                 int64_t size, int64_t inner);

}  // namespace ix

}  // namespace cuda
}  // namespace mytorch
