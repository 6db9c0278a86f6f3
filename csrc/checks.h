// Input checks shared by every op. Each message names the op, what it got and
// what it accepts, e.g.
//   mytorch::gelu: expected x to be a floating tensor (float32, float64, bfloat16, float16), got int64
#pragma once
#include <c10/util/Exception.h>

#include <array>
#include <initializer_list>
#include <limits>
#include <string>

#include "aten_core.h"

namespace mytorch {

inline std::string dtype_list(std::initializer_list<at::ScalarType> ok) {
  std::string s;
  for (auto t : ok) {
    if (!s.empty()) s += ", ";
    s += c10::toString(t);
  }
  return s;
}

// "[2, 3]": formatted by hand, so messages do not depend on stream operators across libraries.
inline std::string shape_str(c10::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

// Whether `shape` broadcasts to `desired` (as at::is_expandable_to).
inline bool expandable_to(c10::IntArrayRef shape, c10::IntArrayRef desired) {
  if (shape.size() > desired.size()) return false;
  for (size_t i = 1; i <= shape.size(); ++i)
    if (shape[shape.size() - i] != desired[desired.size() - i] && shape[shape.size() - i] != 1) return false;
  return true;
}

inline void check_dtype(const char* op, const char* name, const at::Tensor& t,
                        std::initializer_list<at::ScalarType> ok) {
  for (auto d : ok)
    if (t.scalar_type() == d) return;
  TORCH_CHECK(false, op, ": expected ", name, " to have dtype in (", dtype_list(ok), "), got ",
              t.scalar_type());
}

// float32, float64, bfloat16, float16
inline void check_floating(const char* op, const char* name, const at::Tensor& t) {
  check_dtype(op, name, t, {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf});
}

inline void check_same_device(const char* op, const at::Tensor& a, const char* an,
                              const at::Tensor& b, const char* bn) {
  TORCH_CHECK(a.device() == b.device(), op, ": expected ", an, " and ", bn,
              " on the same device, got ", a.device(), " and ", b.device());
}

inline void check_same_dtype(const char* op, const at::Tensor& a, const char* an,
                             const at::Tensor& b, const char* bn) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": expected ", an, " and ", bn,
              " to have the same dtype, got ", a.scalar_type(), " and ", b.scalar_type());
}

inline void check_same_shape(const char* op, const at::Tensor& a, const char* an,
                             const at::Tensor& b, const char* bn) {
  TORCH_CHECK(a.sizes() == b.sizes(), op, ": expected ", an, " and ", bn,
              " to have the same shape, got ", shape_str(a.sizes()), " and ",
              shape_str(b.sizes()));
}

inline void check_dim(const char* op, const char* name, const at::Tensor& t, int64_t dim) {
  TORCH_CHECK(t.dim() == dim, op, ": expected ", name, " to be ", dim, "-D, got a ", t.dim(),
              "-D tensor of shape ", shape_str(t.sizes()));
}

// Wraps a possibly negative dim into [0, ndim) or raises IndexError.
inline int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim) {
  int64_t n = ndim == 0 ? 1 : ndim;
  TORCH_CHECK_INDEX(dim >= -n && dim < n, op, ": dim ", dim, " is out of range for a tensor with ",
                    ndim, " dims (expected a dim in [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

// A pair of int parameters given as 1 or 2 values (stride, padding, kernel_size ...), each
// >= min and at most INT32_MAX (larger ones would overflow the geometry); an empty v takes
// dflt when one is given.
inline std::array<int64_t, 2> int_pair(const char* op, const char* name, c10::IntArrayRef v, int64_t min,
                                       c10::IntArrayRef dflt = {}) {
  if (v.empty() && !dflt.empty()) v = dflt;
  TORCH_CHECK(v.size() == 1 || v.size() == 2, op, ": expected ", name,
              " to have 1 or 2 elements, got ", v.size(), " (", shape_str(v), ")");
  std::array<int64_t, 2> r{v[0], v.size() == 2 ? v[1] : v[0]};
  TORCH_CHECK(r[0] >= min && r[1] >= min, op, ": expected ", name, " to be ",
              min == 0 ? "non-negative" : "positive", ", got ", shape_str(v));
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  TORCH_CHECK(r[0] <= kMax && r[1] <= kMax, op, ": expected ", name, " to be at most ", kMax, ", got ",
              shape_str(v));
  return r;
}

}  // namespace mytorch
