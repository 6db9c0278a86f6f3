// The loss family's reductions on the device (loss_reduce.cu): one kernel launch each.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/Reduction.h>

namespace mytorch {
namespace cuda {

// What the summed loss and a 'mean' gradient are divided by (float32, one element on the
// device): the count of targets other than ignore_index (mean) times the divisor, or the
// divisor alone (sum: undefined without one). target: contiguous int64; divisor: an undefined
// tensor or one float32 element on target's device.
at::Tensor ce_denominator(at::Reduction::Reduction red, const at::Tensor& target, int64_t ignore_index,
                          const at::Tensor& divisor);

// sum(loss_rows) / denom (denom undefined: the sum) as a 0-dim tensor of `dtype`; loss_rows:
// contiguous float32.
at::Tensor loss_total(const at::Tensor& loss_rows, const at::Tensor& denom, at::ScalarType dtype);

}  // namespace cuda
}  // namespace mytorch
