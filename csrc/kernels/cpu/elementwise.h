// Shared pieces of the CPU elementwise kernels:
//  - Strided: an N-d iteration space (dim 0 fastest) with per-operand byte strides,
//    run in parallel with OpenMP over contiguous ranges of the flat index;
//  - vectorizable float math (exp, log, tanh, sigmoid, erfc) written without branches
//    so that `#pragma omp simd` loops compile to SIMD code;
//  - entry points other families call from C++ (cast, binary ops, copy).
#pragma once
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#ifndef __CUDACC__
#include <ATen/TensorIterator.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <type_traits>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__SSE2__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

#include "aten_core.h"

namespace mytorch {
namespace cpu {

constexpr int64_t kElemGrain = 1 << 15;  // below this many elements: one thread
constexpr int kMaxDims = 25;
constexpr int kMaxOperands = 6;

inline int max_threads() {
#ifdef _OPENMP
  return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  return 1;
#endif
}

// ---- iteration space ----
struct Strided {
  int ndim = 0;    // 0 means a single element
  int nops = 0;
  int64_t numel = 1;
  int64_t shape[kMaxDims];
  int64_t strides[kMaxOperands][kMaxDims];  // bytes
  char* data[kMaxOperands];
};

#ifndef __CUDACC__  // CUDA sources plan their own geometry (kernels/cuda/strided.cuh)
// Geometry of a built TensorIterator (broadcast, coalesced, reordered).
inline Strided strided_from(const at::TensorIteratorBase& it) {
  Strided g;
  g.ndim = it.ndim();
  g.nops = it.ntensors();
  TORCH_INTERNAL_ASSERT(g.ndim <= kMaxDims && g.nops <= kMaxOperands);
  g.numel = it.numel();
  for (int d = 0; d < g.ndim; ++d) g.shape[d] = it.shape()[d];
  for (int k = 0; k < g.nops; ++k) {
    g.data[k] = static_cast<char*>(it.data_ptr(k));
    auto st = it.strides(k);
    for (int d = 0; d < g.ndim; ++d) g.strides[k][d] = st[d];
  }
  return g;
}
#endif

// Calls loop(char** ptrs, const int64_t* inner_strides, int64_t n) on runs along dim 0,
// the flat index range split evenly over the OpenMP threads.
template <typename Loop>
void for_each(const Strided& g, const Loop& loop, int64_t grain = kElemGrain) {
  const int64_t N = g.numel;
  if (N <= 0) return;
  const int nd = g.ndim;
  const int nops = g.nops;
  int64_t inner_strides[kMaxOperands];
  for (int k = 0; k < nops; ++k) inner_strides[k] = nd ? g.strides[k][0] : 0;
  const int64_t inner = nd ? g.shape[0] : 1;
  auto run = [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxDims];
    int64_t rem = begin;
    for (int d = 0; d < nd; ++d) {
      idx[d] = rem % g.shape[d];
      rem /= g.shape[d];
    }
    char* ptrs[kMaxOperands];
    while (begin < end) {
      for (int k = 0; k < nops; ++k) {
        char* p = g.data[k];
        for (int d = 0; d < nd; ++d) p += idx[d] * g.strides[k][d];
        ptrs[k] = p;
      }
      int64_t i0 = nd ? idx[0] : 0;
      int64_t n = std::min(inner - i0, end - begin);
      loop(ptrs, inner_strides, n);
      begin += n;
      if (nd) {
        idx[0] += n;
        for (int d = 0; d + 1 < nd && idx[d] >= g.shape[d]; ++d) {
          idx[d] = 0;
          ++idx[d + 1];
        }
      }
    }
  };
  int nt = max_threads();
  if (N < grain || nt <= 1) {
    run(0, N);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
#ifdef _OPENMP
    int t = omp_get_thread_num(), T = omp_get_num_threads();
#else
    int t = 0, T = 1;
#endif
    // chunks aligned to 64 elements so threads do not share cache lines in the common case
    int64_t chunk = ((N + T - 1) / T + 63) / 64 * 64;
    int64_t b = std::min<int64_t>(N, t * chunk), e = std::min<int64_t>(N, b + chunk);
    if (b < e) run(b, e);
  }
}

#ifndef __CUDACC__
// ---- outputs past the caches: non-temporal stores ----
// An output this large is written with streaming stores: the loop overwrites whole lines, so
// reading them in first (what an ordinary store does) only costs bandwidth, and the output would
// not stay in cache anyway. One thread, o = a + b fp32, direct streaming stores (2-core AVX-512
// machine): 16 MB output 2.33 -> 1.30 ms, 8 MB 0.54 -> 0.33, 4 MB 0.18 -> 0.16; 1 MB 0.033 ->
// 0.039 (cache-resident).
constexpr int64_t kStreamOutBytes = int64_t(8) << 20;

// `bytes` from src to 64-byte aligned dst with streaming stores where the ISA has them.
inline void stream_copy(void* dst, const void* src, size_t bytes) {
  size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 64 <= bytes; i += 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(static_cast<char*>(dst) + i),
                        _mm512_load_si512(static_cast<const char*>(src) + i));
#elif defined(__AVX__)
  for (; i + 32 <= bytes; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(static_cast<char*>(dst) + i),
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(static_cast<const char*>(src) + i)));
#elif defined(__SSE2__)
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(static_cast<char*>(dst) + i),
                     _mm_load_si128(reinterpret_cast<const __m128i*>(static_cast<const char*>(src) + i)));
#endif
  std::memcpy(static_cast<char*>(dst) + i, static_cast<const char*>(src) + i, bytes - i);
}

// Elements [0, n) of o from block(dst, begin, len), which writes elements begin .. begin + len
// to dst[0 .. len): straight into o, or (stream) 512 bytes at a time into a buffer in L1 that is
// then streamed out (the head up to o's first 64-byte boundary written directly). Small blocks
// keep the loads and the streaming stores interleaved: 16 MB fp32 add, one thread, 1.3-1.5 ms
// with 512-byte blocks, 1.6-1.9 with 1 KB, 2.3-2.9 with 4 KB (plain stores 2.5).
template <typename O, typename F>
void write_out(O* o, int64_t n, bool stream, const F& block) {
  constexpr int64_t kBlock = 512 / sizeof(O);
  const uintptr_t mis = reinterpret_cast<uintptr_t>(o) % 64;
  // (short runs, e.g. a broadcast's narrow rows, and misaligned elements: plain stores)
  if (!stream || n < 4 * kBlock || mis % sizeof(O) != 0) return block(o, 0, n);
  const int64_t head = mis ? (64 - mis) / sizeof(O) : 0;
  if (head) block(o, 0, head);
  alignas(64) O buf[kBlock];
  for (int64_t i = head; i < n; i += kBlock) {
    const int64_t len = std::min(kBlock, n - i);
    block(buf, i, len);
    stream_copy(o + i, buf, (size_t)len * sizeof(O));
  }
#if defined(__SSE2__)
  _mm_sfence();  // streaming stores are weakly ordered: visible before anything after this
#endif
}

// Whether an elementwise loop writing `numel` elements of O to out (inputs `ins`) streams it.
inline bool stream_output(const void* out, int64_t numel, size_t elem, std::initializer_list<const void*> ins) {
  if (numel * (int64_t)elem < kStreamOutBytes) return false;
  for (const void* p : ins)
    if (p == out) return false;  // in place: the lines are in cache already
  return true;
}
#endif

// Splits [0, n) evenly over the threads (n large) or runs it on one thread.
template <typename F>
void parallel_range(int64_t n, int64_t cost_per_item, const F& f) {
  int nt = max_threads();
  if (n <= 0) return;
  if (nt <= 1 || n * cost_per_item < kElemGrain || n == 1) {
    f(int64_t(0), n);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
#ifdef _OPENMP
    int t = omp_get_thread_num(), T = omp_get_num_threads();
#else
    int t = 0, T = 1;
#endif
    int64_t chunk = (n + T - 1) / T;
    int64_t b = std::min<int64_t>(n, t * chunk), e = std::min<int64_t>(n, b + chunk);
    if (b < e) f(b, e);
  }
}

// ---- scalar types ----
template <typename T>
struct Compute {
  using type = T;
};
template <>
struct Compute<c10::BFloat16> {
  using type = float;
};
template <>
struct Compute<c10::Half> {
  using type = float;
};
template <>
struct Compute<bool> {
  using type = bool;
};
template <typename T>
using compute_t = typename Compute<T>::type;

// ---- vectorizable float math (Cephes-style range reduction + minimax polynomials) ----
inline float bits_to_float(int32_t i) { return __builtin_bit_cast(float, i); }
inline int32_t float_to_bits(float f) { return __builtin_bit_cast(int32_t, f); }

// exp, ~1 ulp; handles overflow (inf), underflow (denormals, then 0) and NaN.
inline float fast_exp(float x) {
  const float hi = 88.72283935546875f, lo = -103.972076416015625f;
  float xc = x > hi ? hi : x;
  xc = xc < lo ? lo : xc;
  float n = std::floor(xc * 1.44269504088896341f + 0.5f);
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float z = r * r;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * z + r + 1.0f;
  int32_t ni = static_cast<int32_t>(n);
  int32_t n1 = ni >> 1, n2 = ni - n1;  // two steps so that denormal results stay exact-ish
  float s1 = bits_to_float((n1 + 127) << 23), s2 = bits_to_float((n2 + 127) << 23);
  float res = p * s1 * s2;
  res = x > hi ? std::numeric_limits<float>::infinity() : res;
  res = x < lo ? 0.0f : res;
  res = x != x ? x : res;
  return res;
}

// natural log, ~1 ulp for normal inputs; log(0) = -inf, log(<0) = NaN, log(inf) = inf.
inline float fast_log(float x) {
  bool denorm = x < 1.17549435e-38f;
  float xs = denorm ? x * 8388608.0f : x;  // 2^23
  int32_t bits = float_to_bits(xs);
  float e = static_cast<float>(((bits >> 23) & 0xff) - 126) - (denorm ? 23.0f : 0.0f);
  float m = bits_to_float((bits & 0x807fffff) | 0x3f000000);  // [0.5, 1)
  bool small = m < 0.707106781186547524f;
  e = small ? e - 1.0f : e;
  m = small ? m + m - 1.0f : m - 1.0f;
  float z = m * m;
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
  r = x == std::numeric_limits<float>::infinity() ? x : r;
  r = x == 0.0f ? -std::numeric_limits<float>::infinity() : r;
  r = (x < 0.0f || x != x) ? std::numeric_limits<float>::quiet_NaN() : r;
  return r;
}

inline float fast_sigmoid(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

inline float fast_tanh(float x) {
  float ax = std::fabs(x);
  // |x| < 0.625: odd polynomial; else 1 - 2 / (exp(2|x|) + 1)
  float z = x * x;
  float p = -5.70498872745E-3f;
  p = p * z + 2.06390887954E-2f;
  p = p * z - 5.37397155531E-2f;
  p = p * z + 1.33314422036E-1f;
  p = p * z - 3.33332819422E-1f;
  float small = p * z * x + x;
  float big = 1.0f - 2.0f / (fast_exp(2.0f * ax) + 1.0f);
  big = x < 0 ? -big : big;
  float r = ax < 0.625f ? small : big;
  return x != x ? x : r;
}

// erfc with relative error < 1.2e-7 everywhere (Chebyshev fit, Numerical Recipes 6.2).
inline float fast_erfc(float x) {
  float z = std::fabs(x);
  float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  float ans = t * fast_exp(-z * z + p);
  return x >= 0.0f ? ans : 2.0f - ans;
}

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

// Generic math: float goes to the fast versions, double to libm.
inline float m_exp(float x) { return fast_exp(x); }
inline double m_exp(double x) { return std::exp(x); }
inline float m_log(float x) { return fast_log(x); }
inline double m_log(double x) { return std::log(x); }
inline float m_tanh(float x) { return fast_tanh(x); }
inline double m_tanh(double x) { return std::tanh(x); }
inline float m_erfc(float x) { return fast_erfc(x); }
inline double m_erfc(double x) { return std::erfc(x); }

template <typename C>
inline C gelu_erf(C x) {
  return C(0.5) * x * m_erfc(-x * C(kSqrt1_2));
}
template <typename C>
inline C gelu_tanh(C x) {
  // 0.5 x (1 + tanh(u)) = x * sigmoid(2u), which keeps full precision for x << 0
  C u = C(kSqrt2OverPi) * (x + C(0.044715) * x * x * x);
  return x / (C(1) + m_exp(C(-2) * u));
}
template <typename C>
inline C gelu_erf_grad(C x) {
  C cdf = C(0.5) * m_erfc(-x * C(kSqrt1_2));
  C pdf = m_exp(C(-0.5) * x * x) * C(kInvSqrt2Pi);
  return cdf + x * pdf;
}
template <typename C>
inline C gelu_tanh_grad(C x) {
  C x2 = x * x;
  C u = C(kSqrt2OverPi) * (x + C(0.044715) * x2 * x);
  C t = m_tanh(u);
  C du = C(kSqrt2OverPi) * (C(1) + C(3 * 0.044715) * x2);
  return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * du;
}

// ---- entry points shared with other families ----
// dst <- src with dtype conversion, any strides, broadcasting src to dst's shape.
// dst and src must live in host memory (CPU or the mytorch device).
void copy_cast_(const at::Tensor& dst, const at::Tensor& src);
// A tensor with t's values in dtype, on t's device (t itself when it already has it).
at::Tensor to_dtype(const at::Tensor& t, at::ScalarType dtype);
// r itself when contiguous, else a contiguous copy: the results of the mytorch:: elementwise ops.
at::Tensor contiguous_result(const at::Tensor& r);

}  // namespace cpu
}  // namespace mytorch

namespace mytorch {
namespace cpu {

// ---- elementwise ops other files route to ----
enum class Bin {
  Add, Sub, Mul, Div, DivTrunc, DivFloor, Maximum, Minimum, Pow,
  Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr,
  SigmoidBwd, TanhBwd, SiluBwd, GeluBwd, GeluTanhBwd, ThresholdBwd, Lerp,
};
enum class Un {
  Neg, Abs, Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Relu, Silu, Gelu, GeluTanh,
  Reciprocal, Sign, Clamp, Square, LogicalNot,
};
enum class Tern { Where, Addcmul, Addcdiv, LerpTensor };

const char* op_name(Bin op);
const char* op_name(Un op);
const char* op_name(Tern op);

// result = a (op) b, broadcast, ATen type promotion. `out` undefined: a new tensor;
// defined: written (resized like an ATen out= argument) and returned. `alpha` is the
// scale of b for Add/Sub, the threshold for ThresholdBwd, the weight for Lerp.
at::Tensor binary(Bin op, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha,
                  const at::Tensor& out);
// In place into a (a's shape must be the broadcast shape).
at::Tensor& binary_(Bin op, at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);
// lo/hi are the bounds for Clamp (either may be None).
at::Tensor unary(Un op, const at::Tensor& x, const at::Tensor& out,
                 const std::optional<at::Scalar>& lo = std::nullopt,
                 const std::optional<at::Scalar>& hi = std::nullopt);
at::Tensor& unary_(Un op, at::Tensor& x, const std::optional<at::Scalar>& lo = std::nullopt,
                   const std::optional<at::Scalar>& hi = std::nullopt);
// Where(c, a, b); Addcmul(self, t1, t2) with value; Addcdiv; LerpTensor(self, end, weight).
at::Tensor ternary(Tern op, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                   const at::Scalar& value, const at::Tensor& out);
at::Tensor& ternary_(Tern op, at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                     const at::Scalar& value);
// x[mask] = value, mask broadcast to x; value is a Scalar or a 0-dim tensor.
at::Tensor& masked_fill_(at::Tensor& x, const at::Tensor& mask, const at::Scalar& value);
// A copy of x for an out-of-place masked_fill: a larger mask broadcasts x too (as ATen).
at::Tensor masked_fill_copy(const at::Tensor& x, const at::Tensor& mask);
// x[:] = value
at::Tensor& fill_(at::Tensor& x, const at::Scalar& value);

// A 0-dim CPU tensor holding s, flagged as a wrapped number (how ATen passes Python scalars).
at::Tensor wrap_scalar(const at::Scalar& s);
// The device of the operands, ignoring 0-dim CPU tensors; raises when they disagree.
at::Device common_device(const char* op, std::initializer_list<at::Tensor> ts);

}  // namespace cpu
}  // namespace mytorch
