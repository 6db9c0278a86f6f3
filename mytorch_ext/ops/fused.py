"""Fused training ops: fake kernels, autograd and public wrappers.

Covers fused_cross_entropy (and fused_cross_entropy_grad, its one-pass training form),
fused_linear_cross_entropy, scale_, bias_gelu, swiglu, rope,
fused_adamw_ and fused_sgd_. lse is float32, or float64 for float64 inputs.
rms_norm, layer_norm, softmax and log_softmax here are wrappers over the canonical
ops, whose fake kernels and autograd live in norm.py and softmax.py.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from ._autograd import register_autograd

from . import norm as _norm, softmax as _softmax

_ops = torch.ops.mytorch


def _stat_dtype(x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _empty(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


# ---- gradients computed in the forward (cross-entropy, fused linear + cross-entropy) ----
def _eager(t):
    """A plain tensor outside any tracing (torch.compile, make_fx, torch.func)."""
    if type(t) is not torch.Tensor or torch._C._functorch.is_functorch_wrapped_tensor(t):
        return False
    keys = torch._C._TorchDispatchModeKey
    return all(torch._C._get_dispatch_mode(k) is None for k in (keys.PROXY, keys.FAKE, keys.FUNCTIONAL))


def _hold_grads(ctx, grads):
    ctx.save_for_backward(*grads)
    ctx.first_scale = None
    # the gradient outputs take no gradient: no zero-filled stand-ins as large as them
    ctx.set_materialize_grads(False)


def _hand_over(ctx, grad):
    """The forward's gradients (for a loss gradient of 1) times `grad`.

    Eager, first backward: scaled in place (`scale_`: no work and no host sync when grad is
    1) and returned; once autograd frees the graph nothing else holds them, so they become
    .grad without a copy. A later backward of a retained graph gets them times grad / the
    first grad, out of place (NaN if the first grad was 0 or not finite: the values are gone). Traced: out of
    place, as a functional graph needs."""
    saved = ctx.saved_tensors
    if grad is None:  # the loss is not part of what is differentiated
        return (None,) * len(saved)
    if not _eager(saved[0]):
        return tuple(g * grad.to(g.dtype) for g in saved)
    if ctx.first_scale is None:
        ctx.first_scale = grad.detach().to(torch.float32, copy=True)
        for g in saved:
            _ops.scale_(g, grad)
        return tuple(saved)
    ratio = grad.to(torch.float32) / ctx.first_scale
    return tuple(g * ratio.to(g.dtype) for g in saved)


# ---- norms, softmax: the canonical ops (fake kernels and autograd in norm.py, softmax.py) ----
def rms_norm(x, normalized_shape, weight=None, eps: Optional[float] = None):
    """torch.nn.functional.rms_norm through mytorch's kernels."""
    return _norm.rms_norm(x, normalized_shape, weight, eps)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """torch.nn.functional.layer_norm through mytorch's kernels."""
    return _norm.layer_norm(x, normalized_shape, weight, bias, eps)


def softmax(x, dim: int = -1):
    return _softmax.softmax(x, dim)


def log_softmax(x, dim: int = -1):
    return _softmax.log_softmax(x, dim)


# ---- fused_cross_entropy: vocab-chunked, saves only lse ----
@torch.library.register_fake("mytorch::fused_cross_entropy")
def _ce_fake(logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    n = logits.shape[0]
    loss = logits.new_empty((n,) if reduction == "none" else ())
    return loss, logits.new_empty((n,), dtype=_stat_dtype(logits))


@torch.library.register_fake("mytorch::fused_cross_entropy_backward")
def _ce_backward_fake(grad, logits, target, lse, ignore_index, label_smoothing, reduction):
    return _empty(logits)


def _ce_setup(ctx, inputs, output):
    logits, target, ignore_index, label_smoothing, reduction = inputs[:5]
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(logits, target, output[1])
    ctx.args = (ignore_index, label_smoothing, reduction)


def _ce_backward(ctx, grad, _grad_lse):
    logits, target, lse = ctx.saved_tensors
    return _ops.fused_cross_entropy_backward(grad, logits, target, lse, *ctx.args), None, None, None, None


register_autograd("mytorch::fused_cross_entropy", _ce_backward, setup_context=_ce_setup)


def _check_divisor(op, divisor):
    if divisor is not None:
        torch._check(divisor.numel() == 1,
                     lambda: f"mytorch::{op}: expected a one-element divisor, got shape {tuple(divisor.shape)}")


@torch.library.register_fake("mytorch::fused_cross_entropy_grad")
def _ce_grad_fake(logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean", divisor=None):
    torch._check(reduction in ("mean", "sum"),
                 lambda: f"mytorch::fused_cross_entropy_grad: expected reduction 'mean' or 'sum', got {reduction!r}")
    _check_divisor("fused_cross_entropy_grad", divisor)
    return logits.new_empty(()), _empty(logits)


def _ce_grad_setup(ctx, inputs, output):
    ctx.mark_non_differentiable(output[1])
    _hold_grads(ctx, output[1:])


def _ce_grad_backward(ctx, grad, _grad_logits):
    return _hand_over(ctx, grad) + (None,) * 5


register_autograd("mytorch::fused_cross_entropy_grad", _ce_grad_backward, setup_context=_ce_grad_setup)


def _divisor_tensor(op, divisor, like):
    """A number or one-element tensor as a 0-dim tensor on `like`'s device (None stays None);
    the checks of the ops' own (loss_checks.h), for the paths that divide here."""
    if divisor is None:
        return None
    if not torch.is_tensor(divisor):
        return torch.full((), float(divisor), dtype=torch.float32, device=like.device)
    if divisor.numel() != 1:
        raise RuntimeError(f"mytorch::{op}: expected a one-element divisor, got shape {list(divisor.shape)}")
    if divisor.dtype == torch.bool or divisor.is_complex():
        name = str(divisor.dtype).removeprefix("torch.").capitalize()  # as c10 prints it: Bool
        raise RuntimeError(f"mytorch::{op}: expected a floating or integer divisor, got {name}")
    return divisor.reshape(()).to(like.device)


def fused_cross_entropy(logits, target, ignore_index: int = -100, label_smoothing: float = 0.0,
                        reduction: str = "mean", divisor=None):
    """torch.nn.functional.cross_entropy for logits [N, C] and class targets [N], vocab-chunked,
    divided by `divisor` (a number or one-element tensor) when given.

    When the logits need a gradient (reduction 'mean' or 'sum'), the forward also writes it,
    in one pass over the logits, and backward only scales it (nothing to do for a loss
    gradient of 1) and hands it over as the logits' gradient. A loss gradient other than 1
    makes that scaling one more pass over the gradient; a known factor (a sum over the items of
    a batch, a loss divided by accumulation steps) belongs in `divisor`, which the same pass
    applies: `fused_cross_entropy(x, t, reduction="sum", divisor=n)` is `cross_entropy(x, t,
    reduction="sum") / n` at no extra cost. The separate ops
    (`torch.ops.mytorch.fused_cross_entropy` and its backward) cost the same with any loss gradient.
    """
    if reduction != "none" and logits.requires_grad and torch.is_grad_enabled():
        d = _divisor_tensor("fused_cross_entropy_grad", divisor, logits)
        return _ops.fused_cross_entropy_grad(logits, target, ignore_index, label_smoothing, reduction, d)[0]
    d = _divisor_tensor("fused_cross_entropy", divisor, logits)
    loss = _ops.fused_cross_entropy(logits, target, ignore_index, label_smoothing, reduction)[0]
    return loss if d is None else (loss.float() / d).to(loss.dtype)


# ---- fused linear + cross-entropy ----
@torch.library.register_fake("mytorch::fused_linear_cross_entropy")
def _flce_fake(input, weight, target, ignore_index=-100, label_smoothing=0.0, reduction="mean", chunk_size=0,
               divisor=None):
    torch._check(reduction in ("mean", "sum"),
                 lambda: f"mytorch::fused_linear_cross_entropy: expected reduction 'mean' or 'sum', got {reduction!r}")
    _check_divisor("fused_linear_cross_entropy", divisor)
    return input.new_empty(()), _empty(input), _empty(weight)


@torch.library.register_fake("mytorch::scale_")
def _scale_fake(self, scale):
    torch._check(scale.numel() == 1, lambda: f"mytorch::scale_: expected a one-element scale, got shape {tuple(scale.shape)}")
    return None


def _flce_setup(ctx, inputs, output):
    ctx.mark_non_differentiable(*output[1:])
    _hold_grads(ctx, output[1:])


def _flce_backward(ctx, grad, _gi, _gw):
    return _hand_over(ctx, grad) + (None,) * 6


register_autograd("mytorch::fused_linear_cross_entropy", _flce_backward, setup_context=_flce_setup)


def fused_linear_cross_entropy(input, weight, target, ignore_index: int = -100, label_smoothing: float = 0.0,
                               reduction: str = "mean", chunk_size: int = 0, divisor=None):
    """cross_entropy(input @ weight.T, target) without keeping the [N, V] logits, divided by
    `divisor` (a number or one-element tensor) when given.

    The gradients are computed during the forward, chunk by chunk; backward scales them in
    place by the incoming gradient and hands them over as .grad (see _hand_over).
    """
    return _ops.fused_linear_cross_entropy(input, weight, target, ignore_index, label_smoothing, reduction,
                                           chunk_size, _divisor_tensor("fused_linear_cross_entropy", divisor, input))[0]


# ---- bias + GELU, SwiGLU ----
@torch.library.register_fake("mytorch::bias_gelu")
def _bias_gelu_fake(x, bias, approximate="tanh"):
    return _empty(x)


@torch.library.register_fake("mytorch::bias_gelu_backward")
def _bias_gelu_backward_fake(grad, x, bias, approximate="tanh"):
    return _empty(x), _empty(bias)


def _bias_gelu_setup(ctx, inputs, output):
    x, bias, approximate = inputs[:3]
    ctx.save_for_backward(x, bias)
    ctx.approximate = approximate


def _bias_gelu_backward(ctx, grad):
    x, bias = ctx.saved_tensors
    dx, db = _ops.bias_gelu_backward(grad, x, bias, ctx.approximate)
    return dx, db, None


register_autograd("mytorch::bias_gelu", _bias_gelu_backward, setup_context=_bias_gelu_setup)


@torch.library.register_fake("mytorch::swiglu")
def _swiglu_fake(a, b):
    return _empty(a)


@torch.library.register_fake("mytorch::swiglu_backward")
def _swiglu_backward_fake(grad, a, b):
    return _empty(a), _empty(b)


def _swiglu_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1])


def _swiglu_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return tuple(_ops.swiglu_backward(grad, a, b))


register_autograd("mytorch::swiglu", _swiglu_backward, setup_context=_swiglu_setup)


def bias_gelu(x, bias, approximate: str = "tanh"):
    """gelu(x + bias), bias broadcast over the last dim."""
    return _ops.bias_gelu(x, bias, approximate)


def swiglu(a, b):
    """silu(a) * b."""
    return _ops.swiglu(a, b)


# ---- rotary position embedding ----
@torch.library.register_fake("mytorch::rope")
def _rope_fake(x, cos, sin, interleaved=False):
    return _empty(x)


@torch.library.register_fake("mytorch::rope_backward")
def _rope_backward_fake(grad, cos, sin, interleaved=False):
    return _empty(grad)


@torch.library.register_fake("mytorch::rope_")
def _rope_inplace_fake(x, cos, sin, interleaved=False):
    return None


def _rope_setup(ctx, inputs, output):
    _, cos, sin, interleaved = inputs[:4]
    ctx.save_for_backward(cos, sin)
    ctx.interleaved = interleaved


def _rope_backward(ctx, grad):
    cos, sin = ctx.saved_tensors
    return _ops.rope_backward(grad, cos, sin, ctx.interleaved), None, None, None


register_autograd("mytorch::rope", _rope_backward, setup_context=_rope_setup)


def rope(x, cos, sin, interleaved: bool = False, inplace: bool = False):
    """Rotary embedding of x (..., seq, heads, head_dim) by cos, sin (seq, rotary_dim / 2).

    Pairs are (i, i + rotary_dim/2) (GPT-NeoX / Llama), or (2i, 2i+1) when interleaved (GPT-J).
    Features past rotary_dim pass through. inplace=True overwrites x (no autograd).
    """
    if inplace:
        _ops.rope_(x, cos, sin, interleaved)
        return x
    return _ops.rope(x, cos, sin, interleaved)


# ---- multi-tensor optimizer steps ----
@torch.library.register_fake("mytorch::fused_adamw_")
def _adamw_fake(params, grads, exp_avgs, exp_avg_sqs, lr, beta1, beta2, weight_decay, eps, step):
    return None


@torch.library.register_fake("mytorch::fused_sgd_")
def _sgd_fake(params, grads, momentum_buffers, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
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
