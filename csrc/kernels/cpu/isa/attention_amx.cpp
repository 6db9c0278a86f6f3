// The bfloat16 attention forward on Intel AMX tiles (see kernels/cpu/attention_amx.h).
//
// Per (batch, q head, block of 32 queries), for each block of 32 keys:
//   S = Q K^T     four 16 x 16 float32 tiles, accumulated over head_dim in steps of 32 by
//                 tdpbf16ps (tiles 0-3 = S, 4-5 = Q rows 0-15 / 16-31, 6-7 = K keys 0-15 / 16-31);
//   online softmax of S's rows in AVX-512 (base 2, as the other kernels), P rounded to
//                 bfloat16 for the second product, as flash-attn's GPU kernels round it;
//   O = O * alpha + P V, O a float32 buffer the tiles load, accumulate and store, 32 columns
//                 at a time.
// K and V are packed once per call into the tiles' VNNI layout (pairs of rows along the
// product's inner dimension interleaved), shared by every query block and the q heads of a
// GQA group. The scores keep the float32 of the tiles; only P is rounded.
#include "kernels/cpu/attention_amx.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kept_buffer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define MYTORCH_AMX 1
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define MYTORCH_AMX 0
#endif

namespace mytorch {

#if MYTORCH_AMX
// What the baseline entry and the AMX code share: constants, the CPU check, the packing.
namespace amx_detail {
using ::mytorch::cpu::AmxAttention;

#define MYTORCH_AMX_TARGET \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

constexpr int64_t kBq = 32;   // queries per block: two rows of tiles
constexpr int64_t kTile = 16 * 32;             // bf16 elements of one 16 x 64-byte tile
constexpr int64_t kMaxPackBytes = int64_t(1) << 29;  // larger calls take the other kernel

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

bool amx_usable() {
  static const bool ok = [] {
    const char* env = std::getenv("MYTORCH_CPU_AMX");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    // the tiles' softmax is AVX-512 code: a cap below it (MYTORCH_CPU_ISA) rules them out too
    if (cpu::cpu_isa() != cpu::Isa::Avx512 || !__builtin_cpu_supports("amx-bf16")) return false;
    // Linux grants the 8 KB tile state only on request (ARCH_REQ_XCOMP_PERM, XTILEDATA).
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  }();
  return ok;
}

// K of one (batch, kv head): per group of 16 keys, head_dim / 32 tiles whose row r holds
// (K[j][32 t + 2r], K[j][32 t + 2r + 1]) for the group's keys j; keys past nk are 0.
void pack_k(const AmxAttention& a, const uint16_t* kb, int64_t g, uint16_t* dst) {
  for (int64_t t = 0; t < a.d / 32; ++t)
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t n = 0; n < 16; ++n) {
        const int64_t j = g * 16 + n;
        uint16_t* o = dst + t * kTile + r * 32 + n * 2;
        if (j < a.nk) {
          const uint16_t* s = kb + j * a.sk_t + t * 32 + 2 * r;
          o[0] = s[0];
          o[1] = s[1];
        } else {
          o[0] = o[1] = 0;
        }
      }
}

// V of one (batch, kv head): per group of 32 keys, dv / 16 tiles whose row r holds
// (V[2r][c], V[2r + 1][c]) for the tile's 16 columns c; keys past nk are 0.
void pack_v(const AmxAttention& a, const uint16_t* vb, int64_t g, uint16_t* dst) {
  for (int64_t t = 0; t < a.dv / 16; ++t)
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t e = 0; e < 2; ++e) {
        const int64_t j = g * 32 + 2 * r + e;
        uint16_t* o = dst + t * kTile + r * 32 + e;
        if (j < a.nk) {
          const uint16_t* s = vb + j * a.sv_t + t * 16;
          for (int64_t n = 0; n < 16; ++n) o[n * 2] = s[n];
        } else {
          for (int64_t n = 0; n < 16; ++n) o[n * 2] = 0;
        }
      }
}

}  // namespace amx_detail

// The AMX / AVX-512 code, in a namespace of its own (as the other ISA variants, isa.h): only
// amx_attention_forward reaches it, after amx_usable() said the CPU runs it.
namespace isa_amx_cpu {
using namespace amx_detail;

// 2^x for x <= 0 or -inf lanes masked by the caller; |relative error| < 3e-6.
MYTORCH_AMX_TARGET inline __m512 exp2_ps(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-127.f));
  const __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, n);  // [-0.5, 0.5]
  __m512 p = _mm512_set1_ps(1.3333558e-3f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022651e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}

MYTORCH_AMX_TARGET void attend(const AmxAttention& a, const uint16_t* kp, const uint16_t* vp) {
  const int64_t D = a.d, Dv = a.dv, G = a.hq / a.hk;
  // keys per block, one softmax pass each: 512 at head dim 256, 256 below (measured best on a
  // Sapphire Rapids Xeon; benchmarks/results/cpu_attention_amx_xeon.log)
  const int64_t bk = D >= 256 ? 512 : 256;
  const int64_t nkp = (a.nk + 31) / 32 * 32;
  const int64_t nqb = (a.nq + kBq - 1) / kBq;
  const int64_t off = a.nk - a.nq;  // bottom-right alignment
  const float c = static_cast<float>(a.scale * 1.4426950408889634);  // scores in base 2
  const float ninf = -std::numeric_limits<float>::infinity();
  auto jlo = [&](int64_t i) { return a.has_lo ? std::min(a.nk, std::max<int64_t>(0, i + off - a.wl)) : int64_t(0); };
  auto jhi = [&](int64_t i) {
    return a.has_hi ? std::max<int64_t>(0, std::min(a.nk, i + off + a.wr + 1)) : a.nk;
  };

#pragma omp parallel
  {
    TileConfig cfg;
    for (int t = 0; t < 8; ++t) {
      cfg.rows[t] = 16;
      cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    std::vector<uint16_t> qbuf(kBq * D), pbuf(kBq * bk);
    std::vector<float> sbuf(kBq * bk), obuf(kBq * Dv), m(kBq), l(kBq);
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512 vc = _mm512_set1_ps(c), vninf = _mm512_set1_ps(ninf);

#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < a.batch * a.hq * nqb; ++task) {
      // within a head, the last query block first: under a causal mask it sees the most keys
      const int64_t bh = task / nqb, qb = nqb - 1 - task % nqb;
      const int64_t b = bh / a.hq, h = bh % a.hq, pair = b * a.hk + h / G;
      const int64_t i0 = qb * kBq, rows = std::min(kBq, a.nq - i0);
      const uint16_t* qs = a.q + b * a.sq_b + h * a.sq_h;
      for (int64_t i = 0; i < kBq; ++i) {
        if (i < rows)
          std::memcpy(qbuf.data() + i * D, qs + (i0 + i) * a.sq_t, D * sizeof(uint16_t));
        else
          std::memset(qbuf.data() + i * D, 0, D * sizeof(uint16_t));
      }
      std::fill(pbuf.begin(), pbuf.end(), uint16_t(0));
      std::fill(obuf.begin(), obuf.end(), 0.f);
      std::fill(m.begin(), m.end(), ninf);
      std::fill(l.begin(), l.end(), 0.f);
      const uint16_t* kpair = kp + pair * nkp * D;
      const uint16_t* vpair = vp + pair * nkp * Dv;

      const int64_t jend = jhi(i0 + rows - 1);
      for (int64_t j0 = jlo(i0) / 32 * 32; j0 < jend; j0 += bk) {
        const int64_t nb = std::min(bk, (jend - j0 + 31) / 32 * 32);  // keys of this block
        // S = Q K^T, 32 keys at a time: tiles 0-3 = S[rows 0-15 | 16-31][keys +0-15 | +16-31]
        for (int64_t s0 = 0; s0 < nb; s0 += 32) {
          const uint16_t* kg = kpair + (j0 + s0) * D;  // key groups (j0 + s0) / 16 and the next
          _tile_zero(0);
          _tile_zero(1);
          _tile_zero(2);
          _tile_zero(3);
          for (int64_t t = 0; t < D / 32; ++t) {
            _tile_loadd(4, qbuf.data() + t * 32, D * 2);
            _tile_loadd(5, qbuf.data() + 16 * D + t * 32, D * 2);
            _tile_loadd(6, kg + t * kTile, 64);
            _tile_loadd(7, kg + 16 * D + t * kTile, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
          }
          float* sb = sbuf.data() + s0;
          _tile_stored(0, sb, bk * 4);
          _tile_stored(1, sb + 16, bk * 4);
          _tile_stored(2, sb + 16 * bk, bk * 4);
          _tile_stored(3, sb + 16 * bk + 16, bk * 4);
        }

        // online softmax of each row over the block's keys; P rounded to bfloat16
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t lo = std::max<int64_t>(-1, std::min(jlo(i0 + i) - j0, nb)),
                        hi = std::max<int64_t>(-1, std::min(jhi(i0 + i) - j0, nb));  // visible [lo, hi)
          const __m512i vlo = _mm512_set1_epi32(static_cast<int>(lo)), vhi = _mm512_set1_epi32(static_cast<int>(hi));
          float* srow = sbuf.data() + i * bk;
          __m512 mx = vninf;
          for (int64_t j = 0; j < nb; j += 16) {
            const __m512i jj = _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(j)));
            const __mmask16 vis = _mm512_cmp_epi32_mask(jj, vlo, _MM_CMPINT_NLT) &
                                  _mm512_cmp_epi32_mask(jj, vhi, _MM_CMPINT_LT);
            const __m512 x = _mm512_mask_blend_ps(vis, vninf, _mm512_mul_ps(_mm512_loadu_ps(srow + j), vc));
            _mm512_storeu_ps(srow + j, x);
            mx = _mm512_max_ps(mx, x);
          }
          const float mo = m[i];
          const float mn = std::max(mo, _mm512_reduce_max_ps(mx));
          const float mu = mn == ninf ? 0.f : mn;  // no visible key yet: subtract a finite value
          const float alpha = std::exp2(mo - mu);
          const __m512 vmu = _mm512_set1_ps(mu);
          __m512 sum = _mm512_setzero_ps();
          uint16_t* prow = pbuf.data() + i * bk;
          for (int64_t j = 0; j < nb; j += 32) {
            const __m512 x0 = _mm512_loadu_ps(srow + j), x1 = _mm512_loadu_ps(srow + j + 16);
            // masked lanes hold -inf: exactly 0, not exp2's smallest value
            const __m512 p0 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x0, vninf, _CMP_NEQ_OQ),
                                                  exp2_ps(_mm512_sub_ps(x0, vmu)));
            const __m512 p1 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x1, vninf, _CMP_NEQ_OQ),
                                                  exp2_ps(_mm512_sub_ps(x1, vmu)));
            sum = _mm512_add_ps(sum, _mm512_add_ps(p0, p1));
            _mm512_storeu_si512(prow + j, (__m512i)_mm512_cvtne2ps_pbh(p1, p0));
          }
          l[i] = l[i] * alpha + _mm512_reduce_add_ps(sum);
          m[i] = mn;
          if (alpha != 1.f) {
            float* orow = obuf.data() + i * Dv;
            const __m512 va = _mm512_set1_ps(alpha);
            for (int64_t d = 0; d < Dv; d += 16)
              _mm512_storeu_ps(orow + d, _mm512_mul_ps(_mm512_loadu_ps(orow + d), va));
          }
        }

        // O += P V: per 32 output columns, the four O tiles stay loaded across the block's keys
        for (int64_t t = 0; t < Dv / 16; t += 2) {
          float* o = obuf.data() + t * 16;
          _tile_loadd(0, o, Dv * 4);
          _tile_loadd(1, o + 16, Dv * 4);
          _tile_loadd(2, o + 16 * Dv, Dv * 4);
          _tile_loadd(3, o + 16 * Dv + 16, Dv * 4);
          for (int64_t s0 = 0; s0 < nb; s0 += 32) {
            const uint16_t* vg = vpair + (j0 + s0) * Dv;  // key group (j0 + s0) / 32
            _tile_loadd(4, pbuf.data() + s0, bk * 2);
            _tile_loadd(5, pbuf.data() + 16 * bk + s0, bk * 2);
            _tile_loadd(6, vg + t * kTile, 64);
            _tile_loadd(7, vg + (t + 1) * kTile, 64);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
          }
          _tile_stored(0, o, Dv * 4);
          _tile_stored(1, o + 16, Dv * 4);
          _tile_stored(2, o + 16 * Dv, Dv * 4);
          _tile_stored(3, o + 16 * Dv + 16, Dv * 4);
        }
      }

      uint16_t* ob = a.out + b * a.so_b + h * a.so_h;
      float* lb = a.lse + (b * a.hq + h) * a.nq + i0;
      for (int64_t i = 0; i < rows; ++i) {
        const bool empty = l[i] == 0.f;  // no visible key: out 0, lse +inf
        lb[i] = empty ? std::numeric_limits<float>::infinity()
                      : static_cast<float>(m[i] * 0.6931471805599453 + std::log(l[i]));
        const __m512 inv = _mm512_set1_ps(empty ? 0.f : 1.f / l[i]);
        uint16_t* orow = ob + (i0 + i) * a.so_t;
        for (int64_t d = 0; d < Dv; d += 16) {
          const __m512 x = empty ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_loadu_ps(obuf.data() + i * Dv + d), inv);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(orow + d), (__m256i)_mm512_cvtneps_pbh(x));
        }
      }
    }
    _tile_release();
  }
}

}  // namespace isa_amx_cpu

namespace cpu {
using namespace amx_detail;

// The K and V packs of a call, kept by the calling thread for its next call up to kKeepPack
// elements (64 MB; kernels/cpu/kept_buffer.h): a fresh allocation of that size faults its pages
// in at every call (batch 8, 1024 keys, GQA 32:8, D128, 16 queries: 17-19 ms a call against
// 11-13 ms with the pages already mapped). Larger packs are the call's own (owner).
constexpr int64_t kKeepPack = int64_t(1) << 25;

bool amx_attention_forward(const AmxAttention& a) {
  if (!amx_usable() || !amx_attention_covers(a.d, a.dv)) return false;
  const int64_t nkp = (a.nk + 31) / 32 * 32;  // keys, padded to the 32-key groups
  const int64_t pairs = a.batch * a.hk;
  if (pairs * nkp * (a.d + a.dv) * 2 > kMaxPackBytes) return false;
  std::unique_ptr<uint16_t[]> owner;
  uint16_t* const kbuf = kept_buffer<uint16_t, 0, kKeepPack>(std::max<int64_t>(1, pairs * nkp * (a.d + a.dv)), owner);
  uint16_t* const vbuf = kbuf + pairs * nkp * a.d;
  const int64_t kgroups = nkp / 16, vgroups = nkp / 32;
#pragma omp parallel for schedule(static)
  for (int64_t u = 0; u < pairs * kgroups; ++u) {
    const int64_t pair = u / kgroups, g = u % kgroups;
    const int64_t b = pair / a.hk, hk = pair % a.hk;
    pack_k(a, a.k + b * a.sk_b + hk * a.sk_h, g, kbuf + pair * nkp * a.d + g * 16 * a.d);
  }
#pragma omp parallel for schedule(static)
  for (int64_t u = 0; u < pairs * vgroups; ++u) {
    const int64_t pair = u / vgroups, g = u % vgroups;
    const int64_t b = pair / a.hk, hk = pair % a.hk;
    pack_v(a, a.v + b * a.sv_b + hk * a.sv_h, g, vbuf + pair * nkp * a.dv + g * 32 * a.dv);
  }
  isa_amx_cpu::attend(a, kbuf, vbuf);
  return true;
}

bool amx_attention_available() { return amx_usable(); }

}  // namespace cpu

#else

namespace cpu {
bool amx_attention_forward(const AmxAttention&) { return false; }
bool amx_attention_available() { return false; }
}  // namespace cpu

#endif

}  // namespace mytorch
