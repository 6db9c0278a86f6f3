// ATen elementwise ops on the mytorch device -> the OpenMP kernels in kernels/cpu/elementwise_*.
// Most overloads are aten/elementwise.h's templates over the op; here are those with their
// own argument handling: div's rounding modes, rsub, pow's special exponents, clamp, masked_fill.
#include <ATen/native/Resize.h>

#include "aten/ops.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/elementwise.h"

namespace mytorch {
namespace aten {

using cpu::Bin;
using cpu::Un;
using cpu::binary;
using cpu::binary_;
using cpu::unary;
using cpu::unary_;
using cpu::wrap_scalar;

// ---- div with rounding_mode (elementwise::div_op parses it) ----
using elementwise::div_op;

Tensor div_mode(const Tensor& a, const Tensor& b, OptStr m) { return binary(div_op(m), a, b, 1, {}); }
Tensor& div_mode_(Tensor& a, const Tensor& b, OptStr m) { return binary_(div_op(m), a, b, 1); }
Tensor& div_mode_out(const Tensor& a, const Tensor& b, OptStr m, Tensor& out) {
  binary(div_op(m), a, b, 1, out);
  return out;
}
Tensor div_scalar_mode(const Tensor& a, const at::Scalar& b, OptStr m) {
  return binary(div_op(m), a, wrap_scalar(b), 1, {});
}
Tensor& div_scalar_mode_(Tensor& a, const at::Scalar& b, OptStr m) { return binary_(div_op(m), a, wrap_scalar(b), 1); }
Tensor& div_scalar_mode_out(const Tensor& a, const at::Scalar& b, OptStr m, Tensor& out) {
  binary(div_op(m), a, wrap_scalar(b), 1, out);
  return out;
}

// rsub(self, other, alpha) = other - alpha * self
Tensor rsub(const Tensor& a, const Tensor& b, const at::Scalar& al) { return binary(Bin::Sub, b, a, al, {}); }
Tensor rsub_scalar(const Tensor& a, const at::Scalar& b, const at::Scalar& al) {
  return binary(Bin::Sub, wrap_scalar(b), a, al, {});
}

// ---- pow ----
Tensor pow_tensor_scalar(const Tensor& a, const at::Scalar& e) {
  if (at::isFloatingType(a.scalar_type()) && !e.isComplex()) {
    double v = e.toDouble();
    if (v == 2.0) return unary(Un::Square, a, {});
    if (v == 0.5) return unary(Un::Sqrt, a, {});
    if (v == -1.0) return unary(Un::Reciprocal, a, {});
  }
  return binary(Bin::Pow, a, wrap_scalar(e), 1, {});
}
Tensor pow_scalar(const at::Scalar& s, const Tensor& e) { return binary(Bin::Pow, wrap_scalar(s), e, 1, {}); }
Tensor& pow_scalar_out(const at::Scalar& s, const Tensor& e, Tensor& out) {
  binary(Bin::Pow, wrap_scalar(s), e, 1, out);
  return out;
}

// ---- clamp ----
Tensor clamp(const Tensor& x, const OptScalar& lo, const OptScalar& hi) {
  return unary(Un::Clamp, x, {}, lo, hi);
}
Tensor& clamp_(Tensor& x, const OptScalar& lo, const OptScalar& hi) { return unary_(Un::Clamp, x, lo, hi); }
Tensor& clamp_out(const Tensor& x, const OptScalar& lo, const OptScalar& hi, Tensor& out) {
  unary(Un::Clamp, x, out, lo, hi);
  return out;
}
Tensor clamp_min(const Tensor& x, const at::Scalar& lo) { return unary(Un::Clamp, x, {}, lo); }
Tensor& clamp_min_(Tensor& x, const at::Scalar& lo) { return unary_(Un::Clamp, x, lo); }
Tensor& clamp_min_out(const Tensor& x, const at::Scalar& lo, Tensor& out) {
  unary(Un::Clamp, x, out, lo);
  return out;
}
Tensor clamp_max(const Tensor& x, const at::Scalar& hi) { return unary(Un::Clamp, x, {}, std::nullopt, hi); }
Tensor& clamp_max_(Tensor& x, const at::Scalar& hi) { return unary_(Un::Clamp, x, std::nullopt, hi); }
Tensor& clamp_max_out(const Tensor& x, const at::Scalar& hi, Tensor& out) {
  unary(Un::Clamp, x, out, std::nullopt, hi);
  return out;
}
Tensor clamp_tensor(const Tensor& x, const OptTensor& lo, const OptTensor& hi) {
  TORCH_CHECK((lo && lo->defined()) || (hi && hi->defined()),
              "mytorch::clamp: expected at least one of min and max, got neither");
  Tensor r = x;
  if (lo && lo->defined()) r = binary(Bin::Maximum, r, *lo, 1, {});
  if (hi && hi->defined()) r = binary(Bin::Minimum, r, *hi, 1, {});
  return r;
}
Tensor& clamp_tensor_out(const Tensor& x, const OptTensor& lo, const OptTensor& hi, Tensor& out) {
  Tensor r = clamp_tensor(x, lo, hi);
  at::native::resize_output(out, r.sizes());
  TORCH_CHECK(at::canCast(r.scalar_type(), out.scalar_type()), "mytorch::clamp: result type ",
              r.scalar_type(), " can't be cast to the desired output type ", out.scalar_type());
  cpu::copy_cast_(out, r);
  return out;
}
Tensor& clamp_tensor_(Tensor& x, const OptTensor& lo, const OptTensor& hi) { return clamp_tensor_out(x, lo, hi, x); }

// ---- masked_fill ----
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const at::Scalar& v) { return cpu::masked_fill_(x, mask, v); }
Tensor& masked_fill_tensor_(Tensor& x, const Tensor& mask, const Tensor& v) {
  TORCH_CHECK(v.dim() == 0, "mytorch::masked_fill: expected value to be a 0-dim tensor, got a ",
              v.dim(), "-D tensor of shape ", v.sizes());
  return cpu::masked_fill_(x, mask, v.item());
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, const at::Scalar& v) {
  Tensor out = cpu::masked_fill_copy(x, mask);
  return cpu::masked_fill_(out, mask, v);
}
Tensor masked_fill_tensor(const Tensor& x, const Tensor& mask, const Tensor& v) {
  Tensor out = cpu::masked_fill_copy(x, mask);
  return masked_fill_tensor_(out, mask, v);
}

}  // namespace aten
}  // namespace mytorch
