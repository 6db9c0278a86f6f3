// Unary elementwise ops on CUDA: neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, silu,
// reciprocal and clamp, with the promotion (integers -> the default float for exp, log, ...),
// checks, errors and float math of the CPU kernels (kernels/cpu/elementwise_unary.cpp; the
// promotion and checks in kernels/elementwise.h).
// Results are fresh contiguous tensors.
#include <limits>

#include "kernels/cuda/ops.h"
#include "kernels/cuda/strided.cuh"

namespace mytorch {
namespace cuda {
namespace ew {
namespace {

using cpu::Un;

// ---- the math, in the compute type C; lo/hi are the clamp bounds ----
template <Un OP, typename C>
__device__ __forceinline__ C un_apply(C x, C lo, C hi) {
  constexpr bool F = std::is_floating_point_v<C>;
  if constexpr (OP == Un::Neg) {
    return C(-x);
  } else if constexpr (OP == Un::Abs) {
    if constexpr (std::is_unsigned_v<C> || std::is_same_v<C, bool>) return x;
    else return x < 0 ? C(-x) : x;
  } else if constexpr (OP == Un::Relu) {
    if constexpr (F) return x > 0 ? x : (x != x ? x : C(0));
    else return x > 0 ? x : C(0);
  } else if constexpr (OP == Un::Clamp) {
    const C r = x < lo ? lo : x;
    return r > hi ? hi : r;
  } else if constexpr (OP == Un::Exp) {
    return exp_c(x);
  } else if constexpr (OP == Un::Log) {
    return log_c(x);
  } else if constexpr (OP == Un::Sqrt) {
    return sqrt_rn(x);
  } else if constexpr (OP == Un::Rsqrt) {
    return div_rn(C(1), sqrt_rn(x));
  } else if constexpr (OP == Un::Tanh) {
    return tanh_c(x);
  } else if constexpr (OP == Un::Sigmoid) {
    return div_rn(C(1), C(1) + exp_c(-x));
  } else if constexpr (OP == Un::Silu) {
    return div_rn(x, C(1) + exp_c(-x));
  } else {
    static_assert(OP == Un::Reciprocal);
    return div_rn(C(1), x);
  }
}

template <Un OP, typename T>
struct UnOp {
  using C = compute_t<T>;
  C lo, hi;
  __device__ __forceinline__ T operator()(T x) const { return T(un_apply<OP, C>(C(x), lo, hi)); }
};

template <Un OP, typename T>
void go(const at::Tensor& out, const Operand& x, compute_t<T> lo, compute_t<T> hi) {
  launch<T, T>(cpu::op_name(OP), out, {x}, UnOp<OP, T>{lo, hi});
}

template <typename T>
void run_unary(Un op, const at::Tensor& out, const Operand& x, const std::optional<at::Scalar>& lo,
               const std::optional<at::Scalar>& hi) {
  using C = compute_t<T>;
  const C l = elementwise::clamp_bound<C>(lo, false), h = elementwise::clamp_bound<C>(hi, true);
  switch (op) {
    case Un::Abs: return go<Un::Abs, T>(out, x, l, h);
    case Un::Relu: return go<Un::Relu, T>(out, x, l, h);
    default: break;
  }
  if constexpr (!std::is_same_v<C, bool>) {  // bool was refused on the host
    switch (op) {
      case Un::Neg: return go<Un::Neg, T>(out, x, l, h);
      case Un::Clamp: return go<Un::Clamp, T>(out, x, l, h);
      default: break;
    }
  }
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case Un::Exp: return go<Un::Exp, T>(out, x, l, h);
      case Un::Log: return go<Un::Log, T>(out, x, l, h);
      case Un::Sqrt: return go<Un::Sqrt, T>(out, x, l, h);
      case Un::Rsqrt: return go<Un::Rsqrt, T>(out, x, l, h);
      case Un::Tanh: return go<Un::Tanh, T>(out, x, l, h);
      case Un::Sigmoid: return go<Un::Sigmoid, T>(out, x, l, h);
      case Un::Silu: return go<Un::Silu, T>(out, x, l, h);
      case Un::Reciprocal: return go<Un::Reciprocal, T>(out, x, l, h);
      default: break;
    }
  }
  TORCH_INTERNAL_ASSERT(false, cpu::op_name(op), ": no CUDA kernel for dtype ", out.scalar_type());
}

// ---- glue (as unary() in kernels/cpu/elementwise_unary.cpp) ----
at::Tensor unary(Un op, const at::Tensor& x_, const std::optional<at::Scalar>& lo = std::nullopt,
                 const std::optional<at::Scalar>& hi = std::nullopt) {
  const char* name = cpu::op_name(op);
  const at::ScalarType ct = elementwise::unary_dtype(op, x_, lo, hi);
  TORCH_CHECK(x_.is_cuda(), name, ": expected x on a CUDA device, got ", x_.device());
  c10::cuda::CUDAGuard guard(x_.device());
  const at::Tensor x = to_dtype(x_, ct);
  at::Tensor out = aten::empty(x_.sizes(), x_.options().dtype(ct));
  if (out.numel() == 0) return out;
  const Operand ox = Operand::of(x);
  cpu::dispatch_all(name, "x", ct, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_unary<T>(op, out, ox, lo, hi);
  });
  return out;
}

}  // namespace

// ---- the ops (kernels/elementwise.h) ----
#define MYTORCH_UN(NAME, OP) \
  at::Tensor NAME(const at::Tensor& x) { return unary(Un::OP, x); }
MYTORCH_UNARY_TENSOR_OPS(MYTORCH_UN)
#undef MYTORCH_UN

at::Tensor clamp(const at::Tensor& x, const std::optional<at::Scalar>& lo, const std::optional<at::Scalar>& hi) {
  return unary(Un::Clamp, x, lo, hi);
}

}  // namespace ew
}  // namespace cuda
}  // namespace mytorch
