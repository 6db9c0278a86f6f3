// aten GEMM ops on the mytorch device -> the OpenMP GEMM (kernels/cpu/gemm.cpp).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/gemm.h"

namespace {
using namespace mytorch::cpu;

at::Tensor& addmm_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const at::Scalar& beta, const at::Scalar& alpha) {
  return addmm_out(self, a, b, beta, alpha, self);
}
at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                     const at::Scalar& beta, const at::Scalar& alpha) {
  return baddbmm_out(self, a, b, beta, alpha, self);
}
// aten's out= overloads put `out` last, after the same arguments.
at::Tensor& addmm_out_aten(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                           const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  return addmm_out(self, a, b, beta, alpha, out);
}
}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mm", &mytorch::cpu::mm);
  m.impl("mm.out", &mm_out);
  m.impl("bmm", &mytorch::cpu::bmm);
  m.impl("bmm.out", &bmm_out);
  m.impl("addmm", &mytorch::cpu::addmm);
  m.impl("addmm.out", &addmm_out_aten);
  m.impl("addmm_", &addmm_);
  m.impl("baddbmm", &mytorch::cpu::baddbmm);
  m.impl("baddbmm.out", &baddbmm_out);
  m.impl("baddbmm_", &baddbmm_);
}
