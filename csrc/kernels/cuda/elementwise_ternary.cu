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
  const at::ScalarType ct = elementwise::ternary_dtype(op, a_, b_, c_);
  const auto shape = elementwise::broadcast3(name, {a_, b_, c_});
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
  const c10::DimVector shape = elementwise::masked_fill_shape(name, x, mask);
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
