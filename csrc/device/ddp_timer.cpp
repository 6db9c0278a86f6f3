// DistributedDataParallel's step timer for the mytorch device. DDP's logger asks the
// TimerRegistry for a timer of the parameters' device type and warns when there is none.
// Every op runs synchronously on the host, so host timestamps time the device's work.
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

namespace mytorch {
namespace device {

namespace {

class HostTimer final : public c10d::Timer {
 public:
  explicit HostTimer(c10::Device) {}
  std::optional<int64_t> measureDifference(Event start, Event end) override {
    const int64_t a = getTimeRef(start), b = getTimeRef(end);
    if (a == c10d::kUnsetTime || b == c10d::kUnsetTime || b < a) return std::nullopt;
    return b - a;
  }
};

}  // namespace

}  // namespace device
}  // namespace mytorch

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, mytorch::device::HostTimer)
}  // namespace c10d
