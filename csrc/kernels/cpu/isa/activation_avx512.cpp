// kernels/cpu/activation.cpp compiled for AVX512, in namespace mytorch::isa_avx512_cpu (see
// isa.h): its gelu loops; the rest is compiled in the baseline build only.
#define MYTORCH_ISA_VARIANT avx512
#include "kernels/cpu/isa_variant.h"
#include <ATen/TensorIterator.h>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/vec_math.h"

#if MYTORCH_ISA_VARIANTS
#include "kernels/cpu/isa/begin_avx512.h"
#include "kernels/cpu/activation.cpp"
#include "kernels/cpu/isa/end.h"
#endif
