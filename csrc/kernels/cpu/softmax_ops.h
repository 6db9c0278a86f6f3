// ATen-level softmax entry points, shared by the mytorch:: ops and the aten
// routing of the mytorch device (csrc/aten/softmax.cpp).
#pragma once
#include <ATen/ATen.h>

namespace mytorch {
namespace cpu {

at::Tensor softmax(const at::Tensor& x, int64_t dim);
at::Tensor log_softmax(const at::Tensor& x, int64_t dim);
at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim);
at::Tensor log_softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim);
// out= forms; `log` picks log_softmax.
at::Tensor& softmax_out(const at::Tensor& x, int64_t dim, bool log, at::Tensor& out);
at::Tensor& softmax_backward_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                 bool log, at::Tensor& out);

}  // namespace cpu
}  // namespace mytorch
