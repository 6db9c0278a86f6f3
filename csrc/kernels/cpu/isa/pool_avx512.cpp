// kernels/cpu/pool.cpp compiled for AVX512, in namespace mytorch::isa_avx512_cpu (see isa.h).
#define MYTORCH_ISA_VARIANT avx512
#include "kernels/cpu/isa_variant.h"
#include "kernels/pool.h"

#if MYTORCH_ISA_VARIANTS
// 256-bit autovectorization: the 2x2 max-pool loop (float values, int64 indices) ran 1.6x
// slower with 512-bit vectors on a Sapphire Rapids class Xeon.
#define MYTORCH_ISA_PREFER_256
#include "kernels/cpu/isa/begin_avx512.h"
#include "kernels/cpu/pool.cpp"
#include "kernels/cpu/isa/end.h"
#endif
