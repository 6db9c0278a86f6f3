// aten gelu, hardswish and hardsigmoid on the mytorch device -> the activation family
// (kernels/cpu/activation.cpp). gelu's functional, in-place and out= overloads take the
// elementwise glue (type promotion, broadcasting, out=), which runs the activation loops.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/elementwise.h"

namespace {
using namespace mytorch::cpu;
using at::Tensor;

// ---- gelu ----
Bin gelu_bwd_op(c10::string_view a) {
  TORCH_CHECK(a == "none" || a == "tanh", "mytorch::gelu: expected approximate to be 'none' or "
              "'tanh', got '", std::string(a), "'");
  return a == "tanh" ? Bin::GeluTanhBwd : Bin::GeluBwd;
}
Un gelu_op(c10::string_view a) { return gelu_bwd_op(a) == Bin::GeluTanhBwd ? Un::GeluTanh : Un::Gelu; }
Tensor gelu(const Tensor& x, c10::string_view a) { return unary(gelu_op(a), x, {}); }
Tensor& gelu_i(Tensor& x, c10::string_view a) { return unary_(gelu_op(a), x); }
Tensor& gelu_o(const Tensor& x, c10::string_view a, Tensor& out) {
  unary(gelu_op(a), x, out);
  return out;
}
Tensor gelu_bwd(const Tensor& g, const Tensor& x, c10::string_view a) {
  return binary(gelu_bwd_op(a), g, x, 1, {});
}
Tensor& gelu_bwd_o(const Tensor& g, const Tensor& x, c10::string_view a, Tensor& gin) {
  binary(gelu_bwd_op(a), g, x, 1, gin);
  return gin;
}

// ---- hardswish, hardsigmoid ----
at::Tensor& inplace(at::Tensor& self, HardAct act) {
  if (self.is_contiguous()) {
    hardact_into(act, self, self);
  } else {
    self.copy_(act == HardAct::kSwish ? mytorch::cpu::hardswish(self) : mytorch::cpu::hardsigmoid(self));
  }
  return self;
}
at::Tensor& hardswish_(at::Tensor& self) { return inplace(self, HardAct::kSwish); }
at::Tensor& hardsigmoid_(at::Tensor& self) { return inplace(self, HardAct::kSigmoid); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gelu", &gelu);
  m.impl("gelu_", &gelu_i);
  m.impl("gelu.out", &gelu_o);
  m.impl("gelu_backward", &gelu_bwd);
  m.impl("gelu_backward.grad_input", &gelu_bwd_o);
  m.impl("hardswish", &hardswish);
  m.impl("hardswish_", &hardswish_);
  m.impl("hardswish_backward", &hardswish_backward);
  m.impl("hardsigmoid", &hardsigmoid);
  m.impl("hardsigmoid_", &hardsigmoid_);
  m.impl("hardsigmoid_backward", &hardsigmoid_backward);
}
