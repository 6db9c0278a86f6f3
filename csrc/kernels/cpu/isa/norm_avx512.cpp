// kernels/cpu/norm.cpp compiled for AVX512, in namespace mytorch::isa_avx512_cpu (see isa.h).
#define MYTORCH_ISA_VARIANT avx512
#include "kernels/cpu/isa_variant.h"
#include "kernels/norm.h"

#if MYTORCH_ISA_VARIANTS
#include "kernels/cpu/isa/begin_avx512.h"
#include "kernels/cpu/norm.cpp"
#include "kernels/cpu/isa/end.h"
#endif
