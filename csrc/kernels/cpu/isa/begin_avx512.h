// Opens an AVX-512 compilation of a CPU kernel source in namespace mytorch::isa_avx512_cpu.
// MYTORCH_ISA_PREFER_256 (defined before): 256-bit autovectorization, for loops that run
// slower with 512-bit vectors.
// The C++ front end does not update the ISA macros on #pragma GCC target (it preprocesses
// ahead of the parser): this defines those the kernel sources test. gcc does not apply the
// target pragma to friend functions defined in a class: `friend` names the target too.
// Include it, then the kernel source, then isa/end.h, in a file of isa/ (see isa.h).
namespace mytorch {
namespace isa_avx512_cpu {
using namespace ::mytorch::cpu;  // the types and helpers of the headers included before
}  // namespace isa_avx512_cpu
}  // namespace mytorch

#pragma GCC push_options
#ifdef MYTORCH_ISA_PREFER_256
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,avx512f,avx512cd,avx512bw,avx512dq,avx512vl,prefer-vector-width=256")
#define friend friend __attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,avx512f,avx512cd,avx512bw,avx512dq,avx512vl,prefer-vector-width=256")))
#else
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,avx512f,avx512cd,avx512bw,avx512dq,avx512vl")
#define friend friend __attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,avx512f,avx512cd,avx512bw,avx512dq,avx512vl")))
#endif
#include "kernels/cpu/isa/avx2_macros.h"
#define __AVX512F__ 1
#define __AVX512CD__ 1
#define __AVX512BW__ 1
#define __AVX512DQ__ 1
#define __AVX512VL__ 1
#define cpu isa_avx512_cpu
