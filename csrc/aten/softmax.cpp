// aten softmax ops on the mytorch device -> kernels/cpu/softmax.cpp.
#include "aten/ops.h"

#include "kernels/softmax.h"

namespace mytorch {
namespace aten {
namespace {

void no_half_to_float(const char* op, bool half_to_float) {
  TORCH_CHECK(!half_to_float, op, ": half_to_float=True is not supported on the mytorch device "
              "(as on the CPU); cast the input to float32 first");
}
void same_input_dtype(const char* op, const Tensor& grad, at::ScalarType input_dtype) {
  TORCH_CHECK(grad.scalar_type() == input_dtype, op, ": expected input_dtype to equal the dtype of "
              "grad_output (", grad.scalar_type(), "), got ", input_dtype);
}

}  // namespace

template <bool LOG>
Tensor softmax(const Tensor& x, int64_t dim, bool half_to_float) {
  no_half_to_float(LOG ? "mytorch::log_softmax" : "mytorch::softmax", half_to_float);
  return LOG ? cpu::log_softmax(x, dim) : cpu::softmax(x, dim);
}
template <bool LOG>
Tensor& softmax_out(const Tensor& x, int64_t dim, bool half_to_float, Tensor& out) {
  no_half_to_float(LOG ? "mytorch::log_softmax" : "mytorch::softmax", half_to_float);
  return cpu::softmax_out(x, dim, LOG, out);
}
template <bool LOG>
Tensor softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, at::ScalarType input_dtype) {
  same_input_dtype(LOG ? "mytorch::log_softmax_backward" : "mytorch::softmax_backward", g, input_dtype);
  return LOG ? cpu::log_softmax_backward(g, y, dim) : cpu::softmax_backward(g, y, dim);
}
template <bool LOG>
Tensor& softmax_backward_out(const Tensor& g, const Tensor& y, int64_t dim, at::ScalarType input_dtype,
                             Tensor& out) {
  same_input_dtype(LOG ? "mytorch::log_softmax_backward" : "mytorch::softmax_backward", g, input_dtype);
  return cpu::softmax_backward_out(g, y, dim, LOG, out);
}

#define MYTORCH_SOFTMAX_INSTANTIATE(LOG)                                                                  \
  template Tensor softmax<LOG>(const Tensor&, int64_t, bool);                                             \
  template Tensor& softmax_out<LOG>(const Tensor&, int64_t, bool, Tensor&);                               \
  template Tensor softmax_backward<LOG>(const Tensor&, const Tensor&, int64_t, at::ScalarType);           \
  template Tensor& softmax_backward_out<LOG>(const Tensor&, const Tensor&, int64_t, at::ScalarType, Tensor&);
MYTORCH_SOFTMAX_INSTANTIATE(false)
MYTORCH_SOFTMAX_INSTANTIATE(true)
#undef MYTORCH_SOFTMAX_INSTANTIATE

}  // namespace aten
}  // namespace mytorch
