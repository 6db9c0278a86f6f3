// aten hardswish / hardsigmoid on the mytorch device -> kernels/cpu/hardact.cpp.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/cpu/hardact.h"

namespace {
using namespace mytorch::cpu;

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
  m.impl("hardswish", &hardswish);
  m.impl("hardswish_", &hardswish_);
  m.impl("hardswish_backward", &hardswish_backward);
  m.impl("hardsigmoid", &hardsigmoid);
  m.impl("hardsigmoid_", &hardsigmoid_);
  m.impl("hardsigmoid_backward", &hardsigmoid_backward);
}
