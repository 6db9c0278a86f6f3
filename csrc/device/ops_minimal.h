// Helpers shared by the device's minimal ops, copy, random ops and the CPU fallback.
#pragma once
#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>

namespace mytorch {
namespace device {

// Grows or shrinks a mytorch storage to `nbytes`, keeping its first bytes, on the
// storage's own device.
void resize_bytes(c10::StorageImpl* storage, size_t nbytes);

// A CPU tensor over the same memory as the host-resident tensor `t` (no copy). It
// keeps t's storage alive.
at::Tensor host_alias(const at::Tensor& t);

}  // namespace device
}  // namespace mytorch
