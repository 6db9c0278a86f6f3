// Zero-copy CPU views of mytorch device memory, for libraries that take only CPU
// tensors (the c10d backend hands them to gloo).
#pragma once
#include <ATen/ATen.h>

namespace mytorch {
namespace device {

// A CPU tensor over the same bytes as `t` (same sizes, strides and offset), which keeps
// t's storage alive for as long as it lives. Writes through either are seen by both.
at::Tensor cpu_alias(const at::Tensor& t);

}  // namespace device
}  // namespace mytorch
