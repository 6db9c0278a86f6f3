// aten batch norm on the mytorch device -> kernels/cpu/batchnorm.cpp.
// F.batch_norm reaches native_batch_norm (+ native_batch_norm_backward) in eager mode;
// the export-era entries (_native_batch_norm_legit*, _batch_norm_with_update,
// batch_norm_backward) go to the same kernels.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "kernels/batchnorm.h"

namespace {
using mytorch::batchnorm::OptTensor;
using mytorch::cpu::batch_norm_backward_impl;
using mytorch::cpu::batch_norm_forward;
using Out3 = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

Out3 native_batch_norm(const at::Tensor& x, const OptTensor& w, const OptTensor& b,
                       const OptTensor& rm, const OptTensor& rv, bool training, double momentum,
                       double eps) {
  return batch_norm_forward("mytorch (aten::native_batch_norm)", x, w, b, rm, rv, training,
                            momentum, eps);
}

Out3 native_batch_norm_backward(const at::Tensor& grad, const at::Tensor& x, const OptTensor& w,
                                const OptTensor& rm, const OptTensor& rv, const OptTensor& sm,
                                const OptTensor& si, bool training, double eps,
                                std::array<bool, 3> mask) {
  return batch_norm_backward_impl("mytorch (aten::native_batch_norm_backward)", grad, x, w, rm, rv,
                                  sm, si, training, eps, mask);
}

Out3 legit(const at::Tensor& x, const OptTensor& w, const OptTensor& b, at::Tensor& rm,
           at::Tensor& rv, bool training, double momentum, double eps) {
  return batch_norm_forward("mytorch (aten::_native_batch_norm_legit)", x, w, b, rm, rv, training,
                            momentum, eps);
}

Out3 legit_no_stats(const at::Tensor& x, const OptTensor& w, const OptTensor& b, bool training,
                    double momentum, double eps) {
  return batch_norm_forward("mytorch (aten::_native_batch_norm_legit)", x, w, b, std::nullopt,
                            std::nullopt, training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> with_update(
    const at::Tensor& x, const OptTensor& w, const OptTensor& b, at::Tensor& rm, at::Tensor& rv,
    double momentum, double eps) {
  auto [y, sm, si] = batch_norm_forward("mytorch (aten::_batch_norm_with_update)", x, w, b, rm, rv,
                                        true, momentum, eps);
  return {y, sm, si, at::empty({0}, x.options().dtype(at::kByte))};
}

Out3 batch_norm_backward(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& w,
                         const OptTensor& rm, const OptTensor& rv, const OptTensor& sm,
                         const OptTensor& si, bool update, double eps, std::array<bool, 3> mask,
                         const at::Tensor&) {
  return batch_norm_backward_impl("mytorch (aten::batch_norm_backward)", grad, x, w, rm, rv, sm,
                                  si, update, eps, mask);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", &native_batch_norm);
  m.impl("native_batch_norm_backward", &native_batch_norm_backward);
  m.impl("_native_batch_norm_legit", &legit);
  m.impl("_native_batch_norm_legit.no_stats", &legit_no_stats);
  m.impl("_batch_norm_with_update", &with_update);
  m.impl("batch_norm_backward", &batch_norm_backward);
}
