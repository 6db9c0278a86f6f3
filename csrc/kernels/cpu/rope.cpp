// Rotary position embedding (OpenMP), forward and backward, in place or out of place.
// x: (..., S, H, D); cos, sin: (S, R/2) with R <= D; the first R features rotate, the rest pass
// through. Pairs are (i, i + R/2), or (2i, 2i+1) when interleaved. Backward is the inverse
// rotation (sin negated). Math in at::opmath_type (fp32 for bf16/fp16); cos/sin are read in their
// own dtype and row stride (widened through double, as a double copy of them would be).
// Checks in the family header, kernels/rope.h; registered in kernels/cpu/register.cpp.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>

#include "checks.h"
#include "kernels/rope.h"

namespace mytorch {
namespace cpu {
namespace {

constexpr int64_t kGrain = 1 << 14;  // elements below which the loop stays on one thread

// ---- kernel: pointers and sizes only ----
// Rotates the first 2*half features of each (token, head) row; out may alias x. Rows of cos
// and sin are cs and ss elements apart.
template <typename T, typename C>
void rope_kernel(const T* x, T* out, const C* cosv, const C* sinv, int64_t cs, int64_t ss, int64_t rows,
                 int64_t heads, int64_t S, int64_t D, int64_t half, bool interleaved, double sign) {
  using Acc = at::opmath_type<T>;
#pragma omp parallel for if (rows * D > kGrain) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    int64_t s = (r / heads) % S;
    const C* cr = cosv + s * cs;
    const C* sr = sinv + s * ss;
    for (int64_t p = 0; p < half; ++p) {
      int64_t i1 = interleaved ? 2 * p : p, i2 = interleaved ? 2 * p + 1 : p + half;
      Acc c = (Acc)(double)cr[p], sn = (Acc)(sign * (double)sr[p]);
      Acc x1 = (Acc)x[r * D + i1], x2 = (Acc)x[r * D + i2];
      out[r * D + i1] = (T)(x1 * c - x2 * sn);
      out[r * D + i2] = (T)(x2 * c + x1 * sn);
    }
    if (out != x)
      for (int64_t j = 2 * half; j < D; ++j) out[r * D + j] = x[r * D + j];
  }
}

// ---- ATen glue: checks, layout, allocation ----
void run_rope(const at::Tensor& x, at::Tensor& out, const at::Tensor& cos, const at::Tensor& sin,
              const rope::RopeShape& r, bool interleaved, double sign) {
  const int64_t S = r.S, H = r.H, D = r.D, half = r.half;
  int64_t rows = D == 0 ? 0 : x.numel() / D;
  // cos and sin where they lie when both have one dtype and unit-stride rows, else double copies
  at::Tensor c = cos, s = sin;
  if (cos.scalar_type() != sin.scalar_type() || cos.stride(1) != 1 || sin.stride(1) != 1) {
    c = cos.to(at::kDouble).contiguous();
    s = sin.to(at::kDouble).contiguous();
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "mytorch_rope", [&] {
    using T = scalar_t;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, c.scalar_type(), "mytorch_rope_table", [&] {
      rope_kernel<T, scalar_t>(x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), c.const_data_ptr<scalar_t>(),
                               s.const_data_ptr<scalar_t>(), c.stride(0), s.stride(0), rows, H, S, D, half,
                               interleaved, sign);
    });
  });
}

at::Tensor rope_out_of_place(const char* op, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                             bool interleaved, double sign) {
  const rope::RopeShape r = rope::check(op, x, cos, sin, check_floating);
  at::Tensor xc = x.contiguous(), out = at::empty_like(xc);
  run_rope(xc, out, cos, sin, r, interleaved, sign);
  return out;
}

}  // namespace

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  return rope_out_of_place("mytorch::rope", x, cos, sin, interleaved, 1.0);
}

at::Tensor rope_backward(const at::Tensor& grad, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  return rope_out_of_place("mytorch::rope_backward", grad, cos, sin, interleaved, -1.0);
}

void rope_(at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool interleaved) {
  const char* op = "mytorch::rope_";
  const rope::RopeShape r = rope::check(op, x, cos, sin, check_floating);
  rope::check_inplace(op, x);
  run_rope(x, x, cos, sin, r, interleaved, 1.0);
}

}  // namespace cpu
}  // namespace mytorch
