// The bfloat16 attention forward on Intel AMX tiles (kernels/cpu/isa/attention_amx.cpp).
//
// kernels/cpu/attention.cpp hands a bfloat16 forward here when the CPU has AMX-BF16 and the
// call is one this kernel covers (amx_attention_covers); it returns false when AMX cannot be
// used in this process (no AMX, or the OS refuses the tile state), and the caller then runs
// its own kernel. MYTORCH_CPU_AMX=0 turns it off, and so does MYTORCH_CPU_ISA below avx512.
#pragma once
#include <cstdint>

namespace mytorch {
namespace cpu {

// One (batch, seqlen, heads, head_dim) forward. Strides in elements; bf16 data as raw bits.
struct AmxAttention {
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  uint16_t* out;
  float* lse;  // (batch, heads_q, seqlen_q), contiguous
  int64_t batch, hq, hk, nq, nk, d, dv;
  int64_t sq_b, sq_t, sq_h, sk_b, sk_t, sk_h, sv_b, sv_t, sv_h, so_b, so_t, so_h;
  double scale;
  bool has_lo, has_hi;  // a left / right window bound (causal: right bound 0)
  int64_t wl, wr;
};

// Head dims the tiles take: multiples of 32 up to 256 (q/k and v alike).
inline bool amx_attention_covers(int64_t d, int64_t dv) {
  return d % 32 == 0 && dv % 32 == 0 && d > 0 && dv > 0 && d <= 256 && dv <= 256;
}

// Runs the forward and returns true; returns false, leaving out and lse untouched, where AMX
// is unavailable in this process.
bool amx_attention_forward(const AmxAttention& a);

// Whether this process runs covered bfloat16 forwards on AMX tiles.
bool amx_attention_available();

}  // namespace cpu
}  // namespace mytorch
