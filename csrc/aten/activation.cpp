// aten gelu, hardswish and hardsigmoid on the mytorch device -> the activation family
// (kernels/cpu/activation.cpp). gelu's functional, in-place and out= overloads take the
// elementwise glue (type promotion, broadcasting, out=), which runs the activation loops.
#include "aten/ops.h"

#include "kernels/cpu/activation.h"
#include "kernels/cpu/elementwise.h"

namespace mytorch {
namespace aten {
namespace {
using namespace mytorch::cpu;

Bin gelu_bwd_op(c10::string_view a) {
  TORCH_CHECK(a == "none" || a == "tanh", "mytorch::gelu: expected approximate to be 'none' or "
              "'tanh', got '", std::string(a), "'");
  return a == "tanh" ? Bin::GeluTanhBwd : Bin::GeluBwd;
}
Un gelu_op(c10::string_view a) { return gelu_bwd_op(a) == Bin::GeluTanhBwd ? Un::GeluTanh : Un::Gelu; }

at::Tensor& hard_inplace(at::Tensor& self, HardAct act) {
  if (self.is_contiguous()) {
    hardact_into(act, self, self);
  } else {
    self.copy_(act == HardAct::kSwish ? mytorch::cpu::hardswish(self) : mytorch::cpu::hardsigmoid(self));
  }
  return self;
}

}  // namespace

// ---- gelu ----
Tensor gelu(const Tensor& x, c10::string_view a) { return unary(gelu_op(a), x, {}); }
Tensor& gelu_(Tensor& x, c10::string_view a) { return unary_(gelu_op(a), x); }
Tensor& gelu_out(const Tensor& x, c10::string_view a, Tensor& out) {
  unary(gelu_op(a), x, out);
  return out;
}
Tensor gelu_backward(const Tensor& g, const Tensor& x, c10::string_view a) {
  return binary(gelu_bwd_op(a), g, x, 1, {});
}
Tensor& gelu_backward_out(const Tensor& g, const Tensor& x, c10::string_view a, Tensor& gin) {
  binary(gelu_bwd_op(a), g, x, 1, gin);
  return gin;
}

// ---- hardswish, hardsigmoid ----
Tensor& hardswish_(Tensor& self) { return hard_inplace(self, HardAct::kSwish); }
Tensor& hardsigmoid_(Tensor& self) { return hard_inplace(self, HardAct::kSigmoid); }

}  // namespace aten
}  // namespace mytorch
