// The rope family: rotary position embedding, forward and backward, in place or out of place.
// x: (..., S, H, D); cos, sin: (S, R/2) with R <= D. The checks and shape both backends share,
// so that they raise the same errors, the op list and the entry points of each
// (kernels/cpu/rope.cpp, kernels/cuda/rope.cu). Host code only.
#pragma once
#include <cstdint>

#include "checks.h"

namespace mytorch {
namespace rope {

struct RopeShape {
  int64_t S, H, D, half;  // seq, heads, head_dim, rotary_dim / 2
};

// x, cos and sin: floating (each backend's dtype check, `check_float`), one device, cos and sin
// (S, R/2) with 2 <= R <= D.
template <typename CheckFloat>
RopeShape check(const char* op, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                CheckFloat check_float) {
  check_float(op, "x", x);
  check_float(op, "cos", cos);
  check_float(op, "sin", sin);
  check_same_device(op, x, "x", cos, "cos");
  check_same_device(op, x, "x", sin, "sin");
  TORCH_CHECK(x.dim() >= 3, op, ": expected x of shape (..., seq, heads, head_dim), got ", x.sizes());
  check_dim(op, "cos", cos, 2);
  check_same_shape(op, cos, "cos", sin, "sin");
  RopeShape r{x.size(-3), x.size(-2), x.size(-1), cos.size(1)};
  TORCH_CHECK(cos.size(0) == r.S && 2 * r.half <= r.D && r.half >= 1, op,
              ": expected cos and sin of shape (seq, rotary_dim / 2) with seq = ", r.S, " and rotary_dim <= ", r.D,
              ", got ", cos.sizes());
  return r;
}

// The in-place form's x: contiguous.
inline void check_inplace(const char* op, const at::Tensor& x) {
  TORCH_CHECK(x.is_contiguous(), op, ": expected a contiguous x for the in-place form, got strides ", x.strides());
}

}  // namespace rope

// ---- entry points ----
// The registered ops, X(name), each backend's registered from this list (cpu/register.cpp,
// cuda/register.cpp).
#define MYTORCH_ROPE_OPS(X) X(rope) X(rope_) X(rope_backward)

#define MYTORCH_ROPE_DECLS                                                                                  \
  at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved);    \
  void rope_(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved);               \
  at::Tensor rope_backward(const at::Tensor& grad, const at::Tensor& cos, const at::Tensor& sin, bool interleaved);

namespace cpu {
MYTORCH_ROPE_DECLS
}  // namespace cpu
namespace cuda {
MYTORCH_ROPE_DECLS
}  // namespace cuda

#undef MYTORCH_ROPE_DECLS

}  // namespace mytorch
