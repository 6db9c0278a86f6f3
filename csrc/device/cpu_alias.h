// Zero-copy CPU views of mytorch device memory, for libraries that take only CPU
// tensors (the c10d backend hands them to gloo), and device views of CPU memory.
#pragma once
#include <ATen/ATen.h>

namespace mytorch {
namespace device {

// A CPU tensor over the same bytes as `t` (same sizes, strides and offset), which keeps
// t's storage alive for as long as it lives. Writes through either are seen by both.
at::Tensor cpu_alias(const at::Tensor& t);

// The converse: a mytorch tensor on `device` over the same bytes as the CPU tensor `t`,
// keeping t's storage alive (compiled graphs hand their host results to the device this
// way, without a copy). Its bytes are not counted in the device's memory statistics.
at::Tensor device_alias(const at::Tensor& t, c10::DeviceIndex device);

}  // namespace device
}  // namespace mytorch
