// The mytorch device runtime: how many devices there are and which one is current.
// Every mytorch:N device is a slice of host memory owned by mytorch's allocator.
#pragma once
#include <c10/core/Device.h>

namespace mytorch {
namespace device {

// Number of mytorch devices: MYTORCH_DEVICE_COUNT (1..64), default 2. Read once.
c10::DeviceIndex device_count();

// The current device of the calling thread (starts at 0, as on CUDA).
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);
// Sets `index` and returns the previous device (a negative index is a no-op).
c10::DeviceIndex exchange_device(c10::DeviceIndex index);

// Throws a clear error unless 0 <= index < device_count().
void check_index(c10::DeviceIndex index);

// -1 (or any negative index) means the current device.
c10::DeviceIndex resolve_index(c10::DeviceIndex index);

inline c10::Device make_device(c10::DeviceIndex index) {
  return c10::Device(c10::DeviceType::PrivateUse1, resolve_index(index));
}

}  // namespace device
}  // namespace mytorch
