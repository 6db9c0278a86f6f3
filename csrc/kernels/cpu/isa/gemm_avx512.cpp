// kernels/cpu/gemm.cpp compiled for AVX512, in namespace mytorch::isa_avx512_cpu (see isa.h).
#define MYTORCH_ISA_VARIANT avx512
#include "kernels/cpu/isa_variant.h"
#include "kernels/cpu/gemm.h"
#include "kernels/gemm.h"

#if MYTORCH_ISA_VARIANTS
#include "kernels/cpu/isa/begin_avx512.h"
#include "kernels/cpu/gemm.cpp"
#include "kernels/cpu/isa/end.h"
#endif
