"""mytorch:: fused optimizer steps: fake kernels (they mutate in place and return nothing)."""
from __future__ import annotations

import torch


@torch.library.register_fake("mytorch::sgd_step_")
def _sgd_fake(params, grads, momentum_buffers, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
              nesterov=False, maximize=False, first_step=False):
    return None


@torch.library.register_fake("mytorch::adam_step_")
def _adam_fake(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1=0.9, beta2=0.999,
               weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False, decoupled_weight_decay=False):
    return None
