// Binary elementwise ops on CUDA: add, sub, mul, div (with rounding modes), maximum, minimum,
// pow, the activation backwards autograd uses (sigmoid, tanh, silu, threshold) and
// clamp_tensor; the comparisons' kernels are in elementwise_binary_compare.cu. Broadcasting, ATen
// type promotion, checks and errors as the CPU kernels (kernels/cpu/elementwise_binary.cpp);
// 0-dim CPU tensors are scalar operands. Results are fresh contiguous tensors.
#include "kernels/cuda/ops.h"
#include "kernels/cuda/strided.cuh"

namespace mytorch {
namespace cuda {
namespace ew {

using cpu::Bin;

namespace {

// ---- the math, in the compute type C (as bin_apply in the CPU kernel) ----
template <typename C>
__device__ __forceinline__ C int_pow(C base, C exp) {
  if constexpr (std::is_signed_v<C>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? C(-1) : C(1);
      return 0;
    }
  }
  using U = std::make_unsigned_t<C>;
  U r = 1, b = static_cast<U>(base);
  C e = exp;
  while (e) {
    if (e & 1) r *= b;
    e >>= 1;
    b *= b;
  }
  return static_cast<C>(r);
}

template <typename C>
__device__ __forceinline__ C floor_div(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (b == 0) return div_rn(a, b);
    const C mod = ::fmod(a, b);
    C div = div_rn(a - mod, b);
    if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
    C fl;
    if (div != 0) {
      fl = ::floor(div);
      if (div - fl > C(0.5)) fl += 1;
    } else {
      fl = ::copysign(C(0), div_rn(a, b));
    }
    return fl;
  } else {
    if (b == 0) return 0;  // raised on the host before the launch
    C q = a / b;
    if constexpr (std::is_signed_v<C>) {
      if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
    }
    return q;
  }
}

template <Bin OP, typename C>
__device__ __forceinline__ C bin_apply(C a, C b, C p) {
  constexpr bool F = std::is_floating_point_v<C>;
  if constexpr (OP == Bin::Add) {
    if constexpr (std::is_same_v<C, bool>) return a || (p && b);
    else return C(a + p * b);
  } else if constexpr (OP == Bin::Sub) {
    return C(a - p * b);
  } else if constexpr (OP == Bin::Mul) {
    if constexpr (std::is_same_v<C, bool>) return a && b;
    else return C(a * b);
  } else if constexpr (OP == Bin::Div) {
    return div_rn(a, b);
  } else if constexpr (OP == Bin::DivTrunc) {
    if constexpr (F) return ::trunc(div_rn(a, b));
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
    if constexpr (F) return pow_c(a, b);
    else if constexpr (std::is_same_v<C, bool>) return a || !b;
    else return int_pow<C>(a, b);
  } else if constexpr (OP == Bin::SigmoidBwd) {  // a = grad, b = sigmoid output
    return a * (C(1) - b) * b;
  } else if constexpr (OP == Bin::TanhBwd) {  // b = tanh output
    return a * (C(1) - b * b);
  } else if constexpr (OP == Bin::SiluBwd) {  // b = input
    const C s = div_rn(C(1), C(1) + exp_c(-b));
    return a * s * (C(1) + b * (C(1) - s));
  } else {
    static_assert(OP == Bin::ThresholdBwd);  // b = input, p = threshold
    return b <= p ? C(0) : a;
  }
}

template <Bin OP, typename T>
struct BinOp {
  using C = compute_t<T>;
  C p;
  __device__ __forceinline__ T operator()(T x, T y) const { return T(bin_apply<OP, C>(C(x), C(y), p)); }
};

template <Bin OP, typename T>
void go(const at::Tensor& out, const Operand& a, const Operand& b, compute_t<T> p) {
  launch<T, T, T>(cpu::op_name(OP), out, {a, b}, BinOp<OP, T>{p});
}

template <typename T>
void run_binary(Bin op, const at::Tensor& out, const Operand& a, const Operand& b, compute_t<T> p) {
  using C = compute_t<T>;
  constexpr bool F = std::is_floating_point_v<C>, B = std::is_same_v<C, bool>;
  switch (op) {
    case Bin::Add: return go<Bin::Add, T>(out, a, b, p);
    case Bin::Mul: return go<Bin::Mul, T>(out, a, b, p);
    case Bin::Maximum: return go<Bin::Maximum, T>(out, a, b, p);
    case Bin::Minimum: return go<Bin::Minimum, T>(out, a, b, p);
    default: break;
  }
  if constexpr (!B) {  // bool operands were refused on the host
    switch (op) {
      case Bin::Sub: return go<Bin::Sub, T>(out, a, b, p);
      case Bin::Pow: return go<Bin::Pow, T>(out, a, b, p);
      case Bin::DivTrunc: return go<Bin::DivTrunc, T>(out, a, b, p);
      case Bin::DivFloor: return go<Bin::DivFloor, T>(out, a, b, p);
      default: break;
    }
  }
  if constexpr (F) {
    switch (op) {
      case Bin::Div: return go<Bin::Div, T>(out, a, b, p);
      case Bin::SigmoidBwd: return go<Bin::SigmoidBwd, T>(out, a, b, p);
      case Bin::TanhBwd: return go<Bin::TanhBwd, T>(out, a, b, p);
      case Bin::SiluBwd: return go<Bin::SiluBwd, T>(out, a, b, p);
      case Bin::ThresholdBwd: return go<Bin::ThresholdBwd, T>(out, a, b, p);
      default: break;
    }
  }
  TORCH_INTERNAL_ASSERT(false, cpu::op_name(op), ": no CUDA kernel for dtype ", out.scalar_type());
}

// ---- integer division by zero raises, as on the CPU ----
template <typename T>
__global__ void any_zero_kernel(const T* __restrict__ x, int64_t n, int* flag) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    if (x[i] == T(0)) *flag = 1;  // every writer writes 1
}

template <typename T>
bool any_zero(const at::Tensor& t) {
  if (t.dim() == 0 && t.device().is_cpu()) return *t.const_data_ptr<T>() == T(0);
  if (t.numel() == 0) return false;
  const at::Tensor c = t.contiguous();
  at::Tensor flag = aten::empty({1}, t.options().dtype(at::kInt));
  auto stream = at::cuda::getCurrentCUDAStream();
  C10_CUDA_CHECK(cudaMemsetAsync(flag.mutable_data_ptr(), 0, sizeof(int), stream));
  any_zero_kernel<T><<<grid_for(c.numel(), kThreads), kThreads, 0, stream>>>(c.const_data_ptr<T>(), c.numel(),
                                                                    flag.mutable_data_ptr<int>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return flag.item<int>() != 0;
}

}  // namespace

// ---- glue (as binary() in kernels/cpu/elementwise_binary.cpp) ----
using elementwise::binary_dtype;
using elementwise::bool_out;
using elementwise::broadcast_shape;

at::Tensor binary(Bin op, const at::Tensor& a_, const at::Tensor& b_, const at::Scalar& alpha) {
  const char* name = cpu::op_name(op);
  TORCH_CHECK(a_.defined() && b_.defined(), name, ": expected defined tensors");
  const at::Device dev = cpu::common_device(name, {a_, b_});
  TORCH_CHECK(dev.is_cuda(), name, ": expected CUDA tensors, got ", dev);
  const at::ScalarType ct = binary_dtype(op, a_, b_, alpha);
  const auto shape = broadcast_shape(name, a_.sizes(), b_.sizes());
  c10::cuda::CUDAGuard guard(dev);
  const at::Tensor a = to_dtype(a_, ct), b = to_dtype(b_, ct);
  if ((op == Bin::DivTrunc || op == Bin::DivFloor) && !at::isFloatingType(ct)) {
    const bool z = cpu::dispatch_all(name, "b", ct, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) return any_zero<T>(b);
      else return false;
    });
    TORCH_CHECK(!z, "ZeroDivisionError: ", name, ": integer division by zero");
  }
  at::Tensor out = aten::empty(shape, a_.options().dtype(bool_out(op) ? at::kBool : ct).device(dev));
  if (out.numel() == 0) return out;
  const Operand oa = Operand::of(a), ob = Operand::of(b);
  if (bool_out(op)) {
    launch_compare(op, ct, out, oa, ob);
    return out;
  }
  cpu::dispatch_all(name, "the operands", ct, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_binary<T>(op, out, oa, ob, scalar_to<compute_t<T>>(alpha));
  });
  return out;
}

// ---- the ops (kernels/elementwise.h) ----
#define MYTORCH_BIN2(NAME, OP) \
  at::Tensor NAME(const at::Tensor& a, const at::Tensor& b) { return binary(Bin::OP, a, b, 1); }
MYTORCH_BINARY_TENSOR_OPS(MYTORCH_BIN2)
#undef MYTORCH_BIN2

at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return binary(Bin::Add, a, b, alpha);
}
at::Tensor sub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  return binary(Bin::Sub, a, b, alpha);
}
at::Tensor div(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> mode) {
  return binary(elementwise::div_op(mode), a, b, 1);
}
at::Tensor threshold_backward(const at::Tensor& g, const at::Tensor& x, const at::Scalar& thr) {
  return binary(Bin::ThresholdBwd, g, x, thr);
}

at::Tensor clamp_tensor(const at::Tensor& x, const std::optional<at::Tensor>& lo,
                        const std::optional<at::Tensor>& hi) {
  elementwise::check_clamp_tensor("mytorch::clamp_tensor", x, lo, hi);
  at::Tensor r = x;
  if (lo) r = binary(Bin::Maximum, r, *lo, 1);
  if (hi) r = binary(Bin::Minimum, r, *hi, 1);
  return r;
}

}  // namespace ew
}  // namespace cuda
}  // namespace mytorch
