// Float transposes in registers, shared by the attention kernels (attention.cpp keeps query
// blocks transposed; kvcache.cpp transposes blocks of keys): 16 x 16 in AVX-512 registers,
// 8 x 8 in AVX2 registers.
// No #pragma once: an ISA copy (isa/*_avx512.cpp, isa/*_avx2.cpp) includes the kernel source,
// and so this header, again inside its own namespace once isa/begin_*.h has defined the ISA
// macros; the macros below keep one definition per translation unit.
#if defined(__AVX512F__) && !defined(MYTORCH_TRANSPOSE16_DEFINED)
#define MYTORCH_TRANSPOSE16_DEFINED
#include <immintrin.h>

namespace mytorch {
namespace cpu {

// r[i] lane j -> r[j] lane i.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      t[8 * i + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0x88);
      t[8 * i + 4 + k] = _mm512_shuffle_f32x4(r[8 * i + k], r[8 * i + 4 + k], 0xDD);
    }
  for (int k = 0; k < 8; ++k) {
    r[k] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88);
    r[k + 8] = _mm512_shuffle_f32x4(t[k], t[8 + k], 0xDD);
  }
}

}  // namespace cpu
}  // namespace mytorch
#endif

#if defined(__AVX2__) && !defined(MYTORCH_TRANSPOSE8_DEFINED)
#define MYTORCH_TRANSPOSE8_DEFINED
#include <immintrin.h>

namespace mytorch {
namespace cpu {

// r[i] lane j -> r[j] lane i, for 8 rows of 8.
inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x20);
    r[k + 4] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x31);
  }
}

}  // namespace cpu
}  // namespace mytorch
#endif
