// The activation family's hard activations on CUDA: hardswish(x) = x * relu6(x + 3) / 6 and
// hardsigmoid(x) = relu6(x + 3) / 6, with the checks and the backward boundaries of
// kernels/cpu/activation.cpp (kernels/activation.h): hardswish' = x / 3 + 1/2 on
// (-3, 3), 0 below, 1 above, NaN for NaN x; hardsigmoid' = 1/6 on (-3, 3). Any strides in,
// contiguous out.
#include "kernels/activation.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/strided.cuh"

namespace mytorch {
namespace cuda {
using namespace ew;  // the elementwise launcher (strided.cuh)
namespace {

template <typename T, bool SWISH>
struct HardActOp {
  __device__ __forceinline__ T operator()(T x) const {
    using Acc = at::opmath_type<T>;
    const Acc v = static_cast<Acc>(x);
    Acc t = v + Acc(3);
    t = t < Acc(0) ? Acc(0) : t;  // std::max / std::min as the CPU kernel: NaN stays
    t = Acc(6) < t ? Acc(6) : t;
    const Acc s = div_rn(t, Acc(6));
    return static_cast<T>(SWISH ? v * s : s);
  }
};

template <typename T, bool SWISH>
struct HardActBwdOp {
  __device__ __forceinline__ T operator()(T g, T x) const {
    using Acc = at::opmath_type<T>;
    const Acc v = static_cast<Acc>(x), gv = static_cast<Acc>(g);
    Acc d;
    if constexpr (SWISH)
      d = v != v ? v : v <= Acc(-3) ? Acc(0) : (v < Acc(3) ? gv * (div_rn(v, Acc(3)) + Acc(0.5)) : gv);
    else
      d = (v > Acc(-3) && v < Acc(3)) ? div_rn(gv, Acc(6)) : Acc(0);
    return static_cast<T>(d);
  }
};

template <bool SWISH>
at::Tensor forward(const char* op, const at::Tensor& x) {
  check_floating(op, "x", x);
  check_cuda(op, "x", x);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor y = aten::empty(x.sizes(), x.options());
  cpu::dispatch_floating(op, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch<T, T>(op, y, {Operand::of(x)}, HardActOp<T, SWISH>{});
  });
  return y;
}

template <bool SWISH>
at::Tensor backward(const char* op, const at::Tensor& grad, const at::Tensor& x) {
  check_floating(op, "x", x);
  activation::check_grad_like(op, grad, x, "x");
  check_cuda(op, "x", x);
  c10::cuda::CUDAGuard guard(x.device());
  at::Tensor dx = aten::empty(x.sizes(), x.options());
  cpu::dispatch_floating(op, "x", x.scalar_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch<T, T, T>(op, dx, {Operand::of(grad), Operand::of(x)}, HardActBwdOp<T, SWISH>{});
  });
  return dx;
}

}  // namespace

at::Tensor hardswish(const at::Tensor& x) { return forward<true>("mytorch::hardswish", x); }
at::Tensor hardsigmoid(const at::Tensor& x) { return forward<false>("mytorch::hardsigmoid", x); }
at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& x) {
  return backward<true>("mytorch::hardswish_backward", grad, x);
}
at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& x) {
  return backward<false>("mytorch::hardsigmoid_backward", grad, x);
}

}  // namespace cuda
}  // namespace mytorch
