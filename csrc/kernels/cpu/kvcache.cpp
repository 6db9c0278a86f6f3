// mytorch::flash_attn_with_kvcache on the CPU (OpenMP): decoding attention over a KV cache.
//
// 1. Append: the new k, v (rotated by rotary_cos / rotary_sin when given) are written into
//    k_cache, v_cache in place at positions cache_seqlens[b] + i of sequence b (through
//    block_table for a paged cache, cache_batch_idx otherwise).
// 2. Attention: one task per (sequence, kv head, split of the keys). A task takes the
//    heads_q / heads_k query heads of its kv head and all seqlen_q queries as rows, so each
//    key and value row is read (and converted to float) once for the whole group. Keys are
//    the cache positions [cache_leftpad[b], cache_seqlens[b] + seqlen_new), less those
//    key_mask hides; causal and windows are aligned bottom-right on those positions. Online
//    softmax over blocks of kBk keys.
// 3. Split-KV: with several splits per (sequence, kv head), each split leaves its rows'
//    output and log-sum-exp; the combine weighs them by exp(lse_split - lse).
// The kernel is compiled for the baseline ISA and again for AVX2 / AVX-512
// (kernels/cpu/isa/kvcache_*.cpp); its loops are written for the compiler to vectorize,
// except the float-accumulation products of the AVX-512 copy, which are explicit tiles
// (scores_tile, pv_tile) that widen 16-bit rows 16 elements per load; with 8 rows or more a
// block's keys are first transposed, and the scores become a GEMM tile (scores_t).
#include <ATen/ATen.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/attention_checks.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kvcache.h"
#include "kernels/cpu/register_transpose.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/kvcache_checks.h"

MYTORCH_ISA_DECLARE(kvcache_forward)

namespace mytorch {
namespace cpu {
namespace {

using namespace mytorch::kvcache;

struct Problem {
  int64_t batch = 0, sq = 0, hq = 0, hk = 0, d = 0, snew = 0, G = 1;
  bool paged = false;
  int64_t block_size = 1, max_blocks = 0;
  const int32_t* block_table = nullptr;
  // strides in elements: cache (sequence or page, position, head); q, out, k, v (batch, token, head)
  int64_t kc0 = 0, kc1 = 0, kc2 = 0, vc0 = 0, vc1 = 0, vc2 = 0;
  int64_t q0 = 0, q1 = 0, q2 = 0, o0 = 0, o1 = 0, o2 = 0;
  int64_t kn0 = 0, kn1 = 0, kn2 = 0, vn0 = 0, vn1 = 0, vn2 = 0;
  const int64_t *seqlens = nullptr, *leftpad = nullptr, *bidx = nullptr;
  double scale = 1.0, softcap = 0.0;
  bool has_lo = false, has_hi = false;
  int64_t wl = 0, wr = 0;
  const float* alibi = nullptr;
  int64_t alibi_sb = 0;
  // key_mask (batch, capacity): false hides the key at that cache position
  const bool* key_mask = nullptr;
  int64_t km0 = 0, km1 = 0;
  // rotary
  int64_t rot_half = 0, ro0 = 0, rs0 = 0;
  bool interleaved = true, q_per_token = false;

  // keys of sequence b after the append, and the diagonal offset of its queries
  int64_t nk(int64_t b) const { return seqlens[b] + snew - leftpad[b]; }
  // element offset of cache position pos of sequence b (stride0 / stride1 of k or v cache)
  int64_t row(int64_t b, int64_t pos, int64_t s0, int64_t s1) const {
    if (paged) {
      const int64_t page = block_table[b * max_blocks + pos / block_size];
      return page * s0 + (pos % block_size) * s1;
    }
    return bidx[b] * s0 + pos * s1;
  }
};

template <typename T>
struct Acc { using type = float; };
template <>
struct Acc<double> { using type = double; };

template <typename T, typename A>
inline void to_acc(const T* x, A* y, int64_t n) {
  if constexpr (std::is_same<T, c10::BFloat16>::value) {
    const uint16_t* u = reinterpret_cast<const uint16_t*>(x);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t bits = static_cast<uint32_t>(u[i]) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      y[i] = f;
    }
#if defined(__F16C__) && defined(__AVX__)
  } else if constexpr (std::is_same<T, c10::Half>::value && std::is_same<A, float>::value) {
    const uint16_t* u = reinterpret_cast<const uint16_t*>(x);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u + i))));
    for (; i < n; ++i) y[i] = static_cast<A>(x[i]);
#endif
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<A>(x[i]);
  }
}

// Element i of a key / value row as A: bfloat16 widened in place (a shift), others as stored.
template <typename A, typename U>
inline A ld(const U* p, int64_t i) {
  if constexpr (std::is_same<U, c10::BFloat16>::value) {
    const uint32_t bits = static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(p)[i]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  } else {
    return p[i];
  }
}

// y = rotary(x) over the first 2 * half dims (pairs (2r, 2r+1) interleaved, (r, r + half)
// otherwise), the rest copied; computed in A, rounded to T as the cache stores it.
template <typename T, typename A>
inline void rotate(const T* x, T* y, int64_t d, const T* cos, const T* sin, int64_t half, bool interleaved) {
  for (int64_t r = 0; r < half; ++r) {
    const int64_t i0 = interleaved ? 2 * r : r, i1 = interleaved ? 2 * r + 1 : r + half;
    const A a = static_cast<A>(x[i0]), b = static_cast<A>(x[i1]);
    const A c = static_cast<A>(cos[r]), s = static_cast<A>(sin[r]);
    y[i0] = static_cast<T>(a * c - b * s);
    y[i1] = static_cast<T>(a * s + b * c);
  }
  for (int64_t i = 2 * half; i < d; ++i) y[i] = x[i];
}

template <typename T>
void append(const Problem& p, const T* kn, const T* vn, const T* cos, const T* sin, T* kc, T* vc) {
  const int64_t n = p.batch * p.snew * p.hk;
#pragma omp parallel for if (n * p.d > (1 << 16))
  for (int64_t t = 0; t < n; ++t) {
    const int64_t h = t % p.hk, i = (t / p.hk) % p.snew, b = t / (p.hk * p.snew);
    const int64_t pos = p.seqlens[b] + i;
    const T* ks = kn + b * p.kn0 + i * p.kn1 + h * p.kn2;
    const T* vs = vn + b * p.vn0 + i * p.vn1 + h * p.vn2;
    T* kd = kc + p.row(b, pos, p.kc0, p.kc1) + h * p.kc2;
    T* vd = vc + p.row(b, pos, p.vc0, p.vc1) + h * p.vc2;
    if (p.rot_half > 0) {
      const int64_t rp = pos - p.leftpad[b];
      rotate<T, typename Acc<T>::type>(ks, kd, p.d, cos + rp * p.ro0, sin + rp * p.rs0, p.rot_half, p.interleaved);
    } else {
      std::copy(ks, ks + p.d, kd);
    }
    std::copy(vs, vs + p.d, vd);
  }
}

constexpr int64_t kBk = 64;         // keys per block of the online softmax
constexpr int64_t kSplitUnit = 16;  // a split's keys: a multiple of this many
constexpr int kInf = 1, kNaN = 2;   // rows whose result a +inf / NaN score decides

inline int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Splits per (sequence, kv head): the requested number (at most one per kSplitUnit keys), or
// (0) enough tasks for every thread when batch * heads_k alone are too few, each split
// keeping >= 4 blocks of kBk keys.
int64_t pick_splits(const Problem& p, int64_t requested, int64_t longest) {
  const int64_t blocks = std::max<int64_t>(1, (longest + kBk - 1) / kBk);
  if (requested > 0) return std::min<int64_t>(requested, std::max<int64_t>(1, (longest + kSplitUnit - 1) / kSplitUnit));
  const int64_t tasks = p.batch * p.hk, threads = max_threads();
  if (tasks >= threads || threads == 1) return 1;
  const int64_t want = (2 * threads + tasks - 1) / tasks;
  return std::max<int64_t>(1, std::min<int64_t>({want, blocks / 4, 64}));
}

// With this many rows or more, a block's scores come from its keys transposed (scores_t): the
// transpose costs one shuffle network per 16 x 16 (AVX-512) or 8 x 8 (AVX2) key elements, once
// per block, where each dot product ends in a horizontal sum, for every row. Measured on a
// 2-core AVX-512 EPYC against the dot products: AVX-512 1.0-1.7x at 14-112 rows and -16 to
// +10 % at 4; AVX2 1.0-1.34x at 4-28 rows, -14 to +12 % at 2.
#if defined(__AVX512F__)
constexpr int64_t kTransposedRows = 8;
#else
constexpr int64_t kTransposedRows = 4;
#endif

// Calls f(std::integral_constant<int, RB>{}, r) over rows [0, R) in tiles of 6 rows, then one
// tile of the 1-5 rows left: the row tiling of the transposed-score kernels below.
template <typename F>
inline void row_tiles6(int64_t R, F&& f) {
  int64_t r = 0;
  for (; r + 6 <= R; r += 6) f(std::integral_constant<int, 6>{}, r);
  switch (R - r) {
    case 5: f(std::integral_constant<int, 5>{}, r); break;
    case 4: f(std::integral_constant<int, 4>{}, r); break;
    case 3: f(std::integral_constant<int, 3>{}, r); break;
    case 2: f(std::integral_constant<int, 2>{}, r); break;
    case 1: f(std::integral_constant<int, 1>{}, r); break;
    default: break;
  }
}

#if defined(__AVX512F__)
// ---- AVX-512 tiles of a block (float accumulation; K, V read from the cache as stored) ----
// Up to 16 elements of a row as floats; lanes outside the mask read nothing and are 0.
inline __m512 ld16(const float* x, __mmask16 m) { return _mm512_maskz_loadu_ps(m, x); }
inline __m512 ld16(const c10::BFloat16* x, __mmask16 m) {
  const __m256i u = _mm256_maskz_loadu_epi16(m, x);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(u), 16));
}
inline __m512 ld16(const c10::Half* x, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x)); }

// v[0..16) -> one vector whose lane j is the sum of v[j]'s lanes.
inline __m512 hsum16(const __m512* v) {
  __m512 b[4];
  for (int g = 0; g < 4; ++g) {
    const __m512 *x = v + 4 * g;
    // in each 128-bit lane: (x0, x1, x0, x1) and (x2, x3, x2, x3) pair sums, then the 4 rows
    const __m512 a0 = _mm512_add_ps(_mm512_unpacklo_ps(x[0], x[1]), _mm512_unpackhi_ps(x[0], x[1]));
    const __m512 a1 = _mm512_add_ps(_mm512_unpacklo_ps(x[2], x[3]), _mm512_unpackhi_ps(x[2], x[3]));
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(a0), _mm512_castps_pd(a1));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(a0), _mm512_castps_pd(a1));
    b[g] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));  // lane k: rows' sums over lane k
  }
  // sum the four 128-bit lanes; group g ends in lane g
  const __m512 d0 = _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], 0x88), _mm512_shuffle_f32x4(b[0], b[1], 0xDD));
  const __m512 d1 = _mm512_add_ps(_mm512_shuffle_f32x4(b[2], b[3], 0x88), _mm512_shuffle_f32x4(b[2], b[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, 0x88), _mm512_shuffle_f32x4(d0, d1, 0xDD));
}

inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

// s[r * ls + j] = q[r * Dp + 0:D] . k_j[0:D] for RB rows and keys j < nb (16 keys per
// reduction; s rows hold whole groups of 16).
template <int RB, typename T>
inline void scores_tile(const float* q, int64_t Dp, int64_t D, const T* const* krow, int64_t nb, float* s, int64_t ls,
                        const T* const* vpre) {
  const int64_t nc = (D + 15) / 16;
  const __mmask16 last = tail_mask(D - (nc - 1) * 16);
  alignas(64) __m512 acc[RB][16];
  for (int64_t j0 = 0; j0 < nb; j0 += 16) {
    const int64_t n = std::min<int64_t>(16, nb - j0);
    for (int64_t jj = 0; jj < n; ++jj) {
      const T* k = krow[j0 + jj];
      if (vpre) {  // the value row (wanted right after these scores) and the key row 4 keys ahead
        for (int64_t x = 0; x < D * int64_t(sizeof(T)); x += 64)
          _mm_prefetch(reinterpret_cast<const char*>(vpre[j0 + jj]) + x, _MM_HINT_T0);
        if (j0 + jj + 4 < nb)
          for (int64_t x = 0; x < D * int64_t(sizeof(T)); x += 64)
            _mm_prefetch(reinterpret_cast<const char*>(krow[j0 + jj + 4]) + x, _MM_HINT_T0);
      }
      __m512 a[RB];
      for (int i = 0; i < RB; ++i) a[i] = _mm512_setzero_ps();
      for (int64_t c = 0; c < nc; ++c) {
        const __m512 kv = ld16(k + 16 * c, c == nc - 1 ? last : __mmask16(0xFFFF));
        for (int i = 0; i < RB; ++i) a[i] = _mm512_fmadd_ps(_mm512_loadu_ps(q + i * Dp + 16 * c), kv, a[i]);
      }
      for (int i = 0; i < RB; ++i) acc[i][jj] = a[i];
    }
    for (int64_t jj = n; jj < 16; ++jj)
      for (int i = 0; i < RB; ++i) acc[i][jj] = _mm512_setzero_ps();
    for (int i = 0; i < RB; ++i) _mm512_storeu_ps(s + i * ls + j0, hsum16(acc[i]));
  }
}

// o[r * Dp + 16 * (c0 + c)] += sum_j p[r * lp + j] v_j[16 * (c0 + c)] for RB rows, CB chunks
// of 16 (the last one masked by `last`).
template <int RB, int CB, typename T>
inline void pv_tile(const float* p, int64_t lp, const T* const* vrow, int64_t nb, float* o, int64_t Dp,
                    int64_t c0, __mmask16 last) {
  __m512 acc[RB][CB];
  for (int i = 0; i < RB; ++i)
    for (int c = 0; c < CB; ++c) acc[i][c] = _mm512_loadu_ps(o + i * Dp + 16 * (c0 + c));
  for (int64_t j = 0; j < nb; ++j) {
    const T* v = vrow[j] + 16 * c0;
    __m512 pj[RB];
    for (int i = 0; i < RB; ++i) pj[i] = _mm512_set1_ps(p[i * lp + j]);
    for (int c = 0; c < CB; ++c) {
      const __m512 vv = ld16(v + 16 * c, c == CB - 1 ? last : __mmask16(0xFFFF));
      for (int i = 0; i < RB; ++i) acc[i][c] = _mm512_fmadd_ps(pj[i], vv, acc[i][c]);
    }
  }
  for (int i = 0; i < RB; ++i)
    for (int c = 0; c < CB; ++c) _mm512_storeu_ps(o + i * Dp + 16 * (c0 + c), acc[i][c]);
}

template <int RB, int CB, typename T>
inline void pv_rows(const float* p, int64_t lp, const T* const* vrow, int64_t nb, float* o, int64_t Dp, int64_t D) {
  const int64_t nc = (D + 15) / 16;
  const __mmask16 last = tail_mask(D - (nc - 1) * 16), full = 0xFFFF;
  int64_t c0 = 0;
  for (; c0 + CB < nc; c0 += CB) pv_tile<RB, CB>(p, lp, vrow, nb, o, Dp, c0, full);
  switch (nc - c0) {  // 1..CB chunks left, the last one masked
#define MYTORCH_PV_CASE(n) \
    case n: if constexpr (n <= CB) pv_tile<RB, n>(p, lp, vrow, nb, o, Dp, c0, last); break;
    MYTORCH_PV_CASE(1) MYTORCH_PV_CASE(2) MYTORCH_PV_CASE(3) MYTORCH_PV_CASE(4)
    MYTORCH_PV_CASE(5) MYTORCH_PV_CASE(6) MYTORCH_PV_CASE(7) MYTORCH_PV_CASE(8)
#undef MYTORCH_PV_CASE
    default: break;
  }
}

// S = Q K^T for R rows (q rows Dp apart, s rows ls apart) over one block of nb keys.
template <typename T>
void block_scores(const float* q, int64_t R, int64_t Dp, int64_t D, const T* const* krow, int64_t nb, float* s,
                  int64_t ls, const T* const* vrow) {
  int64_t r = 0;
  for (; r + 4 <= R; r += 4, vrow = nullptr) scores_tile<4>(q + r * Dp, Dp, D, krow, nb, s + r * ls, ls, vrow);
  for (; r + 2 <= R; r += 2, vrow = nullptr) scores_tile<2>(q + r * Dp, Dp, D, krow, nb, s + r * ls, ls, vrow);
  for (; r < R; ++r, vrow = nullptr) scores_tile<1>(q + r * Dp, Dp, D, krow, nb, s + r * ls, ls, vrow);
}

// kt[d * kBk + j] = k_j[d] as float for j < nb, d < D; columns nb..kBk are zero. Prefetches the
// block's value rows (vpre), which P V reads right after.
template <typename T>
inline void transpose_keys(const T* const* krow, int64_t nb, int64_t D, float* kt, const T* const* vpre) {
  const int64_t nc = (D + 15) / 16;
  const __mmask16 last = tail_mask(D - (nc - 1) * 16);
  for (int64_t j0 = 0; j0 < kBk; j0 += 16) {
    const int64_t n = std::max<int64_t>(0, std::min<int64_t>(16, nb - j0));
    if (n == 0) {
      for (int64_t d = 0; d < D; ++d) _mm512_storeu_ps(kt + d * kBk + j0, _mm512_setzero_ps());
      continue;
    }
    if (vpre)
      for (int64_t jj = 0; jj < n; ++jj)
        for (int64_t x = 0; x < D * int64_t(sizeof(T)); x += 64)
          _mm_prefetch(reinterpret_cast<const char*>(vpre[j0 + jj]) + x, _MM_HINT_T0);
    for (int64_t c = 0; c < nc; ++c) {
      const __mmask16 m = c == nc - 1 ? last : __mmask16(0xFFFF);
      __m512 r[16];
      for (int64_t k = 0; k < 16; ++k) r[k] = k < n ? ld16(krow[j0 + k] + 16 * c, m) : _mm512_setzero_ps();
      transpose16(r);
      const int64_t dn = std::min<int64_t>(16, D - 16 * c);
      for (int64_t dd = 0; dd < dn; ++dd) _mm512_storeu_ps(kt + (16 * c + dd) * kBk + j0, r[dd]);
    }
  }
}

// s[r * ls + j] = q[r * Dp + 0:D] . kt[0:D][j] for RB rows and all kBk columns: a GEMM tile of
// RB rows x 64 keys in registers, one broadcast of q per row and head-dim element.
template <int RB>
inline void scores_t_tile(const float* q, int64_t Dp, int64_t D, const float* kt, float* s, int64_t ls) {
  static_assert(kBk == 64, "four vectors of 16 keys");
  __m512 acc[RB][4];
  for (int i = 0; i < RB; ++i)
    for (int c = 0; c < 4; ++c) acc[i][c] = _mm512_setzero_ps();
  for (int64_t d = 0; d < D; ++d) {
    const float* kd = kt + d * kBk;
    const __m512 k0 = _mm512_loadu_ps(kd), k1 = _mm512_loadu_ps(kd + 16);
    const __m512 k2 = _mm512_loadu_ps(kd + 32), k3 = _mm512_loadu_ps(kd + 48);
    for (int i = 0; i < RB; ++i) {
      const __m512 qb = _mm512_set1_ps(q[i * Dp + d]);
      acc[i][0] = _mm512_fmadd_ps(qb, k0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(qb, k1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(qb, k2, acc[i][2]);
      acc[i][3] = _mm512_fmadd_ps(qb, k3, acc[i][3]);
    }
  }
  for (int i = 0; i < RB; ++i)
    for (int c = 0; c < 4; ++c) _mm512_storeu_ps(s + i * ls + 16 * c, acc[i][c]);
}

// S = Q K^T for R rows from the transposed keys (s rows ls >= kBk apart).
inline void scores_t(const float* q, int64_t R, int64_t Dp, int64_t D, const float* kt, float* s, int64_t ls) {
  row_tiles6(R, [&](auto rb, int64_t r) { scores_t_tile<decltype(rb)::value>(q + r * Dp, Dp, D, kt, s + r * ls, ls); });
}

// O += P V for R rows (p rows lp apart, o rows Dp apart) over one block of nb values.
template <typename T>
void block_pv(const float* p, int64_t R, int64_t lp, const T* const* vrow, int64_t nb, float* o, int64_t Dp,
              int64_t D) {
  int64_t r = 0;
  for (; r + 4 <= R; r += 4) pv_rows<4, 4>(p + r * lp, lp, vrow, nb, o + r * Dp, Dp, D);
  for (; r + 2 <= R; r += 2) pv_rows<2, 8>(p + r * lp, lp, vrow, nb, o + r * Dp, Dp, D);
  for (; r < R; ++r) pv_rows<1, 8>(p + r * lp, lp, vrow, nb, o + r * Dp, Dp, D);
}
#endif

#if defined(__AVX2__) && !defined(__AVX512F__)
// ---- AVX2: a block's scores from its keys transposed (at kTransposedRows rows or more) ----
// Up to 8 elements of a row (float, bfloat16 or half) as floats (n < 8: the rest 0).
template <typename T>
inline __m256 ld8(const T* x, int64_t n) {
  if (n >= 8) {
    if constexpr (std::is_same<T, float>::value) {
      return _mm256_loadu_ps(x);
    } else {
      const __m128i u = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
      if constexpr (std::is_same<T, c10::BFloat16>::value)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(u), 16));
      else
        return _mm256_cvtph_ps(u);
    }
  }
  alignas(32) float f[8] = {};
  for (int64_t i = 0; i < n; ++i) f[i] = static_cast<float>(x[i]);
  return _mm256_load_ps(f);
}

// kt[d * kBk + j] = k_j[d] as float for j < nb, d < D; columns nb..kBk are zero.
template <typename T>
inline void transpose_keys(const T* const* krow, int64_t nb, int64_t D, float* kt) {
  for (int64_t j0 = 0; j0 < kBk; j0 += 8) {
    const int64_t n = std::max<int64_t>(0, std::min<int64_t>(8, nb - j0));
    for (int64_t d0 = 0; d0 < D; d0 += 8) {
      const int64_t dn = std::min<int64_t>(8, D - d0);
      __m256 r[8];
      for (int64_t k = 0; k < 8; ++k) r[k] = k < n ? ld8(krow[j0 + k] + d0, dn) : _mm256_setzero_ps();
      transpose8(r);
      for (int64_t dd = 0; dd < dn; ++dd) _mm256_storeu_ps(kt + (d0 + dd) * kBk + j0, r[dd]);
    }
  }
}

// s[r * ls + j0 + j] = q[r * Dp + 0:D] . kt[0:D][j0 + j] for RB rows and 16 keys from j0.
template <int RB>
inline void scores_t_tile(const float* q, int64_t Dp, int64_t D, const float* kt, int64_t j0, float* s,
                          int64_t ls) {
  __m256 acc[RB][2];
  for (int i = 0; i < RB; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t d = 0; d < D; ++d) {
    const __m256 k0 = _mm256_loadu_ps(kt + d * kBk + j0), k1 = _mm256_loadu_ps(kt + d * kBk + j0 + 8);
    for (int i = 0; i < RB; ++i) {
      const __m256 qb = _mm256_broadcast_ss(q + i * Dp + d);
      acc[i][0] = _mm256_fmadd_ps(qb, k0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(qb, k1, acc[i][1]);
    }
  }
  for (int i = 0; i < RB; ++i) {
    _mm256_storeu_ps(s + i * ls + j0, acc[i][0]);
    _mm256_storeu_ps(s + i * ls + j0 + 8, acc[i][1]);
  }
}

// S = Q K^T for R rows from the transposed keys (all kBk columns).
inline void scores_t(const float* q, int64_t R, int64_t Dp, int64_t D, const float* kt, float* s, int64_t ls) {
  for (int64_t j0 = 0; j0 < kBk; j0 += 16)
    row_tiles6(R, [&](auto rb, int64_t r) {
      scores_t_tile<decltype(rb)::value>(q + r * Dp, Dp, D, kt, j0, s + r * ls, ls);
    });
}
#endif

// U: how K, V rows are read: as stored (T), or converted to A per block (worth it when
// several rows share each key: GQA groups, several queries).
template <typename T, typename U>
void attend(const Problem& p, int64_t ns, const T* q, const T* kc, const T* vc, const T* cos, const T* sin,
            T* out, float* lse) {
  using A = typename Acc<T>::type;
#if defined(__AVX512F__)
  // float accumulation: the AVX-512 tiles (K, V rows as stored or converted, see U)
  constexpr bool kVec = std::is_same<A, float>::value;
#else
  constexpr bool kVec = false;
#endif
#if defined(__AVX2__)
  constexpr bool kTransposes = std::is_same<A, float>::value;  // scores_t: AVX-512 or AVX2
#else
  constexpr bool kTransposes = false;
#endif
  const int64_t D = p.d, G = p.G, R = G * p.sq;
  const int64_t Dp = kVec ? (D + 15) / 16 * 16 : D;  // row stride of the q and o rows
  const bool transposed = kTransposes && R >= kTransposedRows;  // scores from transposed keys
  const A ninf = -std::numeric_limits<A>::infinity();
  const A c = A(p.softcap > 0 ? p.scale / p.softcap : p.scale);
  const int64_t ntask = p.batch * p.hk * ns;
  // split outputs: (task, row, D) and (task, row); with one split the rows go straight out
  std::vector<A> opart(ns > 1 ? ntask * R * D : 0), lpart(ns > 1 ? ntask * R : 0);
  double work = 0;
  for (int64_t b = 0; b < p.batch; ++b) work += double(p.nk(b)) * p.hq * p.sq * D;

#pragma omp parallel if (work > (1 << 16) && ntask > 1)
  {
    std::vector<A> qs(R * Dp), s(R * kBk), o(R * Dp), m(R), l(R), kf(kBk * D), vf(kBk * D), tmp(D);
    std::vector<A> kt(transposed ? D * kBk : 0);  // a block's keys, transposed
    std::vector<int> bad(R);  // kNaN / kInf: the row has a NaN / +inf score
    const U* krow[kBk];       // this block's key / value rows (in the cache, or converted)
    const U* vrow[kBk];
    const T* kraw[kBk];       // the key rows in the cache
    std::vector<T> qrot(D);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < ntask; ++t) {
      const int64_t split = t % ns, hk = (t / ns) % p.hk, b = t / (ns * p.hk);
      const int64_t nk = p.nk(b), off = nk - p.sq, lp = p.leftpad[b];
      auto lo_of = [&](int64_t i) {
        return p.has_lo ? std::min(nk, std::max<int64_t>(0, i + off - p.wl)) : int64_t(0);
      };
      auto hi_of = [&](int64_t i) {
        return p.has_hi ? std::max<int64_t>(0, std::min(nk, i + off + p.wr + 1)) : nk;
      };
      // this split's keys: a run of whole blocks of the task's range
      const int64_t lo = lo_of(0), hi = std::max(lo, hi_of(p.sq - 1));
      const int64_t units = (hi - lo + kSplitUnit - 1) / kSplitUnit, per = (units + ns - 1) / ns * kSplitUnit;
      const int64_t j_begin = std::min(hi, lo + split * per), j_end = std::min(hi, lo + (split + 1) * per);

      // rows r = g * sq + i: q head hk * G + g, query i; q rotated and scaled
      for (int64_t g = 0; g < G; ++g)
        for (int64_t i = 0; i < p.sq; ++i) {
          const int64_t r = g * p.sq + i;
          const T* qr = q + b * p.q0 + i * p.q1 + (hk * G + g) * p.q2;
          if (p.rot_half > 0) {
            const int64_t rp = p.seqlens[b] - lp + (p.q_per_token ? i : 0);
            rotate<T, A>(qr, qrot.data(), D, cos + rp * p.ro0, sin + rp * p.rs0, p.rot_half, p.interleaved);
            qr = qrot.data();
          }
          to_acc(qr, tmp.data(), D);
          for (int64_t dd = 0; dd < D; ++dd) qs[r * Dp + dd] = tmp[dd] * c;
          for (int64_t dd = D; dd < Dp; ++dd) qs[r * Dp + dd] = A(0);
        }
      std::fill(m.begin(), m.end(), ninf);
      std::fill(bad.begin(), bad.end(), 0);
      std::fill(l.begin(), l.end(), A(0));
      std::fill(o.begin(), o.end(), A(0));

      for (int64_t j0 = j_begin; j0 < j_end; j0 += kBk) {
        const int64_t nb = std::min(kBk, j_end - j0);
        // K, V rows of this block: read in place, or converted (keys that are transposed
        // are converted by the transpose)
        for (int64_t jj = 0; jj < nb; ++jj) {
          const T* kr = kc + p.row(b, lp + j0 + jj, p.kc0, p.kc1) + hk * p.kc2;
          const T* vr = vc + p.row(b, lp + j0 + jj, p.vc0, p.vc1) + hk * p.vc2;
          kraw[jj] = kr;
          if constexpr (std::is_same<T, U>::value) {
            krow[jj] = kr, vrow[jj] = vr;
          } else {
            if (!transposed) to_acc(kr, kf.data() + jj * D, D);
            to_acc(vr, vf.data() + jj * D, D);
            krow[jj] = kf.data() + jj * D, vrow[jj] = vf.data() + jj * D;
          }
        }
#if defined(__AVX512F__)
        if constexpr (kVec) {
          if (transposed) {
            const T* const* vpre = nullptr;  // value rows to prefetch: those read in place
            if constexpr (std::is_same<T, U>::value) vpre = vrow;
            transpose_keys<T>(kraw, nb, D, kt.data(), vpre);
            scores_t(qs.data(), R, Dp, D, kt.data(), s.data(), kBk);
          } else {
            block_scores<U>(qs.data(), R, Dp, D, krow, nb, s.data(), kBk,
                            std::is_same<T, U>::value ? vrow : nullptr);
          }
        } else
#elif defined(__AVX2__)
        if constexpr (kTransposes) {
          if (transposed) {
            transpose_keys<T>(kraw, nb, D, kt.data());
            scores_t(qs.data(), R, Dp, D, kt.data(), s.data(), kBk);
          }
        }
        if (!transposed)
#endif
        // S = Q K^T, four keys at a time (four independent accumulators per row)
        for (int64_t r = 0; r < R; ++r) {
          const A* qr = qs.data() + r * Dp;
          A* sr = s.data() + r * kBk;
          int64_t jj = 0;
          for (; jj + 4 <= nb; jj += 4) {
            const U *k0 = krow[jj], *k1 = krow[jj + 1], *k2 = krow[jj + 2], *k3 = krow[jj + 3];
            A a0 = 0, a1 = 0, a2 = 0, a3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3)
            for (int64_t dd = 0; dd < D; ++dd) {
              const A x = qr[dd];
              a0 += x * ld<A>(k0, dd);
              a1 += x * ld<A>(k1, dd);
              a2 += x * ld<A>(k2, dd);
              a3 += x * ld<A>(k3, dd);
            }
            sr[jj] = a0, sr[jj + 1] = a1, sr[jj + 2] = a2, sr[jj + 3] = a3;
          }
          for (; jj < nb; ++jj) {
            const U* kj = krow[jj];
            A acc = 0;
#pragma omp simd reduction(+ : acc)
            for (int64_t dd = 0; dd < D; ++dd) acc += qr[dd] * ld<A>(kj, dd);
            sr[jj] = acc;
          }
        }
        // score transforms, masks, online softmax
        for (int64_t r = 0; r < R; ++r) {
          const int64_t g = r / p.sq, i = r % p.sq;
          A* sr = s.data() + r * kBk;
          if (p.softcap > 0) {
            const A cap = A(p.softcap);
            for (int64_t jj = 0; jj < nb; ++jj) sr[jj] = cap * std::tanh(sr[jj]);
          }
          if (p.alibi) {
            const A slope = A(p.alibi[b * p.alibi_sb + hk * G + g]);
            for (int64_t jj = 0; jj < nb; ++jj) sr[jj] -= slope * A(std::abs(i + off - (j0 + jj)));
          }
          // visible: [a, e) of this block
          const int64_t a = std::min(nb, std::max<int64_t>(0, lo_of(i) - j0));
          const int64_t e = std::max(a, std::min(nb, hi_of(i) - j0));
          std::fill(sr, sr + a, ninf);
          std::fill(sr + e, sr + nb, ninf);
          if (p.key_mask) {
            const bool* km = p.key_mask + b * p.km0 + (lp + j0) * p.km1;
            for (int64_t jj = a; jj < e; ++jj)
              if (!km[jj * p.km1]) sr[jj] = ninf;
          }
          if (bad[r]) {
            if (bad[r] == kInf && std::any_of(sr, sr + nb, [](A x) { return std::isnan(x); })) bad[r] = kNaN;
            continue;
          }
          // a NaN score, or a +inf one, decides the row's result (as a plain softmax gives it):
          // +inf shows in the max, NaN in the sum of the exponentials (or, when max_of skipped
          // it and nothing else is visible, in a scan)
          const A mx = max_of(sr, nb);
          if (mx == -ninf) {
            bad[r] = std::any_of(sr, sr + nb, [](A x) { return std::isnan(x); }) ? kNaN : kInf;
            continue;
          }
          const A mn = std::max(m[r], mx);
          if (mn == ninf) {  // nothing visible yet
            if (std::any_of(sr, sr + nb, [](A x) { return std::isnan(x); })) bad[r] = kNaN;
            continue;
          }
          const A alpha = std::exp(m[r] - mn);
          const A sum = exp_shift_sum(sr, sr, nb, mn);
          if (std::isnan(sum)) {
            bad[r] = kNaN;
            continue;
          }
          l[r] = l[r] * alpha + sum;
          m[r] = mn;
          if (alpha != A(1)) {
            A* orow = o.data() + r * Dp;
            for (int64_t dd = 0; dd < D; ++dd) orow[dd] *= alpha;
          }
        }
#if defined(__AVX512F__)
        if constexpr (kVec) {
          // the tiles take all rows: a row without probabilities this block adds zeros
          for (int64_t r = 0; r < R; ++r)
            if (m[r] == ninf || bad[r]) std::fill(s.data() + r * kBk, s.data() + r * kBk + nb, A(0));
          block_pv<U>(s.data(), R, kBk, vrow, nb, o.data(), Dp, D);
          continue;
        }
#endif
        // O += P V, four keys per pass over the output row
        for (int64_t r = 0; r < R; ++r) {
          if (m[r] == ninf || bad[r]) continue;
          const A* pr = s.data() + r * kBk;
          A* orow = o.data() + r * Dp;
          int64_t jj = 0;
          for (; jj + 4 <= nb; jj += 4) {
            const A p0 = pr[jj], p1 = pr[jj + 1], p2 = pr[jj + 2], p3 = pr[jj + 3];
            const U *v0 = vrow[jj], *v1 = vrow[jj + 1], *v2 = vrow[jj + 2], *v3 = vrow[jj + 3];
#pragma omp simd
            for (int64_t dd = 0; dd < D; ++dd)
              orow[dd] += p0 * ld<A>(v0, dd) + p1 * ld<A>(v1, dd) + p2 * ld<A>(v2, dd) + p3 * ld<A>(v3, dd);
          }
          for (; jj < nb; ++jj) {
            const A pj = pr[jj];
            const U* vj = vrow[jj];
#pragma omp simd
            for (int64_t dd = 0; dd < D; ++dd) orow[dd] += pj * ld<A>(vj, dd);
          }
        }
      }

      for (int64_t r = 0; r < R; ++r) {
        const int64_t g = r / p.sq, i = r % p.sq, h = hk * G + g;
        const A nan = std::numeric_limits<A>::quiet_NaN();
        A inv = l[r] > 0 ? A(1) / l[r] : A(0);
        A lr = l[r] > 0 ? m[r] + std::log(l[r]) : ninf;
        if (bad[r]) {  // out NaN; lse NaN, or +inf for a +inf score
          inv = nan;
          lr = bad[r] == kNaN ? nan : -ninf;
        }
        if (ns == 1) {
          T* od = out + b * p.o0 + i * p.o1 + h * p.o2;
          for (int64_t dd = 0; dd < D; ++dd) od[dd] = static_cast<T>(o[r * Dp + dd] * inv);
          lse[(b * p.hq + h) * p.sq + i] = lr == ninf ? std::numeric_limits<float>::infinity() : float(lr);
        } else {
          A* od = opart.data() + (t * R + r) * D;
          for (int64_t dd = 0; dd < D; ++dd) od[dd] = o[r * Dp + dd] * inv;
          lpart[t * R + r] = lr;
        }
      }
    }
  }
  if (ns == 1) return;

  // combine the splits of each (sequence, kv head, row)
  const int64_t nrow = p.batch * p.hk * R;
#pragma omp parallel for if (nrow * ns * D > (1 << 16))
  for (int64_t x = 0; x < nrow; ++x) {
    const int64_t r = x % R, hk = (x / R) % p.hk, b = x / (R * p.hk);
    const int64_t g = r / p.sq, i = r % p.sq, h = hk * G + g;
    const int64_t t0 = (b * p.hk + hk) * ns;
    A mx = ninf;
    bool nan = false;
    for (int64_t sp = 0; sp < ns; ++sp) {
      const A x = lpart[(t0 + sp) * R + r];
      nan |= std::isnan(x);
      mx = std::max(mx, x);
    }
    T* od = out + b * p.o0 + i * p.o1 + h * p.o2;
    if (nan || mx == -ninf) {  // a split saw a NaN or +inf score: out NaN, lse NaN or +inf
      for (int64_t dd = 0; dd < D; ++dd) od[dd] = static_cast<T>(std::numeric_limits<A>::quiet_NaN());
      lse[(b * p.hq + h) * p.sq + i] = nan ? std::numeric_limits<float>::quiet_NaN()
                                           : std::numeric_limits<float>::infinity();
      continue;
    }
    if (mx == ninf) {
      for (int64_t dd = 0; dd < D; ++dd) od[dd] = static_cast<T>(0);
      lse[(b * p.hq + h) * p.sq + i] = std::numeric_limits<float>::infinity();
      continue;
    }
    A total = 0;
    for (int64_t sp = 0; sp < ns; ++sp) total += std::exp(lpart[(t0 + sp) * R + r] - mx);
    const A lr = mx + std::log(total);
    std::vector<A> acc(D, A(0));
    for (int64_t sp = 0; sp < ns; ++sp) {
      const A w = std::exp(lpart[(t0 + sp) * R + r] - lr);
      if (w == A(0)) continue;
      const A* src = opart.data() + ((t0 + sp) * R + r) * D;
      for (int64_t dd = 0; dd < D; ++dd) acc[dd] += w * src[dd];
    }
    for (int64_t dd = 0; dd < D; ++dd) od[dd] = static_cast<T>(acc[dd]);
    lse[(b * p.hq + h) * p.sq + i] = float(lr);
  }
}

template <typename F>
void dispatch(at::ScalarType t, F&& f) {
  switch (t) {
    case at::kFloat: f(float{}); break;
    case at::kDouble: f(double{}); break;
    case at::kBFloat16: f(c10::BFloat16{}); break;
    case at::kHalf: f(c10::Half{}); break;
    default: TORCH_CHECK(false, "unreachable dtype ", t);
  }
}

at::Tensor host_alias(const at::Tensor& t) {
  if (t.device().is_cpu()) return t;
  return at::from_blob(t.data_ptr(), t.sizes(), t.strides(), t.options().device(at::kCPU));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> kvcache_forward(const KvcacheArgs& a) {
  MYTORCH_ISA_DISPATCH(kvcache_forward, a)
  const char* op = "mytorch::flash_attn_with_kvcache";
  const at::Tensor &q = a.q, &k_cache = a.k_cache, &v_cache = a.v_cache;
  const Shapes sh = check_shapes(op, q, k_cache, v_cache, a.k, a.v, a.rotary_cos, a.rotary_sin, a.cache_seqlens,
                                 a.cache_batch_idx, a.cache_leftpad, a.block_table, a.alibi_slopes, a.softcap,
                                 a.num_splits, a.key_mask, Rules::kOpenMP);
  const bool causal_or_local = a.causal || a.window_left >= 0 || a.window_right >= 0;
  const Values vals = check_values(op, sh, a.cache_seqlens, a.cache_batch_idx, a.cache_leftpad, a.block_table,
                                   causal_or_local);
  at::Tensor out = at::empty({sh.batch, sh.seqlen_q, sh.heads_q, sh.head_dim}, q.options());
  at::Tensor lse = at::empty({sh.batch, sh.heads_q, sh.seqlen_q}, q.options().dtype(at::kFloat));

  Problem p;
  p.batch = sh.batch, p.sq = sh.seqlen_q, p.hq = sh.heads_q, p.hk = sh.heads_k, p.d = sh.head_dim;
  p.G = p.hq / p.hk, p.snew = sh.seqlen_new;
  p.paged = sh.paged, p.block_size = sh.paged ? sh.block_size : 1, p.max_blocks = sh.max_blocks;
  p.block_table = sh.paged ? vals.block_table.data() : nullptr;
  p.kc0 = k_cache.stride(0), p.kc1 = k_cache.stride(1), p.kc2 = k_cache.stride(2);
  p.vc0 = v_cache.stride(0), p.vc1 = v_cache.stride(1), p.vc2 = v_cache.stride(2);
  p.q0 = q.stride(0), p.q1 = q.stride(1), p.q2 = q.stride(2);
  p.o0 = out.stride(0), p.o1 = out.stride(1), p.o2 = out.stride(2);
  if (a.k.has_value()) {
    p.kn0 = a.k->stride(0), p.kn1 = a.k->stride(1), p.kn2 = a.k->stride(2);
    p.vn0 = a.v->stride(0), p.vn1 = a.v->stride(1), p.vn2 = a.v->stride(2);
  }
  p.seqlens = vals.seqlens.data(), p.leftpad = vals.leftpad.data(), p.bidx = vals.batch_idx.data();
  p.scale = mytorch::attention::softmax_scale(a.softmax_scale, p.d);
  p.softcap = a.softcap;
  p.has_lo = a.window_left >= 0;
  p.wl = a.window_left;
  p.has_hi = a.causal || a.window_right >= 0;
  p.wr = a.causal ? (a.window_right >= 0 ? std::min<int64_t>(a.window_right, 0) : 0) : a.window_right;
  at::Tensor alibi;
  if (a.alibi_slopes.has_value()) {
    alibi = host_alias(*a.alibi_slopes).contiguous();
    p.alibi = alibi.const_data_ptr<float>();
    p.alibi_sb = a.alibi_slopes->dim() == 2 ? p.hq : 0;
  }
  at::Tensor key_mask;
  if (a.key_mask.has_value()) {
    key_mask = host_alias(*a.key_mask);
    p.key_mask = key_mask.const_data_ptr<bool>();
    p.km0 = key_mask.stride(0), p.km1 = key_mask.stride(1);
  }
  if (sh.rotary_dim > 0) {
    p.rot_half = sh.rotary_dim / 2;
    p.ro0 = a.rotary_cos->stride(0), p.rs0 = a.rotary_sin->stride(0);
    p.interleaved = a.rotary_interleaved;
    p.q_per_token = causal_or_local;
  }
  int64_t longest = 0;
  for (int64_t b = 0; b < p.batch; ++b) longest = std::max(longest, p.nk(b));
  const int64_t ns = pick_splits(p, a.num_splits, longest);

  dispatch(q.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* cos = sh.rotary_dim > 0 ? static_cast<const T*>(a.rotary_cos->const_data_ptr()) : nullptr;
    const T* sin = sh.rotary_dim > 0 ? static_cast<const T*>(a.rotary_sin->const_data_ptr()) : nullptr;
    T* kc = static_cast<T*>(k_cache.data_ptr());
    T* vc = static_cast<T*>(v_cache.data_ptr());
    if (p.snew > 0 && p.batch > 0)
      append<T>(p, static_cast<const T*>(a.k->const_data_ptr()), static_cast<const T*>(a.v->const_data_ptr()), cos,
                sin, kc, vc);
    if (out.numel() == 0) return;
    auto run = [&](auto u) {
      attend<T, decltype(u)>(p, ns, static_cast<const T*>(q.const_data_ptr()), kc, vc, cos, sin,
                             static_cast<T*>(out.data_ptr()), lse.data_ptr<float>());
    };
    if constexpr (std::is_same<T, c10::Half>::value) {
#if defined(__AVX512F__)
      if (p.G * p.sq == 1) run(T{});  // one row per key: the AVX-512 tiles widen in the loops
      else run(float{});
#else
      run(float{});
#endif
    } else if constexpr (std::is_same<T, c10::BFloat16>::value) {
      if (p.G * p.sq == 1) run(T{});  // one row per key: widen in the loops
      else run(float{});              // rows share each key: widen once per block
    } else {
      run(T{});
    }
  });
  return {out, lse};
}

}  // namespace cpu
}  // namespace mytorch
