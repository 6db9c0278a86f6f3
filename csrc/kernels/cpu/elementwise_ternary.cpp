// Ternary elementwise ops (where, addcmul, addcdiv, lerp with a tensor weight) and masked_fill
// (OpenMP): the strided kernels, the ATen-style glue (broadcasting, type promotion, out=) that the
// aten ops of the mytorch device share (csrc/aten/elementwise.cpp), and the mytorch:: ops, whose
// results are contiguous (as the fake kernels in mytorch_ext/ops/elementwise_ternary.py say;
// registered in kernels/cpu/register.cpp). Promotion and shapes shared with the CUDA kernels:
// kernels/elementwise.h.
#include <ATen/ATen.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>

#include "checks.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/elementwise.h"

namespace mytorch {
namespace cpu {

const char* op_name(Tern op) {
  switch (op) {
    case Tern::Where: return "mytorch::where";
    case Tern::Addcmul: return "mytorch::addcmul";
    case Tern::Addcdiv: return "mytorch::addcdiv";
    case Tern::LerpTensor: return "mytorch::lerp";
  }
  return "mytorch::ternary";
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
  const at::ScalarType ct = elementwise::ternary_dtype(op, a_, b_, c_);
  auto shape = elementwise::broadcast3(name, {a_, b_, c_});
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
  auto shape = elementwise::broadcast3(name, {a, b, c});
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

at::Tensor masked_fill_copy(const at::Tensor& x, const at::Tensor& mask) {
  if (mask.sizes() == x.sizes()) {
    at::Tensor out = at::empty_like(x);
    copy_cast_(out, x);
    return out;
  }
  const c10::DimVector shape = elementwise::masked_fill_shape("mytorch::masked_fill", x, mask);
  at::Tensor out = at::empty(shape, x.options());
  copy_cast_(out, x.expand(shape));
  return out;
}

// ---- the mytorch:: ops ----
namespace ew {

at::Tensor where(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  return contiguous_result(ternary(Tern::Where, c, a, b, 0, {}));
}
at::Tensor addcmul(const at::Tensor& x, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& v) {
  return contiguous_result(ternary(Tern::Addcmul, x, t1, t2, v, {}));
}
at::Tensor addcdiv(const at::Tensor& x, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& v) {
  return contiguous_result(ternary(Tern::Addcdiv, x, t1, t2, v, {}));
}
at::Tensor lerp(const at::Tensor& x, const at::Tensor& end, const at::Tensor& w) {
  return contiguous_result(ternary(Tern::LerpTensor, x, end, w, 0, {}));
}
at::Tensor masked_fill(const at::Tensor& x, const at::Tensor& mask, const at::Scalar& v) {
  at::Tensor out = masked_fill_copy(x, mask);
  return masked_fill_(out, mask, v);
}

}  // namespace ew
}  // namespace cpu
}  // namespace mytorch
