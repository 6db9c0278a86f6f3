// Profiler support: torch.autograd.profiler.profile(use_device="mytorch") times device
// work through these stubs. Every op runs synchronously on the host, so a device event
// is a host timestamp and the device time of a range is the host time between its events.
#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <memory>

#include "device/device.h"

namespace mytorch {
namespace device {

namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

struct ProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (device != nullptr) *device = current_device();
    const int64_t now = c10::getTime();
    if (cpu_ns != nullptr) *cpu_ns = now;
    *event = std::make_shared<int64_t>(now);
  }
  // microseconds between two recorded events, as the CUDA stubs report
  float elapsed(const ProfilerVoidEventStub* start,
                const ProfilerVoidEventStub* end) const override {
    TORCH_CHECK(start != nullptr && end != nullptr && *start && *end,
                "mytorch profiler: elapsed needs two recorded events");
    const int64_t a = *static_cast<const int64_t*>(start->get());
    const int64_t b = *static_cast<const int64_t*>(end->get());
    return static_cast<float>(b - a) / 1000.0f;
  }
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }
  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, i));
      op(i);
    }
  }
  void synchronize() const override {}
};

ProfilerStubs g_stubs;

const bool registered = [] {
  torch::profiler::impl::registerPrivateUse1Methods(&g_stubs);
  return true;
}();

}  // namespace

}  // namespace device
}  // namespace mytorch
