// Unary elementwise ops (neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, silu, reciprocal,
// sign, clamp, ...), the dtype-converting copy (cast, and the mixed-dtype operands of the other
// elementwise ops) and fill (OpenMP): the strided kernels, the ATen-style glue (type promotion,
// out=) that the aten ops of the mytorch device share (csrc/aten/elementwise.cpp), and the
// mytorch:: ops, whose results are contiguous (as the fake kernels in
// mytorch_ext/ops/elementwise_unary.py say; registered in kernels/cpu/register.cpp). gelu's
// loops are the activation family's (activation.cpp); unary(Un::Gelu) runs them. Promotion and
// checks shared with the CUDA kernels: kernels/elementwise.h.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>

#include <cstring>

#include "checks.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/unary_apply.h"
#include "kernels/cpu/unary_contig.h"
#include "kernels/cpu/vec_math.h"
#include "kernels/elementwise.h"

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


// Contiguous runs in a function of their own: gcc vectorizes the branchy float math (exp,
// tanh) here, where the same loop inside the strided lambda stays scalar. Sigmoid in float32
// takes hand-written vectors (vec_math.h); the scalar formula finishes the tail.
template <Un OP, typename T, typename O, typename C>
__attribute__((noinline)) void unary_contiguous(const T* a, O* o, int64_t n, C lo, C hi) {
  int64_t start = 0;
  if constexpr (std::is_same_v<T, float> && std::is_same_v<O, float>) {
    if constexpr (OP == Un::Sigmoid) start = sigmoid_vec(a, o, n);
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

template <typename T>
static void run_unary(Un op, const Strided& g, const std::optional<at::Scalar>& lo,
                      const std::optional<at::Scalar>& hi) {
  using C = compute_t<T>;
  constexpr bool F = std::is_floating_point_v<C>;
  C l = elementwise::clamp_bound<C>(lo, false), h = elementwise::clamp_bound<C>(hi, true);
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
      MYTORCH_UN_CASE(Tanh) MYTORCH_UN_CASE(Sigmoid) MYTORCH_UN_CASE(Silu) MYTORCH_UN_CASE(Reciprocal)
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
  at::ScalarType ct = elementwise::unary_dtype(op, x_, lo, hi);
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
  if (op == Un::Gelu || op == Un::GeluTanh) {
    gelu_loop(g, ct, op == Un::GeluTanh);  // the activation family's loops
    return it.output();
  }
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

// ---- cast: strided copy with dtype conversion ----
template <typename U, typename T>
inline U cast_value(T v) {
  if constexpr (std::is_same_v<U, T>) {
    return v;
  } else if constexpr (std::is_same_v<U, bool>) {
    return static_cast<compute_t<T>>(v) != compute_t<T>(0);
  } else if constexpr (std::is_same_v<U, c10::BFloat16> || std::is_same_v<U, c10::Half>) {
    return U(static_cast<float>(static_cast<compute_t<T>>(v)));
  } else {
    return static_cast<U>(static_cast<compute_t<T>>(v));
  }
}

// ---- kernel ----
template <typename U, typename T>
void cast_loop(char** d, const int64_t* s, int64_t n) {
  if (s[0] == sizeof(U) && s[1] == sizeof(T)) {
    U* o = reinterpret_cast<U*>(d[0]);
    const T* a = reinterpret_cast<const T*>(d[1]);
    if constexpr (std::is_same_v<U, T>) {
      std::memcpy(o, a, n * sizeof(T));
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = cast_value<U>(a[i]);
    }
  } else if (s[0] == sizeof(U) && s[1] == 0) {
    U* o = reinterpret_cast<U*>(d[0]);
    U v = cast_value<U>(*reinterpret_cast<const T*>(d[1]));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  } else {
    char* o = d[0];
    const char* a = d[1];
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<U*>(o + i * s[0]) = cast_value<U>(*reinterpret_cast<const T*>(a + i * s[1]));
  }
}

// ---- glue ----
void copy_cast_(const at::Tensor& dst, const at::Tensor& src) {
  const char* op = "mytorch::copy";
  TORCH_CHECK(at::is_expandable_to(src.sizes(), dst.sizes()), op, ": expected src of shape ",
              src.sizes(), " to broadcast to dst of shape ", dst.sizes());
  if (dst.numel() == 0) return;
  auto it = at::TensorIteratorConfig()
                .add_output(dst)
                .add_const_input(src)
                .check_all_same_dtype(false)
                .check_all_same_device(false)
                .resize_outputs(false)
                .set_check_mem_overlap(false)
                .build();
  Strided g = strided_from(it);
  dispatch_all(op, "dst", dst.scalar_type(), [&](auto to) {
    using U = typename decltype(to)::type;
    dispatch_all(op, "src", src.scalar_type(), [&](auto from) {
      using T = typename decltype(from)::type;
      for_each(g, [](char** d, const int64_t* s, int64_t n) { cast_loop<U, T>(d, s, n); });
    });
  });
}

static at::Tensor copy_as(const at::Tensor& t, at::ScalarType dtype) {
  at::Tensor out;
  if (t.is_non_overlapping_and_dense())
    out = at::empty_strided(t.sizes(), t.strides(), t.options().dtype(dtype));
  else
    out = at::empty(t.sizes(), t.options().dtype(dtype));
  if (t.dim() == 0 && t.unsafeGetTensorImpl()->is_wrapped_number())
    out.unsafeGetTensorImpl()->set_wrapped_number(true);
  copy_cast_(out, t);
  return out;
}

at::Tensor to_dtype(const at::Tensor& t, at::ScalarType dtype) {
  return t.scalar_type() == dtype ? t : copy_as(t, dtype);
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

at::Tensor contiguous_result(const at::Tensor& r) {
  if (r.is_contiguous()) return r;
  at::Tensor out = at::empty(r.sizes(), r.options());
  copy_cast_(out, r);
  return out;
}

// ---- the mytorch:: ops ----
namespace ew {

#define MYTORCH_UN(NAME, OP) \
  at::Tensor NAME(const at::Tensor& x) { return contiguous_result(unary(Un::OP, x, {})); }
MYTORCH_UNARY_TENSOR_OPS(MYTORCH_UN)
#undef MYTORCH_UN

at::Tensor clamp(const at::Tensor& x, const std::optional<at::Scalar>& lo,
                 const std::optional<at::Scalar>& hi) {
  return contiguous_result(unary(Un::Clamp, x, {}, lo, hi));
}

at::Tensor cast(const at::Tensor& x, at::ScalarType dtype) {
  dispatch_all("mytorch::cast", "dtype", dtype, [](auto) {});
  dispatch_all("mytorch::cast", "x", x.scalar_type(), [](auto) {});
  return copy_as(x, dtype);
}

}  // namespace ew
}  // namespace cpu
}  // namespace mytorch
