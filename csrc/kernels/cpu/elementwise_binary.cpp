// Binary elementwise ops (add, sub, mul, div, maximum, minimum, pow, comparisons, clamp_tensor,
// the activation backwards autograd uses, and scale_) with broadcasting, any strides and ATen
// type promotion. TensorIterator computes only the geometry (broadcast shape, coalesced byte
// strides, output allocation); the loops below are ours. The loops (binary_loop) run the widest
// copy of this file the CPU has (kernels/cpu/isa/elementwise_binary_*.cpp); the glue, compiled
// only in the baseline build, plans the iteration and calls them. It serves the aten ops of the
// mytorch device (csrc/aten/elementwise.cpp) and the mytorch:: ops, whose results are contiguous
// (as the fake kernels in mytorch_ext/ops/elementwise_binary.py say; registered in
// kernels/cpu/register.cpp). Promotion and checks shared with the CUDA kernels:
// kernels/elementwise.h. gelu_backward's loops are the activation family's (activation.cpp);
// binary(Bin::GeluBwd) runs them.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>

#include <atomic>

#include "checks.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/isa.h"
#ifndef MYTORCH_ISA_VARIANT
#include "kernels/elementwise.h"  // the glue's promotion, shapes and entry points
#endif

namespace mytorch {
namespace cpu {
// out = a (op) b over g (operands: out, a, b) in dtype ct; alpha as for binary().
void binary_loop(Bin op, const Strided& g, at::ScalarType ct, const at::Scalar& alpha);
}  // namespace cpu
}  // namespace mytorch
MYTORCH_ISA_DECLARE(binary_loop)

namespace mytorch {
namespace cpu {

#ifndef MYTORCH_ISA_VARIANT
const char* op_name(Bin op) {
  switch (op) {
    case Bin::Add: return "mytorch::add";
    case Bin::Sub: return "mytorch::sub";
    case Bin::Mul: return "mytorch::mul";
    case Bin::Div: return "mytorch::div";
    case Bin::DivTrunc: return "mytorch::div(rounding_mode='trunc')";
    case Bin::DivFloor: return "mytorch::div(rounding_mode='floor')";
    case Bin::Maximum: return "mytorch::maximum";
    case Bin::Minimum: return "mytorch::minimum";
    case Bin::Pow: return "mytorch::pow";
    case Bin::Eq: return "mytorch::eq";
    case Bin::Ne: return "mytorch::ne";
    case Bin::Lt: return "mytorch::lt";
    case Bin::Le: return "mytorch::le";
    case Bin::Gt: return "mytorch::gt";
    case Bin::Ge: return "mytorch::ge";
    case Bin::LogicalAnd: return "mytorch::logical_and";
    case Bin::LogicalOr: return "mytorch::logical_or";
    case Bin::SigmoidBwd: return "mytorch::sigmoid_backward";
    case Bin::TanhBwd: return "mytorch::tanh_backward";
    case Bin::SiluBwd: return "mytorch::silu_backward";
    case Bin::GeluBwd: return "mytorch::gelu_backward";
    case Bin::GeluTanhBwd: return "mytorch::gelu_backward(approximate='tanh')";
    case Bin::ThresholdBwd: return "mytorch::threshold_backward";
    case Bin::Lerp: return "mytorch::lerp";
  }
  return "mytorch::binary";
}

at::Tensor wrap_scalar(const at::Scalar& s) { return at::native::wrapped_scalar_tensor(s); }

static bool is_cpu_scalar(const at::Tensor& t) { return t.dim() == 0 && t.device().is_cpu(); }

at::Device common_device(const char* op, std::initializer_list<at::Tensor> ts) {
  std::optional<at::Device> dev;
  for (const auto& t : ts) {
    if (!t.defined() || is_cpu_scalar(t)) continue;
    if (!dev) dev = t.device();
    TORCH_CHECK(*dev == t.device(), op, ": expected all tensors on the same device, got ", *dev,
                " and ", t.device());
  }
  if (dev) return *dev;
  for (const auto& t : ts)
    if (t.defined()) return t.device();
  return at::kCPU;
}
#endif  // MYTORCH_ISA_VARIANT

// ---- the math, in the compute type C ----
template <typename C>
inline C int_pow(C base, C exp) {
  if constexpr (std::is_signed_v<C>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? C(-1) : C(1);
      return 0;
    }
  }
  using U = std::make_unsigned_t<C>;
  U r = 1, b = static_cast<U>(base);
  auto e = exp;
  while (e) {
    if (e & 1) r *= b;
    e >>= 1;
    b *= b;
  }
  return static_cast<C>(r);
}

template <typename C>
inline C floor_div(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (b == 0) return a / b;
    C mod = std::fmod(a, b);
    C div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    C fl;
    if (div != 0) {
      fl = std::floor(div);
      if (div - fl > C(0.5)) fl += 1;
    } else {
      fl = std::copysign(C(0), a / b);
    }
    return fl;
  } else {
    if (b == 0) return 0;  // caught in the glue before the loop runs
    C q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    return q;
  }
}

template <Bin OP, typename C>
inline auto bin_apply(C a, C b, C p) {
  constexpr bool F = std::is_floating_point_v<C>;
  if constexpr (OP == Bin::Add) {
    if constexpr (std::is_same_v<C, bool>) return bool(a || (p && b));
    else return C(a + p * b);
  } else if constexpr (OP == Bin::Sub) {
    return C(a - p * b);
  } else if constexpr (OP == Bin::Mul) {
    if constexpr (std::is_same_v<C, bool>) return bool(a && b);
    else return C(a * b);
  } else if constexpr (OP == Bin::Div) {
    return C(a / b);
  } else if constexpr (OP == Bin::DivTrunc) {
    if constexpr (F) return std::trunc(a / b);
    else return C(b == 0 ? 0 : a / b);
  } else if constexpr (OP == Bin::DivFloor) {
    return floor_div<C>(a, b);
  } else if constexpr (OP == Bin::Maximum) {
    if constexpr (F) return (a != a) ? a : ((b != b) ? b : (a > b ? a : b));
    else return a > b ? a : b;
  } else if constexpr (OP == Bin::Minimum) {
    if constexpr (F) return (a != a) ? a : ((b != b) ? b : (a < b ? a : b));
    else return a < b ? a : b;
  } else if constexpr (OP == Bin::Pow) {
    if constexpr (F) return std::pow(a, b);
    else if constexpr (std::is_same_v<C, bool>) return C(a || !b);
    else return int_pow<C>(a, b);
  } else if constexpr (OP == Bin::Eq) {
    return a == b;
  } else if constexpr (OP == Bin::Ne) {
    return a != b;
  } else if constexpr (OP == Bin::Lt) {
    return a < b;
  } else if constexpr (OP == Bin::Le) {
    return a <= b;
  } else if constexpr (OP == Bin::Gt) {
    return a > b;
  } else if constexpr (OP == Bin::Ge) {
    return a >= b;
  } else if constexpr (OP == Bin::LogicalAnd) {
    return bool(a) && bool(b);
  } else if constexpr (OP == Bin::LogicalOr) {
    return bool(a) || bool(b);
  } else if constexpr (!F) {
    return C(0);  // floating-only ops never dispatch here
  } else if constexpr (OP == Bin::SigmoidBwd) {  // a = grad, b = sigmoid output
    return a * (C(1) - b) * b;
  } else if constexpr (OP == Bin::TanhBwd) {  // b = tanh output
    return a * (C(1) - b * b);
  } else if constexpr (OP == Bin::SiluBwd) {  // b = input
    C s = C(1) / (C(1) + m_exp(-b));
    return a * s * (C(1) + b * (C(1) - s));
  } else if constexpr (OP == Bin::ThresholdBwd) {  // b = input, p = threshold
    return b <= p ? C(0) : a;
  } else {
    static_assert(OP == Bin::Lerp);  // a = self, b = end, p = weight
    C d = b - a;
    return std::abs(p) < C(0.5) ? a + p * d : b - d * (C(1) - p);
  }
}

// ---- kernel: one run along the innermost dim, with contiguous / scalar fast paths ----
template <typename O, typename T, typename F>
inline void loop2(char** d, const int64_t* s, int64_t n, const F& f) {
  constexpr int64_t so = sizeof(O), st = sizeof(T);
  O* o = reinterpret_cast<O*>(d[0]);
  const T* a = reinterpret_cast<const T*>(d[1]);
  const T* b = reinterpret_cast<const T*>(d[2]);
  if (s[0] == so && s[1] == st && s[2] == st) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (s[0] == so && s[1] == st && s[2] == 0) {
    const T bv = *b;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
  } else if (s[0] == so && s[1] == 0 && s[2] == st) {
    const T av = *a;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<O*>(d[0] + i * s[0]) = f(*reinterpret_cast<const T*>(d[1] + i * s[1]),
                                                 *reinterpret_cast<const T*>(d[2] + i * s[2]));
  }
}

// Contiguous float runs in a function of their own: gcc vectorizes the branchy math of the
// activation backwards (exp, erfc) here, where the same loop inside the strided lambda stays
// scalar (measured: gelu_backward 20x slower than ATen that way; see unary_contiguous).
template <Bin OP, typename T, typename O, typename C>
__attribute__((noinline)) void binary_contiguous(const T* a, const T* b, O* o, int64_t n, C p) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = O(bin_apply<OP, C>(C(a[i]), C(b[i]), p));
}

template <Bin OP, typename T>
void binary_kernel(const Strided& g, compute_t<T> p) {
  using C = compute_t<T>;
  using O = std::conditional_t<(OP >= Bin::Eq && OP <= Bin::LogicalOr), bool, T>;
  // one or two instructions an element: bound by memory, so large outputs stream (write_out);
  // heavier math (exp-based backwards: measured with exp and sigmoid) loses more to the buffer
  constexpr bool kLight = OP == Bin::Add || OP == Bin::Sub || OP == Bin::Mul || OP == Bin::Div ||
                          OP == Bin::Maximum || OP == Bin::Minimum;
  const bool stream = kLight && stream_output(g.data[0], g.numel, sizeof(O), {g.data[1], g.data[2]});
  for_each(g, [p, stream](char** d, const int64_t* s, int64_t n) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (s[0] == sizeof(O) && s[1] == sizeof(T) && s[2] == sizeof(T)) {
        const T* a = reinterpret_cast<const T*>(d[1]);
        const T* b = reinterpret_cast<const T*>(d[2]);
        return write_out(reinterpret_cast<O*>(d[0]), n, stream, [&](O* dst, int64_t i0, int64_t len) {
          binary_contiguous<OP, T, O, C>(a + i0, b + i0, dst, len, p);
        });
      }
    }
    loop2<O, T>(d, s, n, [p](T x, T y) { return O(bin_apply<OP, C>(C(x), C(y), p)); });
  });
}

template <typename T>
static compute_t<T> scalar_as(const at::Scalar& s) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<C, bool>) return s.toBool();
  else if constexpr (std::is_floating_point_v<C>) return static_cast<C>(s.toDouble());
  else return static_cast<C>(s.toLong());
}

template <typename T>
static void run_binary(Bin op, const Strided& g, compute_t<T> p) {
  constexpr bool F = std::is_floating_point_v<compute_t<T>>;
#define MYTORCH_BIN_CASE(NAME) \
  case Bin::NAME: binary_kernel<Bin::NAME, T>(g, p); return;
  switch (op) {
    MYTORCH_BIN_CASE(Add) MYTORCH_BIN_CASE(Sub) MYTORCH_BIN_CASE(Mul)
    MYTORCH_BIN_CASE(DivTrunc) MYTORCH_BIN_CASE(DivFloor) MYTORCH_BIN_CASE(Maximum)
    MYTORCH_BIN_CASE(Minimum) MYTORCH_BIN_CASE(Pow) MYTORCH_BIN_CASE(Eq) MYTORCH_BIN_CASE(Ne)
    MYTORCH_BIN_CASE(Lt) MYTORCH_BIN_CASE(Le) MYTORCH_BIN_CASE(Gt) MYTORCH_BIN_CASE(Ge)
    MYTORCH_BIN_CASE(LogicalAnd) MYTORCH_BIN_CASE(LogicalOr)
    default: break;
  }
  if constexpr (F) {
    switch (op) {
      MYTORCH_BIN_CASE(Div) MYTORCH_BIN_CASE(SigmoidBwd) MYTORCH_BIN_CASE(TanhBwd)
      MYTORCH_BIN_CASE(SiluBwd) MYTORCH_BIN_CASE(ThresholdBwd) MYTORCH_BIN_CASE(Lerp)
      default: break;
    }
  }
#undef MYTORCH_BIN_CASE
  TORCH_INTERNAL_ASSERT(false, op_name(op), ": no kernel for dtype");
}

// Floating dtypes run the widest copy of these loops the CPU has; integer and bool operands
// (rarely hot in models) keep the baseline loops, which keeps each copy's compile time down.
void binary_loop(Bin op, const Strided& g, at::ScalarType ct, const at::Scalar& alpha) {
  if (at::isFloatingType(ct)) {
    MYTORCH_ISA_DISPATCH(binary_loop, op, g, ct, alpha)
  }
  dispatch_all(op_name(op), "the operands", ct, [&](auto tag) {
    using T = typename decltype(tag)::type;
#ifdef MYTORCH_ISA_VARIANT
    if constexpr (std::is_floating_point_v<compute_t<T>>)
#endif
      run_binary<T>(op, g, scalar_as<T>(alpha));
  });
}

// ---- glue (baseline build only) ----
#ifndef MYTORCH_ISA_VARIANT
template <typename T>
bool any_zero(const at::Tensor& t) {
  std::atomic<bool> z{false};
  auto it = at::TensorIteratorConfig().add_const_input(t).build();
  Strided g = strided_from(it);
  for_each(g, [&z](char** d, const int64_t* s, int64_t n) {
    bool found = false;
    for (int64_t i = 0; i < n; ++i) found |= *reinterpret_cast<const T*>(d[0] + i * s[0]) == T(0);
    if (found) z.store(true, std::memory_order_relaxed);
  });
  return z.load();
}

using elementwise::binary_dtype;
using elementwise::bool_out;
using elementwise::broadcast_shape;

at::Tensor binary(Bin op, const at::Tensor& a_, const at::Tensor& b_, const at::Scalar& alpha,
                  const at::Tensor& out_) {
  const char* name = op_name(op);
  TORCH_CHECK(a_.defined() && b_.defined(), name, ": expected defined tensors");
  at::Device dev = common_device(name, {a_, b_, out_});
  at::ScalarType ct = binary_dtype(op, a_, b_, alpha);
  at::ScalarType odt = bool_out(op) ? at::kBool : ct;
  auto shape = broadcast_shape(name, a_.sizes(), b_.sizes());
  at::Tensor out = out_;
  if (out.defined()) {
    TORCH_CHECK(at::canCast(odt, out.scalar_type()), name, ": result type ", odt,
                " can't be cast to the desired output type ", out.scalar_type());
    if (out.scalar_type() != odt) {
      at::Tensor r = binary(op, a_, b_, alpha, at::Tensor());
      at::native::resize_output(out, r.sizes());
      copy_cast_(out, r);
      return out;
    }
    at::native::resize_output(out, shape);
  }
  at::Tensor a = to_dtype(a_, ct), b = to_dtype(b_, ct);
  if ((op == Bin::DivTrunc || op == Bin::DivFloor) && !at::isFloatingType(ct)) {
    bool z = dispatch_all(name, "b", ct, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return any_zero<T>(b);
    });
    TORCH_CHECK(!z, "ZeroDivisionError: ", name, ": integer division by zero");
  }
  if (!out.defined() && bool_out(op)) out = at::empty(shape, a.options().dtype(at::kBool).device(dev));
  at::TensorIteratorConfig cfg;
  cfg.add_output(out).add_const_input(a).add_const_input(b).allow_cpu_scalars(true)
      .check_all_same_dtype(false).resize_outputs(false);
  if (!out.defined()) cfg.check_all_same_dtype(true);
  auto it = cfg.build();
  if (op == Bin::GeluBwd || op == Bin::GeluTanhBwd)
    gelu_backward_loop(strided_from(it), ct, op == Bin::GeluTanhBwd);  // the activation family's loops
  else
    binary_loop(op, strided_from(it), ct, alpha);
  return it.output();
}

at::Tensor& binary_(Bin op, at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  const char* name = op_name(op);
  auto shape = broadcast_shape(name, a.sizes(), b.sizes());
  TORCH_CHECK(at::IntArrayRef(shape) == a.sizes(), name, "_: output with shape ", a.sizes(),
              " doesn't match the broadcast shape ", at::IntArrayRef(shape));
  binary(op, a, b, alpha, a);
  return a;
}

// ---- the mytorch:: ops ----
namespace ew {

#define MYTORCH_BIN2(NAME, OP) \
  at::Tensor NAME(const at::Tensor& a, const at::Tensor& b) { return contiguous_result(binary(Bin::OP, a, b, 1, {})); }
MYTORCH_BINARY_TENSOR_OPS(MYTORCH_BIN2)
#undef MYTORCH_BIN2

at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return contiguous_result(binary(Bin::Add, a, b, alpha, {}));
}
at::Tensor sub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return contiguous_result(binary(Bin::Sub, a, b, alpha, {}));
}
at::Tensor div(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  return contiguous_result(binary(elementwise::div_op(mode), a, b, 1, {}));
}
at::Tensor threshold_backward(const at::Tensor& g, const at::Tensor& x, const at::Scalar& thr) {
  return contiguous_result(binary(Bin::ThresholdBwd, g, x, thr, {}));
}

at::Tensor clamp_tensor(const at::Tensor& x, const std::optional<at::Tensor>& lo,
                        const std::optional<at::Tensor>& hi) {
  elementwise::check_clamp_tensor("mytorch::clamp_tensor", x, lo, hi);
  at::Tensor r = x;
  if (lo) r = binary(Bin::Maximum, r, *lo, 1, {});
  if (hi) r = binary(Bin::Minimum, r, *hi, 1, {});
  return contiguous_result(r);
}

}  // namespace ew

namespace {

// self *= scale (one element): on the host, so a scale of exactly 1 costs nothing.
template <typename T>
void scale_kernel(T* p, int64_t n, double g) {
  using A = at::opmath_type<T>;
  const A f = (A)g;
#pragma omp parallel for if (n > kElemGrain) schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = (T)((A)p[i] * f);
}

}  // namespace

void scale_(const at::Tensor& self, const at::Tensor& scale) {
  const char* op = "mytorch::scale_";
  check_floating(op, "self", self);
  check_floating(op, "scale", scale);
  TORCH_CHECK(scale.numel() == 1, op, ": expected a one-element scale, got shape ", scale.sizes());
  check_same_device(op, self, "self", scale, "scale");
  const double g = scale.item<double>();  // host memory: no sync to avoid
  if (g == 1.0 || self.numel() == 0) return;
  at::Tensor c = self.is_contiguous() ? self : self.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, self.scalar_type(), "mytorch_scale_",
                                  [&] { scale_kernel<scalar_t>(c.mutable_data_ptr<scalar_t>(), c.numel(), g); });
  if (!c.is_same(self)) self.copy_(c);
}
#endif  // MYTORCH_ISA_VARIANT

}  // namespace cpu
}  // namespace mytorch
