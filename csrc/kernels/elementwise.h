// The elementwise families (elementwise_unary, _binary, _ternary): the type promotion, shape
// math and checks both backends share, so that they raise the same errors, the op lists and
// the entry points of each (kernels/cpu/elementwise_*.cpp, kernels/cuda/elementwise_*.cu).
// The op enums (Un, Bin, Tern) and their names are in kernels/cpu/elementwise.h. Host code only.
#pragma once
#include <c10/util/string_view.h>

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "checks.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"

namespace mytorch {
namespace elementwise {

using cpu::Bin;
using cpu::Tern;
using cpu::Un;

inline at::ScalarType default_float() { return at::typeMetaToScalarType(at::get_default_dtype()); }
// ATen's result_type: the dispatcher entry point at::result_type calls, which CUDA sources reach too
inline at::ScalarType result_dtype(const at::Tensor& a, const at::Tensor& b) {
  return at::_ops::result_type_Tensor::call(a, b);
}
inline at::ScalarType result_dtype(const at::Tensor& a, const at::Scalar& b) {
  return at::_ops::result_type_Scalar::call(a, b);
}

// ---- unary ----
// Ops whose integer inputs give the default float dtype.
inline bool float_result(Un op) {
  switch (op) {
    case Un::Exp: case Un::Log: case Un::Sqrt: case Un::Rsqrt: case Un::Tanh:
    case Un::Sigmoid: case Un::Reciprocal:
      return true;
    default:
      return false;
  }
}
inline bool floating_only(Un op) { return op == Un::Silu || op == Un::Gelu || op == Un::GeluTanh; }

// A clamp bound in the compute type C; a missing one is the type's extreme.
template <typename C>
C clamp_bound(const std::optional<at::Scalar>& s, bool upper) {
  if (!s) {
    if constexpr (std::is_floating_point_v<C>)
      return upper ? std::numeric_limits<C>::infinity() : -std::numeric_limits<C>::infinity();
    else
      return upper ? std::numeric_limits<C>::max() : std::numeric_limits<C>::lowest();
  }
  if constexpr (std::is_same_v<C, bool>) return s->toBool();
  else if constexpr (std::is_floating_point_v<C>) return static_cast<C>(s->toDouble());
  else return static_cast<C>(s->toLong());
}

// The compute (and result) dtype of unary(op, x); lo/hi are the clamp bounds.
inline at::ScalarType unary_dtype(Un op, const at::Tensor& x, const std::optional<at::Scalar>& lo,
                                  const std::optional<at::Scalar>& hi) {
  const char* name = cpu::op_name(op);
  at::ScalarType ct = x.scalar_type();
  cpu::dispatch_all(name, "x", ct, [](auto) {});
  if (float_result(op) && !at::isFloatingType(ct)) ct = default_float();
  if (floating_only(op)) check_floating(name, "x", x);
  if (op == Un::Neg)
    TORCH_CHECK(ct != at::kBool, name, ": negation of a bool tensor is not supported; use "
                "logical_not or ~ instead");
  if (op == Un::Clamp) {
    TORCH_CHECK(lo || hi, name, ": expected at least one of min and max, got neither");
    if (lo) ct = at::promoteTypes(ct, result_dtype(x, *lo));
    if (hi) ct = at::promoteTypes(ct, result_dtype(x, *hi));
    TORCH_CHECK(ct != at::kBool, name, ": expected a numeric tensor, got Bool");
  }
  return ct;
}

// ---- binary ----
inline bool bool_out(Bin op) { return op >= Bin::Eq && op <= Bin::LogicalOr; }
inline bool floating_only(Bin op) { return op >= Bin::SigmoidBwd; }

// The compute dtype of binary(op, a, b, alpha): ATen's promotion, then the op's rules.
inline at::ScalarType binary_dtype(Bin op, const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  const char* name = cpu::op_name(op);
  at::ScalarType ct = result_dtype(a, b);
  cpu::dispatch_all(name, "the operands", ct, [](auto) {});
  if (op == Bin::Div && !at::isFloatingType(ct)) ct = default_float();
  if (floating_only(op))
    TORCH_CHECK(at::isFloatingType(ct), name, ": expected floating point operands (",
                dtype_list({at::kFloat, at::kDouble, at::kBFloat16, at::kHalf}), "), got ",
                a.scalar_type(), " and ", b.scalar_type());
  if (op == Bin::Sub)
    TORCH_CHECK(ct != at::kBool, name, ": subtraction of bool tensors is not supported; "
                "use logical_xor or ~ instead");
  if (op == Bin::Pow || op == Bin::DivTrunc || op == Bin::DivFloor)
    TORCH_CHECK(ct != at::kBool, name, ": expected numeric operands, got Bool");
  if ((op == Bin::Add || op == Bin::Sub) && !at::isFloatingType(ct))
    TORCH_CHECK(!alpha.isFloatingPoint(), name, ": expected an integral alpha for integral "
                "operands, got ", alpha);
  if (op == Bin::Add && ct == at::kBool)
    TORCH_CHECK(alpha.isBoolean() || alpha.toLong() == 0 || alpha.toLong() == 1, name,
                ": expected alpha of 0 or 1 for bool operands, got ", alpha);
  return ct;
}

// The broadcast shape of two shapes.
inline c10::DimVector broadcast_shape(const char* op, at::IntArrayRef a, at::IntArrayRef b) {
  const int64_t n = std::max(a.size(), b.size());
  c10::DimVector out(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t da = i < (int64_t)a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < (int64_t)b.size() ? b[b.size() - 1 - i] : 1;
    TORCH_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                " do not broadcast (size ", da, " vs ", db, " at dim ", n - 1 - i, ")");
    out[n - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

// div's rounding_mode: None, 'trunc' or 'floor'.
inline Bin div_op(std::optional<c10::string_view> mode) {
  if (!mode) return Bin::Div;
  if (*mode == "trunc") return Bin::DivTrunc;
  if (*mode == "floor") return Bin::DivFloor;
  TORCH_CHECK(false, "mytorch::div: expected rounding_mode to be None, 'trunc' or 'floor', got '",
              std::string(*mode), "'");
}

// clamp_tensor's bounds: at least one, on x's device, each broadcasting with x and the other.
inline void check_clamp_tensor(const char* op, const at::Tensor& x, const std::optional<at::Tensor>& lo,
                               const std::optional<at::Tensor>& hi) {
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
  if (lo) TORCH_CHECK(broadcasts(x.sizes(), lo->sizes()), op, ": expected min of shape ",
                      shape_str(lo->sizes()), " to broadcast with x of shape ", shape_str(x.sizes()));
  if (hi) TORCH_CHECK(broadcasts(x.sizes(), hi->sizes()), op, ": expected max of shape ",
                      shape_str(hi->sizes()), " to broadcast with x of shape ", shape_str(x.sizes()));
  if (lo && hi) TORCH_CHECK(broadcasts(lo->sizes(), hi->sizes()), op, ": expected min of shape ",
                            shape_str(lo->sizes()), " and max of shape ", shape_str(hi->sizes()),
                            " to broadcast together");
}

// ---- ternary ----
// The compute dtype of ternary(op, a, b, c): Where(cond, x, y) promotes x and y, the others all three.
inline at::ScalarType ternary_dtype(Tern op, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  const char* name = cpu::op_name(op);
  at::ScalarType ct;
  if (op == Tern::Where) {
    TORCH_CHECK(a.scalar_type() == at::kBool, name, ": expected condition to have dtype Bool, got ",
                a.scalar_type());
    ct = result_dtype(b, c);
  } else {
    ct = at::promoteTypes(result_dtype(a, b), result_dtype(a, c));
    if (op == Tern::LerpTensor) {
      TORCH_CHECK(at::isFloatingType(ct), name, ": expected floating point tensors, got ", ct);
      // as ATen: end has self's dtype; so does weight, unless it is 0-dim
      TORCH_CHECK(b.scalar_type() == a.scalar_type(), name, ": expected end of dtype ",
                  a.scalar_type(), " (self's), got ", b.scalar_type());
      TORCH_CHECK(c.dim() == 0 || c.scalar_type() == a.scalar_type(), name,
                  ": expected weight of dtype ", a.scalar_type(), " (self's) or a 0-dim weight, got ",
                  c.scalar_type(), " of shape ", shape_str(c.sizes()));
    }
    if (op == Tern::Addcdiv)
      TORCH_CHECK(at::isFloatingType(ct), name, ": integer division with addcdiv is not "
                  "supported; expected floating point tensors, got ", ct);
  }
  cpu::dispatch_all(name, "the operands", ct, [](auto) {});
  return ct;
}

// The broadcast shape of the tensors.
inline c10::DimVector broadcast3(const char* op, std::initializer_list<at::Tensor> ts) {
  c10::DimVector shape;
  for (const auto& t : ts) {
    auto s = t.sizes();
    c10::DimVector r(std::max(shape.size(), s.size()));
    const int64_t n = r.size();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t a = i < (int64_t)shape.size() ? shape[shape.size() - 1 - i] : 1;
      const int64_t b = i < (int64_t)s.size() ? s[s.size() - 1 - i] : 1;
      TORCH_CHECK(a == b || a == 1 || b == 1, op, ": shapes do not broadcast (size ", a, " vs ", b,
                  " at dim ", n - 1 - i, " of ", shape_str(s), ")");
      r[n - 1 - i] = a == 1 ? b : a;
    }
    shape = r;
  }
  return shape;
}

// masked_fill's result shape: x's, or x and a larger mask broadcast together (as ATen).
inline c10::DimVector masked_fill_shape(const char* op, const at::Tensor& x, const at::Tensor& mask) {
  c10::DimVector shape(x.sizes().begin(), x.sizes().end());
  if (mask.sizes() == x.sizes()) return shape;
  const int64_t nd = std::max(x.dim(), mask.dim());
  shape.resize(nd);
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t a = i < nd - x.dim() ? 1 : x.size(i - (nd - x.dim()));
    const int64_t b = i < nd - mask.dim() ? 1 : mask.size(i - (nd - mask.dim()));
    TORCH_CHECK(a == b || a == 1 || b == 1, op, ": expected mask of shape ", shape_str(mask.sizes()),
                " and x of shape ", shape_str(x.sizes()), " to broadcast together");
    shape[i] = a == 1 ? b : a;
  }
  return shape;
}

}  // namespace elementwise

// ---- entry points ----
// The mytorch:: ops, each backend's in namespace ew (cpu::ew, cuda::ew), defined from these
// lists and registered from them (cpu/register.cpp, cuda/register.cpp); their results are
// contiguous. One-tensor ops as X(name, Un), two-tensor ones as X(name, Bin); the others by name.
#define MYTORCH_UNARY_TENSOR_OPS(X)                                                            \
  X(neg, Neg) X(abs, Abs) X(exp, Exp) X(log, Log) X(sqrt, Sqrt) X(rsqrt, Rsqrt) X(tanh, Tanh) \
  X(sigmoid, Sigmoid) X(relu, Relu) X(silu, Silu) X(reciprocal, Reciprocal)
#define MYTORCH_BINARY_TENSOR_OPS(X)                                                      \
  X(mul, Mul) X(maximum, Maximum) X(minimum, Minimum) X(pow, Pow) X(eq, Eq) X(ne, Ne)     \
  X(lt, Lt) X(le, Le) X(gt, Gt) X(ge, Ge) X(sigmoid_backward, SigmoidBwd)                 \
  X(tanh_backward, TanhBwd) X(silu_backward, SiluBwd)
#define MYTORCH_ELEMENTWISE_OTHER_OPS(X)                                                        \
  X(clamp) X(cast) X(add) X(sub) X(div) X(threshold_backward) X(clamp_tensor) X(where) X(addcmul) \
  X(addcdiv) X(lerp) X(masked_fill)

#define MYTORCH_EW_DECL_UN(NAME, OP) at::Tensor NAME(const at::Tensor& x);
#define MYTORCH_EW_DECL_BIN(NAME, OP) at::Tensor NAME(const at::Tensor& a, const at::Tensor& b);
#define MYTORCH_ELEMENTWISE_DECLS                                                                           \
  namespace ew {                                                                                            \
  MYTORCH_UNARY_TENSOR_OPS(MYTORCH_EW_DECL_UN)                                                              \
  at::Tensor clamp(const at::Tensor& x, const std::optional<at::Scalar>& lo,                               \
                   const std::optional<at::Scalar>& hi);                                                    \
  at::Tensor cast(const at::Tensor& x, at::ScalarType dtype);                                               \
  MYTORCH_BINARY_TENSOR_OPS(MYTORCH_EW_DECL_BIN)                                                            \
  at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);                        \
  at::Tensor sub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);                        \
  at::Tensor div(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode);           \
  at::Tensor threshold_backward(const at::Tensor& g, const at::Tensor& x, const at::Scalar& thr);           \
  at::Tensor clamp_tensor(const at::Tensor& x, const std::optional<at::Tensor>& lo,                         \
                          const std::optional<at::Tensor>& hi);                                             \
  at::Tensor where(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b);                         \
  at::Tensor addcmul(const at::Tensor& x, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& v); \
  at::Tensor addcdiv(const at::Tensor& x, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& v); \
  at::Tensor lerp(const at::Tensor& x, const at::Tensor& end, const at::Tensor& w);                        \
  at::Tensor masked_fill(const at::Tensor& x, const at::Tensor& mask, const at::Scalar& value);            \
  }                                                                                                         \
  /* self *= scale (one element), in place */                                                               \
  void scale_(const at::Tensor& self, const at::Tensor& scale);

namespace cpu {
MYTORCH_ELEMENTWISE_DECLS
}  // namespace cpu
namespace cuda {
MYTORCH_ELEMENTWISE_DECLS
}  // namespace cuda

#undef MYTORCH_ELEMENTWISE_DECLS
#undef MYTORCH_EW_DECL_UN
#undef MYTORCH_EW_DECL_BIN

}  // namespace mytorch
