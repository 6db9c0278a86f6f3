// Device count and the per-thread current device.
#include "device/device.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <string>

namespace mytorch {
namespace device {

constexpr int kMaxDevices = 64;

static c10::DeviceIndex read_device_count() {
  const char* env = std::getenv("MYTORCH_DEVICE_COUNT");
  if (env == nullptr || *env == '\0') return 2;
  char* end = nullptr;
  long n = std::strtol(env, &end, 10);
  TORCH_CHECK(end != env && *end == '\0' && n >= 1 && n <= kMaxDevices,
              "mytorch: MYTORCH_DEVICE_COUNT must be an integer in [1, ", kMaxDevices,
              "], got '", env, "'");
  return static_cast<c10::DeviceIndex>(n);
}

c10::DeviceIndex device_count() {
  static const c10::DeviceIndex count = read_device_count();
  return count;
}

static thread_local c10::DeviceIndex tls_current = 0;

void check_index(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "mytorch: invalid device index ", int(index),
              "; there are ", int(device_count()), " mytorch devices (mytorch:0 to mytorch:",
              int(device_count()) - 1, "; set MYTORCH_DEVICE_COUNT to change the count)");
}

c10::DeviceIndex current_device() { return tls_current; }

void set_device(c10::DeviceIndex index) {
  check_index(index);
  tls_current = index;
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  c10::DeviceIndex prev = tls_current;
  if (index >= 0) set_device(index);
  return prev;
}

c10::DeviceIndex resolve_index(c10::DeviceIndex index) {
  if (index < 0) return current_device();
  check_index(index);
  return index;
}

}  // namespace device
}  // namespace mytorch
