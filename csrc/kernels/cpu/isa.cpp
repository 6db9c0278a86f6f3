// cpu_isa(): which compiled variant of the ISA-dispatched kernels this CPU runs (isa.h).
#include "kernels/cpu/isa.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cpu/gemm.h"

namespace mytorch {
namespace cpu {

namespace {

Isa detect() {
#if MYTORCH_ISA_VARIANTS
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2"))
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi") &&
      __builtin_cpu_supports("bmi2"))
    return Isa::Avx2;
#endif
  return Isa::Base;
}

Isa choose() {
  Isa best = detect();
  const char* env = std::getenv("MYTORCH_CPU_ISA");
  if (env == nullptr || *env == '\0') return best;
  Isa cap;
  if (std::strcmp(env, "base") == 0) cap = Isa::Base;
  else if (std::strcmp(env, "avx2") == 0) cap = Isa::Avx2;
  else if (std::strcmp(env, "avx512") == 0) cap = Isa::Avx512;
  else TORCH_CHECK(false, "MYTORCH_CPU_ISA must be base, avx2 or avx512, got '", env, "'");
  return static_cast<int>(cap) < static_cast<int>(best) ? cap : best;
}

}  // namespace

Isa cpu_isa() {
  static const Isa isa = choose();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    case Isa::Base: break;
  }
  return "base";
}

std::string isa_description() {
  return std::string(isa_name(cpu_isa())) + " (gemm " + gemm_kernel_name() + ")";
}

}  // namespace cpu
}  // namespace mytorch

