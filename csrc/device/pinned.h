// Pinned host memory for the mytorch device: what tensor.pin_memory() and
// DataLoader(pin_memory=True) allocate when mytorch is the current accelerator.
#pragma once
#include <c10/core/Allocator.h>

namespace mytorch {
namespace device {

// The host allocator registered for PrivateUse1 (CPU DataPtrs, tracked so that
// is_pinned_ptr can tell its blocks, interior pointers included).
c10::Allocator* pinned_allocator();
bool is_pinned_ptr(const void* ptr);

}  // namespace device
}  // namespace mytorch
