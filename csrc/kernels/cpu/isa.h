// Runtime ISA dispatch for the hot CPU kernels.
//
// The extension is compiled for a baseline ISA (setup.py: MYTORCH_CPU_FLAGS, x86-64-v2 by
// default), so that one binary runs on any x86-64 CPU of the last fifteen years. The kernels
// whose speed depends most on the vector width (GEMM, CPU attention, the vectorized exp of
// vec_math.cpp, the contiguous unary loops of unary_contig.cpp, the gelu loops of
// activation.cpp, the norms, pooling, the reductions, the binary elementwise loops, the
// losses, the optimizer steps) are compiled two more times, for AVX2+FMA and for AVX-512, by
// the wrapper sources in kernels/cpu/isa/:
//
//   #include "kernels/cpu/isa_variant.h"      // the torch/std headers, at the baseline ISA
//   #include "kernels/cpu/<kernel>.h"           // the kernel's own headers, idem
//   #pragma GCC target(...)                     // from here on: the wider ISA
//   #define __AVX2__ 1 ...                      // the ISA macros the kernel source tests
//   #define cpu isa_avx2_cpu                    // every symbol of the copy in its own namespace
//   #include "kernels/cpu/<kernel>.cpp"
//
// Headers come before the target pragma so that every inline function or template shared
// with the baseline sources is compiled for the baseline ISA: the linker may keep any one
// copy of those. What the kernel source itself defines lands in mytorch::isa_<isa>_cpu, so
// no wider-ISA code can be picked for a baseline caller. The kernel source compiles its
// op glue and registrations only in its baseline build (#ifndef MYTORCH_ISA_VARIANT), and
// its entry points start with MYTORCH_ISA_DISPATCH, which hands the call to the widest
// copy the CPU runs (cpu_isa(): chosen once, at load time, with __builtin_cpu_supports).
// Inside a copy, an unqualified call to another entry point whose arguments include a
// mytorch::cpu type (an enum such as Bin) would find both that copy's function and
// mytorch::cpu's (by argument-dependent lookup): such calls are written cpu::fn(...), which
// names the copy's own namespace there, or the function stays in the baseline-only glue
// (elementwise_binary.cpp compiles only its loops, binary_loop, in the copies).
#pragma once
#include <string>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define MYTORCH_ISA_VARIANTS 1
#include <immintrin.h>
#else
#define MYTORCH_ISA_VARIANTS 0
#endif

// The wrappers' target pragmas name features rather than arch=, so that the inline functions
// of the baseline headers stay inlinable (gcc does not inline across different -march), and
// spell them out (#pragma GCC target does not expand macros):
//   avx2:   avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe
//   avx512: the avx2 list + avx512f,avx512cd,avx512bw,avx512dq,avx512vl

namespace mytorch {
namespace cpu {

enum class Isa { Base = 0, Avx2 = 1, Avx512 = 2 };

// The widest compiled variant this CPU runs, capped by the environment variable
// MYTORCH_CPU_ISA=base|avx2|avx512 when set (read once, at the first call).
Isa cpu_isa();
const char* isa_name(Isa isa);
// The variant in use and its GEMM micro-kernel, as `python -m mytorch_ext info` shows it.
std::string isa_description();

}  // namespace cpu
}  // namespace mytorch

#if defined(MYTORCH_ISA_VARIANT) || !MYTORCH_ISA_VARIANTS
#define MYTORCH_ISA_DECLARE(fn)
#define MYTORCH_ISA_DISPATCH(fn, ...)
#else
// Declares the variant copies of the entry point mytorch::cpu::fn (at global scope).
#define MYTORCH_ISA_DECLARE(fn)                                          \
  namespace mytorch {                                                    \
  namespace isa_avx2_cpu { decltype(::mytorch::cpu::fn) fn; }            \
  namespace isa_avx512_cpu { decltype(::mytorch::cpu::fn) fn; }          \
  }
// First statement of an entry point: run the widest copy this CPU has.
#define MYTORCH_ISA_DISPATCH(fn, ...)                                    \
  switch (::mytorch::cpu::cpu_isa()) {                                   \
    case ::mytorch::cpu::Isa::Avx512: return ::mytorch::isa_avx512_cpu::fn(__VA_ARGS__); \
    case ::mytorch::cpu::Isa::Avx2: return ::mytorch::isa_avx2_cpu::fn(__VA_ARGS__);     \
    case ::mytorch::cpu::Isa::Base: break;                               \
  }
#endif
