// Strided copy with dtype conversion: the kernel behind casts, .contiguous() copies and
// mixed-dtype operands of the other elementwise ops.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <torch/library.h>

#include "checks.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"

namespace mytorch {
namespace cpu {

template <typename U, typename T>
inline U cast_value(T v) {
  if constexpr (std::is_same_v<U, T>) {
    return v;
  } else if constexpr (std::is_same_v<U, bool>) {
    return static_cast<compute_t<T>>(v) != compute_t<T>(0);
  } else if constexpr (std::is_same_v<U, c10::BFloat16> || std::is_same_v<U, c10::Half>) {
    return U(static_cast<float>(static_cast<compute_t<T>>(v)));
  } else {
    return static_cast<U>(static_cast<compute_t<T>>(v));
  }
}

// ---- kernel ----
template <typename U, typename T>
void cast_loop(char** d, const int64_t* s, int64_t n) {
  if (s[0] == sizeof(U) && s[1] == sizeof(T)) {
    U* o = reinterpret_cast<U*>(d[0]);
    const T* a = reinterpret_cast<const T*>(d[1]);
    if constexpr (std::is_same_v<U, T>) {
      std::memcpy(o, a, n * sizeof(T));
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = cast_value<U>(a[i]);
    }
  } else if (s[0] == sizeof(U) && s[1] == 0) {
    U* o = reinterpret_cast<U*>(d[0]);
    U v = cast_value<U>(*reinterpret_cast<const T*>(d[1]));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  } else {
    char* o = d[0];
    const char* a = d[1];
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<U*>(o + i * s[0]) = cast_value<U>(*reinterpret_cast<const T*>(a + i * s[1]));
  }
}

// ---- glue ----
void copy_cast_(const at::Tensor& dst, const at::Tensor& src) {
  const char* op = "mytorch::copy";
  TORCH_CHECK(at::is_expandable_to(src.sizes(), dst.sizes()), op, ": expected src of shape ",
              src.sizes(), " to broadcast to dst of shape ", dst.sizes());
  if (dst.numel() == 0) return;
  auto it = at::TensorIteratorConfig()
                .add_output(dst)
                .add_const_input(src)
                .check_all_same_dtype(false)
                .check_all_same_device(false)
                .resize_outputs(false)
                .set_check_mem_overlap(false)
                .build();
  Strided g = strided_from(it);
  dispatch_all(op, "dst", dst.scalar_type(), [&](auto to) {
    using U = typename decltype(to)::type;
    dispatch_all(op, "src", src.scalar_type(), [&](auto from) {
      using T = typename decltype(from)::type;
      for_each(g, [](char** d, const int64_t* s, int64_t n) { cast_loop<U, T>(d, s, n); });
    });
  });
}

static at::Tensor copy_as(const at::Tensor& t, at::ScalarType dtype) {
  at::Tensor out;
  if (t.is_non_overlapping_and_dense())
    out = at::empty_strided(t.sizes(), t.strides(), t.options().dtype(dtype));
  else
    out = at::empty(t.sizes(), t.options().dtype(dtype));
  if (t.dim() == 0 && t.unsafeGetTensorImpl()->is_wrapped_number())
    out.unsafeGetTensorImpl()->set_wrapped_number(true);
  copy_cast_(out, t);
  return out;
}

at::Tensor to_dtype(const at::Tensor& t, at::ScalarType dtype) {
  return t.scalar_type() == dtype ? t : copy_as(t, dtype);
}

at::Tensor cast(const at::Tensor& x, at::ScalarType dtype) {
  dispatch_all("mytorch::cast", "dtype", dtype, [](auto) {});
  dispatch_all("mytorch::cast", "x", x.scalar_type(), [](auto) {});
  return copy_as(x, dtype);
}

}  // namespace cpu
}  // namespace mytorch

TORCH_LIBRARY_IMPL(mytorch, CPU, m) { m.impl("cast", &mytorch::cpu::cast); }
TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) { m.impl("cast", &mytorch::cpu::cast); }
