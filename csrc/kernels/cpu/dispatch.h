// Dtype dispatch for the CPU kernels, with errors that name the op and the dtypes it accepts.
#pragma once
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "aten_core.h"
#include "checks.h"

namespace mytorch {
namespace cpu {

template <typename T>
struct Tag {
  using type = T;
};

// Every dtype the elementwise kernels handle.
#define MYTORCH_ALL_DTYPES                                                            \
  at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kLong, at::kInt, at::kShort, \
      at::kChar, at::kByte, at::kBool

// f(Tag<T>{}) for the dtype; unsupported dtypes raise "op: expected <what> to have dtype in (...)".
template <typename F>
decltype(auto) dispatch_all(const char* op, const char* what, at::ScalarType st, F&& f) {
  switch (st) {
    case at::kFloat: return f(Tag<float>{});
    case at::kDouble: return f(Tag<double>{});
    case at::kBFloat16: return f(Tag<c10::BFloat16>{});
    case at::kHalf: return f(Tag<c10::Half>{});
    case at::kLong: return f(Tag<int64_t>{});
    case at::kInt: return f(Tag<int32_t>{});
    case at::kShort: return f(Tag<int16_t>{});
    case at::kChar: return f(Tag<int8_t>{});
    case at::kByte: return f(Tag<uint8_t>{});
    case at::kBool: return f(Tag<bool>{});
    default: break;
  }
  TORCH_CHECK(false, op, ": expected ", what, " to have dtype in (", dtype_list({MYTORCH_ALL_DTYPES}),
              "), got ", st);
}

template <typename F>
decltype(auto) dispatch_floating(const char* op, const char* what, at::ScalarType st, F&& f) {
  switch (st) {
    case at::kFloat: return f(Tag<float>{});
    case at::kDouble: return f(Tag<double>{});
    case at::kBFloat16: return f(Tag<c10::BFloat16>{});
    case at::kHalf: return f(Tag<c10::Half>{});
    default: break;
  }
  TORCH_CHECK(false, op, ": expected ", what, " to have dtype in (",
              dtype_list({at::kFloat, at::kDouble, at::kBFloat16, at::kHalf}), "), got ", st);
}

}  // namespace cpu
}  // namespace mytorch
