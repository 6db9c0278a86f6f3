// The pinned host allocator (see pinned.h). Device memory is host memory, so a "pinned"
// block needs no page locking: it is an aligned host block that this allocator tracks.
#include "device/pinned.h"

#include <ATen/core/CachingHostAllocator.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "device/allocator.h"

namespace mytorch {
namespace device {

namespace {

struct PinnedState {
  std::mutex mu;
  std::map<uintptr_t, size_t> blocks;  // start -> size, ordered for interior lookups
  at::HostStats stats;
};

PinnedState& pinned_state() {
  static PinnedState* s = new PinnedState();  // never destroyed: blocks may outlive teardown
  return *s;
}

void free_pinned(void* p) {
  if (p == nullptr) return;
  PinnedState& s = pinned_state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.blocks.find(reinterpret_cast<uintptr_t>(p));
    TORCH_INTERNAL_ASSERT(it != s.blocks.end(), "mytorch pinned allocator: freeing an unknown pointer");
    s.stats.allocated_bytes.decrease(it->second);
    s.stats.allocations.decrease(1);
    s.blocks.erase(it);
  }
  std::free(p);
}

struct PinnedAllocator final : public at::HostAllocator {
  at::DataPtr allocate(size_t n) override {
    if (n == 0) return {nullptr, nullptr, &free_pinned, c10::Device(c10::kCPU)};
    void* p = nullptr;
    size_t rounded = (n + kAlignment - 1) / kAlignment * kAlignment;
    if (posix_memalign(&p, kAlignment, rounded) != 0) p = nullptr;
    TORCH_CHECK_WITH(OutOfMemoryError, p != nullptr,
                     "mytorch: pinned host memory: could not allocate ", n, " bytes");
    PinnedState& s = pinned_state();
    std::lock_guard<std::mutex> lock(s.mu);
    s.blocks.emplace(reinterpret_cast<uintptr_t>(p), n);
    s.stats.allocated_bytes.increase(n);
    s.stats.allocations.increase(1);
    return {p, p, &free_pinned, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count) std::memcpy(dest, src, count);
  }
  // Every op runs synchronously: a block is free to reuse as soon as it is released.
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override {
    PinnedState& s = pinned_state();
    std::lock_guard<std::mutex> lock(s.mu);
    return s.stats;
  }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {
    PinnedState& s = pinned_state();
    std::lock_guard<std::mutex> lock(s.mu);
    s.stats.allocated_bytes.reset_peak();
    s.stats.allocations.reset_peak();
  }
};

PinnedAllocator g_pinned;

}  // namespace

c10::Allocator* pinned_allocator() { return &g_pinned; }

bool is_pinned_ptr(const void* ptr) {
  PinnedState& s = pinned_state();
  std::lock_guard<std::mutex> lock(s.mu);
  const auto c = reinterpret_cast<uintptr_t>(ptr);
  auto it = s.blocks.upper_bound(c);
  if (it == s.blocks.begin()) return false;
  --it;
  return c >= it->first && c < it->first + it->second;
}

}  // namespace device
}  // namespace mytorch

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &mytorch::device::g_pinned)
