// The mytorch device allocator (see allocator.h). No caching: a freed block goes
// straight back to the C heap, so memory_allocated() is exactly the live bytes.
#include "device/allocator.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <deque>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "device/device.h"

namespace mytorch {
namespace device {

namespace {

struct Block {
  size_t size;
  c10::DeviceIndex device;
};

int64_t env_bytes(const char* name) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  long long v = std::strtoll(env, &end, 10);
  TORCH_CHECK(end != env && *end == '\0' && v >= 0, "mytorch: ", name,
              " must be a number of bytes (>= 0), got '", env, "'");
  return v;
}

bool env_flag(const char* name) {
  const char* env = std::getenv(name);
  return env != nullptr && *env != '\0' && std::strcmp(env, "0") != 0;
}

class State {
 public:
  State() : stats_(kMaxSlots), limits_(kMaxSlots, env_bytes("MYTORCH_MEMORY_LIMIT")) {
    debug_ = env_flag("MYTORCH_ALLOC_DEBUG");
  }
  static constexpr size_t kMaxSlots = 64;

  void* allocate(size_t n, c10::DeviceIndex dev) {
    // Reserve the bytes first, so that the limit holds under concurrent allocations.
    int64_t in_use = 0, limit = 0;
    bool over = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      DeviceStats& s = stats_[dev];
      limit = limits_[dev];
      in_use = s.allocated;
      over = limit > 0 && s.allocated + static_cast<int64_t>(n) > limit;
      if (over) {
        s.num_ooms++;
      } else {
        s.allocated += n;
      }
    }
    TORCH_CHECK_WITH(OutOfMemoryError, !over, "mytorch: out of memory on mytorch:", int(dev),
                     ": tried to allocate ", n, " bytes; ", in_use, " bytes in use, limit ", limit,
                     " bytes (MYTORCH_MEMORY_LIMIT)");
    void* p = nullptr;
    size_t rounded = (n + kAlignment - 1) / kAlignment * kAlignment;
    if (posix_memalign(&p, kAlignment, rounded) != 0) p = nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    DeviceStats& s = stats_[dev];
    if (p == nullptr) {
      s.allocated -= n;
      s.num_ooms++;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "mytorch: out of memory on mytorch:", int(dev),
                       ": the host could not provide ", n, " bytes");
    }
    if (debug_) std::memset(p, kPoisonNew, n);
    blocks_[p] = Block{n, dev};
    s.total_allocated += n;
    s.blocks++;
    s.alloc_count++;
    if (s.allocated > s.peak) s.peak = s.allocated;
    return p;
  }

  void free(void* p) {
    if (p == nullptr) return;
    size_t n = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = blocks_.find(p);
      TORCH_INTERNAL_ASSERT(it != blocks_.end(), "mytorch allocator: freeing an unknown pointer");
      n = it->second.size;
      DeviceStats& s = stats_[it->second.device];
      s.allocated -= n;
      s.total_freed += n;
      s.blocks--;
      s.free_count++;
      blocks_.erase(it);
    }
    if (!debug_) {
      std::free(p);
      return;
    }
    // Debug mode: poison the block and hold it back for a while, so that a stray read
    // through a stale pointer sees 0xDD instead of someone else's data.
    std::memset(p, kPoisonFreed, n);
    std::vector<void*> release;
    {
      std::lock_guard<std::mutex> lock(mu_);
      quarantine_.push_back({p, n});
      quarantine_bytes_ += n;
      while (quarantine_bytes_ > kQuarantineBytes) {
        release.push_back(quarantine_.front().first);
        quarantine_bytes_ -= quarantine_.front().second;
        quarantine_.pop_front();
      }
    }
    for (void* q : release) std::free(q);
  }

  void drain_quarantine() {
    std::deque<std::pair<void*, size_t>> q;
    {
      std::lock_guard<std::mutex> lock(mu_);
      q.swap(quarantine_);
      quarantine_bytes_ = 0;
    }
    for (auto& b : q) std::free(b.first);
  }

  DeviceStats stats(c10::DeviceIndex d) {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_[d];
  }
  void reset_peak(c10::DeviceIndex d) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_[d].peak = stats_[d].allocated;
  }
  void set_limit(c10::DeviceIndex d, int64_t v) {
    std::lock_guard<std::mutex> lock(mu_);
    limits_[d] = v;
  }
  int64_t limit(c10::DeviceIndex d) {
    std::lock_guard<std::mutex> lock(mu_);
    return limits_[d];
  }
  c10::DeviceIndex device_of(const void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(const_cast<void*>(ptr));
    if (it != blocks_.end()) return it->second.device;
    // an interior pointer: search the block that holds it
    auto c = reinterpret_cast<uintptr_t>(ptr);
    for (const auto& kv : blocks_) {
      auto b = reinterpret_cast<uintptr_t>(kv.first);
      if (c >= b && c < b + kv.second.size) return kv.second.device;
    }
    return -1;
  }

  std::atomic<bool> debug_{false};

 private:
  std::mutex mu_;
  std::unordered_map<void*, Block> blocks_;
  std::vector<DeviceStats> stats_;
  std::vector<int64_t> limits_;
  static constexpr size_t kQuarantineBytes = size_t(64) << 20;
  std::deque<std::pair<void*, size_t>> quarantine_;  // debug mode: freed, poisoned, held
  size_t quarantine_bytes_ = 0;
};

State& state() {
  static State* s = new State();  // never destroyed: blocks may outlive static teardown
  return *s;
}

void delete_block(void* p) { state().free(p); }

class MytorchAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    c10::DeviceIndex dev = current_device();
    c10::Device device(c10::DeviceType::PrivateUse1, dev);
    if (n == 0) return c10::DataPtr(nullptr, nullptr, &delete_block, device);
    void* p = state().allocate(n, dev);
    return c10::DataPtr(p, p, &delete_block, device);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count) std::memcpy(dest, src, count);
  }
};

MytorchAllocator g_allocator;

}  // namespace

c10::Allocator* allocator() { return &g_allocator; }

DeviceStats stats(c10::DeviceIndex index) { return state().stats(resolve_index(index)); }
void reset_peak(c10::DeviceIndex index) { state().reset_peak(resolve_index(index)); }

std::map<std::string, int64_t> memory_stats(c10::DeviceIndex index) {
  DeviceStats s = stats(index);
  return {
      {"allocated_bytes.all.current", s.allocated},
      {"allocated_bytes.all.peak", s.peak},
      {"allocated_bytes.all.allocated", s.total_allocated},
      {"allocated_bytes.all.freed", s.total_freed},
      {"reserved_bytes.all.current", s.allocated},
      {"active_bytes.all.current", s.allocated},
      {"allocation.all.current", s.blocks},
      {"allocation.all.allocated", s.alloc_count},
      {"allocation.all.freed", s.free_count},
      {"num_ooms", s.num_ooms},
      {"memory_limit", state().limit(resolve_index(index))},
  };
}

void empty_cache() {
  state().drain_quarantine();
  malloc_trim(0);
}

void set_memory_limit(c10::DeviceIndex index, int64_t bytes) {
  TORCH_CHECK(bytes >= 0, "mytorch: memory limit must be >= 0 bytes (0: no limit), got ", bytes);
  state().set_limit(resolve_index(index), bytes);
}
int64_t memory_limit(c10::DeviceIndex index) { return state().limit(resolve_index(index)); }
void set_debug(bool on) { state().debug_ = on; }
bool debug() { return state().debug_; }
c10::DeviceIndex device_of(const void* ptr) { return state().device_of(ptr); }

}  // namespace device
}  // namespace mytorch

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &mytorch::device::g_allocator);
