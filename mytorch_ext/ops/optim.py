"""The optim family: fake kernels (the steps update in place and return nothing) and wrappers.

sgd_step_ / adam_step_ (Adam and AdamW, amsgrad, maximize; steps as tensors) take any strides;
on CUDA one launch updates every parameter where they and their state are contiguous, of one
float32 / bfloat16 / float16 dtype (SGD and AdamW without maximize or amsgrad).
"""
from __future__ import annotations

from typing import Sequence

import torch

_ops = torch.ops.mytorch


@torch.library.register_fake("mytorch::sgd_step_")
def _sgd_fake(params, grads, momentum_buffers, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
              nesterov=False, maximize=False, first_step=False):
    return None


@torch.library.register_fake("mytorch::adam_step_")
def _adam_fake(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1=0.9, beta2=0.999,
               weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False, decoupled_weight_decay=False):
    return None


def sgd_step_(params: Sequence[torch.Tensor], grads, momentum_buffers=(), *, lr, momentum=0.0, dampening=0.0,
              weight_decay=0.0, nesterov=False, maximize=False, first_step=False):
    """One SGD step (torch.optim.SGD semantics) for every param. first_step: the momentum
    buffers take the gradient (torch's first step)."""
    _ops.sgd_step_(list(params), list(grads), list(momentum_buffers), lr, momentum, dampening, weight_decay,
                   nesterov, maximize, first_step)


def adam_step_(params: Sequence[torch.Tensor], grads, exp_avgs, exp_avg_sqs, steps, *, lr, beta1=0.9, beta2=0.999,
               weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False, decoupled_weight_decay=False,
               max_exp_avg_sqs=()):
    """One Adam step (torch.optim.Adam semantics; AdamW with decoupled_weight_decay) for every
    param. steps: one 1-element tensor per param holding the step count after this step (read
    on the device on CUDA, as torch's fused Adam reads its state_steps)."""
    _ops.adam_step_(list(params), list(grads), list(exp_avgs), list(exp_avg_sqs), list(max_exp_avg_sqs),
                    list(steps), lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, decoupled_weight_decay)
