// Ternary elementwise ops on CUDA (where, addcmul, addcdiv, lerp with a tensor weight) and
// masked_fill, with the broadcasting, promotion, checks and errors of the CPU kernels
// (kernels/cpu/elementwise_ternary.cpp). 0-dim CPU tensors are scalar operands. Results are fresh
// and contiguous.
#include "kernels/cuda/ops.h"
#include "kernels/cuda/strided.cuh"

namespace mytorch {
namespace cuda {
namespace ew {
namespace {

using cpu::Tern;

template <Tern OP, typename C>
__device__ __forceinline__ C tern_apply(C a, C b, C c, C v) {
  if constexpr (OP == Tern::Addcmul) {
    if constexpr (std::is_same_v<C, bool>) return a || (v && b && c);
    else return C(a + v * b * c);
  } else if constexpr (OP == Tern::Addcdiv) {
    return C(a + v * div_rn(b, c));
  } else {
    static_assert(OP == Tern::LerpTensor);
    const C d = b - a;
    return (c < 0 ? -c : c) < C(0.5) ? C(a + c * d) : C(b - d * (C(1) - c));
  }
}

template <Tern OP, typename T>
struct TernOp {
  using C = compute_t<T>;
  C v;
  __device__ __forceinline__ T operator()(T a, T b, T c) const {
    return T(tern_apply<OP, C>(C(a), C(b), C(c), v));
  }
};

template <typename T>
struct WhereOp {
  __device__ __forceinline__ T operator()(bool c, T a, T b) const { return c ? a : b; }
};

template <typename T>
struct MaskedFillOp {
  T v;
  __device__ __forceinline__ T operator()(T x, bool m) const { return m ? v : x; }
};

c10::DimVector broadcast3(const char* op, std::initializer_list<at::Tensor> ts) {
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

// The CPU kernel moves 0-dim CPU operands to the device before it promotes types, which
// drops the wrapped-number flag; promote the same way here.
at::Tensor unwrapped(const at::Tensor& t) {
  return t.dim() == 0 && t.device().is_cpu() && t.unsafeGetTensorImpl()->is_wrapped_number() ? t.clone() : t;
}

at::Tensor ternary(Tern op, const at::Tensor& a0, const at::Tensor& b0, const at::Tensor& c0,
                   const at::Scalar& value) {
  const char* name = cpu::op_name(op);
  const at::Device dev = cpu::common_device(name, {a0, b0, c0});
  TORCH_CHECK(dev.is_cuda(), name, ": expected CUDA tensors, got ", dev);
  const at::Tensor a_ = unwrapped(a0), b_ = unwrapped(b0), c_ = unwrapped(c0);
  at::ScalarType ct;
  if (op == Tern::Where) {
    TORCH_CHECK(a_.scalar_type() == at::kBool, name, ": expected condition to have dtype Bool, got ",
                a_.scalar_type());
    ct = aten::result_type(b_, c_);
  } else {
    ct = at::promoteTypes(aten::result_type(a_, b_), aten::result_type(a_, c_));
    if (op == Tern::LerpTensor) {
      TORCH_CHECK(at::isFloatingType(ct), name, ": expected floating point tensors, got ", ct);
      // as ATen: end has self's dtype; so does weight, unless it is 0-dim
      TORCH_CHECK(b_.scalar_type() == a_.scalar_type(), name, ": expected end of dtype ",
                  a_.scalar_type(), " (self's), got ", b_.scalar_type());
      TORCH_CHECK(c_.dim() == 0 || c_.scalar_type() == a_.scalar_type(), name,
                  ": expected weight of dtype ", a_.scalar_type(), " (self's) or a 0-dim weight, got ",
                  c_.scalar_type(), " of shape ", shape_str(c_.sizes()));
    }
    if (op == Tern::Addcdiv)
      TORCH_CHECK(at::isFloatingType(ct), name, ": integer division with addcdiv is not "
                  "supported; expected floating point tensors, got ", ct);
  }
  cpu::dispatch_all(name, "the operands", ct, [](auto) {});
  const auto shape = broadcast3(name, {a_, b_, c_});
  c10::cuda::CUDAGuard guard(dev);
  const at::Tensor a = op == Tern::Where ? a_ : to_dtype(a_, ct);
  const at::Tensor b = to_dtype(b_, ct), c = to_dtype(c_, ct);
  at::Tensor out = aten::empty(shape, b.options().dtype(ct).device(dev));
  if (out.numel() == 0) return out;
  const std::array<Operand, 3> ins = {Operand::of(a), Operand::of(b), Operand::of(c)};
  cpu::dispatch_all(name, "the operands", ct, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    const C v = scalar_to<C>(value);
    switch (op) {
      case Tern::Where: return launch<T, bool, T, T>(name, out, ins, WhereOp<T>{});
      case Tern::Addcmul: return launch<T, T, T, T>(name, out, ins, TernOp<Tern::Addcmul, T>{v});
      case Tern::Addcdiv:
        if constexpr (std::is_floating_point_v<C>)
          return launch<T, T, T, T>(name, out, ins, TernOp<Tern::Addcdiv, T>{v});
        break;
      case Tern::LerpTensor:
        if constexpr (std::is_floating_point_v<C>)
          return launch<T, T, T, T>(name, out, ins, TernOp<Tern::LerpTensor, T>{v});
        break;
    }
    TORCH_INTERNAL_ASSERT(false, name, ": no CUDA kernel for dtype ", ct);
  });
  return out;
}

}  // namespace

at::Tensor where(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b) {
  return ternary(Tern::Where, c, a, b, 0);
}
at::Tensor addcmul(const at::Tensor& x, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& v) {
  return ternary(Tern::Addcmul, x, t1, t2, v);
}
at::Tensor addcdiv(const at::Tensor& x, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& v) {
  return ternary(Tern::Addcdiv, x, t1, t2, v);
}
at::Tensor lerp(const at::Tensor& x, const at::Tensor& end, const at::Tensor& w) {
  return ternary(Tern::LerpTensor, x, end, w, 0);
}

// out = x broadcast with mask, value where mask: one pass for the CPU kernel's copy + fill.
at::Tensor masked_fill(const at::Tensor& x, const at::Tensor& mask, const at::Scalar& value) {
  const char* name = "mytorch::masked_fill";
  c10::DimVector shape(x.sizes().begin(), x.sizes().end());
  if (mask.sizes() != x.sizes()) {  // a larger mask broadcasts x too (as ATen)
    const int64_t nd = std::max(x.dim(), mask.dim());
    shape.resize(nd);
    for (int64_t i = 0; i < nd; ++i) {
      const int64_t a = i < nd - x.dim() ? 1 : x.size(i - (nd - x.dim()));
      const int64_t b = i < nd - mask.dim() ? 1 : mask.size(i - (nd - mask.dim()));
      TORCH_CHECK(a == b || a == 1 || b == 1, name, ": expected mask of shape ",
                  shape_str(mask.sizes()), " and x of shape ", shape_str(x.sizes()), " to broadcast together");
      shape[i] = a == 1 ? b : a;
    }
  }
  // the filled copy lives on x's device; a 0-dim CPU mask is a scalar operand
  TORCH_CHECK(x.device() == mask.device() || (mask.dim() == 0 && mask.device().is_cpu()), name,
              ": expected all tensors on the same device, got ", x.device(), " and ", mask.device());
  TORCH_CHECK(x.is_cuda(), name, ": expected x on a CUDA device, got ", x.device());
  TORCH_CHECK(mask.scalar_type() == at::kBool, name, ": expected mask to have dtype Bool, got ",
              mask.scalar_type());
  return cpu::dispatch_all(name, "x", x.scalar_type(), [&](auto tag) {  // checks even when empty
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    bool fits = true;
    try {
      (void)value.to<T>();
    } catch (const std::exception&) {  // the overflow report is a std::runtime_error
      fits = false;
    }
    TORCH_CHECK(fits, name, ": expected a value that x's dtype ", x.scalar_type(),
                " can hold, got ", value, " (it overflows)");
    T v;
    if constexpr (std::is_same_v<C, bool>) v = value.toBool();
    else if constexpr (std::is_floating_point_v<C>) v = T(static_cast<C>(value.toDouble()));
    else v = static_cast<T>(value.toLong());
    c10::cuda::CUDAGuard guard(x.device());
    at::Tensor out = aten::empty(shape, x.options());
    launch<T, T, bool>(name, out, {Operand::of(x), Operand::of(mask)}, MaskedFillOp<T>{v});
    return out;
  });
}

}  // namespace ew
}  // namespace cuda
}  // namespace mytorch
