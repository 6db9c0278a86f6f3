// patch(): ATen ops routed to mytorch kernels by C++ kernels (mytorch_ext._C._patching).
#pragma once
#include <pybind11/pybind11.h>

namespace mytorch {
namespace patching {
void init_bindings(pybind11::module& m);
}  // namespace patching
}  // namespace mytorch
