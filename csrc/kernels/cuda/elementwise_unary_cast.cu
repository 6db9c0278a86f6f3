// cast, and the dtype-converting copy behind the other CUDA elementwise ops (mixed-dtype
// operands), with the conversions of the CPU kernel (kernels/cpu/elementwise_unary.cpp);
// cast returns a contiguous tensor, as its fake kernel says.
#include "kernels/cuda/ops.h"
#include "kernels/cuda/strided.cuh"

namespace mytorch {
namespace cuda {
namespace ew {
namespace {

template <typename U, typename T>
struct CastOp {
  __device__ __forceinline__ U operator()(T v) const {
    using CT = compute_t<T>;
    const CT c = static_cast<CT>(v);
    if constexpr (std::is_same_v<U, bool>) {
      return c != CT(0);
    } else if constexpr (std::is_same_v<U, c10::BFloat16> || std::is_same_v<U, c10::Half>) {
      return U(static_cast<float>(c));
    } else if constexpr (std::is_floating_point_v<CT> && std::is_integral_v<U> && sizeof(U) < 4) {
      return static_cast<U>(static_cast<int32_t>(c));  // as the host code: through int32, truncated
    } else {
      return static_cast<U>(c);
    }
  }
};

// Same dtype: a copy of the element's bytes.
template <typename W>
struct CopyOp {
  __device__ __forceinline__ W operator()(W v) const { return v; }
};

at::Tensor copy_as(const at::Tensor& t, at::ScalarType dtype) {
  at::Tensor out = t.is_non_overlapping_and_dense()
                       ? aten::empty_strided(t.sizes(), t.strides(), t.options().dtype(dtype))
                       : aten::empty(t.sizes(), t.options().dtype(dtype));
  if (t.dim() == 0 && t.unsafeGetTensorImpl()->is_wrapped_number())
    out.unsafeGetTensorImpl()->set_wrapped_number(true);
  copy_cast(out, t);
  return out;
}

}  // namespace

at::Tensor cast(const at::Tensor& x, at::ScalarType dtype) {
  cpu::dispatch_all("mytorch::cast", "dtype", dtype, [](auto) {});
  cpu::dispatch_all("mytorch::cast", "x", x.scalar_type(), [](auto) {});
  at::Tensor out = aten::empty(x.sizes(), x.options().dtype(dtype));  // contiguous, as the fake kernel
  copy_cast(out, x);
  return out;
}

void copy_cast(const at::Tensor& dst, const at::Tensor& src) {
  const char* op = "mytorch::copy";
  TORCH_CHECK(expandable_to(src.sizes(), dst.sizes()), op, ": expected src of shape ",
              shape_str(src.sizes()), " to broadcast to dst of shape ", shape_str(dst.sizes()));
  const Operand s = Operand::of(src);
  if (s.t.defined()) check_same_device(op, dst, "dst", src, "src");
  if (dst.numel() == 0) return;
  if (dst.scalar_type() == src.scalar_type()) {
    switch (dst.element_size()) {
      case 1: return launch<uint8_t, uint8_t>(op, dst, {s}, CopyOp<uint8_t>{});
      case 2: return launch<uint16_t, uint16_t>(op, dst, {s}, CopyOp<uint16_t>{});
      case 4: return launch<uint32_t, uint32_t>(op, dst, {s}, CopyOp<uint32_t>{});
      case 8: return launch<uint64_t, uint64_t>(op, dst, {s}, CopyOp<uint64_t>{});
      default: break;
    }
  }
  cpu::dispatch_all(op, "dst", dst.scalar_type(), [&](auto to) {
    using U = typename decltype(to)::type;
    cpu::dispatch_all(op, "src", src.scalar_type(), [&](auto from) {
      using T = typename decltype(from)::type;
      if constexpr (!std::is_same_v<U, T>) launch<U, T>(op, dst, {s}, CastOp<U, T>{});
    });
  });
}

at::Tensor to_dtype(const at::Tensor& t, at::ScalarType dtype) {
  if (t.scalar_type() == dtype) return t;
  if (t.dim() == 0 && t.device().is_cpu()) return cpu::to_dtype(t, dtype);  // a scalar operand
  return copy_as(t, dtype);
}

}  // namespace ew
}  // namespace cuda
}  // namespace mytorch
