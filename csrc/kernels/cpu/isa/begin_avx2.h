// Opens an AVX2 compilation of a CPU kernel source in namespace mytorch::isa_avx2_cpu.
// The C++ front end does not update the ISA macros on #pragma GCC target (it preprocesses
// ahead of the parser): this defines those the kernel sources test. gcc does not apply the
// target pragma to friend functions defined in a class: `friend` names the target too.
// Include it, then the kernel source, then isa/end.h, in a file of isa/ (see isa.h).
namespace mytorch {
namespace isa_avx2_cpu {
using namespace ::mytorch::cpu;  // the types and helpers of the headers included before
}  // namespace isa_avx2_cpu
}  // namespace mytorch

#pragma GCC push_options
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe")
#include "kernels/cpu/isa/avx2_macros.h"
#define friend friend __attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe")))
#define cpu isa_avx2_cpu
