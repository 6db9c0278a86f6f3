// kernels/cpu/attention.cpp compiled for AVX2, in namespace mytorch::isa_avx2_cpu (see isa.h).
#define MYTORCH_ISA_VARIANT avx2
#include "kernels/cpu/isa_variant.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kvcache.h"
#include "kernels/attention_checks.h"
#include "kernels/cpu/vec_math.h"

#if MYTORCH_ISA_VARIANTS
#include "kernels/cpu/isa/begin_avx2.h"
#include "kernels/cpu/attention.cpp"
#include "kernels/cpu/isa/end.h"
#endif
