// Eager calls of mytorch ops from Python's hot paths (mytorch_ext._C._eager_calls).
#pragma once
#include <pybind11/pybind11.h>

namespace mytorch {
namespace eager_calls {
void init_bindings(pybind11::module& m);
}  // namespace eager_calls
}  // namespace mytorch
