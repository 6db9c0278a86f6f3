// PrivateUse1HooksInterface: how ATen asks the mytorch device for its runtime
// (device count and switching, default generators, pointer -> device, storage resize,
// the pinned host allocator).
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>

#include "device/allocator.h"
#include "device/device.h"
#include "device/generator.h"
#include "device/ops_minimal.h"
#include "device/pinned.h"

namespace mytorch {
namespace device {

namespace {

struct Hooks final : public at::PrivateUse1HooksInterface {
  void init() const override {}
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex index) const override {
    check_index(index);
    return true;
  }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex index) const override { set_device(index); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
    return exchange_device(index);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
    if (index < 0 || index >= device_count()) return current_device();
    return exchange_device(index);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return new_generator(index);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    c10::DeviceIndex d = device_of(data);
    TORCH_CHECK(d >= 0, "mytorch: the pointer ", data, " is not in mytorch device memory");
    return c10::Device(c10::DeviceType::PrivateUse1, d);
  }
  // pin_memory() of a CPU tensor asks the current accelerator for its pinned allocator.
  // The device computes on host memory, so any host memory serves; "pinned" memory is
  // memory from this allocator, which is what is_pinned() reports.
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_bytes(storage.unsafeGetStorageImpl(), newsize);
  }
};

// Registered at load time, before any tensor exists on the device.
const bool registered = [] {
  at::RegisterPrivateUse1HooksInterface(new Hooks());
  return true;
}();

}  // namespace

}  // namespace device
}  // namespace mytorch
