// aten softmax ops on the mytorch device -> kernels/cpu/softmax.cpp.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/softmax.h"

namespace {
using namespace mytorch::cpu;

void no_half_to_float(const char* op, bool half_to_float) {
  TORCH_CHECK(!half_to_float, op, ": half_to_float=True is not supported on the mytorch device "
              "(as on the CPU); cast the input to float32 first");
}
void same_input_dtype(const char* op, const at::Tensor& grad, at::ScalarType input_dtype) {
  TORCH_CHECK(grad.scalar_type() == input_dtype, op, ": expected input_dtype to equal the dtype of "
              "grad_output (", grad.scalar_type(), "), got ", input_dtype);
}

// LOG picks log_softmax.
template <bool LOG>
at::Tensor softmax_aten(const at::Tensor& x, int64_t dim, bool half_to_float) {
  no_half_to_float(LOG ? "mytorch::log_softmax" : "mytorch::softmax", half_to_float);
  return LOG ? mytorch::cpu::log_softmax(x, dim) : mytorch::cpu::softmax(x, dim);
}
template <bool LOG>
at::Tensor& softmax_aten_out(const at::Tensor& x, int64_t dim, bool half_to_float, at::Tensor& out) {
  no_half_to_float(LOG ? "mytorch::log_softmax" : "mytorch::softmax", half_to_float);
  return softmax_out(x, dim, LOG, out);
}
template <bool LOG>
at::Tensor softmax_bwd_aten(const at::Tensor& g, const at::Tensor& y, int64_t dim, at::ScalarType input_dtype) {
  same_input_dtype(LOG ? "mytorch::log_softmax_backward" : "mytorch::softmax_backward", g, input_dtype);
  return LOG ? mytorch::cpu::log_softmax_backward(g, y, dim) : mytorch::cpu::softmax_backward(g, y, dim);
}
template <bool LOG>
at::Tensor& softmax_bwd_aten_out(const at::Tensor& g, const at::Tensor& y, int64_t dim, at::ScalarType input_dtype,
                                 at::Tensor& out) {
  same_input_dtype(LOG ? "mytorch::log_softmax_backward" : "mytorch::softmax_backward", g, input_dtype);
  return softmax_backward_out(g, y, dim, LOG, out);
}
}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", &softmax_aten<false>);
  m.impl("_softmax.out", &softmax_aten_out<false>);
  m.impl("_log_softmax", &softmax_aten<true>);
  m.impl("_log_softmax.out", &softmax_aten_out<true>);
  m.impl("_softmax_backward_data", &softmax_bwd_aten<false>);
  m.impl("_softmax_backward_data.out", &softmax_bwd_aten_out<false>);
  m.impl("_log_softmax_backward_data", &softmax_bwd_aten<true>);
  m.impl("_log_softmax_backward_data.out", &softmax_bwd_aten_out<true>);
}
