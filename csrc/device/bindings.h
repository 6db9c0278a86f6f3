// Python bindings of the mytorch device runtime: mytorch_ext._C._device.
#pragma once
#include <pybind11/pybind11.h>

namespace mytorch {
namespace device {
void init_bindings(pybind11::module& m);
}  // namespace device
}  // namespace mytorch
