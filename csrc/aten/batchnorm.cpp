// aten batch norm on the mytorch device -> kernels/cpu/batchnorm.cpp.
// F.batch_norm reaches native_batch_norm (+ native_batch_norm_backward) in eager mode;
// the export-era entries (_native_batch_norm_legit*, _batch_norm_with_update,
// batch_norm_backward) go to the same kernels.
#include "aten/ops.h"

#include "kernels/batchnorm.h"

namespace mytorch {
namespace aten {

using cpu::batch_norm_backward_impl;
using cpu::batch_norm_forward;

Tensors3 native_batch_norm(const Tensor& x, const OptTensor& w, const OptTensor& b, const OptTensor& rm,
                           const OptTensor& rv, bool training, double momentum, double eps) {
  return batch_norm_forward("mytorch (aten::native_batch_norm)", x, w, b, rm, rv, training, momentum, eps);
}

Tensors3 native_batch_norm_backward(const Tensor& grad, const Tensor& x, const OptTensor& w, const OptTensor& rm,
                                    const OptTensor& rv, const OptTensor& sm, const OptTensor& si, bool training,
                                    double eps, std::array<bool, 3> mask) {
  return batch_norm_backward_impl("mytorch (aten::native_batch_norm_backward)", grad, x, w, rm, rv, sm, si,
                                  training, eps, mask);
}

Tensors3 native_batch_norm_legit(const Tensor& x, const OptTensor& w, const OptTensor& b, Tensor& rm, Tensor& rv,
                                 bool training, double momentum, double eps) {
  return batch_norm_forward("mytorch (aten::_native_batch_norm_legit)", x, w, b, rm, rv, training, momentum, eps);
}

Tensors3 native_batch_norm_legit_no_stats(const Tensor& x, const OptTensor& w, const OptTensor& b, bool training,
                                          double momentum, double eps) {
  return batch_norm_forward("mytorch (aten::_native_batch_norm_legit)", x, w, b, std::nullopt, std::nullopt,
                            training, momentum, eps);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> batch_norm_with_update(const Tensor& x, const OptTensor& w,
                                                                  const OptTensor& b, Tensor& rm, Tensor& rv,
                                                                  double momentum, double eps) {
  auto [y, sm, si] =
      batch_norm_forward("mytorch (aten::_batch_norm_with_update)", x, w, b, rm, rv, true, momentum, eps);
  return {y, sm, si, at::empty({0}, x.options().dtype(at::kByte))};
}

Tensors3 batch_norm_backward(const Tensor& grad, const Tensor& x, const Tensor& w, const OptTensor& rm,
                             const OptTensor& rv, const OptTensor& sm, const OptTensor& si, bool update, double eps,
                             std::array<bool, 3> mask, const Tensor&) {
  return batch_norm_backward_impl("mytorch (aten::batch_norm_backward)", grad, x, w, rm, rv, sm, si, update, eps,
                                  mask);
}

}  // namespace aten
}  // namespace mytorch
