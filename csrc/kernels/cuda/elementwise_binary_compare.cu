// Comparison kernels on CUDA (eq, ne, lt, le, gt, ge -> bool), in the compute type of the
// CPU kernels (reduced floats compare as float). The ops' glue is binary() in
// elementwise_binary.cu; this file only holds the many dtype instances.
#include "kernels/cuda/ops.h"
#include "kernels/cuda/strided.cuh"

namespace mytorch {
namespace cuda {
namespace ew {

using cpu::Bin;

namespace {

template <Bin OP, typename T>
struct CmpOp {
  using C = compute_t<T>;
  __device__ __forceinline__ bool operator()(T x, T y) const {
    const C a = C(x), b = C(y);
    if constexpr (OP == Bin::Eq) return a == b;
    else if constexpr (OP == Bin::Ne) return a != b;
    else if constexpr (OP == Bin::Lt) return a < b;
    else if constexpr (OP == Bin::Le) return a <= b;
    else if constexpr (OP == Bin::Gt) return a > b;
    else return a >= b;
  }
};

template <Bin OP, typename T>
void go(const at::Tensor& out, const Operand& a, const Operand& b) {
  launch<bool, T, T>(cpu::op_name(OP), out, {a, b}, CmpOp<OP, T>{});
}

}  // namespace

void launch_compare(Bin op, at::ScalarType ct, const at::Tensor& out, const Operand& a, const Operand& b) {
  const char* name = cpu::op_name(op);
  cpu::dispatch_all(name, "the operands", ct, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (op) {
      case Bin::Eq: return go<Bin::Eq, T>(out, a, b);
      case Bin::Ne: return go<Bin::Ne, T>(out, a, b);
      case Bin::Lt: return go<Bin::Lt, T>(out, a, b);
      case Bin::Le: return go<Bin::Le, T>(out, a, b);
      case Bin::Gt: return go<Bin::Gt, T>(out, a, b);
      case Bin::Ge: return go<Bin::Ge, T>(out, a, b);
      default: TORCH_INTERNAL_ASSERT(false, name, ": not a comparison");
    }
  });
}

}  // namespace ew
}  // namespace cuda
}  // namespace mytorch
