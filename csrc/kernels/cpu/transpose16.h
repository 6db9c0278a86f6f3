// A 16 x 16 float transpose in AVX-512 registers, shared by the attention kernels
// (attention.cpp keeps query blocks transposed; kvcache.cpp transposes a block of keys).
// No #pragma once: an AVX-512 copy (isa/*_avx512.cpp) includes the kernel source, and so this
// header, again inside its own namespace once isa/begin_avx512.h has defined __AVX512F__; the
// macro below keeps one definition per translation unit.
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
