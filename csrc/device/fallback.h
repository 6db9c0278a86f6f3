// The CPU fallback of the mytorch device (fallback.cpp): any ATen op without a native
// mytorch kernel runs on CPU aliases of the same memory.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace mytorch {
namespace device {

enum class FallbackMode { Warn, Silent, Error };

// MYTORCH_FALLBACK=warn|silent|error at load time (default warn); settable later.
FallbackMode fallback_mode();
void set_fallback_mode(FallbackMode mode);
FallbackMode parse_fallback_mode(const std::string& s);
std::string fallback_mode_name(FallbackMode mode);

// "aten::add.Tensor" -> how many times it fell back since the last reset.
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();

}  // namespace device
}  // namespace mytorch
