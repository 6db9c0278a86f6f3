// torch.ops.mytorch elementwise ops: thin wrappers over the kernels in elementwise_*.cpp.
// Results are contiguous (the fake kernels in mytorch_ext/ops/elementwise.py say so).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "checks.h"
#include "kernels/cpu/elementwise.h"

namespace mytorch {
namespace cpu {
namespace {

at::Tensor contig(const at::Tensor& r) {
  if (r.is_contiguous()) return r;
  at::Tensor out = at::empty(r.sizes(), r.options());
  copy_cast_(out, r);
  return out;
}

#define MYTORCH_BIN2(NAME, OP) \
  at::Tensor NAME(const at::Tensor& a, const at::Tensor& b) { return contig(binary(OP, a, b, 1, {})); }
MYTORCH_BIN2(mul, Bin::Mul)
MYTORCH_BIN2(maximum, Bin::Maximum)
MYTORCH_BIN2(minimum, Bin::Minimum)
MYTORCH_BIN2(pow, Bin::Pow)
MYTORCH_BIN2(eq, Bin::Eq)
MYTORCH_BIN2(ne, Bin::Ne)
MYTORCH_BIN2(lt, Bin::Lt)
MYTORCH_BIN2(le, Bin::Le)
MYTORCH_BIN2(gt, Bin::Gt)
MYTORCH_BIN2(ge, Bin::Ge)
MYTORCH_BIN2(sigmoid_backward, Bin::SigmoidBwd)
MYTORCH_BIN2(tanh_backward, Bin::TanhBwd)
MYTORCH_BIN2(silu_backward, Bin::SiluBwd)
#undef MYTORCH_BIN2

at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return contig(binary(Bin::Add, a, b, alpha, {}));
}
at::Tensor sub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return contig(binary(Bin::Sub, a, b, alpha, {}));
}
Bin div_op(std::optional<c10::string_view> mode) {
  if (!mode) return Bin::Div;
  if (*mode == "trunc") return Bin::DivTrunc;
  if (*mode == "floor") return Bin::DivFloor;
  TORCH_CHECK(false, "mytorch::div: expected rounding_mode to be None, 'trunc' or 'floor', got '",
              std::string(*mode), "'");
}
at::Tensor div(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  return contig(binary(div_op(mode), a, b, 1, {}));
}
at::Tensor threshold_backward(const at::Tensor& g, const at::Tensor& x, const at::Scalar& thr) {
  return contig(binary(Bin::ThresholdBwd, g, x, thr, {}));
}

#define MYTORCH_UN(NAME, OP) \
  at::Tensor NAME(const at::Tensor& x) { return contig(unary(OP, x, {})); }
MYTORCH_UN(neg, Un::Neg)
MYTORCH_UN(abs, Un::Abs)
MYTORCH_UN(exp, Un::Exp)
MYTORCH_UN(log, Un::Log)
MYTORCH_UN(sqrt, Un::Sqrt)
MYTORCH_UN(rsqrt, Un::Rsqrt)
MYTORCH_UN(tanh, Un::Tanh)
MYTORCH_UN(sigmoid, Un::Sigmoid)
MYTORCH_UN(relu, Un::Relu)
MYTORCH_UN(silu, Un::Silu)
MYTORCH_UN(reciprocal, Un::Reciprocal)
#undef MYTORCH_UN

at::Tensor clamp(const at::Tensor& x, const std::optional<at::Scalar>& lo,
                 const std::optional<at::Scalar>& hi) {
  return contig(unary(Un::Clamp, x, {}, lo, hi));
}
at::Tensor clamp_tensor(const at::Tensor& x, const std::optional<at::Tensor>& lo,
                        const std::optional<at::Tensor>& hi) {
  const char* op = "mytorch::clamp_tensor";
  TORCH_CHECK(lo || hi, op, ": expected at least one of min and max, got neither");
  if (lo) check_same_device(op, x, "x", *lo, "min");
  if (hi) check_same_device(op, x, "x", *hi, "max");
  auto broadcasts = [](at::IntArrayRef a, at::IntArrayRef b) {
    for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
      const int64_t p = a[a.size() - i], q = b[b.size() - i];
      if (p != q && p != 1 && q != 1) return false;
    }
    return true;
  };
  if (lo) TORCH_CHECK(broadcasts(x.sizes(), lo->sizes()), op, ": expected min of shape ", lo->sizes(),
                      " to broadcast with x of shape ", x.sizes());
  if (hi) TORCH_CHECK(broadcasts(x.sizes(), hi->sizes()), op, ": expected max of shape ", hi->sizes(),
                      " to broadcast with x of shape ", x.sizes());
  if (lo && hi) TORCH_CHECK(broadcasts(lo->sizes(), hi->sizes()), op, ": expected min of shape ",
                            lo->sizes(), " and max of shape ", hi->sizes(), " to broadcast together");
  at::Tensor r = x;
  if (lo) r = binary(Bin::Maximum, r, *lo, 1, {});
  if (hi) r = binary(Bin::Minimum, r, *hi, 1, {});
  return contig(r);
}
at::Tensor where(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  return contig(ternary(Tern::Where, c, a, b, 0, {}));
}
at::Tensor addcmul(const at::Tensor& x, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& v) {
  return contig(ternary(Tern::Addcmul, x, t1, t2, v, {}));
}
at::Tensor addcdiv(const at::Tensor& x, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& v) {
  return contig(ternary(Tern::Addcdiv, x, t1, t2, v, {}));
}
at::Tensor lerp(const at::Tensor& x, const at::Tensor& end, const at::Tensor& w) {
  return contig(ternary(Tern::LerpTensor, x, end, w, 0, {}));
}
at::Tensor masked_fill(const at::Tensor& x, const at::Tensor& mask, const at::Scalar& v) {
  at::Tensor out = masked_fill_copy(x, mask);
  return masked_fill_(out, mask, v);
}

}  // namespace

at::Tensor masked_fill_copy(const at::Tensor& x, const at::Tensor& mask) {
  if (mask.sizes() == x.sizes()) {
    at::Tensor out = at::empty_like(x);
    copy_cast_(out, x);
    return out;
  }
  const int64_t nd = std::max(x.dim(), mask.dim());
  std::vector<int64_t> shape(nd);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t a = i < nd - x.dim() ? 1 : x.size(i - (nd - x.dim()));
    int64_t b = i < nd - mask.dim() ? 1 : mask.size(i - (nd - mask.dim()));
    TORCH_CHECK(a == b || a == 1 || b == 1, "mytorch::masked_fill: expected mask of shape ", mask.sizes(),
                " and x of shape ", x.sizes(), " to broadcast together");
    shape[i] = a == 1 ? b : a;
  }
  at::Tensor out = at::empty(shape, x.options());
  copy_cast_(out, x.expand(shape));
  return out;
}

}  // namespace cpu
}  // namespace mytorch

#define MYTORCH_ELEMENTWISE_IMPLS(m)                                   \
  m.impl("add", &mytorch::cpu::add);                                                 \
  m.impl("sub", &mytorch::cpu::sub);                                                 \
  m.impl("mul", &mytorch::cpu::mul);                                                 \
  m.impl("div", &mytorch::cpu::div);                                                 \
  m.impl("maximum", &mytorch::cpu::maximum);                                         \
  m.impl("minimum", &mytorch::cpu::minimum);                                         \
  m.impl("pow", &mytorch::cpu::pow);                                                 \
  m.impl("eq", &mytorch::cpu::eq);                                                   \
  m.impl("ne", &mytorch::cpu::ne);                                                   \
  m.impl("lt", &mytorch::cpu::lt);                                                   \
  m.impl("le", &mytorch::cpu::le);                                                   \
  m.impl("gt", &mytorch::cpu::gt);                                                   \
  m.impl("ge", &mytorch::cpu::ge);                                                   \
  m.impl("where", &mytorch::cpu::where);                                             \
  m.impl("neg", &mytorch::cpu::neg);                                                 \
  m.impl("abs", &mytorch::cpu::abs);                                                 \
  m.impl("exp", &mytorch::cpu::exp);                                                 \
  m.impl("log", &mytorch::cpu::log);                                                 \
  m.impl("sqrt", &mytorch::cpu::sqrt);                                               \
  m.impl("rsqrt", &mytorch::cpu::rsqrt);                                             \
  m.impl("tanh", &mytorch::cpu::tanh);                                               \
  m.impl("sigmoid", &mytorch::cpu::sigmoid);                                         \
  m.impl("relu", &mytorch::cpu::relu);                                               \
  m.impl("silu", &mytorch::cpu::silu);                                               \
  m.impl("reciprocal", &mytorch::cpu::reciprocal);                                   \
  m.impl("sigmoid_backward", &mytorch::cpu::sigmoid_backward);                       \
  m.impl("tanh_backward", &mytorch::cpu::tanh_backward);                             \
  m.impl("silu_backward", &mytorch::cpu::silu_backward);                             \
  m.impl("threshold_backward", &mytorch::cpu::threshold_backward);                   \
  m.impl("clamp", &mytorch::cpu::clamp);                                             \
  m.impl("clamp_tensor", &mytorch::cpu::clamp_tensor);                               \
  m.impl("masked_fill", &mytorch::cpu::masked_fill);                                 \
  m.impl("addcmul", &mytorch::cpu::addcmul);                                         \
  m.impl("addcdiv", &mytorch::cpu::addcdiv);                                         \
  m.impl("lerp", &mytorch::cpu::lerp);

TORCH_LIBRARY_IMPL(mytorch, CPU, m) { MYTORCH_ELEMENTWISE_IMPLS(m) }
TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) { MYTORCH_ELEMENTWISE_IMPLS(m) }
