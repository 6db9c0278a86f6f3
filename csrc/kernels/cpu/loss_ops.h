// ATen-level loss entry points, shared by the mytorch:: ops and the aten routing of
// the mytorch device (csrc/aten/loss.cpp). reduction: 0 none, 1 mean, 2 sum.
#pragma once
#include <ATen/ATen.h>

#include <tuple>

namespace mytorch {
namespace cpu {

// input (C,) / (N, C) / (N, C, d1, ...); returns (output, total_weight) as aten's nll_loss_forward.
std::tuple<at::Tensor, at::Tensor> nll_loss(const at::Tensor& input, const at::Tensor& target,
                                            const c10::optional<at::Tensor>& weight,
                                            int64_t reduction, int64_t ignore_index);
at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& input,
                             const at::Tensor& target, const c10::optional<at::Tensor>& weight,
                             int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight);
// Fused log-softmax + nll (+ label smoothing) over (C,) or (N, C) logits.
at::Tensor cross_entropy(const at::Tensor& input, const at::Tensor& target,
                         const c10::optional<at::Tensor>& weight, int64_t reduction,
                         int64_t ignore_index, double label_smoothing);
at::Tensor cross_entropy_backward(const at::Tensor& grad_output, const at::Tensor& input,
                                  const at::Tensor& target, const c10::optional<at::Tensor>& weight,
                                  int64_t reduction, int64_t ignore_index, double label_smoothing);
at::Tensor mse_loss(const at::Tensor& input, const at::Tensor& target, int64_t reduction);
at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& input,
                             const at::Tensor& target, int64_t reduction);

}  // namespace cpu
}  // namespace mytorch
