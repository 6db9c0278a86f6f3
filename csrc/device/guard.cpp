// The device guard: how PyTorch switches the current mytorch device (DeviceGuard,
// torch.mytorch.device(...), tensors on two devices). mytorch executes every op
// synchronously on the host, so streams are labels and an event is a timestamp: a
// recorded event is always complete.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <chrono>

#include "device/device.h"

namespace mytorch {
namespace device {

namespace {

struct Event {
  std::chrono::steady_clock::time_point when;
  c10::DeviceIndex device;
};

constexpr int kMaxDevices = 64;
thread_local std::array<c10::StreamId, kMaxDevices> tls_stream{};  // 0: the default stream
std::atomic<c10::StreamId> next_stream_id{1};

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kType);
    return c10::Device(kType, device::exchange_device(d.index()));
  }
  c10::Device getDevice() const override { return c10::Device(kType, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_INTERNAL_ASSERT(d.type() == kType);
    if (d.index() >= 0) set_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < device_count()) {
      try {
        set_device(d.index());
      } catch (...) {
      }
    }
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  // torch.accelerator.get_device_capability: the dtypes a mytorch tensor can hold and
  // convert between: the dense numeric dtypes. Sub-byte (int1..7, uint1..7, float4) and bits
  // dtypes are left out (no copy kernel converts them), and so are the quantized dtypes: a
  // qint8 / quint8 tensor comes from quantize_per_tensor and converts only by dequantize.
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    if (d.index() >= 0) check_index(d.index());
    c10::DeviceCapability cap;
    uint64_t bits = 0;
    for (int i : {c10::kIndex_Byte, c10::kIndex_Char, c10::kIndex_Short, c10::kIndex_Int,
                  c10::kIndex_Long, c10::kIndex_Half, c10::kIndex_Float, c10::kIndex_Double,
                  c10::kIndex_ComplexHalf, c10::kIndex_ComplexFloat, c10::kIndex_ComplexDouble,
                  c10::kIndex_Bool, c10::kIndex_BFloat16, c10::kIndex_Float8_e5m2,
                  c10::kIndex_Float8_e4m3fn, c10::kIndex_Float8_e5m2fnuz,
                  c10::kIndex_Float8_e4m3fnuz, c10::kIndex_UInt16, c10::kIndex_UInt32,
                  c10::kIndex_UInt64})
      bits |= uint64_t(1) << i;
    cap.capability_data.capability_bits = bits;
    return cap;
  }

  c10::Stream getStream(c10::Device d) const noexcept override {
    c10::DeviceIndex i = d.index() < 0 ? current_device() : d.index();
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kType, i), tls_stream[i]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, make_device(d.index()));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return getNewStream(d, 0);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::UNSAFE, make_device(d.index()), next_stream_id++);
  }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    c10::DeviceIndex i = s.device_index();
    c10::Stream prev(c10::Stream::UNSAFE, s.device(), tls_stream[i]);
    tls_stream[i] = s.id();
    return prev;
  }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  void synchronizeDevice(const c10::DeviceIndex index) const override { check_index(index); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "mytorch: event device index ", int(device_index),
                " does not match the recording stream's device ", stream.device());
    if (*event == nullptr) *event = new Event{};
    auto* e = static_cast<Event*>(*event);
    e->when = std::chrono::steady_clock::now();
    e->device = stream.device_index();
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void synchronizeEvent(void*) const override {}
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<Event*>(event);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "mytorch: elapsed_time needs two recorded events (create them with "
                "enable_timing=True and record both)");
    auto* a = static_cast<Event*>(start);
    auto* b = static_cast<Event*>(end);
    return std::chrono::duration<double, std::milli>(b->when - a->when).count();
  }
};

}  // namespace

}  // namespace device
}  // namespace mytorch

C10_REGISTER_GUARD_IMPL(PrivateUse1, mytorch::device::GuardImpl);
