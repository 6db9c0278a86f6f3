// ATen-level GEMM entry points (checks + allocation), shared by the mytorch:: ops
// and the aten routing of the mytorch device (csrc/aten/gemm.cpp).
#pragma once
#include <ATen/ATen.h>

namespace mytorch {
namespace cpu {

at::Tensor mm(const at::Tensor& a, const at::Tensor& b);
at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out);
at::Tensor bmm(const at::Tensor& a, const at::Tensor& b);
at::Tensor& bmm_out(const at::Tensor& a, const at::Tensor& b, at::Tensor& out);
at::Tensor addmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                 const at::Scalar& beta, const at::Scalar& alpha);
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                      const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out);
at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                   const at::Scalar& beta, const at::Scalar& alpha);
at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b,
                        const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out);
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias);

}  // namespace cpu
}  // namespace mytorch
