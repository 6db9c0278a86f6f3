// aten GEMM ops on the mytorch device -> the OpenMP GEMM (kernels/cpu/gemm.cpp). The functional
// and out= overloads take ATen's arguments as they are (aten/register.cpp); the in-place ones
// write into self.
#include "aten/ops.h"

#include "kernels/gemm.h"

namespace mytorch {
namespace aten {

Tensor& addmm_(Tensor& self, const Tensor& a, const Tensor& b, const at::Scalar& beta, const at::Scalar& alpha) {
  return cpu::addmm_out(self, a, b, beta, alpha, self);
}
Tensor& baddbmm_(Tensor& self, const Tensor& a, const Tensor& b, const at::Scalar& beta, const at::Scalar& alpha) {
  return cpu::baddbmm_out(self, a, b, beta, alpha, self);
}

}  // namespace aten
}  // namespace mytorch
