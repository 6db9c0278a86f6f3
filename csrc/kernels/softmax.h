// The softmax family: softmax, log_softmax and their backwards along one dim. The entry points
// of each backend (kernels/cpu/softmax.cpp, kernels/cuda/softmax.cu); each checks with its own
// messages. Host code only.
#pragma once
#include "checks.h"

namespace mytorch {

// ---- entry points: the registered ops (cpu/register.cpp, cuda/register.cpp) ----
// The backwards take the forward's output.
#define MYTORCH_SOFTMAX_OPS                                                                  \
  at::Tensor softmax(const at::Tensor& x, int64_t dim);                                      \
  at::Tensor log_softmax(const at::Tensor& x, int64_t dim);                                  \
  at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& out, int64_t dim);   \
  at::Tensor log_softmax_backward(const at::Tensor& grad, const at::Tensor& out, int64_t dim);

namespace cpu {
MYTORCH_SOFTMAX_OPS
// out= forms, for the aten routes of the mytorch device (csrc/aten/softmax.cpp); `log` picks
// log_softmax.
at::Tensor& softmax_out(const at::Tensor& x, int64_t dim, bool log, at::Tensor& out);
at::Tensor& softmax_backward_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim, bool log,
                                 at::Tensor& out);
}  // namespace cpu
namespace cuda {
MYTORCH_SOFTMAX_OPS
}  // namespace cuda

#undef MYTORCH_SOFTMAX_OPS

}  // namespace mytorch
