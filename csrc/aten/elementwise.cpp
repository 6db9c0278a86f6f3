// ATen elementwise ops on the mytorch device -> the OpenMP kernels in kernels/cpu/elementwise_*.
// Each macro registers the functional, in-place and out= overloads of one op from one kernel.
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "kernels/cpu/elementwise.h"

namespace mytorch {
namespace aten {
namespace {

using at::Scalar;
using at::Tensor;
using cpu::Bin;
using cpu::Tern;
using cpu::Un;
using cpu::binary;
using cpu::binary_;
using cpu::ternary;
using cpu::ternary_;
using cpu::unary;
using cpu::unary_;
using cpu::wrap_scalar;
using OptScalar = std::optional<Scalar>;

// ---- binary: OP.Tensor, OP_.Tensor, OP.out, OP.Scalar, OP_.Scalar, OP.Scalar_out ----
template <Bin OP>
struct B {
  static Tensor t(const Tensor& a, const Tensor& b) { return binary(OP, a, b, 1, {}); }
  static Tensor& ti(Tensor& a, const Tensor& b) { return binary_(OP, a, b, 1); }
  static Tensor& to(const Tensor& a, const Tensor& b, Tensor& out) {
    binary(OP, a, b, 1, out);
    return out;
  }
  static Tensor s(const Tensor& a, const Scalar& b) { return binary(OP, a, wrap_scalar(b), 1, {}); }
  static Tensor& si(Tensor& a, const Scalar& b) { return binary_(OP, a, wrap_scalar(b), 1); }
  static Tensor& so(const Tensor& a, const Scalar& b, Tensor& out) {
    binary(OP, a, wrap_scalar(b), 1, out);
    return out;
  }
  // with alpha (add, sub)
  static Tensor ta(const Tensor& a, const Tensor& b, const Scalar& al) { return binary(OP, a, b, al, {}); }
  static Tensor& tai(Tensor& a, const Tensor& b, const Scalar& al) { return binary_(OP, a, b, al); }
  static Tensor& tao(const Tensor& a, const Tensor& b, const Scalar& al, Tensor& out) {
    binary(OP, a, b, al, out);
    return out;
  }
  static Tensor sa(const Tensor& a, const Scalar& b, const Scalar& al) {
    return binary(OP, a, wrap_scalar(b), al, {});
  }
  static Tensor& sai(Tensor& a, const Scalar& b, const Scalar& al) {
    return binary_(OP, a, wrap_scalar(b), al);
  }
  static Tensor& sao(const Tensor& a, const Scalar& b, const Scalar& al, Tensor& out) {
    binary(OP, a, wrap_scalar(b), al, out);
    return out;
  }
  // grad-style: OP(grad, x) and OP.grad_input(grad, x, *, grad_input)
  static Tensor& gi(const Tensor& g, const Tensor& x, Tensor& gin) {
    binary(OP, g, x, 1, gin);
    return gin;
  }
};

// OUT: the name of the Tensor out= overload (".Tensor_out", or ".out").
#define REG_BIN_OUT(m, NAME, OP, OUT)                 \
  m.impl(#NAME ".Tensor", &B<OP>::t);                 \
  m.impl(#NAME "_.Tensor", &B<OP>::ti);               \
  m.impl(#NAME OUT, &B<OP>::to);                      \
  m.impl(#NAME ".Scalar", &B<OP>::s);                 \
  m.impl(#NAME "_.Scalar", &B<OP>::si);               \
  m.impl(#NAME ".Scalar_out", &B<OP>::so);
#define REG_BIN(m, NAME, OP) REG_BIN_OUT(m, NAME, OP, ".Tensor_out")

// OP, OP_, OP.out over tensors only (logical_and, logical_or)
#define REG_BIN_TENSORS(m, NAME, OP)                  \
  m.impl(#NAME, &B<OP>::t);                           \
  m.impl(#NAME "_", &B<OP>::ti);                      \
  m.impl(#NAME ".out", &B<OP>::to);

// OP(grad, x) and OP.grad_input (sigmoid_backward, tanh_backward, silu_backward)
#define REG_GRAD(m, NAME, OP)                         \
  m.impl(#NAME, &B<OP>::t);                           \
  m.impl(#NAME ".grad_input", &B<OP>::gi);

#define REG_ALPHA(m, NAME, OP)                        \
  m.impl(#NAME ".Tensor", &B<OP>::ta);                \
  m.impl(#NAME "_.Tensor", &B<OP>::tai);              \
  m.impl(#NAME ".out", &B<OP>::tao);                  \
  m.impl(#NAME ".Scalar", &B<OP>::sa);                \
  m.impl(#NAME "_.Scalar", &B<OP>::sai);              \
  m.impl(#NAME ".Scalar_out", &B<OP>::sao);

// ---- div with rounding_mode ----
Bin div_op(std::optional<c10::string_view> mode) {
  if (!mode) return Bin::Div;
  if (*mode == "trunc") return Bin::DivTrunc;
  if (*mode == "floor") return Bin::DivFloor;
  TORCH_CHECK(false, "mytorch::div: expected rounding_mode to be None, 'trunc' or 'floor', got '",
              std::string(*mode), "'");
}
using OptStr = std::optional<c10::string_view>;
Tensor div_tm(const Tensor& a, const Tensor& b, OptStr m) { return binary(div_op(m), a, b, 1, {}); }
Tensor& div_tmi(Tensor& a, const Tensor& b, OptStr m) { return binary_(div_op(m), a, b, 1); }
Tensor& div_tmo(const Tensor& a, const Tensor& b, OptStr m, Tensor& out) {
  binary(div_op(m), a, b, 1, out);
  return out;
}
Tensor div_sm(const Tensor& a, const Scalar& b, OptStr m) {
  return binary(div_op(m), a, wrap_scalar(b), 1, {});
}
Tensor& div_smi(Tensor& a, const Scalar& b, OptStr m) { return binary_(div_op(m), a, wrap_scalar(b), 1); }
Tensor& div_smo(const Tensor& a, const Scalar& b, OptStr m, Tensor& out) {
  binary(div_op(m), a, wrap_scalar(b), 1, out);
  return out;
}

// rsub(self, other, alpha) = other - alpha * self
Tensor rsub_t(const Tensor& a, const Tensor& b, const Scalar& al) { return binary(Bin::Sub, b, a, al, {}); }
Tensor rsub_s(const Tensor& a, const Scalar& b, const Scalar& al) {
  return binary(Bin::Sub, wrap_scalar(b), a, al, {});
}

// ---- pow ----
Tensor pow_ts(const Tensor& a, const Scalar& e) {
  if (at::isFloatingType(a.scalar_type()) && !e.isComplex()) {
    double v = e.toDouble();
    if (v == 2.0) return unary(Un::Square, a, {});
    if (v == 0.5) return unary(Un::Sqrt, a, {});
    if (v == -1.0) return unary(Un::Reciprocal, a, {});
  }
  return binary(Bin::Pow, a, wrap_scalar(e), 1, {});
}
Tensor pow_st(const Scalar& s, const Tensor& e) { return binary(Bin::Pow, wrap_scalar(s), e, 1, {}); }
Tensor& pow_sto(const Scalar& s, const Tensor& e, Tensor& out) {
  binary(Bin::Pow, wrap_scalar(s), e, 1, out);
  return out;
}
Tensor& pow_tso(const Tensor& a, const Scalar& e, Tensor& out) {
  binary(Bin::Pow, a, wrap_scalar(e), 1, out);
  return out;
}

// ---- threshold_backward(grad, self, threshold) ----
Tensor thr_bwd(const Tensor& g, const Tensor& x, const Scalar& t) {
  return binary(Bin::ThresholdBwd, g, x, t, {});
}
Tensor& thr_bwd_out(const Tensor& g, const Tensor& x, const Scalar& t, Tensor& gin) {
  binary(Bin::ThresholdBwd, g, x, t, gin);
  return gin;
}

// ---- unary: OP, OP_, OP.out ----
template <Un OP>
struct U {
  static Tensor f(const Tensor& x) { return unary(OP, x, {}); }
  static Tensor& i(Tensor& x) { return unary_(OP, x); }
  static Tensor& o(const Tensor& x, Tensor& out) {
    unary(OP, x, out);
    return out;
  }
};
#define REG_UN(m, NAME, OP)                 \
  m.impl(#NAME, &U<OP>::f);                 \
  m.impl(#NAME "_", &U<OP>::i);             \
  m.impl(#NAME ".out", &U<OP>::o);

// ---- clamp ----
Tensor clamp(const Tensor& x, const OptScalar& lo, const OptScalar& hi) {
  return unary(Un::Clamp, x, {}, lo, hi);
}
Tensor& clamp_i(Tensor& x, const OptScalar& lo, const OptScalar& hi) { return unary_(Un::Clamp, x, lo, hi); }
Tensor& clamp_o(const Tensor& x, const OptScalar& lo, const OptScalar& hi, Tensor& out) {
  unary(Un::Clamp, x, out, lo, hi);
  return out;
}
Tensor clamp_min(const Tensor& x, const Scalar& lo) { return unary(Un::Clamp, x, {}, lo); }
Tensor& clamp_min_i(Tensor& x, const Scalar& lo) { return unary_(Un::Clamp, x, lo); }
Tensor& clamp_min_o(const Tensor& x, const Scalar& lo, Tensor& out) {
  unary(Un::Clamp, x, out, lo);
  return out;
}
Tensor clamp_max(const Tensor& x, const Scalar& hi) { return unary(Un::Clamp, x, {}, std::nullopt, hi); }
Tensor& clamp_max_i(Tensor& x, const Scalar& hi) { return unary_(Un::Clamp, x, std::nullopt, hi); }
Tensor& clamp_max_o(const Tensor& x, const Scalar& hi, Tensor& out) {
  unary(Un::Clamp, x, out, std::nullopt, hi);
  return out;
}
using OptTensor = std::optional<Tensor>;
Tensor clamp_t(const Tensor& x, const OptTensor& lo, const OptTensor& hi) {
  TORCH_CHECK((lo && lo->defined()) || (hi && hi->defined()),
              "mytorch::clamp: expected at least one of min and max, got neither");
  Tensor r = x;
  if (lo && lo->defined()) r = binary(Bin::Maximum, r, *lo, 1, {});
  if (hi && hi->defined()) r = binary(Bin::Minimum, r, *hi, 1, {});
  return r;
}
Tensor& clamp_to(const Tensor& x, const OptTensor& lo, const OptTensor& hi, Tensor& out) {
  Tensor r = clamp_t(x, lo, hi);
  at::native::resize_output(out, r.sizes());
  TORCH_CHECK(at::canCast(r.scalar_type(), out.scalar_type()), "mytorch::clamp: result type ",
              r.scalar_type(), " can't be cast to the desired output type ", out.scalar_type());
  cpu::copy_cast_(out, r);
  return out;
}
Tensor& clamp_ti(Tensor& x, const OptTensor& lo, const OptTensor& hi) { return clamp_to(x, lo, hi, x); }
Tensor clamp_min_t(const Tensor& x, const Tensor& lo) { return binary(Bin::Maximum, x, lo, 1, {}); }
Tensor& clamp_min_ti(Tensor& x, const Tensor& lo) { return binary_(Bin::Maximum, x, lo, 1); }
Tensor clamp_max_t(const Tensor& x, const Tensor& hi) { return binary(Bin::Minimum, x, hi, 1, {}); }
Tensor& clamp_max_ti(Tensor& x, const Tensor& hi) { return binary_(Bin::Minimum, x, hi, 1); }

// ---- where, masked_fill ----
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) { return ternary(Tern::Where, c, a, b, 0, {}); }
Tensor& where_o(const Tensor& c, const Tensor& a, const Tensor& b, Tensor& out) {
  ternary(Tern::Where, c, a, b, 0, out);
  return out;
}
Tensor& masked_fill_s(Tensor& x, const Tensor& mask, const Scalar& v) { return cpu::masked_fill_(x, mask, v); }
Tensor& masked_fill_t(Tensor& x, const Tensor& mask, const Tensor& v) {
  TORCH_CHECK(v.dim() == 0, "mytorch::masked_fill: expected value to be a 0-dim tensor, got a ",
              v.dim(), "-D tensor of shape ", v.sizes());
  return cpu::masked_fill_(x, mask, v.item());
}
Tensor masked_fill_sf(const Tensor& x, const Tensor& mask, const Scalar& v) {
  Tensor out = cpu::masked_fill_copy(x, mask);
  return cpu::masked_fill_(out, mask, v);
}
Tensor masked_fill_tf(const Tensor& x, const Tensor& mask, const Tensor& v) {
  Tensor out = cpu::masked_fill_copy(x, mask);
  return masked_fill_t(out, mask, v);
}

// ---- addcmul, addcdiv, lerp ----
template <Tern OP>
struct T3 {
  static Tensor f(const Tensor& a, const Tensor& b, const Tensor& c, const Scalar& v) {
    return ternary(OP, a, b, c, v, {});
  }
  static Tensor& i(Tensor& a, const Tensor& b, const Tensor& c, const Scalar& v) {
    return ternary_(OP, a, b, c, v);
  }
  static Tensor& o(const Tensor& a, const Tensor& b, const Tensor& c, const Scalar& v, Tensor& out) {
    ternary(OP, a, b, c, v, out);
    return out;
  }
};
#define REG_T3(m, NAME, OP)                           \
  m.impl(#NAME, &T3<OP>::f);                          \
  m.impl(#NAME "_", &T3<OP>::i);                      \
  m.impl(#NAME ".out", &T3<OP>::o);
Tensor lerp_s(const Tensor& a, const Tensor& b, const Scalar& w) { return binary(Bin::Lerp, a, b, w, {}); }
Tensor& lerp_si(Tensor& a, const Tensor& b, const Scalar& w) { return binary_(Bin::Lerp, a, b, w); }
Tensor& lerp_so(const Tensor& a, const Tensor& b, const Scalar& w, Tensor& out) {
  binary(Bin::Lerp, a, b, w, out);
  return out;
}
Tensor lerp_t(const Tensor& a, const Tensor& b, const Tensor& w) { return ternary(Tern::LerpTensor, a, b, w, 0, {}); }
Tensor& lerp_ti(Tensor& a, const Tensor& b, const Tensor& w) { return ternary_(Tern::LerpTensor, a, b, w, 0); }
Tensor& lerp_to(const Tensor& a, const Tensor& b, const Tensor& w, Tensor& out) {
  ternary(Tern::LerpTensor, a, b, w, 0, out);
  return out;
}

}  // namespace
}  // namespace aten
}  // namespace mytorch

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using namespace mytorch::aten;
  REG_ALPHA(m, add, Bin::Add)
  REG_ALPHA(m, sub, Bin::Sub)
  m.impl("rsub.Tensor", &rsub_t);
  m.impl("rsub.Scalar", &rsub_s);
  REG_BIN_OUT(m, mul, Bin::Mul, ".out")
  REG_BIN_OUT(m, div, Bin::Div, ".out")
  m.impl("div.Tensor_mode", &div_tm);
  m.impl("div_.Tensor_mode", &div_tmi);
  m.impl("div.out_mode", &div_tmo);
  m.impl("div.Scalar_mode", &div_sm);
  m.impl("div_.Scalar_mode", &div_smi);
  m.impl("div.Scalar_mode_out", &div_smo);
  m.impl("floor_divide", &B<Bin::DivFloor>::t);
  m.impl("floor_divide_.Tensor", &B<Bin::DivFloor>::ti);
  m.impl("floor_divide.out", &B<Bin::DivFloor>::to);
  m.impl("floor_divide.Scalar", &B<Bin::DivFloor>::s);
  m.impl("floor_divide_.Scalar", &B<Bin::DivFloor>::si);
  m.impl("maximum", &B<Bin::Maximum>::t);
  m.impl("maximum.out", &B<Bin::Maximum>::to);
  m.impl("minimum", &B<Bin::Minimum>::t);
  m.impl("minimum.out", &B<Bin::Minimum>::to);
  m.impl("pow.Tensor_Tensor", &B<Bin::Pow>::t);
  m.impl("pow_.Tensor", &B<Bin::Pow>::ti);
  m.impl("pow.Tensor_Tensor_out", &B<Bin::Pow>::to);
  m.impl("pow.Tensor_Scalar", &pow_ts);
  m.impl("pow_.Scalar", &B<Bin::Pow>::si);
  m.impl("pow.Tensor_Scalar_out", &pow_tso);
  m.impl("pow.Scalar", &pow_st);
  m.impl("pow.Scalar_out", &pow_sto);
  REG_BIN(m, eq, Bin::Eq)
  REG_BIN(m, ne, Bin::Ne)
  REG_BIN(m, lt, Bin::Lt)
  REG_BIN(m, le, Bin::Le)
  REG_BIN(m, gt, Bin::Gt)
  REG_BIN(m, ge, Bin::Ge)
  REG_BIN_TENSORS(m, logical_and, Bin::LogicalAnd)
  REG_BIN_TENSORS(m, logical_or, Bin::LogicalOr)
  REG_UN(m, logical_not, Un::LogicalNot)
  REG_UN(m, neg, Un::Neg)
  REG_UN(m, abs, Un::Abs)
  REG_UN(m, exp, Un::Exp)
  REG_UN(m, log, Un::Log)
  REG_UN(m, sqrt, Un::Sqrt)
  REG_UN(m, rsqrt, Un::Rsqrt)
  REG_UN(m, tanh, Un::Tanh)
  REG_UN(m, sigmoid, Un::Sigmoid)
  REG_UN(m, silu, Un::Silu)
  REG_UN(m, reciprocal, Un::Reciprocal)
  REG_UN(m, sign, Un::Sign)
  m.impl("relu", &U<Un::Relu>::f);
  m.impl("relu_", &U<Un::Relu>::i);
  REG_GRAD(m, sigmoid_backward, Bin::SigmoidBwd)
  REG_GRAD(m, tanh_backward, Bin::TanhBwd)
  REG_GRAD(m, silu_backward, Bin::SiluBwd)
  m.impl("threshold_backward", &thr_bwd);
  m.impl("threshold_backward.grad_input", &thr_bwd_out);
  m.impl("clamp", &clamp);
  m.impl("clamp_", &clamp_i);
  m.impl("clamp.out", &clamp_o);
  m.impl("clamp.Tensor", &clamp_t);
  m.impl("clamp_.Tensor", &clamp_ti);
  m.impl("clamp.Tensor_out", &clamp_to);
  m.impl("clamp_min", &clamp_min);
  m.impl("clamp_min_", &clamp_min_i);
  m.impl("clamp_min.out", &clamp_min_o);
  m.impl("clamp_max", &clamp_max);
  m.impl("clamp_max_", &clamp_max_i);
  m.impl("clamp_max.out", &clamp_max_o);
  m.impl("clamp_min.Tensor", &clamp_min_t);
  m.impl("clamp_min_.Tensor", &clamp_min_ti);
  m.impl("clamp_max.Tensor", &clamp_max_t);
  m.impl("clamp_max_.Tensor", &clamp_max_ti);
  m.impl("where.self", &where);
  m.impl("where.self_out", &where_o);
  m.impl("masked_fill.Scalar", &masked_fill_sf);
  m.impl("masked_fill.Tensor", &masked_fill_tf);
  m.impl("masked_fill_.Scalar", &masked_fill_s);
  m.impl("masked_fill_.Tensor", &masked_fill_t);
  REG_T3(m, addcmul, Tern::Addcmul)
  REG_T3(m, addcdiv, Tern::Addcdiv)
  m.impl("lerp.Scalar", &lerp_s);
  m.impl("lerp_.Scalar", &lerp_si);
  m.impl("lerp.Scalar_out", &lerp_so);
  m.impl("lerp.Tensor", &lerp_t);
  m.impl("lerp_.Tensor", &lerp_ti);
  m.impl("lerp.Tensor_out", &lerp_to);
}
