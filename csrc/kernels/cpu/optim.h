// Fused optimizer steps (optim.cpp), shared by torch.ops.mytorch and aten::_fused_*.
#pragma once
#include <ATen/ATen.h>

namespace mytorch {
namespace cpu {

void sgd_step_(at::TensorList params, at::TensorList grads, at::TensorList momentum_buffers, double lr,
               double momentum, double dampening, double weight_decay, bool nesterov, bool maximize,
               bool first_step, const std::optional<at::Tensor>& grad_scale,
               const std::optional<at::Tensor>& found_inf);
// steps: one 1-element tensor per param holding the step count after this step's increment.
// decoupled: AdamW weight decay.
void adam_step_(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList steps,
                double lr, double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                bool maximize, bool decoupled, const std::optional<at::Tensor>& grad_scale,
                const std::optional<at::Tensor>& found_inf);

}  // namespace cpu
}  // namespace mytorch
