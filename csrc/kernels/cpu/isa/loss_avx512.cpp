// kernels/cpu/loss.cpp compiled for AVX512, in namespace mytorch::isa_avx512_cpu (see isa.h).
#define MYTORCH_ISA_VARIANT avx512
#include "kernels/cpu/isa_variant.h"
#include <ATen/core/Reduction.h>

#include "kernels/cpu/elementwise.h"
#include "kernels/loss_checks.h"
#include "kernels/cpu/vec_math.h"

#if MYTORCH_ISA_VARIANTS
#include "kernels/cpu/isa/begin_avx512.h"
#include "kernels/cpu/loss.cpp"
#include "kernels/cpu/isa/end.h"
#endif
