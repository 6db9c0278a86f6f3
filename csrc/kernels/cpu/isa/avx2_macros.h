// The ISA macros of an AVX2 target, for isa/begin_avx2.h and isa/begin_avx512.h (see there).
#define __AVX__ 1
#define __AVX2__ 1
#define __FMA__ 1
#define __F16C__ 1
#define __BMI__ 1
#define __BMI2__ 1
