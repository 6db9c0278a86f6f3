// GEMM (OpenMP), BLIS style: C (m x n) += A (m x k) @ B (k x n).
//
// Loops, outer to inner:  jc (NC columns of B/C) -> pc (KC of the k dim; pack B
// panel KC x NC, shared by all threads) -> ic (MC rows; each thread packs its own
// A block MC x KC) -> jr (NR) -> ir (MR) -> micro-kernel (MR x NR register tile).
// Packing copies any strided layout (row-major, transposed, sliced) into
// contiguous micro-panels, zero-padded to MR / NR, converting bf16/fp16 to fp32.
// The micro-kernel keeps the MR x NR tile in vector registers: per k step it
// loads NR/W vectors of B and broadcasts MR scalars of A.
#include "kernels/cpu/gemm.h"
#include "kernels/gemm.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/native/Resize.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/isa.h"

// The raw GEMMs run the widest copy of this file the CPU has (kernels/cpu/isa/gemm_*.cpp).
MYTORCH_ISA_DECLARE(sgemm)
MYTORCH_ISA_DECLARE(dgemm)
MYTORCH_ISA_DECLARE(gemm_bf16_f32)
MYTORCH_ISA_DECLARE(gemm_f16_f32)
MYTORCH_ISA_DECLARE(gemm_kernel_name)

namespace mytorch {
namespace cpu {
namespace {

// ---- vector traits: one register type per (ISA, dtype) ----
#if defined(__AVX512F__)
struct VecF {
  using T = float;
  using R = __m512;
  static constexpr int W = 16;
  static R zero() { return _mm512_setzero_ps(); }
  static R load(const T* p) { return _mm512_loadu_ps(p); }
  static void store(T* p, R v) { _mm512_storeu_ps(p, v); }
  static R set1(T v) { return _mm512_set1_ps(v); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
};
struct VecD {
  using T = double;
  using R = __m512d;
  static constexpr int W = 8;
  static R zero() { return _mm512_setzero_pd(); }
  static R load(const T* p) { return _mm512_loadu_pd(p); }
  static void store(T* p, R v) { _mm512_storeu_pd(p, v); }
  static R set1(T v) { return _mm512_set1_pd(v); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_pd(a, b, c); }
  static R mul(R a, R b) { return _mm512_mul_pd(a, b); }
};
// 24 accumulators + 2 B vectors + 1 broadcast of 32 zmm registers.
constexpr int kMrF = 12, kNvF = 2, kMrD = 12, kNvD = 2;
constexpr int kMrAltF = 8;  // 8x32 fp32 (16 accumulators), taken where it pads m no more than 12 rows
constexpr const char* kKernelName = "avx512 12x32 fp32, 12x16 fp64";
#elif defined(__AVX2__) && defined(__FMA__)
struct VecF {
  using T = float;
  using R = __m256;
  static constexpr int W = 8;
  static R zero() { return _mm256_setzero_ps(); }
  static R load(const T* p) { return _mm256_loadu_ps(p); }
  static void store(T* p, R v) { _mm256_storeu_ps(p, v); }
  static R set1(T v) { return _mm256_set1_ps(v); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
};
struct VecD {
  using T = double;
  using R = __m256d;
  static constexpr int W = 4;
  static R zero() { return _mm256_setzero_pd(); }
  static R load(const T* p) { return _mm256_loadu_pd(p); }
  static void store(T* p, R v) { _mm256_storeu_pd(p, v); }
  static R set1(T v) { return _mm256_set1_pd(v); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_pd(a, b, c); }
  static R mul(R a, R b) { return _mm256_mul_pd(a, b); }
};
// 6x16 fp32: 12 accumulators + 2 B vectors + 1 broadcast of 16 ymm registers.
constexpr int kMrF = 6, kNvF = 2, kMrD = 6, kNvD = 2, kMrAltF = kMrF;
constexpr const char* kKernelName = "avx2+fma 6x16 fp32, 6x8 fp64";
#else
template <typename T_>
struct VecScalar {
  using T = T_;
  using R = T_;
  static constexpr int W = 1;
  static R zero() { return 0; }
  static R load(const T* p) { return *p; }
  static void store(T* p, R v) { *p = v; }
  static R set1(T v) { return v; }
  static R fma(R a, R b, R c) { return a * b + c; }
  static R mul(R a, R b) { return a * b; }
};
using VecF = VecScalar<float>;
using VecD = VecScalar<double>;
constexpr int kMrF = 4, kNvF = 8, kMrD = 4, kNvD = 8, kMrAltF = kMrF;
constexpr const char* kKernelName = "portable 4x8";
#endif

template <typename T>
struct Cfg;
// KC x NR panel of B (32 KiB for fp32 12x32) stays in L1, the MC x KC block of A in L2.
template <>
struct Cfg<float> {
  using V = VecF;
  static constexpr int MR = kMrF, MR_ALT = kMrAltF, NR = kNvF * VecF::W;
  static constexpr int64_t KC = 256, MC = MR * 24, NC = 4096;
};
template <>
struct Cfg<double> {
  using V = VecD;
  static constexpr int MR = kMrD, MR_ALT = kMrD, NR = kNvD * VecD::W;
  static constexpr int64_t KC = 256, MC = MR * 12, NC = 2048;
};

// ---- micro-kernel: acc = a_panel (MR x kc) @ b_panel (kc x NR); C = alpha*acc + beta*C ----
template <typename T, int MR>
inline void micro_kernel(int64_t kc, const T* __restrict a, const T* __restrict b, T* c,
                         int64_t rsc, int64_t csc, int mr, int nr, T alpha, T beta) {
  using V = typename Cfg<T>::V;
  using R = typename V::R;
  constexpr int NR = Cfg<T>::NR, NV = NR / V::W;
  R acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) acc[i][j] = V::zero();
  for (int64_t p = 0; p < kc; ++p) {
    R bv[NV];
#pragma GCC unroll 16
    for (int j = 0; j < NV; ++j) bv[j] = V::load(b + j * V::W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      R av = V::set1(a[i]);
#pragma GCC unroll 16
      for (int j = 0; j < NV; ++j) acc[i][j] = V::fma(av, bv[j], acc[i][j]);
    }
    a += MR;
    b += NR;
  }
  const R va = V::set1(alpha);
  if (mr == MR && nr == NR && csc == 1) {
    if (beta == T(0)) {
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < NV; ++j) V::store(c + i * rsc + j * V::W, V::mul(va, acc[i][j]));
    } else {
      const R vb = V::set1(beta);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 16
        for (int j = 0; j < NV; ++j) {
          T* cp = c + i * rsc + j * V::W;
          V::store(cp, V::fma(va, acc[i][j], V::mul(vb, V::load(cp))));
        }
    }
    return;
  }
  alignas(64) T tile[MR * NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NV; ++j) V::store(tile + i * NR + j * V::W, acc[i][j]);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) {
      T& dst = c[i * rsc + j * csc];
      T v = alpha * tile[i * NR + j];
      dst = beta == T(0) ? v : v + beta * dst;
    }
}

// ---- packing ----
// A block rows [0, mc) x cols [0, kc) -> micro-panels of MR rows: dst[ir*kc + p*MR + i].
template <typename T, typename S, int MR>
void pack_a(int64_t mc, int64_t kc, const S* a, int64_t rsa, int64_t csa, T* dst) {
  for (int64_t ir = 0; ir < mc; ir += MR) {
    const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ir));
    T* d = dst + ir * kc;
    const S* src = a + ir * rsa;
    if (csa == 1 && mr == MR) {
      for (int64_t p = 0; p < kc; ++p)
        for (int i = 0; i < MR; ++i) d[p * MR + i] = static_cast<T>(src[i * rsa + p]);
    } else if (rsa == 1 && mr == MR) {
      for (int64_t p = 0; p < kc; ++p)
        for (int i = 0; i < MR; ++i) d[p * MR + i] = static_cast<T>(src[p * csa + i]);
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        int i = 0;
        for (; i < mr; ++i) d[p * MR + i] = static_cast<T>(src[i * rsa + p * csa]);
        for (; i < MR; ++i) d[p * MR + i] = T(0);
      }
    }
  }
}

// B panel rows [0, kc) x cols [0, nc) -> micro-panels of NR columns: dst[jr*kc + p*NR + j].
template <typename T, typename S>
void pack_b_panel(int64_t kc, int nr, const S* b, int64_t rsb, int64_t csb, T* d) {
  constexpr int NR = Cfg<T>::NR;
  if (csb == 1 && nr == NR) {
    for (int64_t p = 0; p < kc; ++p) {
      const S* s = b + p * rsb;
      for (int j = 0; j < NR; ++j) d[p * NR + j] = static_cast<T>(s[j]);
    }
  } else if (rsb == 1 && nr == NR) {
    for (int j = 0; j < NR; ++j) {
      const S* s = b + j * csb;
      for (int64_t p = 0; p < kc; ++p) d[p * NR + j] = static_cast<T>(s[p]);
    }
  } else {
    for (int64_t p = 0; p < kc; ++p) {
      int j = 0;
      for (; j < nr; ++j) d[p * NR + j] = static_cast<T>(b[p * rsb + j * csb]);
      for (; j < NR; ++j) d[p * NR + j] = T(0);
    }
  }
}

// Grow-only, 64-byte aligned scratch, one per thread and purpose.
struct Scratch {
  void* ptr = nullptr;
  size_t bytes = 0;
  ~Scratch() { std::free(ptr); }
  template <typename T>
  T* get(size_t n) {
    size_t need = (n * sizeof(T) + 63) / 64 * 64;
    if (need > bytes) {
      std::free(ptr);
      ptr = std::aligned_alloc(64, need);
      TORCH_CHECK(ptr != nullptr, "mytorch gemm: out of memory for a ", need, "-byte packing buffer");
      bytes = need;
    }
    return static_cast<T*>(ptr);
  }
};
thread_local Scratch tls_a, tls_b;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int gemm_threads(int64_t m, int64_t n, int64_t k) {
#ifdef _OPENMP
  if (omp_in_parallel()) return 1;
  // Below ~1 MFLOP thread start-up costs more than it saves.
  if (m * n * k < (int64_t(1) << 18)) return 1;
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Short, deep products whose A rows and B columns are contiguous along k (csa == rsb == 1),
// e.g. a convolution's weight gradient over one image's positions, or a narrow linear layer:
// dot products of DM rows of A with DN columns of B at a time, k in vector steps, no packing.
template <typename T, typename V>
void gemm_dot(int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t rsa, const T* b, int64_t csb, T beta,
              T* c, int64_t rsc, int64_t csc, int nt) {
  using R = typename V::R;
  constexpr int W = V::W, DM = 4, DN = W >= 16 ? 4 : 3;  // DM * DN accumulators + DN + 1 registers
  const int64_t kv = k / W * W, bm = (m + DM - 1) / DM, bn = (n + DN - 1) / DN;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int64_t blk = 0; blk < bm * bn; ++blk) {
    const int64_t i0 = blk / bn * DM, j0 = blk % bn * DN;
      const T* ar[DM];
      const T* br[DN];
      for (int i = 0; i < DM; ++i) ar[i] = a + std::min<int64_t>(i0 + i, m - 1) * rsa;  // edges: repeats, unused
      for (int j = 0; j < DN; ++j) br[j] = b + std::min<int64_t>(j0 + j, n - 1) * csb;
      R acc[DM][DN];
#pragma GCC unroll 4
      for (int i = 0; i < DM; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < DN; ++j) acc[i][j] = V::zero();
      for (int64_t p = 0; p < kv; p += W) {
        R bv[DN];
#pragma GCC unroll 4
        for (int j = 0; j < DN; ++j) bv[j] = V::load(br[j] + p);
#pragma GCC unroll 4
        for (int i = 0; i < DM; ++i) {
          const R av = V::load(ar[i] + p);
#pragma GCC unroll 4
          for (int j = 0; j < DN; ++j) acc[i][j] = V::fma(av, bv[j], acc[i][j]);
        }
      }
      const int mi = (int)std::min<int64_t>(DM, m - i0), nj = (int)std::min<int64_t>(DN, n - j0);
      alignas(64) T lanes[W];
      for (int i = 0; i < mi; ++i)
        for (int j = 0; j < nj; ++j) {
          V::store(lanes, acc[i][j]);
          T sum = 0;
          for (int l = 0; l < W; ++l) sum += lanes[l];
          for (int64_t p = kv; p < k; ++p) sum += ar[i][p] * br[j][p];
          T& d = c[(i0 + i) * rsc + (j0 + j) * csc];
          d = beta == T(0) ? alpha * sum : alpha * sum + beta * d;
        }
    }
}

// T: compute type (float/double); S: storage type of A and B; MR: rows of the micro-kernel.
template <typename T, typename S, int MR>
void gemm_packed(int64_t m, int64_t n, int64_t k, T alpha, const S* a, int64_t rsa, int64_t csa, const S* b,
                 int64_t rsb, int64_t csb, T beta, T* c, int64_t rsc, int64_t csc, int nt) {
  using C = Cfg<T>;
  constexpr int NR = C::NR;
  constexpr int64_t MC = MR * (C::MC / C::MR);
  // Row blocks: balanced, each a multiple of MR, a multiple of the thread count and,
  // with several threads, about 4 per thread (taken dynamically, so a thread that
  // the OS preempts does not hold the others up at the barrier).
  int64_t n_ic = ceil_div(m, MC);
  if (nt > 1) n_ic = std::max(n_ic, std::min<int64_t>(4 * nt, ceil_div(m, 4 * MR)));
  n_ic = ceil_div(n_ic, nt) * nt;
  const int64_t mc_blk = std::min<int64_t>(MC, ceil_div(ceil_div(m, n_ic), MR) * MR);
  n_ic = ceil_div(m, mc_blk);
  const int64_t nc_max = std::min<int64_t>(C::NC, ceil_div(n, NR) * NR);
  const int64_t kc_max = std::min<int64_t>(C::KC, k);
  T* bbuf = tls_b.get<T>(static_cast<size_t>(kc_max * nc_max));

#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    for (int64_t jc = 0; jc < n; jc += C::NC) {
      const int64_t nc = std::min<int64_t>(C::NC, n - jc);
      const int64_t n_jr = ceil_div(nc, NR);
      // With fewer row blocks than threads, split the columns too.
      const int64_t n_jsplit = n_ic >= nt ? 1 : std::min<int64_t>(n_jr, ceil_div(nt, n_ic));
      const int64_t jr_per = ceil_div(n_jr, n_jsplit);
      for (int64_t pc = 0; pc < k; pc += C::KC) {
        const int64_t kc = std::min<int64_t>(C::KC, k - pc);
        const T beta_eff = pc == 0 ? beta : T(1);
#pragma omp for schedule(static)
        for (int64_t jr = 0; jr < n_jr; ++jr) {
          const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr * NR));
          pack_b_panel<T, S>(kc, nr, b + pc * rsb + (jc + jr * NR) * csb, rsb, csb,
                             bbuf + jr * NR * kc);
        }
        T* abuf = tls_a.get<T>(static_cast<size_t>(mc_blk * kc));
        int64_t packed_ic = -1;
#pragma omp for schedule(dynamic, 1)
        for (int64_t task = 0; task < n_ic * n_jsplit; ++task) {
          const int64_t ic_i = task / n_jsplit, js = task % n_jsplit;
          const int64_t ic = ic_i * mc_blk;
          const int64_t mc = std::min<int64_t>(mc_blk, m - ic);
          if (packed_ic != ic) {
            pack_a<T, S, MR>(mc, kc, a + ic * rsa + pc * csa, rsa, csa, abuf);
            packed_ic = ic;
          }
          const int64_t jr_end = std::min<int64_t>(n_jr, (js + 1) * jr_per);
          for (int64_t jr = js * jr_per; jr < jr_end; ++jr) {
            const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr * NR));
            const T* bp = bbuf + jr * NR * kc;
            for (int64_t ir = 0; ir < mc; ir += MR) {
              const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ir));
              micro_kernel<T, MR>(kc, abuf + ir * kc, bp, c + (ic + ir) * rsc + (jc + jr * NR) * csc,
                              rsc, csc, mr, nr, alpha, beta_eff);
            }
          }
        }
      }
    }
  }
}

template <typename T, typename S>
void gemm_driver(int64_t m, int64_t n, int64_t k, T alpha, const S* a, int64_t rsa, int64_t csa,
                 const S* b, int64_t rsb, int64_t csb, T beta, T* c, int64_t rsc, int64_t csc) {
  using C = Cfg<T>;
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == T(0)) {  // C = beta * C
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T& d = c[i * rsc + j * csc];
        d = beta == T(0) ? T(0) : beta * d;
      }
    return;
  }
  const int nt = gemm_threads(m, n, k);
  // Narrow and deep (max(m, n) <= 128, k >= 4 max(m, n)), A's rows and B's columns contiguous
  // along k: dot products, no packing. 2 cores, GFLOP/s against the packed path: m 32 n 27 k 1024
  // 82 / 13, m 16 n 16 k 4096 100 / 7, m 64 n 64 k 1024 103 / 60, m 128 n 64 k 1024 102 / 93.
  if constexpr (std::is_same<T, S>::value) {
    const int64_t wide = std::max(m, n);
    if (csa == 1 && rsb == 1 && wide <= 128 && k >= 4 * wide)
      return gemm_dot<T, typename C::V>(m, n, k, alpha, a, rsa, b, csb, beta, c, rsc, csc, nt);
  }
  // The 8-row micro-kernel unless 12 rows pad m less (m = 12, 36, ...). 8 x 32 measured as fast
  // as 12 x 32 or faster on AVX-512 (1 thread, GFLOP/s: 64x256x288 93 / 80, 96x1024x288 96 / 90,
  // 512^3 108 / 103, 2048^3 98 / 97; m = 12: 44 / 57); on 2 threads 512^3 203 / 177.
  if constexpr (C::MR_ALT != C::MR) {
    auto pad = [m](int mr) { return ceil_div(m, mr) * mr - m; };
    if (pad(C::MR_ALT) <= pad(C::MR))
      return gemm_packed<T, S, C::MR_ALT>(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc, nt);
  }
  gemm_packed<T, S, C::MR>(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc, nt);
}

}  // namespace

void sgemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t rsa, int64_t csa,
           const float* b, int64_t rsb, int64_t csb, float beta, float* c, int64_t rsc,
           int64_t csc) {
  MYTORCH_ISA_DISPATCH(sgemm, m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc)
  gemm_driver<float, float>(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
}

void dgemm(int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t rsa,
           int64_t csa, const double* b, int64_t rsb, int64_t csb, double beta, double* c,
           int64_t rsc, int64_t csc) {
  MYTORCH_ISA_DISPATCH(dgemm, m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc)
  gemm_driver<double, double>(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
}

void gemm_bf16_f32(int64_t m, int64_t n, int64_t k, float alpha, const c10::BFloat16* a,
                   int64_t rsa, int64_t csa, const c10::BFloat16* b, int64_t rsb, int64_t csb,
                   float beta, float* c, int64_t rsc, int64_t csc) {
  MYTORCH_ISA_DISPATCH(gemm_bf16_f32, m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc)
  gemm_driver<float, c10::BFloat16>(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
}

void gemm_f16_f32(int64_t m, int64_t n, int64_t k, float alpha, const c10::Half* a, int64_t rsa,
                  int64_t csa, const c10::Half* b, int64_t rsb, int64_t csb, float beta, float* c,
                  int64_t rsc, int64_t csc) {
  MYTORCH_ISA_DISPATCH(gemm_f16_f32, m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc)
  gemm_driver<float, c10::Half>(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc);
}

const char* gemm_kernel_name() {
  MYTORCH_ISA_DISPATCH(gemm_kernel_name)
  return kKernelName;
}

// The ATen glue and the registrations: once, in the baseline build of this file.
#ifndef MYTORCH_ISA_VARIANT

// ---- ATen glue ----
namespace {

// A 2-D or 3-D tensor seen as (batch, rows, cols) with element strides; no dispatch.
struct View3 {
  void* ptr;
  int64_t b, m, n, sb, sm, sn;
};

View3 view3(const at::Tensor& t) {
  if (t.dim() == 2)
    return {t.data_ptr(), 1, t.size(0), t.size(1), 0, t.stride(0), t.stride(1)};
  return {t.data_ptr(), t.size(0), t.size(1), t.size(2), t.stride(0), t.stride(1), t.stride(2)};
}

// A (b, m, k) or its (m, k) slice i.
template <typename T>
inline T* slice_ptr(const View3& v, int64_t i) {
  return static_cast<T*>(v.ptr) + i * v.sb;
}

// One GEMM on matrix i of each view: c = alpha * a @ b + beta * c.
// c is float32 for bf16/fp16 inputs, else the input dtype.
void gemm_one(at::ScalarType dt, const View3& a, const View3& b, const View3& c, int64_t i,
              double alpha, double beta) {
  const int64_t m = a.m, k = a.n, n = b.n;
  switch (dt) {
    case at::kFloat:
      sgemm(m, n, k, float(alpha), slice_ptr<float>(a, i), a.sm, a.sn, slice_ptr<float>(b, i), b.sm,
            b.sn, float(beta), slice_ptr<float>(c, i), c.sm, c.sn);
      break;
    case at::kDouble:
      dgemm(m, n, k, alpha, slice_ptr<double>(a, i), a.sm, a.sn, slice_ptr<double>(b, i), b.sm,
            b.sn, beta, slice_ptr<double>(c, i), c.sm, c.sn);
      break;
    case at::kBFloat16:
      gemm_bf16_f32(m, n, k, float(alpha), slice_ptr<c10::BFloat16>(a, i), a.sm, a.sn,
                    slice_ptr<c10::BFloat16>(b, i), b.sm, b.sn, float(beta),
                    slice_ptr<float>(c, i), c.sm, c.sn);
      break;
    case at::kHalf:
      gemm_f16_f32(m, n, k, float(alpha), slice_ptr<c10::Half>(a, i), a.sm, a.sn,
                   slice_ptr<c10::Half>(b, i), b.sm, b.sn, float(beta), slice_ptr<float>(c, i),
                   c.sm, c.sn);
      break;
    default:
      TORCH_CHECK(false, "mytorch gemm: unsupported dtype ", dt);
  }
}

bool low_precision(at::ScalarType t) { return t == at::kBFloat16 || t == at::kHalf; }

// dst = scale * src elementwise over (b, m, n) views with broadcasting strides, casting.
template <typename D, typename S>
void scale_copy(const View3& src, const View3& dst, double scale) {
  using Acc = at::opmath_type<D>;
  const Acc sc = static_cast<Acc>(scale);
  const S* sp = static_cast<const S*>(src.ptr);
  D* dp = static_cast<D*>(dst.ptr);
#pragma omp parallel for collapse(2) if (dst.b * dst.m * dst.n > (1 << 16))
  for (int64_t bi = 0; bi < dst.b; ++bi)
    for (int64_t i = 0; i < dst.m; ++i)
      for (int64_t j = 0; j < dst.n; ++j)
        dp[bi * dst.sb + i * dst.sm + j * dst.sn] = static_cast<D>(
            sc * static_cast<Acc>(sp[bi * src.sb + i * src.sm + j * src.sn]));
}

using gemm::check_mm_args;

// out (B x M x N) = beta * self + alpha * a @ b. `self` (if given) broadcasts to out
// and may be out itself (in-place). beta == 0 ignores self entirely.
void baddbmm_into(const char* op, const at::Tensor* self, const at::Tensor& a, const at::Tensor& b,
                  const at::Tensor& out, double beta, double alpha) {
  const at::ScalarType dt = a.scalar_type();
  const View3 va = view3(a), vb = view3(b);
  View3 vo = view3(out);
  bool accumulate = false;
  gemm::check_self(op, self, a, out.sizes());
  if (self != nullptr && self->defined() && beta != 0.0) {
    accumulate = true;
    if (!(self->is_same(out) && beta == 1.0)) {
      // Broadcast strides of self against out's (b, m, n), right-aligned.
      View3 vs{self->data_ptr(), vo.b, vo.m, vo.n, 0, 0, 0};
      const int64_t sd = self->dim(), od = out.dim();
      int64_t* st[3] = {&vs.sb, &vs.sm, &vs.sn};
      for (int64_t d = 0; d < sd; ++d) {
        const int64_t o = 3 - sd + d;  // position in (b, m, n)
        if (self->size(d) != 1) *st[o] = self->stride(d);
      }
      (void)od;
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dt, "mytorch_addmm_self", [&] {
        scale_copy<scalar_t, scalar_t>(vs, vo, beta);
      });
    }
  }
  View3 vacc = vo;
  at::Tensor acc;
  if (low_precision(dt)) {
    acc = at::empty({vo.b, vo.m, vo.n}, out.options().dtype(at::kFloat));
    vacc = view3(acc);
    if (accumulate)
      AT_DISPATCH_REDUCED_FLOATING_TYPES(dt, "mytorch_gemm_widen", [&] {
        scale_copy<float, scalar_t>(vo, vacc, 1.0);
      });
  }
  const double beta_eff = accumulate ? 1.0 : 0.0;
  const int64_t B = va.b;
#ifdef _OPENMP
  const int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
#else
  const int nt = 1;
#endif
  // Many small matrices: one matrix per thread; otherwise threads inside each GEMM.
  if (nt > 1 && B >= 2 * nt && va.m * va.n * vb.n < (int64_t(1) << 24)) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t i = 0; i < B; ++i) gemm_one(dt, va, vb, vacc, i, alpha, beta_eff);
  } else {
    for (int64_t i = 0; i < B; ++i) gemm_one(dt, va, vb, vacc, i, alpha, beta_eff);
  }
  if (low_precision(dt))
    AT_DISPATCH_REDUCED_FLOATING_TYPES(dt, "mytorch_gemm_narrow", [&] {
      scale_copy<scalar_t, float>(vacc, vo, 1.0);
    });
}

}  // namespace

// out = beta * self + alpha * a @ b, with p's checks (self null: mm, bmm).
at::Tensor product(const gemm::Product& p, const at::Tensor* self, const at::Tensor& a, const at::Tensor& b,
                   double beta, double alpha) {
  check_mm_args(p.op, a, p.an, b, p.bn, p.dim);
  if (self) gemm::check_self_dim(p.op, *self, p.dim);
  at::Tensor out = at::empty(gemm::out_shape(a, b), a.options());
  baddbmm_into(p.op, self, a, b, out, beta, alpha);
  return out;
}

namespace {

// The out= form: out is resized to the product's shape, or is self (in place) of that shape.
at::Tensor& product_out(const gemm::Product& p, const at::Tensor* self, const at::Tensor& a, const at::Tensor& b,
                        double beta, double alpha, at::Tensor& out) {
  check_mm_args(p.op, a, p.an, b, p.bn, p.dim);
  check_same_dtype(p.op, out, "out", a, p.an);
  if (self) gemm::check_self_dim(p.op, *self, p.dim);
  const std::vector<int64_t> shape = gemm::out_shape(a, b);
  if (self && self->is_same(out)) {
    TORCH_CHECK(out.sizes() == at::IntArrayRef(shape), p.op, ": in-place self of shape ", shape_str(out.sizes()),
                " does not match the product shape ", shape_str(shape));
  } else {
    at::native::resize_output(out, shape);
  }
  baddbmm_into(p.op, self, a, b, out, beta, alpha);
  return out;
}

}  // namespace

at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return product_out(gemm::kMm, nullptr, a, b, 0.0, 1.0, out);
}
at::Tensor& bmm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  return product_out(gemm::kBmm, nullptr, a, b, 0.0, 1.0, out);
}
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  return product_out(gemm::kAddmm, &self, a, b, beta.toDouble(), alpha.toDouble(), out);
}
at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta,
                        const at::Scalar& alpha, at::Tensor& out) {
  return product_out(gemm::kBaddbmm, &self, a, b, beta.toDouble(), alpha.toDouble(), out);
}

// y = x @ w^T + bias over the last dim of x; w: (out_features, in_features).
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias) {
  const char* op = "mytorch::linear";
  const gemm::Linear l = gemm::check_linear(op, x, w, bias);
  at::Tensor x2 = x.reshape({l.rows, x.size(-1)});
  at::Tensor out = at::empty({x2.size(0), w.size(0)}, x.options());
  at::Tensor wt = w.t();
  baddbmm_into(op, l.bias, x2, wt, out, 1.0, 1.0);
  return out.view(l.shape);
}

#endif  // MYTORCH_ISA_VARIANT

}  // namespace cpu
}  // namespace mytorch
