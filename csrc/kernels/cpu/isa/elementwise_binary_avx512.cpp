// kernels/cpu/elementwise_binary.cpp compiled for AVX512, in namespace mytorch::isa_avx512_cpu (see
// isa.h): its loops (binary_loop); the glue is compiled in the baseline build only.
#define MYTORCH_ISA_VARIANT avx512
#include "kernels/cpu/isa_variant.h"
#include <ATen/ExpandUtils.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/TypeProperties.h>

#include <atomic>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"

#if MYTORCH_ISA_VARIANTS
#include "kernels/cpu/isa/begin_avx512.h"
#include "kernels/cpu/elementwise_binary.cpp"
#include "kernels/cpu/isa/end.h"
#endif
