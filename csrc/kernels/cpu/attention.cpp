// FlashAttention on the CPU (OpenMP + AVX-512 / AVX2 tiles).
//
// Forward: one task per (sequence, q head, one or a few blocks of kBq queries). A query
// block is packed transposed (head_dim x kBq) so that every tile product and the whole
// online softmax run along queries in SIMD lanes without horizontal reductions:
//   S^T (keys x queries) = K . Q^T,  O^T (head_dim x queries) += V^T . P^T.
// K and V are packed once per call into the panel layouts the two products stream
// (qk_block, pv_block). The N x N matrix never exists; a task holds O(kBq * head_dim) floats.
// Backward: one task per (sequence, kv head, set of key blocks). It keeps dK, dV of
// its key block in registers-sized buffers, recomputes P from the saved log-sum-exp
// and accumulates dQ into a per-chunk fp32 buffer (O(N * head_dim)), summed at the end.
// Dropout keeps (seq, head, row, col) iff a hash of (seed, seq, head, row, col) says so,
// so the backward regenerates the same mask.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "checks.h"
#include "kernels/attention_checks.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kept_buffer.h"
#include "kernels/cpu/kvcache.h"
#include "kernels/cpu/register_transpose.h"
#include "kernels/cpu/vec_math.h"

// The kernels run the widest copy of this file the CPU has (kernels/cpu/isa/attention_*.cpp).
MYTORCH_ISA_DECLARE(flash_forward)
MYTORCH_ISA_DECLARE(flash_backward)

namespace mytorch {
namespace cpu {
namespace {

// ---------------------------------------------------------------- SIMD vectors
// One lane type per accumulation type: float uses the widest ISA compiled in,
// double (gradcheck) uses plain scalars.
template <typename T>
struct Scalar {
  using type = T;
  static constexpr int W = 1;
  static constexpr int kR = 4, kC = 4;  // micro-tile: rows x vectors
  // the forward's tiles (see qk_block, pv_block): K . Q^T in kQR keys x kQC vectors, keys
  // packed in panels of kKP; V^T . P^T in kVR rows of V^T (its panel width) x kVC vectors
  static constexpr int kQR = 4, kQC = 4, kKP = 4, kVR = 4, kVC = 4;
  T v;
  static Scalar load(const T* p) { return {*p}; }
  void store(T* p) const { *p = v; }
  static Scalar set1(T x) { return {x}; }
  static Scalar zero() { return {T(0)}; }
  friend Scalar fmadd(Scalar a, Scalar b, Scalar c) { return {a.v * b.v + c.v}; }
  friend Scalar operator+(Scalar a, Scalar b) { return {a.v + b.v}; }
  friend Scalar operator-(Scalar a, Scalar b) { return {a.v - b.v}; }
  friend Scalar operator*(Scalar a, Scalar b) { return {a.v * b.v}; }
  friend Scalar vmax(Scalar a, Scalar b) { return {b.v > a.v ? b.v : a.v}; }
  friend Scalar vexp(Scalar a) { return {std::exp(a.v)}; }
  friend Scalar vexp2(Scalar a) { return {std::exp2(a.v)}; }
};

// 2^x for the forward's softmax, whose scores are in base-2 units (scaled by log2(e) with
// the query): x = n + r, |r| <= 1/2, a degree-5 minimax polynomial for 2^r (relative error
// under 2 ulp), times 2^n.
constexpr float kExp2P[6] = {1.0000001192e+0f, 6.9314700365e-1f, 2.4022118747e-1f,
                             5.5506952107e-2f, 9.6755903214e-3f, 1.3282303698e-3f};

#if defined(__AVX512F__)
struct VecF {
  using type = float;
  static constexpr int W = 16;
  static constexpr int kR = 6, kC = 4;
  static constexpr int kQR = 12, kQC = 2, kKP = 4, kVR = 6, kVC = 4;
  __m512 v;
  static VecF load(const float* p) { return {_mm512_loadu_ps(p)}; }
  void store(float* p) const { _mm512_storeu_ps(p, v); }
  static VecF set1(float x) { return {_mm512_set1_ps(x)}; }
  static VecF zero() { return {_mm512_setzero_ps()}; }
  friend VecF fmadd(VecF a, VecF b, VecF c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
  friend VecF operator+(VecF a, VecF b) { return {_mm512_add_ps(a.v, b.v)}; }
  friend VecF operator-(VecF a, VecF b) { return {_mm512_sub_ps(a.v, b.v)}; }
  friend VecF operator*(VecF a, VecF b) { return {_mm512_mul_ps(a.v, b.v)}; }
  friend VecF vmax(VecF a, VecF b) { return {_mm512_max_ps(a.v, b.v)}; }
  friend VecF vexp(VecF x) { return {exp512(x.v)}; }  // vec_math.h
  friend VecF vexp2(VecF x) {
    // below -160 the result is 0 (scalef saturates); -inf stays out of x - round(x)
    const __m512 y = _mm512_max_ps(_mm512_set1_ps(-160.f), x.v);  // NaN passes through
    const __m512 n = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_sub_ps(y, n);
    __m512 q = _mm512_set1_ps(kExp2P[5]);
    for (int i = 4; i >= 0; --i) q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(kExp2P[i]));
    return {_mm512_scalef_ps(q, n)};
  }
};
#elif defined(__AVX2__) && defined(__FMA__)
struct VecF {
  using type = float;
  static constexpr int W = 8;
  static constexpr int kR = 6, kC = 2;
  static constexpr int kQR = 6, kQC = 2, kKP = 2, kVR = 6, kVC = 2;
  __m256 v;
  static VecF load(const float* p) { return {_mm256_loadu_ps(p)}; }
  void store(float* p) const { _mm256_storeu_ps(p, v); }
  static VecF set1(float x) { return {_mm256_set1_ps(x)}; }
  static VecF zero() { return {_mm256_setzero_ps()}; }
  friend VecF fmadd(VecF a, VecF b, VecF c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
  friend VecF operator+(VecF a, VecF b) { return {_mm256_add_ps(a.v, b.v)}; }
  friend VecF operator-(VecF a, VecF b) { return {_mm256_sub_ps(a.v, b.v)}; }
  friend VecF operator*(VecF a, VecF b) { return {_mm256_mul_ps(a.v, b.v)}; }
  friend VecF vmax(VecF a, VecF b) { return {_mm256_max_ps(a.v, b.v)}; }
  friend VecF vexp(VecF x) { return {exp256(x.v)}; }  // vec_math.h
  friend VecF vexp2(VecF x) {
    const __m256 y = _mm256_max_ps(_mm256_set1_ps(-151.f), _mm256_min_ps(_mm256_set1_ps(128.f), x.v));
    const __m256 n = _mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 r = _mm256_sub_ps(y, n);
    __m256 q = _mm256_set1_ps(kExp2P[5]);
    for (int i = 4; i >= 0; --i) q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(kExp2P[i]));
    // 2^n in two normal factors 2^(n/2), so that the last product rounds once (as exp256)
    const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return {_mm256_mul_ps(_mm256_mul_ps(q, s1), s2)};
  }
};
#else
using VecF = Scalar<float>;
#endif

template <typename A>
struct VecOf { using type = Scalar<A>; };
template <>
struct VecOf<float> { using type = VecF; };

// ------------------------------------------------------------- block transposes
// The forward keeps a query block transposed (head_dim x kBq); these move it between that
// layout and the (token, head_dim) rows of q and out. The AVX-512 copy transposes 16 x 16
// tiles in registers, the scalar loops take the edges and the other ISAs.
#if defined(__AVX512F__)
// 16 elements as float, converted one by one as the scalar loops convert them.
template <typename T>
inline __m512 load16f(const T* p) {
  if constexpr (std::is_same<T, float>::value) {
    return _mm512_loadu_ps(p);
  } else {
    float f[16];
    for (int i = 0; i < 16; ++i) f[i] = static_cast<float>(p[i]);
    return _mm512_loadu_ps(f);
  }
}
template <typename T>
inline void store16f(T* p, __m512 v) {
  if constexpr (std::is_same<T, float>::value) {
    _mm512_storeu_ps(p, v);
  } else {
    float f[16];
    _mm512_storeu_ps(f, v);
    for (int i = 0; i < 16; ++i) p[i] = static_cast<T>(f[i]);
  }
}

// out[d * 4 + r] = r[r][d] for d < 16: four rows of 16 interleaved (a panel of 4 keys).
inline void interleave4(const __m512 r[4], float* out) {
  const __m512 t0 = _mm512_unpacklo_ps(r[0], r[1]), t1 = _mm512_unpackhi_ps(r[0], r[1]);
  const __m512 t2 = _mm512_unpacklo_ps(r[2], r[3]), t3 = _mm512_unpackhi_ps(r[2], r[3]);
  const __m512 u0 = _mm512_shuffle_ps(t0, t2, 0x44), u1 = _mm512_shuffle_ps(t0, t2, 0xEE);
  const __m512 u2 = _mm512_shuffle_ps(t1, t3, 0x44), u3 = _mm512_shuffle_ps(t1, t3, 0xEE);
  const __m512 v0 = _mm512_shuffle_f32x4(u0, u1, 0x44), v1 = _mm512_shuffle_f32x4(u2, u3, 0x44);
  const __m512 v2 = _mm512_shuffle_f32x4(u0, u1, 0xEE), v3 = _mm512_shuffle_f32x4(u2, u3, 0xEE);
  _mm512_storeu_ps(out, _mm512_shuffle_f32x4(v0, v1, 0x88));
  _mm512_storeu_ps(out + 16, _mm512_shuffle_f32x4(v0, v1, 0xDD));
  _mm512_storeu_ps(out + 32, _mm512_shuffle_f32x4(v2, v3, 0x88));
  _mm512_storeu_ps(out + 48, _mm512_shuffle_f32x4(v2, v3, 0xDD));
}
#endif

// dst[d * ldd + i] = src[i * lds + d] * c for i < n, d < D; columns n..ldd of dst are zeroed.
template <typename T, typename A>
inline void load_transposed(const T* src, int64_t lds, int64_t n, int64_t D, A c, A* dst, int64_t ldd) {
  int64_t i0 = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same<A, float>::value) {
    const int64_t D16 = D / 16 * 16;
    const __m512 cv = _mm512_set1_ps(c);
    for (; i0 + 16 <= n; i0 += 16) {
      for (int64_t d0 = 0; d0 < D16; d0 += 16) {
        __m512 r[16];
        for (int k = 0; k < 16; ++k) r[k] = load16f(src + (i0 + k) * lds + d0);
        transpose16(r);
        for (int k = 0; k < 16; ++k) _mm512_storeu_ps(dst + (d0 + k) * ldd + i0, _mm512_mul_ps(r[k], cv));
      }
      for (int64_t i = i0; i < i0 + 16; ++i)
        for (int64_t d = D16; d < D; ++d) dst[d * ldd + i] = static_cast<A>(src[i * lds + d]) * c;
    }
  }
#endif
  for (int64_t i = i0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d) dst[d * ldd + i] = static_cast<A>(src[i * lds + d]) * c;
  if (n < ldd)
    for (int64_t d = 0; d < D; ++d) std::fill(dst + d * ldd + n, dst + (d + 1) * ldd, A(0));
}

// dst[i * ldd + d] = src[d * lds + i] * f[i] for i < n, d < D.
template <typename T, typename A>
inline void store_transposed(const A* src, int64_t lds, int64_t n, int64_t D, const A* f, T* dst, int64_t ldd) {
  int64_t i0 = 0;
#if defined(__AVX512F__)
  if constexpr (std::is_same<A, float>::value) {
    const int64_t D16 = D / 16 * 16;
    for (; i0 + 16 <= n; i0 += 16) {
      for (int64_t d0 = 0; d0 < D16; d0 += 16) {
        __m512 r[16];
        for (int k = 0; k < 16; ++k) r[k] = _mm512_loadu_ps(src + (d0 + k) * lds + i0);
        transpose16(r);
        for (int k = 0; k < 16; ++k)
          store16f(dst + (i0 + k) * ldd + d0, _mm512_mul_ps(r[k], _mm512_set1_ps(f[i0 + k])));
      }
      for (int64_t i = i0; i < i0 + 16; ++i)
        for (int64_t d = D16; d < D; ++d) dst[i * ldd + d] = static_cast<T>(src[d * lds + i] * f[i]);
    }
  }
#endif
  for (int64_t i = i0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d) dst[i * ldd + d] = static_cast<T>(src[d * lds + i] * f[i]);
}

// ------------------------------------------------------------- tile products
// C[r, 0:C*W] (+)= sum_k A[r*ar + k*ak] * B[k*ldb + 0:C*W] for r < R. With ACC and cs,
// the old C is scaled by the column factors cs[0:C*W] first: C = C * cs + A.B.
// P < R: A's rows lie in panels of P, row r at a[(r / P) * ps + (r % P) * ar + k * ak].
template <typename V, int R, int C, bool ACC, int P = R>
inline void micro(int64_t K, const typename V::type* a, int64_t ar, int64_t ak,
                  const typename V::type* b, int64_t ldb, typename V::type* c, int64_t ldc,
                  const typename V::type* cs, int64_t ps = 0) {
  constexpr int W = V::W;
  V acc[R][C];
  if (ACC && cs) {
    V f[C];
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) f[j] = V::load(cs + j * W);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) acc[r][j] = V::load(c + r * ldc + j * W) * f[j];
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) acc[r][j] = ACC ? V::load(c + r * ldc + j * W) : V::zero();
  }
  for (int64_t k = 0; k < K; ++k) {
    V bv[C];
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) bv[j] = V::load(b + j * W);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      V av = V::set1(a[(r / P) * ps + (r % P) * ar]);
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) acc[r][j] = fmadd(av, bv[j], acc[r][j]);
    }
    a += ak;
    b += ldb;
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) acc[r][j].store(c + r * ldc + j * W);
}

template <typename V, int C, bool ACC>
inline void gemm_rows(int64_t M, int64_t K, const typename V::type* a, int64_t ar, int64_t ak,
                      const typename V::type* b, int64_t ldb, typename V::type* c, int64_t ldc,
                      const typename V::type* cs) {
  constexpr int R = V::kR;
  int64_t m = 0;
  for (; m + R <= M; m += R) micro<V, R, C, ACC>(K, a + m * ar, ar, ak, b, ldb, c + m * ldc, ldc, cs);
  const auto* am = a + m * ar;
  auto* cm = c + m * ldc;
  switch (M - m) {
    case 1: micro<V, 1, C, ACC>(K, am, ar, ak, b, ldb, cm, ldc, cs); break;
    case 2: micro<V, 2, C, ACC>(K, am, ar, ak, b, ldb, cm, ldc, cs); break;
    case 3: micro<V, 3, C, ACC>(K, am, ar, ak, b, ldb, cm, ldc, cs); break;
    case 4: if constexpr (R > 4) micro<V, 4, C, ACC>(K, am, ar, ak, b, ldb, cm, ldc, cs); break;
    case 5: if constexpr (R > 5) micro<V, 5, C, ACC>(K, am, ar, ak, b, ldb, cm, ldc, cs); break;
    default: break;
  }
}

// C (M x N) (+)= A (M x K, element (r, k) at a[r*ar + k*ak]) . B (K x N, row stride ldb).
// N is a multiple of V::W. With ACC and cs, C = C * cs[column] + A.B.
template <typename V, bool ACC>
void gemm(int64_t M, int64_t N, int64_t K, const typename V::type* a, int64_t ar, int64_t ak,
          const typename V::type* b, int64_t ldb, typename V::type* c, int64_t ldc,
          const typename V::type* cs = nullptr) {
  constexpr int W = V::W, C = V::kC;
  int64_t n = 0;
  auto csn = [&](int64_t n) { return cs ? cs + n : cs; };
  for (; n + C * W <= N; n += C * W)
    gemm_rows<V, C, ACC>(M, K, a, ar, ak, b + n, ldb, c + n, ldc, csn(n));
  for (; n + 2 * W <= N; n += 2 * W)
    gemm_rows<V, 2, ACC>(M, K, a, ar, ak, b + n, ldb, c + n, ldc, csn(n));
  for (; n < N; n += W) gemm_rows<V, 1, ACC>(M, K, a, ar, ak, b + n, ldb, c + n, ldc, csn(n));
}

// ------------------------------------------------------------- problem layout
struct Strides {
  int64_t b = 0, t = 0, h = 0;  // batch, token, head (elements)
};

inline Strides strides_of(const at::Tensor& t, bool varlen) {
  if (varlen) return {0, t.stride(0), t.stride(1)};
  return {t.stride(0), t.stride(1), t.stride(2)};
}

struct Problem {
  int64_t batch = 0, hq = 0, hk = 0, d = 0, dv = 0;  // head_dim of q and k, of v
  int64_t nq = 0, nk = 0;  // padded layout lengths
  const int64_t* cu_q = nullptr;
  const int64_t* cu_k = nullptr;
  int64_t total_q = 0;
  Strides sq, sk, sv, so;
  double scale = 1.0, softcap = 0.0;
  bool has_lo = false, has_hi = false;
  int64_t wl = 0, wr = 0;
  const float* alibi = nullptr;
  int64_t alibi_sb = 0;
  const float* bias = nullptr;  // additive score bias, float32
  int64_t bias_sb = 0, bias_sh = 0, bias_si = 0, bias_sj = 0;
  double dropout = 0.0;
  uint64_t seed = 0;

  bool varlen() const { return cu_q != nullptr; }
  int64_t group() const { return hq / hk; }
};

struct Seq {
  int64_t q0, nq, k0, nk;  // first token and length of this sequence's queries, keys
  int64_t off;             // diagonal: key i + off is "aligned" with query i
};

inline Seq seq_of(const Problem& p, int64_t b) {
  Seq s;
  if (p.varlen()) {
    s = {p.cu_q[b], p.cu_q[b + 1] - p.cu_q[b], p.cu_k[b], p.cu_k[b + 1] - p.cu_k[b], 0};
  } else {
    s = {0, p.nq, 0, p.nk, 0};
  }
  s.off = s.nk - s.nq;  // bottom-right aligned
  return s;
}

// Keys visible from query i are [jlo(i), jhi(i)).
inline int64_t jlo(const Problem& p, const Seq& s, int64_t i) {
  return p.has_lo ? std::min(s.nk, std::max<int64_t>(0, i + s.off - p.wl)) : 0;
}
inline int64_t jhi(const Problem& p, const Seq& s, int64_t i) {
  return p.has_hi ? std::max<int64_t>(0, std::min(s.nk, i + s.off + p.wr + 1)) : s.nk;
}

// Row of (sequence b, q head h, query i) in lse (and the per-row buffers).
inline int64_t row_of(const Problem& p, int64_t b, const Seq& s, int64_t h, int64_t i) {
  return p.varlen() ? h * p.total_q + s.q0 + i : (b * p.hq + h) * p.nq + i;
}

inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct Dropout {
  bool on = false;
  uint64_t base = 0;
  uint32_t threshold = 0;  // keep iff 24-bit hash >= threshold
  float rescale = 1.f;

  Dropout(const Problem& p, int64_t b, int64_t h) {
    if (p.dropout <= 0) return;
    on = true;
    base = mix64(mix64(p.seed) ^ mix64(static_cast<uint64_t>(b) * 0x100000001B3ULL + static_cast<uint64_t>(h)));
    threshold = static_cast<uint32_t>(std::llround(p.dropout * double(1 << 24)));
    rescale = static_cast<float>(1.0 / (1.0 - p.dropout));
  }
  bool keep(int64_t i, int64_t j) const {
    uint64_t r = mix64(base ^ (static_cast<uint64_t>(i) * 0xD1B54A32D192ED03ULL +
                              static_cast<uint64_t>(j) * 0x8CB92BA72F3D8DD7ULL));
    return static_cast<uint32_t>(r >> 40) >= threshold;
  }
};

// The score transforms other than the scale: softcap, ALiBi, bias, mask.
template <typename T, typename A>
struct Scores {
  const Problem& p;
  const Seq& s;
  A softcap, slope = 0;
  const float* bias = nullptr;

  Scores(const Problem& p_, const Seq& s_, int64_t b, int64_t h) : p(p_), s(s_), softcap(A(p_.softcap)) {
    if (p.alibi) slope = A(p.alibi[b * p.alibi_sb + h]);
    if (p.bias) bias = p.bias + b * p.bias_sb + h * p.bias_sh;
  }
  bool plain() const { return p.softcap <= 0 && !p.alibi && !p.bias; }
  // raw: q.k * scale (or / softcap). Returns the final score; g = d(score)/d(raw).
  A apply(A raw, int64_t i, int64_t j, A* g) const {
    A x = raw;
    if (p.softcap > 0) {
      A t = std::tanh(raw);
      x = softcap * t;
      if (g) *g = softcap * (A(1) - t * t);
    } else if (g) {
      *g = A(1);
    }
    if (p.alibi) x -= slope * A(std::abs(i + s.off - j));
    if (bias) x += A(bias[i * p.bias_si + j * p.bias_sj]);
    return x;
  }
  bool visible(int64_t i, int64_t j) const {
    return j >= jlo(p, s, i) && j < jhi(p, s, i);
  }
};

constexpr int64_t kBq = 64, kBk = 64;
// Keys per block of the forward: whole QK tiles (kQR: 12, 6, 4) for every ISA.
constexpr int64_t kBkF = 96;

// Sets row[0:a) and row[b:n) to -inf (the columns outside the visible range [a, b)).
template <typename A>
inline void mask_outside(A* row, int64_t n, int64_t a, int64_t b) {
  const A ninf = -std::numeric_limits<A>::infinity();
  a = std::min(std::max<int64_t>(a, 0), n);
  b = std::min(std::max(b, a), n);
  std::fill(row, row + a, ninf);
  std::fill(row + b, row + n, ninf);
}

// Pre-multiplier of q.k in the kernel: scale, or scale / softcap under softcap.
inline double raw_scale(const Problem& p) { return p.softcap > 0 ? p.scale / p.softcap : p.scale; }

// The forward's two products read every operand as one sequential stream, from layouts that
// the forward packs for them (a row-major K or V read in place would have each tile gather
// its rows at a stride of heads * head_dim).
//
// S^T (nb keys x kBq queries, row stride kBq) = K . Q^T, in whole tiles of kQR keys: the rows
// of st past nb are written too (kp holds at least kQR - 1 packed rows past the last key).
// kp: keys in panels of kKP, key j, element d at kp[(j / kKP) * kKP * D + d * kKP + j % kKP];
// qt: Q^T in panels of kQC * W queries, query i, element d at qt[(i / QW) * QW * D + d * QW + i % QW].
// A tile of kQR keys reads its kQR / kKP panels from L1 while the Q^T panel (D x QW) stays there.
template <typename V>
void qk_block(int64_t nb, int64_t D, const typename V::type* kp, const typename V::type* qt,
              typename V::type* st) {
  constexpr int R = V::kQR, C = V::kQC, P = V::kKP;
  constexpr int64_t QW = C * V::W;
  static_assert(R % P == 0 && kBq % QW == 0 && kBkF % R == 0, "tile shapes");
  for (int64_t n = 0; n < kBq; n += QW) {
    const auto* b = qt + n * D;
    for (int64_t m = 0; m < nb; m += R)
      micro<V, R, C, false, P>(D, kp + m * D, 1, P, b, QW, st + m * kBq + n, kBq, nullptr, P * D);
  }
}

// O^T (Dvp x kBq, row stride kBq) = O^T * alpha[column] + V^T . P^T (ACC), or V^T . P^T, over
// the nb keys from key j0. vp: V^T in panels of kVR rows (Dvp: Dv rounded up to whole panels,
// the rows past Dv zero), panel of rows [d0, d0 + kVR) at vp + d0 * ldp, key j, row d0 + r
// at [j * kVR + r] (ldp: rows of V packed).
template <typename V, bool ACC>
void pv_block(int64_t nb, int64_t Dvp, const typename V::type* vp, int64_t ldp, int64_t j0,
              const typename V::type* st, typename V::type* ot, const typename V::type* alpha) {
  constexpr int R = V::kVR, C = V::kVC;
  constexpr int64_t CW = C * V::W;
  static_assert(kBq % CW == 0, "tile shapes");
  for (int64_t d0 = 0; d0 < Dvp; d0 += R) {
    const auto* a = vp + d0 * ldp + j0 * R;
    for (int64_t n = 0; n < kBq; n += CW)
      micro<V, R, C, ACC>(nb, a, 1, R, st + n, kBq, ot + d0 * kBq + n, kBq, alpha + n);
  }
}

// Scratch of at least n elements, kept by the calling thread for its next call (slot: one
// buffer per use; kernels/cpu/kept_buffer.h). Blocks over kKeepScratch elements are the
// caller's to free (owner).
constexpr int64_t kKeepScratch = int64_t(1) << 22;
template <typename A, int slot>
A* scratch(int64_t n, std::unique_ptr<A[]>& owner) {
  return kept_buffer<A, slot, kKeepScratch>(n, owner);
}

inline int num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// ------------------------------------------------------------------ forward
// Packed K, V of one chunk of the forward: at most this many floats (both together), or
// one (sequence, kv head) if that alone is larger.
constexpr int64_t kPackFloats = int64_t(1) << 24;

template <typename T, typename V>
void forward_kernel(const Problem& p, const T* q, const T* k, const T* v, T* out, float* lse) {
  using A = typename V::type;
  constexpr int W = V::W;
  const int64_t D = p.d, Dv = p.dv, G = p.group();
  // The softmax runs in base 2: the plain scores come out of the product already scaled by
  // log2(e) (folded into Q), the transformed ones are scaled after the transform; m is then
  // in base-2 units and lse = ln(2) * m + ln(l).
  const A log2e = A(1.4426950408889634), ln2 = A(0.6931471805599453);
  const bool plain = p.softcap <= 0 && !p.alibi && !p.bias;
  const A c = A(raw_scale(p)) * (plain ? log2e : A(1));

  // K and V of each (sequence, kv head) are packed once, in the accumulation type, shared by
  // all query blocks and the q heads of the group: rows of a (batch, seqlen, heads, head_dim)
  // tensor sit heads * head_dim apart, a power-of-two stride that thrashes L1 sets when read
  // in place. K goes into panels of kKP keys (qk_block), V transposed into panels of kVR of
  // its rows (pv_block); a pair takes nk rows rounded up to whole K panels, and kQR more
  // (zeros) for qk_block's last tile. The pairs are done in chunks of at most kPackFloats
  // packed floats, each chunk packed, then attended.
  constexpr int64_t P = V::kKP, RV = V::kVR;
  const int64_t Dvp = (Dv + RV - 1) / RV * RV;
  struct Pair { int64_t b, hk, nk, np, off; };  // np: packed rows, off: first packed row
  struct Task { int64_t pair, h, i0; };
  // A task takes nsub query blocks of one q head, which share each block of K and V while it
  // is in L2: at large head dims one (sequence, kv head) of K and V outgrows L2, and a
  // single query block per pass would stream all of it from farther away once per kBq queries.
  int64_t nsub = 1;
  if (!p.has_lo) {  // a left window gives each query block its own first key block
    int64_t qblocks = 0;
    for (int64_t b = 0; b < p.batch; ++b) qblocks += p.hq * ((seq_of(p, b).nq + kBq - 1) / kBq);
    // the task's Q^T and O^T blocks stay within a quarter of a 2 MB L2, and every thread
    // gets at least four tasks
    const int64_t cap = std::max<int64_t>(1, (int64_t(512) << 10) / ((D + Dv) * kBq * int64_t(sizeof(A))));
    while (nsub * 2 <= std::min<int64_t>(cap, 16) && qblocks / (nsub * 2) >= 4 * num_threads()) nsub *= 2;
  }
  std::vector<Pair> pairs;
  std::vector<int64_t> chunk_pairs{0}, chunk_tasks{0};
  std::vector<Task> tasks;
  double work = 0;
  int64_t max_rows = 0, chunk_rows = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const Seq s = seq_of(p, b);
    work += double(p.hq) * s.nq * s.nk * D;
    for (int64_t hk = 0; hk < p.hk; ++hk) {
      const int64_t np = (s.nk + P - 1) / P * P + V::kQR;
      if (chunk_rows > 0 && (chunk_rows + np) * (D + Dvp) > kPackFloats) {
        chunk_pairs.push_back(static_cast<int64_t>(pairs.size()));
        chunk_tasks.push_back(static_cast<int64_t>(tasks.size()));
        max_rows = std::max(max_rows, chunk_rows);
        chunk_rows = 0;
      }
      const int64_t pi = static_cast<int64_t>(pairs.size());
      pairs.push_back({b, hk, s.nk, np, chunk_rows});
      chunk_rows += np;
      // longest tasks first (causal: the last query blocks see the most keys)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t i0 = (s.nq - 1) / (kBq * nsub) * (kBq * nsub); i0 >= 0; i0 -= kBq * nsub)
          tasks.push_back({pi, hk * G + g, i0});
    }
  }
  chunk_pairs.push_back(static_cast<int64_t>(pairs.size()));
  chunk_tasks.push_back(static_cast<int64_t>(tasks.size()));
  max_rows = std::max(max_rows, chunk_rows);
  const int64_t nchunks = static_cast<int64_t>(chunk_pairs.size()) - 1;
  // not zero-filled: the packing writes every row before it is read
  std::unique_ptr<A[]> kown, vown;
  A* const kpack = scratch<A, 0>(max_rows * D, kown);
  A* const vpack = scratch<A, 1>(max_rows * Dvp, vown);
  constexpr int64_t kPackRows = 256;  // rows per packing unit, a multiple of P

#pragma omp parallel if (work > (1 << 18) && tasks.size() > 1)
  {
    constexpr int64_t QW = V::kQC * W;  // queries per panel of Q^T (qk_block)
    // per thread, not zero-filled: each is written before it is read
    const int64_t nst = kBkF * kBq;
    std::unique_ptr<A[]> own;
    A* const qtv = scratch<A, 2>(nsub * (D + Dvp + 3) * kBq + nst, own);  // nsub x D x kBq: Q^T, c-scaled
    A* const otv = qtv + nsub * D * kBq;       // nsub x Dvp x kBq: O^T
    A* const mv = otv + nsub * Dvp * kBq;      // nsub x kBq: running max (base 2)
    A* const lv = mv + nsub * kBq;             // nsub x kBq: running sum
    A* const alv = lv + nsub * kBq;            // nsub x kBq: rescale factors, then 1 / l
    A* const st = alv + nsub * kBq;            // kBkF x kBq: S^T, then P^T
    struct QBlock {
      int64_t i0, nq, jbeg, jend;
      bool first;
    };
    std::vector<QBlock> qbs(nsub);
    for (int64_t ch = 0; ch < nchunks; ++ch) {
      const int64_t p0 = chunk_pairs[ch], p1 = chunk_pairs[ch + 1];
      int64_t max_nk = 0;
      for (int64_t pi = p0; pi < p1; ++pi) max_nk = std::max(max_nk, pairs[pi].nk);
      const int64_t per = (max_nk + kPackRows - 1) / kPackRows;
#pragma omp for schedule(dynamic, 1)
      for (int64_t u = 0; u < (p1 - p0) * per; ++u) {
        const Pair& pr = pairs[p0 + u / per];
        const Seq s = seq_of(p, pr.b);
        const int64_t r0 = (u % per) * kPackRows, r1 = std::min(pr.nk, r0 + kPackRows);
        if (r1 == pr.nk)  // the rows past the last whole K panel
          std::fill(kpack + (pr.off + (pr.nk + P - 1) / P * P) * D, kpack + (pr.off + pr.np) * D, A(0));
        const T* kb = k + pr.b * p.sk.b + s.k0 * p.sk.t + pr.hk * p.sk.h;
        const T* vb = v + pr.b * p.sv.b + s.k0 * p.sv.t + pr.hk * p.sv.h;
        for (int64_t j = r0; j < r1; j += P) {
          A* kd = kpack + (pr.off + j) * D;
          const int64_t h = std::min(P, pr.nk - j);  // the last panel is padded with zeros
          if (h == P) {
            int64_t d = 0;
#if defined(__AVX512F__)
            if constexpr (std::is_same<A, float>::value && P == 4) {
              for (; d + 16 <= D; d += 16) {
                __m512 r4[4];
                for (int r = 0; r < 4; ++r) r4[r] = load16f(kb + (j + r) * p.sk.t + d);
                interleave4(r4, kd + d * 4);
              }
            }
#endif
            for (; d < D; ++d)
              for (int64_t r = 0; r < P; ++r) kd[d * P + r] = static_cast<A>(kb[(j + r) * p.sk.t + d]);
          } else {
            for (int64_t d = 0; d < D; ++d)
              for (int64_t r = 0; r < P; ++r) kd[d * P + r] = r < h ? static_cast<A>(kb[(j + r) * p.sk.t + d]) : A(0);
          }
        }
        // V^T panels, 16 rows at a time: each panel gets one contiguous run of 16 * RV
        // floats, the 16 rows stay in L1 across the panels
        A* vd = vpack + pr.off * Dvp;
        for (int64_t j0 = r0; j0 < r1; j0 += 16) {
          const int64_t j1 = std::min(r1, j0 + 16);
          for (int64_t d0 = 0; d0 < Dvp; d0 += RV) {
            const int64_t w = std::min(RV, Dv - d0);
            A* o = vd + d0 * pr.np + j0 * RV;
            const T* vs = vb + j0 * p.sv.t + d0;
            if (w == RV) {
#if defined(__AVX512F__)
              if constexpr (std::is_same<A, float>::value && std::is_same<T, float>::value && RV <= 16) {
                constexpr __mmask16 mk = (1u << RV) - 1;
                for (int64_t j = j0; j < j1; ++j, o += RV, vs += p.sv.t)
                  _mm512_mask_storeu_ps(o, mk, _mm512_maskz_loadu_ps(mk, vs));
                continue;
              }
#endif
              for (int64_t j = j0; j < j1; ++j, o += RV, vs += p.sv.t)
                for (int64_t r = 0; r < RV; ++r) o[r] = static_cast<A>(vs[r]);
            } else {
              for (int64_t j = j0; j < j1; ++j, o += RV, vs += p.sv.t)
                for (int64_t r = 0; r < RV; ++r) o[r] = r < w ? static_cast<A>(vs[r]) : A(0);
            }
          }
        }
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = chunk_tasks[ch]; t < chunk_tasks[ch + 1]; ++t) {
        const Pair& pr = pairs[tasks[t].pair];
        const int64_t b = pr.b, h = tasks[t].h;
        const Seq s = seq_of(p, b);
        const A* kb = kpack + pr.off * D;
        const A* vb = vpack + pr.off * Dvp;
        Scores<T, A> sc(p, s, b, h);
        Dropout drop(p, b, h);

        const int64_t ns = std::min(nsub, (s.nq - tasks[t].i0 + kBq - 1) / kBq);
        int64_t jb = std::numeric_limits<int64_t>::max(), je = 0;
        for (int64_t u = 0; u < ns; ++u) {
          QBlock& qb = qbs[u];
          qb.i0 = tasks[t].i0 + u * kBq;
          qb.nq = std::min(kBq, s.nq - qb.i0);
          const T* qrow = q + b * p.sq.b + (s.q0 + qb.i0) * p.sq.t + h * p.sq.h;
          A* qt = qtv + u * D * kBq;
          for (int64_t n = 0; n < kBq; n += QW)
            load_transposed(qrow + std::min(n, qb.nq) * p.sq.t, p.sq.t,
                            std::max<int64_t>(0, std::min(QW, qb.nq - n)), D, c, qt + n * D, QW);
          std::fill(mv + u * kBq, mv + (u + 1) * kBq, -std::numeric_limits<A>::infinity());
          std::fill(lv + u * kBq, lv + (u + 1) * kBq, A(0));
          // key blocks start on a K panel; keys before jlo(i0) are masked
          qb.jbeg = jlo(p, s, qb.i0) / P * P;
          qb.jend = jhi(p, s, qb.i0 + qb.nq - 1);
          qb.first = true;
          if (qb.jbeg < qb.jend) {
            jb = std::min(jb, qb.jbeg);
            je = std::max(je, qb.jend);
          }
        }

        for (int64_t j0 = jb; j0 < je; j0 += kBkF) {
          for (int64_t u = 0; u < ns; ++u) {
            QBlock& qb = qbs[u];
            if (j0 >= qb.jend || j0 + kBkF <= qb.jbeg) continue;
            const int64_t i0 = qb.i0, nq = qb.nq, ilast = i0 + nq - 1;
            const int64_t nb = std::min(kBkF, qb.jend - j0);
            A* m = mv + u * kBq;
            A* l = lv + u * kBq;
            A* alpha = alv + u * kBq;
            // S^T = K . (c Q)^T
            qk_block<V>(nb, D, kb + j0 * D, qtv + u * D * kBq, st);

            const bool full = j0 >= jlo(p, s, ilast) && j0 + nb <= jhi(p, s, i0);
            if (!full && sc.plain()) {
              // key j is visible from queries i0 + [a, b]
              for (int64_t jj = 0; jj < nb; ++jj) {
                const int64_t j = j0 + jj;
                const int64_t a = p.has_hi ? j - s.off - p.wr - i0 : 0;
                const int64_t b = p.has_lo ? j - s.off + p.wl - i0 + 1 : nq;
                mask_outside(st + jj * kBq, nq, a, b);
              }
            } else if (!sc.plain()) {
              for (int64_t jj = 0; jj < nb; ++jj) {
                const int64_t j = j0 + jj;
                A* row = st + jj * kBq;
                for (int64_t ii = 0; ii < nq; ++ii) {
                  const int64_t i = i0 + ii;
                  row[ii] = sc.visible(i, j) ? sc.apply(row[ii], i, j, nullptr) * log2e
                                             : -std::numeric_limits<A>::infinity();
                }
              }
            }
            // online softmax along keys, in lanes of queries
            const V lowest = V::set1(std::numeric_limits<A>::lowest());
            for (int64_t cv = 0; cv < kBq; cv += W) {
              V mo = V::load(m + cv);
              const A* sc0 = st + cv;
              V mx[4] = {V::set1(-std::numeric_limits<A>::infinity()), mx[0], mx[0], mx[0]};
              int64_t jj = 0;
              for (; jj + 4 <= nb; jj += 4)  // four chains: the max's latency, not its count, bounds this
                for (int w = 0; w < 4; ++w) mx[w] = vmax(mx[w], V::load(sc0 + (jj + w) * kBq));
              for (; jj < nb; ++jj) mx[0] = vmax(mx[0], V::load(sc0 + jj * kBq));
              V mn = vmax(mo, vmax(vmax(mx[0], mx[1]), vmax(mx[2], mx[3])));
              V mu = vmax(mn, lowest);  // a row with nothing visible yet subtracts a finite value
              V al = vexp2(mo - mu);
              V sum[2] = {V::zero(), V::zero()};
              for (jj = 0; jj < nb; ++jj) {
                V e = vexp2(V::load(st + jj * kBq + cv) - mu);
                e.store(st + jj * kBq + cv);
                sum[jj & 1] = sum[jj & 1] + e;
              }
              fmadd(V::load(l + cv), al, sum[0] + sum[1]).store(l + cv);
              mn.store(m + cv);
              al.store(alpha + cv);
            }
            if (drop.on) {
              const A rs = A(drop.rescale);
              for (int64_t jj = 0; jj < nb; ++jj)
                for (int64_t ii = 0; ii < nq; ++ii) {
                  A& x = st[jj * kBq + ii];
                  x = drop.keep(i0 + ii, j0 + jj) ? x * rs : A(0);
                }
            }
            // O^T = O^T * alpha + V^T . P^T (the first block writes O^T)
            A* ot = otv + u * Dvp * kBq;
            if (qb.first)
              pv_block<V, false>(nb, Dvp, vb, pr.np, j0, st, ot, alpha);
            else
              pv_block<V, true>(nb, Dvp, vb, pr.np, j0, st, ot, alpha);
            qb.first = false;
          }
        }

        for (int64_t u = 0; u < ns; ++u) {
          const QBlock& qb = qbs[u];
          A* ot = otv + u * Dvp * kBq;
          const A* m = mv + u * kBq;
          const A* l = lv + u * kBq;
          A* inv = alv + u * kBq;
          if (qb.first) std::fill(ot, ot + Dv * kBq, A(0));
          T* ob = out + b * p.so.b + (s.q0 + qb.i0) * p.so.t + h * p.so.h;
          float* lb = lse + row_of(p, b, s, h, qb.i0);
          for (int64_t i = 0; i < qb.nq; ++i) {
            const bool empty = l[i] == A(0);  // no visible key; NaN scores give NaN out and lse
            inv[i] = empty ? A(0) : A(1) / l[i];
            lb[i] = empty ? std::numeric_limits<float>::infinity()
                          : static_cast<float>(m[i] * ln2 + std::log(l[i]));
          }
          store_transposed(ot, kBq, qb.nq, Dv, inv, ob, p.so.t);
        }
      }
    }
  }
}

// ----------------------------------------------------------------- backward
// P as the dV product takes it: rounded to the input dtype for 16-bit inputs, as flash-attn's
// kernels round it for their 16-bit matrix product (dS keeps the unrounded P). A query row that
// sees a single key then gets P = 1 exactly, and dV is the plain sum of dO's rows, even where the
// recomputed score differs from the forward's in its last bit.
template <typename T, typename A>
inline void round_p(A* row, int64_t n) {
  if constexpr (std::is_same<T, c10::Half>::value || std::is_same<T, c10::BFloat16>::value)
    for (int64_t j = 0; j < n; ++j) row[j] = static_cast<A>(static_cast<T>(row[j]));
}

struct Grads {
  Strides sdo, sdq, sdk, sdv;
  float* dbias = nullptr;  // (batch, hq, nq, nk) contiguous, or null
};

// How the backward splits its work. Tasks are (sequence, kv head, chunk); chunk s takes
// key blocks s, s+S, s+2S, ... and accumulates dQ in its own buffer, so that few heads
// still fill the threads.
struct BackwardPlan {
  bool parallel = false;
  int64_t chunks = 1, rows = 0, dpad = 0, dvpad = 0;  // head_dims of q/k and of v, padded to W
};

BackwardPlan plan_backward(const Problem& p, int W) {
  BackwardPlan bp;
  double work = 0;
  int64_t max_kblocks = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    Seq s = seq_of(p, b);
    work += double(p.hq) * s.nq * s.nk * p.d;
    max_kblocks = std::max(max_kblocks, (s.nk + kBk - 1) / kBk);
  }
  bp.parallel = work > (1 << 16);
  const int64_t units = p.batch * p.hk, nthreads = num_threads();
  if (bp.parallel && units < 4 * nthreads && units % nthreads != 0)
    bp.chunks = std::max<int64_t>(1, std::min<int64_t>(max_kblocks, (2 * nthreads + units - 1) / units));
  bp.rows = p.varlen() ? p.hq * p.total_q : p.batch * p.hq * p.nq;
  bp.dpad = (p.d + W - 1) / W * W;
  bp.dvpad = (p.dv + W - 1) / W * W;
  return bp;
}

// dqacc: chunks x rows x dpad accumulators, delta: rows (both scratch of type A).
template <typename T, typename V>
void backward_kernel(const Problem& p, const Grads& gs, const BackwardPlan& bp, const T* dout,
                     const T* q, const T* k, const T* v, const T* out, const float* lse, T* dq,
                     T* dk, T* dv, typename V::type* dqacc, typename V::type* delta) {
  using A = typename V::type;
  constexpr int W = V::W;
  const int64_t D = p.d, Dp = bp.dpad, Dv = p.dv, Dvp = bp.dvpad, G = p.group(), rows = bp.rows,
                S = bp.chunks;
  const A c = A(raw_scale(p)), scale = A(p.scale);
  const bool parallel = bp.parallel;

  // Delta_i = dO_i . O_i
  at::parallel_for(0, p.batch * p.hq, parallel ? 1 : p.batch * p.hq + 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t b = bh / p.hq, h = bh % p.hq;
      Seq s = seq_of(p, b);
      for (int64_t i = 0; i < s.nq; ++i) {
        const T* o = out + b * p.so.b + (s.q0 + i) * p.so.t + h * p.so.h;
        const T* g = dout + b * gs.sdo.b + (s.q0 + i) * gs.sdo.t + h * gs.sdo.h;
        A acc = 0;
        for (int64_t d = 0; d < Dv; ++d) acc += static_cast<A>(o[d]) * static_cast<A>(g[d]);
        delta[row_of(p, b, s, h, i)] = acc;
      }
    }
  });

  std::fill(dqacc, dqacc + S * rows * Dp, A(0));
  const int64_t ntask = p.batch * p.hk * S;

#pragma omp parallel if (parallel && ntask > 1)
  {
    std::vector<A> kt(D * kBk), vt(Dv * kBk), kp(kBk * Dp), qp(kBq * Dp), dop(kBq * Dvp);
    std::vector<A> sb(kBq * kBk), dpb(kBq * kBk), dka(kBk * Dp), dva(kBk * Dvp);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < ntask; ++t) {
      const int64_t chunk = t % S, b = t / S / p.hk, hk = t / S % p.hk;
      const Seq s = seq_of(p, b);
      const int64_t nkb = (s.nk + kBk - 1) / kBk;
      const T* kb = k + b * p.sk.b + s.k0 * p.sk.t + hk * p.sk.h;
      const T* vb = v + b * p.sv.b + s.k0 * p.sv.t + hk * p.sv.h;
      A* dqc = dqacc + chunk * rows * Dp;
      for (int64_t kbi = chunk; kbi < nkb; kbi += S) {
        const int64_t j0 = kbi * kBk, nb = std::min(kBk, s.nk - j0);
        std::fill(kt.begin(), kt.end(), A(0));
        std::fill(vt.begin(), vt.end(), A(0));
        std::fill(kp.begin(), kp.end(), A(0));
        for (int64_t j = 0; j < nb; ++j) {
          for (int64_t d = 0; d < D; ++d) {
            const A kx = static_cast<A>(kb[(j0 + j) * p.sk.t + d]);
            kt[d * kBk + j] = kx;
            kp[j * Dp + d] = kx;
          }
          for (int64_t d = 0; d < Dv; ++d) vt[d * kBk + j] = static_cast<A>(vb[(j0 + j) * p.sv.t + d]);
        }
        std::fill(dka.begin(), dka.end(), A(0));
        std::fill(dva.begin(), dva.end(), A(0));
        // queries that see any key of this block
        const int64_t qlo = p.has_hi ? std::max<int64_t>(0, j0 - s.off - p.wr) : 0;
        const int64_t qhi = p.has_lo ? std::min(s.nq, j0 + nb - s.off + p.wl) : s.nq;
        for (int64_t h = hk * G; h < (hk + 1) * G; ++h) {
          const T* qh = q + b * p.sq.b + s.q0 * p.sq.t + h * p.sq.h;
          const T* doh = dout + b * gs.sdo.b + s.q0 * gs.sdo.t + h * gs.sdo.h;
          Scores<T, A> sc(p, s, b, h);
          Dropout drop(p, b, h);
          float* dbias = gs.dbias ? gs.dbias + ((b * p.hq + h) * p.nq) * p.nk : nullptr;
          for (int64_t i0 = qlo; i0 < qhi; i0 += kBq) {
            const int64_t nq = std::min(kBq, qhi - i0);
            for (int64_t i = 0; i < nq; ++i) {
              for (int64_t d = 0; d < D; ++d) qp[i * Dp + d] = static_cast<A>(qh[(i0 + i) * p.sq.t + d]);
              for (int64_t d = D; d < Dp; ++d) qp[i * Dp + d] = A(0);
              for (int64_t d = 0; d < Dv; ++d) dop[i * Dvp + d] = static_cast<A>(doh[(i0 + i) * gs.sdo.t + d]);
              for (int64_t d = Dv; d < Dvp; ++d) dop[i * Dvp + d] = A(0);
            }
            gemm<V, false>(nq, kBk, D, qp.data(), Dp, 1, kt.data(), kBk, sb.data(), kBk);
            gemm<V, false>(nq, kBk, Dv, dop.data(), Dvp, 1, vt.data(), kBk, dpb.data(), kBk);
            const int64_t r0 = row_of(p, b, s, h, i0);
            const bool full = j0 >= jlo(p, s, i0 + nq - 1) && j0 + kBk <= jhi(p, s, i0);
            if (sc.plain() && !drop.on && !dbias) {
              for (int64_t i = 0; i < nq; ++i) {
                const V li = V::set1(A(lse[r0 + i])), di = V::set1(delta[r0 + i]);
                const V cv = V::set1(c), sv = V::set1(scale);
                A* srow = sb.data() + i * kBk;
                A* drow = dpb.data() + i * kBk;
                if (!full) {
                  for (int64_t j = 0; j < kBk; j += W) (V::load(srow + j) * cv).store(srow + j);
                  mask_outside(srow, kBk, jlo(p, s, i0 + i) - j0, std::min(jhi(p, s, i0 + i) - j0, nb));
                }
                const V cm = full ? cv : V::set1(A(1));
                for (int64_t j = 0; j < kBk; j += W) {
                  V pr = vexp(V::load(srow + j) * cm - li);
                  pr.store(srow + j);
                  (pr * (V::load(drow + j) - di) * sv).store(drow + j);
                }
                round_p<T>(srow, kBk);
              }
            } else {
              for (int64_t i = 0; i < nq; ++i) {
                const A li = A(lse[r0 + i]), di = delta[r0 + i];
                A* srow = sb.data() + i * kBk;
                A* drow = dpb.data() + i * kBk;
                for (int64_t jj = 0; jj < kBk; ++jj) {
                  const int64_t ig = i0 + i, jg = j0 + jj;
                  A g = 1, pr = 0;
                  if (jj < nb && sc.visible(ig, jg)) pr = std::exp(sc.apply(srow[jj] * c, ig, jg, &g) - li);
                  A dp = drow[jj], pd = pr;
                  if (drop.on) {
                    const bool kp_ = drop.keep(ig, jg);
                    pd = kp_ ? pr * A(drop.rescale) : A(0);
                    dp = kp_ ? dp * A(drop.rescale) : A(0);
                  }
                  const A ds = pr * (dp - di);
                  if (dbias && jj < nb) dbias[ig * p.nk + jg] = static_cast<float>(ds);
                  srow[jj] = pd;
                  drow[jj] = ds * g * c;
                }
                round_p<T>(srow, kBk);
              }
            }
            // dV += P^T dO, dK += dS^T Q, dQ += dS K
            gemm<V, true>(nb, Dvp, nq, sb.data(), 1, kBk, dop.data(), Dvp, dva.data(), Dvp);
            gemm<V, true>(nb, Dp, nq, dpb.data(), 1, kBk, qp.data(), Dp, dka.data(), Dp);
            gemm<V, true>(nq, Dp, nb, dpb.data(), kBk, 1, kp.data(), Dp, dqc + r0 * Dp, Dp);
          }
        }
        T* dkb = dk + b * gs.sdk.b + (s.k0 + j0) * gs.sdk.t + hk * gs.sdk.h;
        T* dvb = dv + b * gs.sdv.b + (s.k0 + j0) * gs.sdv.t + hk * gs.sdv.h;
        for (int64_t j = 0; j < nb; ++j) {
          for (int64_t d = 0; d < D; ++d) dkb[j * gs.sdk.t + d] = static_cast<T>(dka[j * Dp + d]);
          for (int64_t d = 0; d < Dv; ++d) dvb[j * gs.sdv.t + d] = static_cast<T>(dva[j * Dvp + d]);
        }
      }
    }
  }

  // dQ = sum over chunks
  at::parallel_for(0, p.batch * p.hq, parallel ? 1 : p.batch * p.hq + 1, [&](int64_t lo, int64_t hi) {
    for (int64_t bh = lo; bh < hi; ++bh) {
      const int64_t b = bh / p.hq, h = bh % p.hq;
      Seq s = seq_of(p, b);
      for (int64_t i = 0; i < s.nq; ++i) {
        const int64_t r = row_of(p, b, s, h, i);
        T* o = dq + b * gs.sdq.b + (s.q0 + i) * gs.sdq.t + h * gs.sdq.h;
        for (int64_t d = 0; d < D; ++d) {
          A acc = 0;
          for (int64_t ch = 0; ch < S; ++ch) acc += dqacc[(ch * rows + r) * Dp + d];
          o[d] = static_cast<T>(acc);
        }
      }
    }
  });
}

// ------------------------------------------------------------------ ATen glue
// A CPU tensor over the same host memory (mytorch device tensors live in host memory),
// so that small host-side steps never go through the device's op table.
at::Tensor host_alias(const at::Tensor& t) {
  if (t.device().is_cpu()) return t;
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
}

using namespace mytorch::attention;

struct Prepared {
  Problem p;
  std::vector<int64_t> cu_q, cu_k;
  at::Tensor alibi, bias;
};

// The checks in the order of check_inputs, then the Problem.
Prepared prepare(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const FlashOptions& opt) {
  const bool varlen = opt.cu_seqlens_q.has_value() || opt.cu_seqlens_k.has_value();
  TORCH_CHECK_VALUE(opt.cu_seqlens_q.has_value() == opt.cu_seqlens_k.has_value(), op,
                    ": expected both cu_seqlens_q and cu_seqlens_k or neither");
  check_qkv(op, q, k, v, varlen, Rules::kOpenMP);
  Prepared pr;
  Problem& p = pr.p;
  p.d = q.size(-1);
  p.dv = v.size(-1);
  p.hq = q.size(-2);
  p.hk = k.size(-2);
  p.batch = varlen ? opt.cu_seqlens_q->numel() - 1 : q.size(0);
  check_scalars(op, opt.dropout_p, opt.softcap);
  if (opt.alibi_slopes.has_value()) {
    const at::Tensor& a = *opt.alibi_slopes;
    check_alibi(op, a, q, p.batch);
    pr.alibi = host_alias(a).contiguous();
    p.alibi = pr.alibi.data_ptr<float>();
    p.alibi_sb = a.dim() == 2 ? p.hq : 0;
  }
  if (opt.bias.has_value() && opt.bias->defined()) {
    const at::Tensor& mask = *opt.bias;
    const std::vector<int64_t> full = check_mask(op, mask, q, k, varlen, Rules::kOpenMP);
    const auto mt = mask.scalar_type();
    // True = attend; an additive mask is added to the scaled scores
    const at::Tensor m = host_alias(mask);
    at::Tensor fm = mt == at::kBool
                        ? at::zeros(m.sizes(), m.options().dtype(at::kFloat))
                              .masked_fill_(m.logical_not(), -std::numeric_limits<float>::infinity())
                        : m.to(at::kFloat);
    pr.bias = fm.expand(full);
    p.bias = pr.bias.data_ptr<float>();
    p.bias_sb = pr.bias.stride(0), p.bias_sh = pr.bias.stride(1);
    p.bias_si = pr.bias.stride(2), p.bias_sj = pr.bias.stride(3);
  }
  if (varlen) {
    const at::Tensor &cq = *opt.cu_seqlens_q, &ck = *opt.cu_seqlens_k;
    pr.cu_q = check_cu(op, "q", cq, q, opt.max_seqlen_q, /*values=*/true);
    pr.cu_k = check_cu(op, "k", ck, k, opt.max_seqlen_k, /*values=*/true);
    check_cu_pair(op, cq, ck);
    p.cu_q = pr.cu_q.data();
    p.cu_k = pr.cu_k.data();
    p.total_q = q.size(0);
  } else {
    p.nq = q.size(1);
    p.nk = k.size(1);
  }
  p.sq = strides_of(q, varlen);
  p.sk = strides_of(k, varlen);
  p.sv = strides_of(v, varlen);
  p.scale = softmax_scale(opt.softmax_scale, p.d);
  p.softcap = opt.softcap;
  p.dropout = opt.dropout_p;
  p.seed = static_cast<uint64_t>(opt.seed);
  p.has_lo = opt.window_left >= 0;
  p.wl = opt.window_left;
  p.has_hi = opt.causal || opt.window_right >= 0;
  p.wr = opt.causal ? (opt.window_right >= 0 ? std::min<int64_t>(opt.window_right, 0) : 0)
                    : opt.window_right;
  return pr;
}


// Whether a call goes to the decoding kernel: a few queries against keys that every query row
// reaches (seqlen_q <= seqlen_k, so bottom-right causal rows and windows are never empty), no
// ALiBi, dropout or varlen, v of k's shape, and a mask only as key_ranges takes it. The dense
// kernel below fills query blocks of 32-64 rows; the decoding kernel takes the query rows of a
// GQA group together and splits the keys across threads. Measured on 2 threads (AVX-512): at
// one query it is 6-14x faster in float32 and 3x in bfloat16, at 16 queries 1.7-2x in float32,
// and the dense kernel wins from 64 queries (bfloat16 on AMX tiles: from 16).
// MYTORCH_CPU_FEW_QUERIES=0 keeps every call on the dense kernel (for comparisons).
bool few_queries(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Problem& p) {
  static const bool enabled = [] {
    const char* env = std::getenv("MYTORCH_CPU_FEW_QUERIES");
    return env == nullptr || std::string(env) != "0";
  }();
  if (!enabled || p.varlen() || p.alibi || p.dropout > 0 || q.numel() == 0 || p.nk == 0) return false;
  if (p.nq > p.nk || v.sizes() != k.sizes()) return false;
  if (p.bias && (p.has_lo || p.has_hi || !q.device().is_cpu())) return false;
  const bool amx = q.scalar_type() == at::kBFloat16 && p.softcap <= 0 && !p.bias &&
                   amx_attention_covers(p.d, p.dv) && amx_attention_available();
  return p.nq <= (amx ? 4 : 16);
}

// A padded batch's mask as the decoding kernel's key range: when the additive mask is the same
// for every head and query and keeps, for each sequence b, exactly the keys [first, last]
// (0 there, -inf elsewhere, as a bool mask becomes), returns int32 (cache_leftpad = first,
// cache_seqlens = last + 1); nothing for any other mask, which stays on the dense kernel. A host
// read of batch x seqlen_k mask values.
std::optional<std::pair<at::Tensor, at::Tensor>> key_ranges(const Problem& p) {
  if (p.bias_sh != 0 || (p.bias_si != 0 && p.nq > 1)) return std::nullopt;
  at::Tensor lo = at::empty({p.batch}, at::TensorOptions().dtype(at::kInt));
  at::Tensor hi = at::empty({p.batch}, at::TensorOptions().dtype(at::kInt));
  for (int64_t b = 0; b < p.batch; ++b) {
    const float* row = p.bias + b * p.bias_sb;
    int64_t first = -1, last = -1;
    for (int64_t j = 0; j < p.nk; ++j) {
      const float x = row[j * p.bias_sj];
      if (x == 0.f) {
        if (first >= 0 && last != j - 1) return std::nullopt;  // a gap inside the kept keys
        if (first < 0) first = j;
        last = j;
      } else if (!(std::isinf(x) && x < 0)) {
        return std::nullopt;
      }
    }
    if (first < 0) return std::nullopt;  // a sequence with no key: the dense kernel's convention
    lo.data_ptr<int32_t>()[b] = static_cast<int32_t>(first);
    hi.data_ptr<int32_t>()[b] = static_cast<int32_t>(last + 1);
  }
  return std::make_pair(lo, hi);
}

template <typename F>
void dispatch(at::ScalarType t, F&& f) {
  switch (t) {
    case at::kFloat: f(float{}, VecOf<float>::type{}); break;
    case at::kDouble: f(double{}, VecOf<double>::type{}); break;
    case at::kBFloat16: f(c10::BFloat16{}, VecOf<float>::type{}); break;
    case at::kHalf: f(c10::Half{}, VecOf<float>::type{}); break;
    default: TORCH_CHECK(false, "unreachable dtype ", t);
  }
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> flash_forward(const char* op, const at::Tensor& q,
                                                 const at::Tensor& k, const at::Tensor& v,
                                                 const FlashOptions& opt) {
  MYTORCH_ISA_DISPATCH(flash_forward, op, q, k, v, opt)
  Prepared pr = prepare(op, q, k, v, opt);
  Problem& p = pr.p;
  if (few_queries(q, k, v, p)) {
    // the decoding kernel (kernels/cpu/kvcache.cpp) over k and v as a filled cache: one task
    // per (sequence, kv head, split of the keys), with every query row of the group
    const auto ranges = p.bias ? key_ranges(p) : std::nullopt;
    if (!p.bias || ranges) {
      KvcacheArgs a{q, k, v};
      a.softmax_scale = opt.softmax_scale, a.causal = opt.causal, a.softcap = opt.softcap;
      a.window_left = opt.window_left, a.window_right = opt.window_right;
      if (ranges) a.cache_leftpad = ranges->first, a.cache_seqlens = ranges->second;
      return kvcache_forward(a);
    }
  }
  at::Tensor out = at::empty(out_shape(q, v), q.options());
  at::Tensor lse = p.varlen() ? at::empty({p.hq, p.total_q}, q.options().dtype(at::kFloat))
                              : at::empty({p.batch, p.hq, p.nq}, q.options().dtype(at::kFloat));
  p.so = strides_of(out, p.varlen());
  if (q.numel() == 0) return {out, lse};
  if (q.scalar_type() == at::kBFloat16 && !p.varlen() && p.softcap <= 0 && !p.alibi && !p.bias &&
      p.dropout <= 0 && amx_attention_covers(p.d, p.dv)) {
    // AMX tiles where the CPU has them (isa/attention_amx.cpp); false: run the kernel below
    AmxAttention a{reinterpret_cast<const uint16_t*>(q.const_data_ptr()),
                   reinterpret_cast<const uint16_t*>(k.const_data_ptr()),
                   reinterpret_cast<const uint16_t*>(v.const_data_ptr()),
                   reinterpret_cast<uint16_t*>(out.mutable_data_ptr()), lse.mutable_data_ptr<float>(),
                   p.batch, p.hq, p.hk, p.nq, p.nk, p.d, p.dv,
                   p.sq.b, p.sq.t, p.sq.h, p.sk.b, p.sk.t, p.sk.h, p.sv.b, p.sv.t, p.sv.h,
                   p.so.b, p.so.t, p.so.h, p.scale, p.has_lo, p.has_hi, p.wl, p.wr};
    if (amx_attention_forward(a)) return {out, lse};
  }
  dispatch(q.scalar_type(), [&](auto t, auto vec) {
    using T = decltype(t);
    using V = decltype(vec);
    forward_kernel<T, V>(p, static_cast<const T*>(q.const_data_ptr()), static_cast<const T*>(k.const_data_ptr()),
                         static_cast<const T*>(v.const_data_ptr()), static_cast<T*>(out.mutable_data_ptr()),
                         lse.mutable_data_ptr<float>());
  });
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> flash_backward(
    const char* op, const at::Tensor& grad_out_, const at::Tensor& q, const at::Tensor& k,
    const at::Tensor& v, const at::Tensor& out_, const at::Tensor& lse, const FlashOptions& opt,
    bool want_dbias) {
  MYTORCH_ISA_DISPATCH(flash_backward, op, grad_out_, q, k, v, out_, lse, opt, want_dbias)
  // autograd may hand over an expanded gradient (strides 0): copy those two if needed
  auto last_dim_contiguous = [](const at::Tensor& t) {
    return t.dim() == 0 || t.stride(-1) == 1 || t.size(-1) <= 1 ? t : t.contiguous();
  };
  const at::Tensor grad_out = last_dim_contiguous(grad_out_), out = last_dim_contiguous(out_);
  Prepared pr = prepare(op, q, k, v, opt);
  Problem& p = pr.p;
  const std::vector<int64_t> lse_shape = p.varlen() ? std::vector<int64_t>{p.hq, p.total_q}
                                                    : std::vector<int64_t>{p.batch, p.hq, p.nq};
  check_backward(op, grad_out, q, v, out, lse, lse_shape);
  at::Tensor lse_c = host_alias(lse).contiguous();
  p.so = strides_of(out, p.varlen());
  Grads gs;
  gs.sdo = strides_of(grad_out, p.varlen());
  at::Tensor dq = at::empty(q.sizes(), q.options());
  at::Tensor dk = at::empty(k.sizes(), k.options());
  at::Tensor dv = at::empty(v.sizes(), v.options());
  gs.sdq = strides_of(dq, p.varlen());
  gs.sdk = strides_of(dk, p.varlen());
  gs.sdv = strides_of(dv, p.varlen());
  at::Tensor dbias;
  if (want_dbias) {
    TORCH_CHECK(!p.varlen(), op, ": the bias gradient is not supported with cu_seqlens");
    dbias = at::empty({p.batch, p.hq, p.nq, p.nk}, q.options().dtype(at::kFloat));
    host_alias(dbias).zero_();
    gs.dbias = dbias.mutable_data_ptr<float>();
  }
  if (q.numel() == 0 || k.numel() == 0) {
    host_alias(dq).zero_();
    host_alias(dk).zero_();
    host_alias(dv).zero_();
    return {dq, dk, dv, dbias};
  }
  dispatch(q.scalar_type(), [&](auto t, auto vec) {
    using T = decltype(t);
    using V = decltype(vec);
    using A = typename V::type;
    // scratch through the tensors' allocator, so that device memory statistics see it
    const BackwardPlan bp = plan_backward(p, V::W);
    const auto acc_dtype = std::is_same<A, double>::value ? at::kDouble : at::kFloat;
    at::Tensor scratch = at::empty({(bp.chunks * bp.dpad + 1) * bp.rows}, q.options().dtype(acc_dtype));
    A* dqacc = static_cast<A*>(scratch.mutable_data_ptr());
    backward_kernel<T, V>(p, gs, bp, static_cast<const T*>(grad_out.const_data_ptr()),
                          static_cast<const T*>(q.const_data_ptr()), static_cast<const T*>(k.const_data_ptr()),
                          static_cast<const T*>(v.const_data_ptr()), static_cast<const T*>(out.const_data_ptr()),
                          lse_c.const_data_ptr<float>(), static_cast<T*>(dq.mutable_data_ptr()),
                          static_cast<T*>(dk.mutable_data_ptr()), static_cast<T*>(dv.mutable_data_ptr()),
                          dqacc, dqacc + bp.chunks * bp.dpad * bp.rows);
  });
  return {dq, dk, dv, dbias};
}

// The op glue: once, in the baseline build of this file (registered in kernels/cpu/register.cpp).
#ifndef MYTORCH_ISA_VARIANT
namespace {

FlashOptions options_of(double dropout_p, std::optional<double> softmax_scale, bool causal,
                        int64_t window_left, int64_t window_right, double softcap,
                        const std::optional<at::Tensor>& alibi_slopes,
                        const std::optional<at::Tensor>& cu_seqlens_q,
                        const std::optional<at::Tensor>& cu_seqlens_k, int64_t max_seqlen_q,
                        int64_t max_seqlen_k, int64_t seed, const std::optional<at::Tensor>& attn_mask,
                        const std::optional<at::Tensor>& seed_tensor, const at::Tensor& q, const char* op) {
  FlashOptions o;
  if (seed_tensor.has_value()) {  // host memory on both devices this kernel serves
    check_seed_tensor(op, *seed_tensor, q);
    seed = host_alias(*seed_tensor).reshape({}).item<int64_t>();
  }
  o.max_seqlen_q = max_seqlen_q;
  o.max_seqlen_k = max_seqlen_k;
  o.bias = attn_mask;
  o.dropout_p = dropout_p;
  o.softmax_scale = softmax_scale;
  o.causal = causal;
  o.window_left = window_left;
  o.window_right = window_right;
  o.softcap = softcap;
  o.alibi_slopes = alibi_slopes;
  o.cu_seqlens_q = cu_seqlens_q;
  o.cu_seqlens_k = cu_seqlens_k;
  o.seed = seed;
  return o;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> flash_attn_op(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double dropout_p,
    std::optional<double> softmax_scale, bool causal, int64_t window_left, int64_t window_right,
    double softcap, const std::optional<at::Tensor>& alibi_slopes,
    const std::optional<at::Tensor>& cu_seqlens_q, const std::optional<at::Tensor>& cu_seqlens_k,
    int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t seed,
    const std::optional<at::Tensor>& attn_mask, bool deterministic,
    const std::optional<at::Tensor>& seed_tensor) {
  (void)deterministic;  // this kernel is always deterministic
  const char* op = "mytorch::flash_attn";
  return flash_forward(op, q, k, v,
                       options_of(dropout_p, softmax_scale, causal, window_left, window_right, softcap,
                                  alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                  seed, attn_mask, seed_tensor, q, op));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attn_backward_op(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, double dropout_p, double softmax_scale, bool causal,
    int64_t window_left, int64_t window_right, double softcap,
    const std::optional<at::Tensor>& alibi_slopes, const std::optional<at::Tensor>& cu_seqlens_q,
    const std::optional<at::Tensor>& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
    int64_t seed, bool deterministic, const std::optional<at::Tensor>& attn_mask,
    const std::optional<at::Tensor>& seed_tensor) {
  (void)deterministic;
  const char* op = "mytorch::flash_attn_backward";
  auto r = flash_backward(op, grad_out, q, k, v, out, lse,
                          options_of(dropout_p, softmax_scale, causal, window_left, window_right,
                                     softcap, alibi_slopes, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                                     max_seqlen_k, seed, attn_mask, seed_tensor, q, op));
  return {std::get<0>(r), std::get<1>(r), std::get<2>(r)};
}
#endif  // MYTORCH_ISA_VARIANT
}  // namespace cpu
}  // namespace mytorch
