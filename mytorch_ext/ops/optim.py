"""The optim family: fake kernels (the steps update in place and return nothing) and wrappers.

sgd_step_ / adam_step_: one kernel call per parameter, any strides (Adam and AdamW, amsgrad,
maximize; steps as tensors). fused_sgd_ / fused_adamw_: every parameter in one launch on CUDA
(contiguous parameters, step as an int).
"""
from __future__ import annotations

from typing import Sequence

import torch

_ops = torch.ops.mytorch


# ---- per-parameter steps ----
@torch.library.register_fake("mytorch::sgd_step_")
def _sgd_fake(params, grads, momentum_buffers, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
              nesterov=False, maximize=False, first_step=False):
    return None


@torch.library.register_fake("mytorch::adam_step_")
def _adam_fake(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1=0.9, beta2=0.999,
               weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False, decoupled_weight_decay=False):
    return None


# ---- multi-tensor optimizer steps ----
@torch.library.register_fake("mytorch::fused_adamw_")
def _fused_adamw_fake(params, grads, exp_avgs, exp_avg_sqs, lr, beta1, beta2, weight_decay, eps, step):
    return None


@torch.library.register_fake("mytorch::fused_sgd_")
def _fused_sgd_fake(params, grads, momentum_buffers, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
              first_step=False):
    return None


def fused_adamw_(params: Sequence[torch.Tensor], grads, exp_avgs, exp_avg_sqs, *, lr, beta1=0.9, beta2=0.999,
                 weight_decay=0.01, eps=1e-8, step: int):
    """One AdamW step (torch.optim.AdamW semantics) for every param, in one launch on CUDA."""
    _ops.fused_adamw_(list(params), list(grads), list(exp_avgs), list(exp_avg_sqs), lr, beta1, beta2, weight_decay,
                      eps, step)


def fused_sgd_(params: Sequence[torch.Tensor], grads, momentum_buffers=(), *, lr, momentum=0.0, dampening=0.0,
               weight_decay=0.0, nesterov=False, first_step=False):
    """One SGD step (torch.optim.SGD semantics) for every param, in one launch on CUDA."""
    _ops.fused_sgd_(list(params), list(grads), list(momentum_buffers), lr, momentum, dampening, weight_decay,
                    nesterov, first_step)
