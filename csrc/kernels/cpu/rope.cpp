// Rotary position embedding (OpenMP), forward and backward, in place or out of place.
// x: (..., S, H, D); cos, sin: (S, R/2) with R <= D; the first R features rotate, the rest pass
// through. Pairs are (i, i + R/2), or (2i, 2i+1) when interleaved. Backward is the inverse
// rotation (sin negated). Math in at::opmath_type (fp32 for bf16/fp16), cos/sin read as double.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include "checks.h"

namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;  // elements below which the loop stays on one thread

// ---- kernel: pointers and sizes only ----
// Rotates the first 2*half features of each (token, head) row; out may alias x.
template <typename T>
void rope_kernel(const T* x, T* out, const double* cosv, const double* sinv, int64_t rows, int64_t heads, int64_t S,
                 int64_t D, int64_t half, bool interleaved, double sign) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for if (rows * D > kGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t s = (r / heads) % S;
    for (int64_t p = 0; p < half; ++p) {
      int64_t i1 = interleaved ? 2 * p : p, i2 = interleaved ? 2 * p + 1 : p + half;
      Acc c = (Acc)cosv[s * half + p], sn = (Acc)(sign * sinv[s * half + p]);
      Acc x1 = (Acc)x[r * D + i1], x2 = (Acc)x[r * D + i2];
      out[r * D + i1] = (T)(x1 * c - x2 * sn);
      out[r * D + i2] = (T)(x2 * c + x1 * sn);
    }
    if (out != x)
      for (int64_t j = 2 * half; j < D; ++j) out[r * D + j] = x[r * D + j];
  }
}

// ---- ATen glue: checks, layout, allocation ----
void check_rope(const char* op, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  check_floating(op, "x", x);
  check_floating(op, "cos", cos);
  check_floating(op, "sin", sin);
  check_same_device(op, x, "x", cos, "cos");
  check_same_device(op, x, "x", sin, "sin");
  TORCH_CHECK(x.dim() >= 3, op, ": expected x of shape (..., seq, heads, head_dim), got ", x.sizes());
  check_dim(op, "cos", cos, 2);
  check_same_shape(op, cos, "cos", sin, "sin");
  TORCH_CHECK(cos.size(0) == x.size(-3) && 2 * cos.size(1) <= x.size(-1) && cos.size(1) >= 1, op,
              ": expected cos and sin of shape (seq, rotary_dim / 2) with seq = ", x.size(-3), " and rotary_dim <= ",
              x.size(-1), ", got ", cos.sizes());
}

void run_rope(const at::Tensor& x, at::Tensor& out, const at::Tensor& cos, const at::Tensor& sin, bool interleaved,
              double sign) {
  int64_t S = x.size(-3), H = x.size(-2), D = x.size(-1), half = cos.size(1);
  int64_t rows = D == 0 ? 0 : x.numel() / D;
  at::Tensor c = cos.to(at::kDouble).contiguous(), s = sin.to(at::kDouble).contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_rope", [&] {
    rope_kernel<scalar_t>(x.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), c.const_data_ptr<double>(),
                          s.const_data_ptr<double>(), rows, H, S, D, half, interleaved, sign);
  });
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  check_rope("mytorch::rope", x, cos, sin);
  at::Tensor xc = x.contiguous(), out = at::empty_like(xc);
  run_rope(xc, out, cos, sin, interleaved, 1.0);
  return out;
}

at::Tensor rope_backward(const at::Tensor& grad, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  check_rope("mytorch::rope_backward", grad, cos, sin);
  at::Tensor gc = grad.contiguous(), out = at::empty_like(gc);
  run_rope(gc, out, cos, sin, interleaved, -1.0);
  return out;
}

void rope_(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  const char* op = "mytorch::rope_";
  check_rope(op, x, cos, sin);
  TORCH_CHECK(x.is_contiguous(), op, ": expected a contiguous x for the in-place form, got strides ", x.strides());
  run_rope(x, x, cos, sin, interleaved, 1.0);
}

}  // namespace
}  // namespace cpu
}  // namespace mytorch

// The mytorch device keeps its tensors in host memory, so it runs the same kernels.
#define MYTORCH_ROPE_IMPLS(m)                        \
  m.impl("rope", &mytorch::cpu::rope);               \
  m.impl("rope_", &mytorch::cpu::rope_);             \
  m.impl("rope_backward", &mytorch::cpu::rope_backward)

TORCH_LIBRARY_IMPL(mytorch, CPU, m) { MYTORCH_ROPE_IMPLS(m); }
TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) { MYTORCH_ROPE_IMPLS(m); }
