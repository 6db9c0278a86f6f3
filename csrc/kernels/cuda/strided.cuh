// Elementwise machinery of the CUDA kernels (elementwise_*.cu, activation_hard.cu).
//  - Plan: the output's shape with per-operand element strides (0 on broadcast dims), size-1
//    dims dropped, dims ordered by the output's strides and coalesced, as the CPU kernels'
//    TensorIterator geometry; up to the CPU kernels' 25 dims.
//  - Two launch paths: "flat" when the output is dense in order and every input is laid out
//    like it or is a single value (a 0-dim or size-1 tensor, a host scalar): 16-byte vector
//    loads and stores; "strided" otherwise: per-element offsets from the linear index, with
//    32-bit magic-number division when all offsets fit and 64-bit division when not.
//  - Inputs are device tensors or host values (0-dim CPU tensors, as TensorIterator's CPU
//    scalars): a host value travels in the kernel's arguments.
//  - Float math shared by the kernels: IEEE division and sqrt whatever the compile flags;
//    exp is libdevice's expf (2 ulp), or under --use_fast_math (where expf becomes __expf) the
//    CPU kernels' polynomial; log and tanh as the CPU kernels compute them.
#pragma once
#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/common.cuh"
#include "kernels/elementwise.h"

namespace mytorch {
namespace cuda {
namespace ew {

constexpr int kMaxDims = cpu::kMaxDims;
using cpu::compute_t;

// ---- 32-bit division by a fixed divisor: n / d = (umulhi(n, m) + n) >> s, for n < 2^31 ----
struct FastDiv {
  uint32_t d = 1, m = 1, s = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t div) : d(div) {
    while ((uint64_t(1) << s) < div) ++s;
    m = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << s) - div)) / div + 1);
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const { return (__umulhi(n, m) + n) >> s; }
};

// Element offsets of N operands at a linear index (dim 0 fastest).
template <typename Index, int N>
struct OffsetCalc;

template <int N>
struct OffsetCalc<uint32_t, N> {
  int ndim;
  FastDiv size[kMaxDims];
  uint32_t stride[kMaxDims][N];
  __device__ __forceinline__ void get(uint32_t i, uint32_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      uint32_t r = i;  // the outermost dim takes what is left
      if (d + 1 < ndim) {
        const uint32_t q = size[d].div(i);
        r = i - q * size[d].d;
        i = q;
      }
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * stride[d][k];
    }
  }
};

template <int N>
struct OffsetCalc<int64_t, N> {
  int ndim;
  int64_t size[kMaxDims];
  int64_t stride[kMaxDims][N];
  __device__ __forceinline__ void get(int64_t i, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
#pragma unroll 1
    for (int d = 0; d < ndim; ++d) {  // the rare path (past 2^31): kept small
      int64_t r = i;
      if (d + 1 < ndim) {
        const int64_t q = i / size[d];
        r = i - q * size[d];
        i = q;
      }
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * stride[d][k];
    }
  }
};

// ---- kernel-side inputs ----
enum : uint8_t { kFull = 0, kOne = 1, kHost = 2 };  // stride-1 array, one device value, host value

template <int N>
struct Inputs {
  const char* ptr[N];
  uint64_t bits[N];  // kHost: the value's bytes, in the input's dtype
  uint8_t mode[N];
};

template <typename Out, typename... Ins>
struct Sig {};  // the kernel's element types: Out f(Ins...)

template <typename T>
__device__ __forceinline__ T from_bits(uint64_t b) {
  T v;
  memcpy(&v, &b, sizeof(T));
  return v;
}

// Input k at element offset off (0 for single values).
template <typename T, int N>
__device__ __forceinline__ T sload(const Inputs<N>& in, int k, int64_t off) {
  if (in.mode[k] == kHost) return from_bits<T>(in.bits[k]);
  return reinterpret_cast<const T*>(in.ptr[k])[off];
}

template <int VEC, typename T, int N>
__device__ __forceinline__ Vec<T, VEC> vload(const Inputs<N>& in, int k, int64_t base) {
  if (in.mode[k] == kFull) return load_vec<T, VEC>(reinterpret_cast<const T*>(in.ptr[k]) + base);
  const T s = sload<T>(in, k, 0);
  Vec<T, VEC> r;
#pragma unroll
  for (int j = 0; j < VEC; ++j) r.v[j] = s;
  return r;
}

template <int VEC, typename Out, typename F, typename... V>
__device__ __forceinline__ void vapply(Out* o, const F& f, const V&... v) {
  Vec<Out, VEC> r;
#pragma unroll
  for (int j = 0; j < VEC; ++j) r.v[j] = f(v.v[j]...);
  store_vec<Out, VEC>(o, r);
}

template <int VEC, typename F, typename Out, typename... Ins, size_t... K>
__device__ __forceinline__ void flat_vec(Sig<Out, Ins...>, std::index_sequence<K...>, Out* out,
                                         const Inputs<sizeof...(Ins)>& in, int64_t base, const F& f) {
  vapply<VEC>(out + base, f, vload<VEC, Ins>(in, K, base)...);
}

template <typename F, typename Out, typename... Ins, size_t... K>
__device__ __forceinline__ Out flat_one(Sig<Out, Ins...>, std::index_sequence<K...>,
                                        const Inputs<sizeof...(Ins)>& in, int64_t i, const F& f) {
  return f(sload<Ins>(in, K, in.mode[K] == kFull ? i : 0)...);
}

template <typename Index, typename F, typename Out, typename... Ins, size_t... K>
__device__ __forceinline__ Out strided_one(Sig<Out, Ins...>, std::index_sequence<K...>,
                                           const Inputs<sizeof...(Ins)>& in, const Index* off, const F& f) {
  return f(sload<Ins>(in, K, static_cast<int64_t>(off[K + 1]))...);
}

// out[i] = f(in...[i]) over n elements, VEC at a time (the last n % VEC one at a time).
template <int VEC, typename F, typename Out, typename... Ins>
__global__ void __launch_bounds__(kThreads)
    flat_kernel(Sig<Out, Ins...> sig, int64_t n, Out* out, Inputs<sizeof...(Ins)> in, F f) {
  using Seq = std::index_sequence_for<Ins...>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nvec = n / VEC;
  for (int64_t v = t; v < nvec; v += step) flat_vec<VEC>(sig, Seq{}, out, in, v * VEC, f);
  for (int64_t i = nvec * VEC + t; i < n; i += step) out[i] = flat_one(sig, Seq{}, in, i, f);
}

template <typename Index, typename F, typename Out, typename... Ins>
__global__ void __launch_bounds__(kThreads)
    strided_kernel(Sig<Out, Ins...> sig, Index n, OffsetCalc<Index, 1 + sizeof...(Ins)> oc, Out* out,
                   Inputs<sizeof...(Ins)> in, F f) {
  using Seq = std::index_sequence_for<Ins...>;
  const Index step = static_cast<Index>(gridDim.x) * blockDim.x;
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    Index off[1 + sizeof...(Ins)];
    oc.get(i, off);
    out[off[0]] = strided_one<Index>(sig, Seq{}, in, off, f);
  }
}

// ---- host side ----
// One input: a device tensor broadcast to the output's shape, or a host value (a 0-dim CPU
// tensor, already in the kernel's input dtype).
struct Operand {
  at::Tensor t;       // undefined for a host value
  uint64_t bits = 0;  // the host value's bytes
  static Operand of(const at::Tensor& t) {
    Operand o;
    if (t.dim() == 0 && t.device().is_cpu()) {
      TORCH_INTERNAL_ASSERT(t.element_size() <= 8);
      std::memcpy(&o.bits, t.const_data_ptr(), t.element_size());
    } else {
      o.t = t;
    }
    return o;
  }
};

// The iteration space of an output and N - 1 inputs.
template <int N>
struct Plan {
  int ndim = 0;
  int64_t numel = 1;
  int64_t shape[kMaxDims];
  int64_t stride[N][kMaxDims];  // elements; operand 0 is the output
};

template <int N>
Plan<N> make_plan(const char* op, const at::Tensor& out, const std::array<Operand, N - 1>& ins) {
  Plan<N> p;
  const int nd = static_cast<int>(out.dim());
  TORCH_CHECK(nd <= kMaxDims, op, ": expected tensors of at most ", kMaxDims, " dims, got ", nd);
  for (int i = nd - 1; i >= 0; --i) {  // fastest dim first
    const int64_t size = out.size(i);
    if (size == 1) continue;
    const int w = p.ndim++;
    p.shape[w] = size;
    p.stride[0][w] = out.stride(i);
    for (int k = 1; k < N; ++k) {
      const at::Tensor& t = ins[k - 1].t;
      int64_t s = 0;
      if (t.defined()) {
        TORCH_INTERNAL_ASSERT(t.dim() <= nd);
        const int64_t j = i - (nd - t.dim());
        if (j >= 0 && t.size(j) != 1) {
          TORCH_INTERNAL_ASSERT(t.size(j) == size, op, ": operand does not broadcast to the output");
          s = t.stride(j);
        }
      }
      p.stride[k][w] = s;
    }
  }
  // fresh outputs are in order already; a strided one (cast keeps its input's layout) may not be
  for (int a = 1; a < p.ndim; ++a)
    for (int b = a; b > 0 && p.stride[0][b] < p.stride[0][b - 1]; --b) {
      std::swap(p.shape[b], p.shape[b - 1]);
      for (int k = 0; k < N; ++k) std::swap(p.stride[k][b], p.stride[k][b - 1]);
    }
  if (p.ndim > 1) {  // merge dims that are one run in every operand
    int c = 0;
    for (int d = 1; d < p.ndim; ++d) {
      bool merge = true;
      for (int k = 0; k < N; ++k) merge = merge && p.stride[k][d] == p.stride[k][c] * p.shape[c];
      if (merge) {
        p.shape[c] *= p.shape[d];
      } else {
        ++c;
        p.shape[c] = p.shape[d];
        for (int k = 0; k < N; ++k) p.stride[k][c] = p.stride[k][d];
      }
    }
    p.ndim = c + 1;
  }
  for (int d = 0; d < p.ndim; ++d) p.numel *= p.shape[d];
  return p;
}

template <int N>
bool fits_32bit(const Plan<N>& p) {
  if (p.numel > INT32_MAX) return false;
  for (int k = 0; k < N; ++k) {
    int64_t last = 0;
    for (int d = 0; d < p.ndim; ++d) last += (p.shape[d] - 1) * p.stride[k][d];
    if (last > INT32_MAX) return false;
  }
  return true;
}

inline bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

template <typename... Ts>
constexpr size_t max_size() {
  size_t m = 1;
  ((m = sizeof(Ts) > m ? sizeof(Ts) : m), ...);
  return m;
}

// out = f(ins...) elementwise, the inputs broadcast to out's shape. out is a fresh tensor (no
// input overlaps it) of element type Out on a CUDA device; device inputs live on the same device.
template <typename Out, typename... Ins, typename F>
void launch(const char* op, const at::Tensor& out, const std::array<Operand, sizeof...(Ins)>& ins, const F& f) {
  constexpr int NI = sizeof...(Ins), N = NI + 1;
  static_assert(NI >= 1, "elementwise kernels take at least one input");
  TORCH_INTERNAL_ASSERT(out.is_cuda() && out.element_size() == sizeof(Out));
  if (out.numel() == 0) return;
  c10::cuda::CUDAGuard guard(out.device());
  const Plan<N> p = make_plan<N>(op, out, ins);
  constexpr size_t in_size[NI] = {sizeof(Ins)...};
  Inputs<NI> in;
  bool flat = p.ndim == 0 || (p.ndim == 1 && p.stride[0][0] == 1);
  constexpr int VEC = static_cast<int>(16 / max_size<Out, Ins...>());
  Out* o = static_cast<Out*>(out.mutable_data_ptr());
  bool aligned = aligned_to(o, VEC * sizeof(Out));
  for (int k = 0; k < NI; ++k) {
    const at::Tensor& t = ins[k].t;
    in.bits[k] = ins[k].bits;
    in.ptr[k] = nullptr;
    if (!t.defined()) {
      in.mode[k] = kHost;
      continue;
    }
    TORCH_INTERNAL_ASSERT(t.device() == out.device() && t.element_size() == in_size[k]);
    in.ptr[k] = static_cast<const char*>(t.const_data_ptr());
    const int64_t s = p.ndim == 0 ? 0 : p.stride[k + 1][0];
    in.mode[k] = s == 0 ? kOne : kFull;
    if (s != 0 && s != 1) flat = false;
    if (in.mode[k] == kFull) aligned = aligned && aligned_to(in.ptr[k], VEC * in_size[k]);
  }
  auto stream = at::cuda::getCurrentCUDAStream();
  const Sig<Out, Ins...> sig;
  if (flat && aligned) {
    flat_kernel<VEC><<<grid_for((p.numel + VEC - 1) / VEC, kThreads), kThreads, 0, stream>>>(sig, p.numel, o, in, f);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else if (fits_32bit(p)) {
    OffsetCalc<uint32_t, N> oc{};
    oc.ndim = p.ndim;
    for (int d = 0; d < p.ndim; ++d) {
      oc.size[d] = FastDiv(static_cast<uint32_t>(p.shape[d]));
      for (int k = 0; k < N; ++k) oc.stride[d][k] = static_cast<uint32_t>(p.stride[k][d]);
    }
    strided_kernel<uint32_t><<<grid_for(p.numel, kThreads), kThreads, 0, stream>>>(
        sig, static_cast<uint32_t>(p.numel), oc, o, in, f);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else {
    OffsetCalc<int64_t, N> oc{};
    oc.ndim = p.ndim;
    for (int d = 0; d < p.ndim; ++d) {
      oc.size[d] = p.shape[d];
      for (int k = 0; k < N; ++k) oc.stride[d][k] = p.stride[k][d];
    }
    strided_kernel<int64_t><<<grid_for(p.numel, kThreads), kThreads, 0, stream>>>(sig, p.numel, oc, o, in, f);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

// A Scalar in the compute type C (as the CPU kernels convert alpha, bounds and values).
template <typename C>
C scalar_to(const at::Scalar& s) {
  if constexpr (std::is_same_v<C, bool>) return s.toBool();
  else if constexpr (std::is_floating_point_v<C>) return static_cast<C>(s.toDouble());
  else return static_cast<C>(s.toLong());
}

// ---- host glue shared by the elementwise files ----
// t in dtype (t itself when it has it). A 0-dim CPU tensor (a scalar operand) is converted on
// the host and stays there; a device tensor goes through the CUDA cast kernel.
at::Tensor to_dtype(const at::Tensor& t, at::ScalarType dtype);
// dst <- src with dtype conversion, src broadcast to dst's shape (elementwise_unary_cast.cu).
void copy_cast(const at::Tensor& dst, const at::Tensor& src);
// a (op) b with the CPU kernels' promotion, checks and errors (elementwise_binary.cu).
at::Tensor binary(cpu::Bin op, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);
// out (bool) = a (op) b for eq/ne/lt/le/gt/ge, both operands in dtype ct (elementwise_binary_compare.cu).
void launch_compare(cpu::Bin op, at::ScalarType ct, const at::Tensor& out, const Operand& a,
                    const Operand& b);

// ---- float math ----

// exp: libdevice's expf (2 ulp); under fast math, ~1 ulp as the CPU kernels' fast_exp.
__device__ __forceinline__ float exp_c(float x) {
#ifndef __USE_FAST_MATH__
  return ::expf(x);
#else
  const float hi = 88.72283935546875f, lo = -103.972076416015625f;
  float xc = x > hi ? hi : x;
  xc = xc < lo ? lo : xc;
  const float n = floorf(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * z + r + 1.0f;
  const int ni = static_cast<int>(n);
  const int n1 = ni >> 1, n2 = ni - n1;  // two scale steps keep results near the denormals
  float res = p * __int_as_float((n1 + 127) << 23) * __int_as_float((n2 + 127) << 23);
  res = x > hi ? INFINITY : res;
  res = x < lo ? 0.0f : res;
  return x != x ? x : res;
#endif
}

// natural log, ~1 ulp: the CPU kernels' fast_log.
__device__ __forceinline__ float log_c(float x) {
  const bool denorm = x < 1.17549435e-38f;
  const float xs = denorm ? x * 8388608.0f : x;  // 2^23
  const int bits = __float_as_int(xs);
  float e = static_cast<float>(((bits >> 23) & 0xff) - 126) - (denorm ? 23.0f : 0.0f);
  float m = __int_as_float((bits & 0x807fffff) | 0x3f000000);  // [0.5, 1)
  const bool small = m < 0.707106781186547524f;
  e = small ? e - 1.0f : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292E-2f;
  y = y * m - 1.1514610310E-1f;
  y = y * m + 1.1676998740E-1f;
  y = y * m - 1.2420140846E-1f;
  y = y * m + 1.4249322787E-1f;
  y = y * m - 1.6668057665E-1f;
  y = y * m + 2.0000714765E-1f;
  y = y * m - 2.4999993993E-1f;
  y = y * m + 3.3333331174E-1f;
  y = y * m * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  float r = m + y + 0.693359375f * e;
  r = x == INFINITY ? x : r;
  r = x == 0.0f ? -INFINITY : r;
  return (x < 0.0f || x != x) ? NAN : r;
}

// tanh: the CPU kernels' fast_tanh (odd polynomial below 0.625, exp above).
__device__ __forceinline__ float tanh_c(float x) {
  const float ax = fabsf(x), z = x * x;
  float p = -5.70498872745E-3f;
  p = p * z + 2.06390887954E-2f;
  p = p * z - 5.37397155531E-2f;
  p = p * z + 1.33314422036E-1f;
  p = p * z - 3.33332819422E-1f;
  const float small = p * z * x + x;
  float big = 1.0f - __fdiv_rn(2.0f, exp_c(2.0f * ax) + 1.0f);
  big = x < 0 ? -big : big;
  const float r = ax < 0.625f ? small : big;
  return x != x ? x : r;
}

__device__ __forceinline__ double exp_c(double x) { return ::exp(x); }
__device__ __forceinline__ double log_c(double x) { return ::log(x); }
__device__ __forceinline__ double tanh_c(double x) { return ::tanh(x); }

// pow: float through double (correctly rounded but for rare ties), as powf on the host.
__device__ __forceinline__ float pow_c(float a, float b) {
  return static_cast<float>(::pow(static_cast<double>(a), static_cast<double>(b)));
}
__device__ __forceinline__ double pow_c(double a, double b) { return ::pow(a, b); }

}  // namespace ew
}  // namespace cuda
}  // namespace mytorch
