// kernels/cpu/loss.cpp compiled for AVX2, in namespace mytorch::isa_avx2_cpu (see isa.h).
#define MYTORCH_ISA_VARIANT avx2
#include "kernels/cpu/isa_variant.h"
#include <ATen/core/Reduction.h>

#include "kernels/cpu/elementwise.h"
#include "kernels/loss_checks.h"
#include "kernels/cpu/vec_math.h"

#if MYTORCH_ISA_VARIANTS
#include "kernels/cpu/isa/begin_avx2.h"
#include "kernels/cpu/loss.cpp"
#include "kernels/cpu/isa/end.h"
#endif
