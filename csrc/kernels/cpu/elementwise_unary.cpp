// Unary elementwise ops (neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, silu, gelu,
// reciprocal, sign, clamp, ...), ternary ops (where, addcmul, addcdiv, lerp) and masked_fill.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "checks.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/unary_apply.h"
#include "kernels/cpu/unary_contig.h"
#include "kernels/cpu/vec_math.h"

namespace mytorch {
namespace cpu {

const char* op_name(Un op) {
  switch (op) {
    case Un::Neg: return "mytorch::neg";
    case Un::Abs: return "mytorch::abs";
    case Un::Exp: return "mytorch::exp";
    case Un::Log: return "mytorch::log";
    case Un::Sqrt: return "mytorch::sqrt";
    case Un::Rsqrt: return "mytorch::rsqrt";
    case Un::Tanh: return "mytorch::tanh";
    case Un::Sigmoid: return "mytorch::sigmoid";
    case Un::Relu: return "mytorch::relu";
    case Un::Silu: return "mytorch::silu";
    case Un::Gelu: return "mytorch::gelu";
    case Un::GeluTanh: return "mytorch::gelu(approximate='tanh')";
    case Un::Reciprocal: return "mytorch::reciprocal";
    case Un::Sign: return "mytorch::sign";
    case Un::Clamp: return "mytorch::clamp";
    case Un::Square: return "mytorch::square";
    case Un::LogicalNot: return "mytorch::logical_not";
  }
  return "mytorch::unary";
}

const char* op_name(Tern op) {
  switch (op) {
    case Tern::Where: return "mytorch::where";
    case Tern::Addcmul: return "mytorch::addcmul";
    case Tern::Addcdiv: return "mytorch::addcdiv";
    case Tern::LerpTensor: return "mytorch::lerp";
  }
  return "mytorch::ternary";
}

static at::ScalarType default_float() { return at::typeMetaToScalarType(at::get_default_dtype()); }

// Contiguous runs in a function of their own: gcc vectorizes the branchy float math (exp,
// erfc, tanh) here, where the same loop inside the strided lambda stays scalar.
// erf-GELU and sigmoid in float32 take hand-written vectors (vec_math.h): gcc leaves erfc's
// loop scalar, and its sigmoid ran at 0.78x ATen; the scalar formula finishes the tail.
template <Un OP, typename T, typename O, typename C>
__attribute__((noinline)) void unary_contiguous(const T* a, O* o, int64_t n, C lo, C hi) {
  int64_t start = 0;
  if constexpr (std::is_same_v<T, float> && std::is_same_v<O, float>) {
    if constexpr (OP == Un::Gelu) start = gelu_erf_vec(a, o, n);
    else if constexpr (OP == Un::Sigmoid) start = sigmoid_vec(a, o, n);
  }
#pragma omp simd
  for (int64_t i = start; i < n; ++i) o[i] = O(un_apply<OP, C>(C(a[i]), lo, hi));
}

template <Un OP, typename T>
void unary_kernel(const Strided& g, compute_t<T> lo, compute_t<T> hi) {
  using C = compute_t<T>;
  using O = std::conditional_t<OP == Un::LogicalNot, bool, T>;
  // an instruction or two an element: large outputs stream (write_out; exp and sigmoid, measured,
  // lose more to the buffer than the streaming stores save)
  constexpr bool kLight = OP == Un::Neg || OP == Un::Abs || OP == Un::Relu || OP == Un::Sign ||
                          OP == Un::Clamp || OP == Un::Square;
  const bool stream = kLight && stream_output(g.data[0], g.numel, sizeof(O), {g.data[1]});
  for_each(g, [lo, hi, stream](char** d, const int64_t* s, int64_t n) {
    O* o = reinterpret_cast<O*>(d[0]);
    const T* a = reinterpret_cast<const T*>(d[1]);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (s[0] == sizeof(O) && s[1] == sizeof(T))
        return write_out(o, n, stream, [&](O* dst, int64_t i0, int64_t len) {
          // float/double results: the widest ISA copy of the loop this CPU runs
          if constexpr (std::is_same_v<O, T>) unary_contig(OP, a + i0, dst, len, lo, hi);
          else unary_contiguous<OP, T, O, C>(a + i0, dst, len, lo, hi);
        });
    }
    if (s[0] == sizeof(O) && s[1] == sizeof(T)) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = O(un_apply<OP, C>(C(a[i]), lo, hi));
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<O*>(d[0] + i * s[0]) =
            O(un_apply<OP, C>(C(*reinterpret_cast<const T*>(d[1] + i * s[1])), lo, hi));
    }
  });
}

static bool float_result(Un op) {
  switch (op) {
    case Un::Exp: case Un::Log: case Un::Sqrt: case Un::Rsqrt: case Un::Tanh:
    case Un::Sigmoid: case Un::Reciprocal:
      return true;
    default:
      return false;
  }
}
static bool floating_only(Un op) { return op == Un::Silu || op == Un::Gelu || op == Un::GeluTanh; }

template <typename C>
static C bound(const std::optional<at::Scalar>& s, bool upper) {
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

static at::ScalarType unary_dtype(Un op, const at::Tensor& x, const std::optional<at::Scalar>& lo,
                                  const std::optional<at::Scalar>& hi) {
  const char* name = op_name(op);
  at::ScalarType ct = x.scalar_type();
  dispatch_all(name, "x", ct, [](auto) {});
  if (float_result(op) && !at::isFloatingType(ct)) ct = default_float();
  if (floating_only(op))
    check_floating(name, "x", x);
  if (op == Un::Neg)
    TORCH_CHECK(ct != at::kBool, name, ": negation of a bool tensor is not supported; use "
                "logical_not or ~ instead");
  if (op == Un::Clamp) {
    TORCH_CHECK(lo || hi, name, ": expected at least one of min and max, got neither");
    if (lo) ct = at::promoteTypes(ct, at::result_type(x, *lo));
    if (hi) ct = at::promoteTypes(ct, at::result_type(x, *hi));
    TORCH_CHECK(ct != at::kBool, name, ": expected a numeric tensor, got Bool");
  }
  return ct;
}

template <typename T>
static void run_unary(Un op, const Strided& g, const std::optional<at::Scalar>& lo,
                      const std::optional<at::Scalar>& hi) {
  using C = compute_t<T>;
  constexpr bool F = std::is_floating_point_v<C>;
  C l = bound<C>(lo, false), h = bound<C>(hi, true);
#define MYTORCH_UN_CASE(NAME) \
  case Un::NAME: unary_kernel<Un::NAME, T>(g, l, h); return;
  switch (op) {
    MYTORCH_UN_CASE(Abs) MYTORCH_UN_CASE(Relu) MYTORCH_UN_CASE(Sign) MYTORCH_UN_CASE(Square)
    MYTORCH_UN_CASE(LogicalNot)
    default: break;
  }
  if constexpr (!std::is_same_v<C, bool>) {
    switch (op) {
      MYTORCH_UN_CASE(Neg) MYTORCH_UN_CASE(Clamp)
      default: break;
    }
  }
  if constexpr (F) {
    switch (op) {
      MYTORCH_UN_CASE(Exp) MYTORCH_UN_CASE(Log) MYTORCH_UN_CASE(Sqrt) MYTORCH_UN_CASE(Rsqrt)
      MYTORCH_UN_CASE(Tanh) MYTORCH_UN_CASE(Sigmoid) MYTORCH_UN_CASE(Silu) MYTORCH_UN_CASE(Gelu)
      MYTORCH_UN_CASE(GeluTanh) MYTORCH_UN_CASE(Reciprocal)
      default: break;
    }
  }
#undef MYTORCH_UN_CASE
  TORCH_INTERNAL_ASSERT(false, op_name(op), ": no kernel for dtype");
}

at::Tensor unary(Un op, const at::Tensor& x_, const at::Tensor& out_,
                 const std::optional<at::Scalar>& lo, const std::optional<at::Scalar>& hi) {
  const char* name = op_name(op);
  if (out_.defined()) common_device(name, {x_, out_});
  at::ScalarType ct = unary_dtype(op, x_, lo, hi);
  at::ScalarType odt = op == Un::LogicalNot ? at::kBool : ct;
  at::Tensor out = out_;
  if (out.defined()) {
    TORCH_CHECK(at::canCast(odt, out.scalar_type()), name, ": result type ", odt,
                " can't be cast to the desired output type ", out.scalar_type());
    if (out.scalar_type() != odt) {
      at::Tensor r = unary(op, x_, at::Tensor(), lo, hi);
      at::native::resize_output(out, r.sizes());
      copy_cast_(out, r);
      return out;
    }
    at::native::resize_output(out, x_.sizes());
  }
  at::Tensor x = to_dtype(x_, ct);
  if (!out.defined() && odt != ct) {
    out = x.is_non_overlapping_and_dense()
              ? at::empty_strided(x.sizes(), x.strides(), x.options().dtype(odt))
              : at::empty(x.sizes(), x.options().dtype(odt));
  }
  at::TensorIteratorConfig cfg;
  cfg.add_output(out).add_const_input(x).check_all_same_dtype(!out.defined()).resize_outputs(false);
  auto it = cfg.build();
  Strided g = strided_from(it);
  dispatch_all(name, "x", ct, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_unary<T>(op, g, lo, hi);
  });
  return it.output();
}

at::Tensor& unary_(Un op, at::Tensor& x, const std::optional<at::Scalar>& lo,
                   const std::optional<at::Scalar>& hi) {
  unary(op, x, x, lo, hi);
  return x;
}

// ---- ternary: where(c, a, b), addcmul, addcdiv, lerp with a tensor weight ----
template <Tern OP, typename C>
inline C tern_apply(C a, C b, C c, C v) {
  if constexpr (OP == Tern::Addcmul) {
    if constexpr (std::is_same_v<C, bool>) return a || (v && b && c);
    else return C(a + v * b * c);
  } else if constexpr (OP == Tern::Addcdiv) {
    return C(a + v * (b / c));
  } else {
    static_assert(OP == Tern::LerpTensor);
    C d = b - a;
    return std::abs(c) < C(0.5) ? C(a + c * d) : C(b - d * (C(1) - c));
  }
}

template <Tern OP, typename T>
void ternary_kernel(const Strided& g, compute_t<T> v) {
  using C = compute_t<T>;
  for_each(g, [v](char** d, const int64_t* s, int64_t n) {
    constexpr int64_t st = sizeof(T);
    if constexpr (OP == Tern::Where) {
      T* o = reinterpret_cast<T*>(d[0]);
      const bool* c = reinterpret_cast<const bool*>(d[1]);
      const T* a = reinterpret_cast<const T*>(d[2]);
      const T* b = reinterpret_cast<const T*>(d[3]);
      if (s[0] == st && s[1] == 1 && s[2] == st && s[3] == st) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? a[i] : b[i];
      } else {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<T*>(d[0] + i * s[0]) =
              *reinterpret_cast<const bool*>(d[1] + i * s[1])
                  ? *reinterpret_cast<const T*>(d[2] + i * s[2])
                  : *reinterpret_cast<const T*>(d[3] + i * s[3]);
      }
    } else {
      T* o = reinterpret_cast<T*>(d[0]);
      const T* a = reinterpret_cast<const T*>(d[1]);
      const T* b = reinterpret_cast<const T*>(d[2]);
      const T* c = reinterpret_cast<const T*>(d[3]);
      if (s[0] == st && s[1] == st && s[2] == st && s[3] == st) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = T(tern_apply<OP, C>(C(a[i]), C(b[i]), C(c[i]), v));
      } else {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<T*>(d[0] + i * s[0]) = T(tern_apply<OP, C>(
              C(*reinterpret_cast<const T*>(d[1] + i * s[1])),
              C(*reinterpret_cast<const T*>(d[2] + i * s[2])),
              C(*reinterpret_cast<const T*>(d[3] + i * s[3])), v));
      }
    }
  });
}

static c10::DimVector broadcast3(const char* op, std::initializer_list<at::Tensor> ts) {
  c10::DimVector shape;
  for (const auto& t : ts) {
    auto s = t.sizes();
    c10::DimVector r(std::max(shape.size(), s.size()));
    int64_t n = r.size();
    for (int64_t i = 0; i < n; ++i) {
      int64_t a = i < (int64_t)shape.size() ? shape[shape.size() - 1 - i] : 1;
      int64_t b = i < (int64_t)s.size() ? s[s.size() - 1 - i] : 1;
      TORCH_CHECK(a == b || a == 1 || b == 1, op, ": shapes do not broadcast (size ", a, " vs ", b,
                  " at dim ", n - 1 - i, " of ", s, ")");
      r[n - 1 - i] = a == 1 ? b : a;
    }
    shape = r;
  }
  return shape;
}

at::Tensor ternary(Tern op, const at::Tensor& a_, const at::Tensor& b_, const at::Tensor& c_,
                   const at::Scalar& value, const at::Tensor& out_) {
  const char* name = op_name(op);
  const at::Device dev0 = common_device(name, {a_, b_, c_, out_});
  if (!dev0.is_cpu()) {
    // 0-dim CPU tensors are scalars here, as many as given (TensorIterator takes only one):
    // they join the other tensors' device
    auto mv = [&](const at::Tensor& t) { return t.defined() && t.device().is_cpu() ? t.to(dev0) : t; };
    at::Tensor a = mv(a_), b = mv(b_), c = mv(c_);
    if (!a.is_same(a_) || !b.is_same(b_) || !c.is_same(c_)) return ternary(op, a, b, c, value, out_);
  }
  at::ScalarType ct;
  if (op == Tern::Where) {
    TORCH_CHECK(a_.scalar_type() == at::kBool, name, ": expected condition to have dtype Bool, got ",
                a_.scalar_type());
    ct = at::result_type(b_, c_);
  } else {
    ct = at::promoteTypes(at::result_type(a_, b_), at::result_type(a_, c_));
    if (op == Tern::LerpTensor) {
      TORCH_CHECK(at::isFloatingType(ct), name, ": expected floating point tensors, got ", ct);
      // as ATen: end has self's dtype; so does weight, unless it is 0-dim
      TORCH_CHECK(b_.scalar_type() == a_.scalar_type(), name, ": expected end of dtype ",
                  a_.scalar_type(), " (self's), got ", b_.scalar_type());
      TORCH_CHECK(c_.dim() == 0 || c_.scalar_type() == a_.scalar_type(), name,
                  ": expected weight of dtype ", a_.scalar_type(), " (self's) or a 0-dim weight, got ",
                  c_.scalar_type(), " of shape ", c_.sizes());
    }
    if (op == Tern::Addcdiv)
      TORCH_CHECK(at::isFloatingType(ct), name, ": integer division with addcdiv is not "
                  "supported; expected floating point tensors, got ", ct);
  }
  dispatch_all(name, "the operands", ct, [](auto) {});
  auto shape = broadcast3(name, {a_, b_, c_});
  at::Tensor out = out_;
  if (out.defined()) {
    TORCH_CHECK(at::canCast(ct, out.scalar_type()), name, ": result type ", ct,
                " can't be cast to the desired output type ", out.scalar_type());
    if (out.scalar_type() != ct) {
      at::Tensor r = ternary(op, a_, b_, c_, value, at::Tensor());
      at::native::resize_output(out, r.sizes());
      copy_cast_(out, r);
      return out;
    }
    at::native::resize_output(out, shape);
  }
  at::Tensor a = op == Tern::Where ? a_ : to_dtype(a_, ct);
  at::Tensor b = to_dtype(b_, ct), c = to_dtype(c_, ct);
  if (!out.defined()) {
    at::Device dev = common_device(name, {a_, b_, c_});
    out = at::empty(shape, b.options().dtype(ct).device(dev));
  }
  at::TensorIteratorConfig cfg;
  cfg.add_output(out).add_const_input(a).add_const_input(b).add_const_input(c)
      .allow_cpu_scalars(true).check_all_same_dtype(false).resize_outputs(false);
  auto it = cfg.build();
  Strided g = strided_from(it);
  dispatch_all(name, "the operands", ct, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    C v;
    if constexpr (std::is_same_v<C, bool>) v = value.toBool();
    else if constexpr (std::is_floating_point_v<C>) v = static_cast<C>(value.toDouble());
    else v = static_cast<C>(value.toLong());
    switch (op) {
      case Tern::Where: ternary_kernel<Tern::Where, T>(g, v); break;
      case Tern::Addcmul: ternary_kernel<Tern::Addcmul, T>(g, v); break;
      case Tern::Addcdiv:
        if constexpr (std::is_floating_point_v<C>) ternary_kernel<Tern::Addcdiv, T>(g, v);
        break;
      case Tern::LerpTensor:
        if constexpr (std::is_floating_point_v<C>) ternary_kernel<Tern::LerpTensor, T>(g, v);
        break;
    }
  });
  return out;
}

at::Tensor& ternary_(Tern op, at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                     const at::Scalar& value) {
  const char* name = op_name(op);
  auto shape = broadcast3(name, {a, b, c});
  TORCH_CHECK(at::IntArrayRef(shape) == a.sizes(), name, "_: output with shape ", a.sizes(),
              " doesn't match the broadcast shape ", at::IntArrayRef(shape));
  ternary(op, a, b, c, value, a);
  return a;
}

// ---- masked_fill ----
at::Tensor& masked_fill_(at::Tensor& x, const at::Tensor& mask, const at::Scalar& value) {
  const char* name = "mytorch::masked_fill";
  common_device(name, {x, mask});
  TORCH_CHECK(mask.scalar_type() == at::kBool, name, ": expected mask to have dtype Bool, got ",
              mask.scalar_type());
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), x.sizes()), name, ": expected mask of shape ",
              mask.sizes(), " to broadcast to x of shape ", x.sizes());
  dispatch_all(name, "x", x.scalar_type(), [&](auto tag) {  // even when x is empty (as ATen)
    using T = typename decltype(tag)::type;
    bool fits = true;
    try {
      (void)value.to<T>();
    } catch (const std::exception&) {  // the overflow report is a std::runtime_error
      fits = false;
    }
    TORCH_CHECK(fits, name, ": expected a value that x's dtype ", x.scalar_type(),
                " can hold, got ", value, " (it overflows)");
  });
  if (x.numel() == 0) return x;
  auto it = at::TensorIteratorConfig()
                .add_output(x)
                .add_const_input(mask)
                .check_all_same_dtype(false)
                .resize_outputs(false)
                .allow_cpu_scalars(true)
                .build();
  Strided g = strided_from(it);
  dispatch_all(name, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    T v;
    if constexpr (std::is_same_v<C, bool>) v = value.toBool();
    else if constexpr (std::is_floating_point_v<C>) v = T(static_cast<C>(value.toDouble()));
    else v = static_cast<T>(value.toLong());
    for_each(g, [v](char** d, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T) && s[1] == 1) {
        T* o = reinterpret_cast<T*>(d[0]);
        const bool* m = reinterpret_cast<const bool*>(d[1]);
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = m[i] ? v : o[i];
      } else {
        for (int64_t i = 0; i < n; ++i)
          if (*reinterpret_cast<const bool*>(d[1] + i * s[1])) *reinterpret_cast<T*>(d[0] + i * s[0]) = v;
      }
    });
  });
  return x;
}

at::Tensor& fill_(at::Tensor& x, const at::Scalar& value) {
  const char* name = "mytorch::fill";
  if (x.numel() == 0) return x;
  auto it = at::TensorIteratorConfig().add_output(x).resize_outputs(false).build();
  Strided g = strided_from(it);
  dispatch_all(name, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    T v;
    if constexpr (std::is_same_v<C, bool>) v = value.toBool();
    else if constexpr (std::is_floating_point_v<C>) v = T(static_cast<C>(value.toDouble()));
    else v = static_cast<T>(value.toLong());
    for_each(g, [v](char** d, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T)) {
        T* o = reinterpret_cast<T*>(d[0]);
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(d[0] + i * s[0]) = v;
      }
    });
  });
  return x;
}

}  // namespace cpu
}  // namespace mytorch
