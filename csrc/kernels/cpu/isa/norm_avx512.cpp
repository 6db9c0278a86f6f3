// kernels/cpu/norm.cpp compiled for AVX512, in namespace mytorch::isa_avx512_cpu (see isa.h).
#define MYTORCH_ISA_VARIANT avx512
#include "kernels/cpu/isa_variant.h"
#include "kernels/cpu/norm_ops.h"

#if MYTORCH_ISA_VARIANTS
namespace mytorch {
namespace isa_avx512_cpu {
using namespace ::mytorch::cpu;  // the types and helpers of the headers above
}  // namespace isa_avx512_cpu
}  // namespace mytorch

#pragma GCC push_options
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,avx512f,avx512cd,avx512bw,avx512dq,avx512vl")
// The C++ front end does not update the ISA macros on #pragma GCC target (it preprocesses
// ahead of the parser): define those the kernel source tests.
#define __AVX__ 1
#define __AVX2__ 1
#define __FMA__ 1
#define __F16C__ 1
#define __BMI__ 1
#define __BMI2__ 1
#define __AVX512F__ 1
#define __AVX512CD__ 1
#define __AVX512BW__ 1
#define __AVX512DQ__ 1
#define __AVX512VL__ 1
// gcc does not apply the target pragma to friend functions defined in a class: name it.
#define friend friend __attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,avx512f,avx512cd,avx512bw,avx512dq,avx512vl")))
#define cpu isa_avx512_cpu
#include "kernels/cpu/norm.cpp"
#undef cpu
#undef friend
#undef __AVX__
#undef __AVX2__
#undef __FMA__
#undef __F16C__
#undef __BMI__
#undef __BMI2__
#undef __AVX512F__
#undef __AVX512CD__
#undef __AVX512BW__
#undef __AVX512DQ__
#undef __AVX512VL__
#pragma GCC pop_options
#endif
