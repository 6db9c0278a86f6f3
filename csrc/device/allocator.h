// mytorch's device allocator: 64-byte aligned host memory, with per-device statistics,
// an optional per-device limit (MYTORCH_MEMORY_LIMIT, bytes) and a debug mode
// (MYTORCH_ALLOC_DEBUG=1) that poisons new blocks with 0xFF and freed ones with 0xDD,
// holding up to 64 MiB of freed blocks back from reuse (empty_cache() releases them).
#pragma once
#include <c10/core/Allocator.h>

#include <cstdint>
#include <map>
#include <string>

namespace mytorch {
namespace device {

constexpr size_t kAlignment = 64;
constexpr unsigned char kPoisonNew = 0xFF;   // NaN in every float type, -1 in ints
constexpr unsigned char kPoisonFreed = 0xDD;

struct DeviceStats {
  int64_t allocated = 0;        // bytes in live blocks
  int64_t peak = 0;             // max of `allocated` since the last reset
  int64_t total_allocated = 0;  // bytes handed out, ever
  int64_t total_freed = 0;      // bytes returned, ever
  int64_t blocks = 0;           // live blocks
  int64_t alloc_count = 0;
  int64_t free_count = 0;
  int64_t num_ooms = 0;
};

c10::Allocator* allocator();

DeviceStats stats(c10::DeviceIndex index);
void reset_peak(c10::DeviceIndex index);
// CUDA-style flat dict: "allocated_bytes.all.current", ...
std::map<std::string, int64_t> memory_stats(c10::DeviceIndex index);
// Hands freed heap pages back to the operating system.
void empty_cache();

// 0 means no limit.
void set_memory_limit(c10::DeviceIndex index, int64_t bytes);
int64_t memory_limit(c10::DeviceIndex index);
void set_debug(bool on);
bool debug();

// The device of a pointer inside a live block, or -1 when it is not mytorch memory.
c10::DeviceIndex device_of(const void* ptr);

}  // namespace device
}  // namespace mytorch
