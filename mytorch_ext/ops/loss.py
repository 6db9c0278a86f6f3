"""The loss family: fake kernels, autograd and public wrappers.

Every loss op takes reduction as an int, as ATen's loss schemas (0 none, 1 mean, 2 sum); the
wrappers here take 'none', 'mean' or 'sum' as torch.nn.functional does and convert once
(_reduction). nll_loss, cross_entropy (class weights, any spatial dims), mse_loss, and the
large-vocabulary cross-entropies of training: fused_cross_entropy (saves only lse: float32, or
float64 for float64 logits), fused_cross_entropy_grad (its one-pass training form) and
fused_linear_cross_entropy.
fused_cross_entropy and fused_cross_entropy_grad have their autograd in C++ too
(csrc/autograd/loss.cpp), which these registrations then leave in place.
"""
from __future__ import annotations

import torch

from .._eager_calls import call as _call
from ._autograd import register_autograd

_ops = torch.ops.mytorch
_RED = {"none": 0, "mean": 1, "sum": 2}  # at::Reduction
_NONE, _MEAN, _SUM = 0, 1, 2


def _reduction(op: str, reduction: str, allow_none: bool = True) -> int:
    """'none', 'mean' or 'sum' ('mean' or 'sum' where allow_none is False) as the ops' int."""
    if reduction in _RED and (allow_none or reduction != "none"):
        return _RED[reduction]
    accepted = "'none', 'mean' or 'sum'" if allow_none else "'mean' or 'sum'"
    raise RuntimeError(f"mytorch::{op}: expected reduction to be {accepted}, got {reduction!r}")


def _check_int_reduction(op: str, reduction: int, allow_none: bool = True):
    """The kernels' check of an int reduction (loss_checks.h: check_reduction), for the fakes."""
    accepted = "0 (none), 1 (mean) or 2 (sum)" if allow_none else "1 (mean) or 2 (sum)"
    torch._check(reduction in ((0, 1, 2) if allow_none else (1, 2)),
                 lambda: f"mytorch::{op}: expected reduction to be {accepted}, got {reduction}")


def _none_shape(x):
    return () if x.dim() == 1 else (x.shape[0], *x.shape[2:])


@torch.library.register_fake("mytorch::nll_loss")
def _nll_fake(x, target, weight=None, reduction=_MEAN, ignore_index=-100):
    out = x.new_empty(_none_shape(x) if reduction == _NONE else ())
    return out, x.new_empty(())


@torch.library.register_fake("mytorch::nll_loss_backward")
def _nll_bwd_fake(g, x, target, weight, reduction, ignore_index, total_weight):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("mytorch::cross_entropy")
def _ce_fake(x, target, weight=None, reduction=_MEAN, ignore_index=-100, label_smoothing=0.0):
    torch._check(x.dim() in (1, 2), lambda: f"mytorch::cross_entropy: expected (C,) or (N, C), got {list(x.shape)}")
    return x.new_empty(_none_shape(x) if reduction == _NONE else ())


@torch.library.register_fake("mytorch::cross_entropy_backward")
def _ce_bwd_fake(g, x, target, weight, reduction, ignore_index, label_smoothing):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.register_fake("mytorch::mse_loss")
def _mse_fake(x, target, reduction=_MEAN):
    torch._check(x.shape == target.shape, lambda: "mytorch::mse_loss: shapes differ")
    return x.new_empty(x.shape if reduction == _NONE else ())


@torch.library.register_fake("mytorch::mse_loss_backward")
def _mse_bwd_fake(g, x, target, reduction):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _nll_setup(ctx, inputs, output):
    x, target, weight, reduction, ignore_index = inputs
    ctx.args = (weight, reduction, ignore_index)
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(x, target, output[1])


def _nll_backward(ctx, g, _gtw):
    x, target, tw = ctx.saved_tensors
    weight, reduction, ignore_index = ctx.args
    gi = _ops.nll_loss_backward(g, x, target, weight, reduction, ignore_index, tw)
    return gi, None, None, None, None


def _ce_setup(ctx, inputs, output):
    x, target, weight, reduction, ignore_index, label_smoothing = inputs
    ctx.args = (weight, reduction, ignore_index, label_smoothing)
    ctx.save_for_backward(x, target)


def _ce_backward(ctx, g):
    x, target = ctx.saved_tensors
    gi = _ops.cross_entropy_backward(g, x, target, *ctx.args)
    return gi, None, None, None, None, None


def _mse_setup(ctx, inputs, output):
    x, target, reduction = inputs
    ctx.reduction = reduction
    ctx.save_for_backward(x, target)


def _mse_backward(ctx, g):
    x, target = ctx.saved_tensors
    gi = _ops.mse_loss_backward(g, x, target, ctx.reduction)
    return (gi if ctx.needs_input_grad[0] else None,
            -gi if ctx.needs_input_grad[1] else None, None)


torch.library.register_autograd("mytorch::nll_loss", _nll_backward, setup_context=_nll_setup)
torch.library.register_autograd("mytorch::cross_entropy", _ce_backward, setup_context=_ce_setup)
torch.library.register_autograd("mytorch::mse_loss", _mse_backward, setup_context=_mse_setup)


def nll_loss(x, target, weight=None, ignore_index=-100, reduction="mean"):
    """As torch.nn.functional.nll_loss (input (C,), (N, C) or (N, C, d1, ...))."""
    return _ops.nll_loss(x, target, weight, _reduction("nll_loss", reduction), ignore_index)[0]


def cross_entropy(x, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """As torch.nn.functional.cross_entropy with class-index targets; one fused kernel."""
    red = _reduction("cross_entropy", reduction)
    if x.dim() > 2:  # (N, C, d1, ...) -> (N * d1 * ..., C)
        c = x.shape[1]
        out = _ops.cross_entropy(x.movedim(1, -1).reshape(-1, c), target.reshape(-1), weight, red,
                                 ignore_index, label_smoothing)
        return out.reshape(target.shape) if red == 0 else out
    return _ops.cross_entropy(x, target, weight, red, ignore_index, label_smoothing)


def mse_loss(x, target, reduction="mean"):
    """As torch.nn.functional.mse_loss (same shapes)."""
    return _ops.mse_loss(x, target, _reduction("mse_loss", reduction))


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


# ---- fused_cross_entropy: vocab-chunked, saves only lse ----
@torch.library.register_fake("mytorch::fused_cross_entropy")
def _fce_fake(logits, target, ignore_index=-100, label_smoothing=0.0, reduction=_MEAN):
    _check_int_reduction("fused_cross_entropy", reduction)
    n = logits.shape[0]
    loss = logits.new_empty((n,) if reduction == _NONE else ())
    return loss, logits.new_empty((n,), dtype=_stat_dtype(logits))


@torch.library.register_fake("mytorch::fused_cross_entropy_backward")
def _fce_backward_fake(grad, logits, target, lse, ignore_index, label_smoothing, reduction):
    return _empty(logits)


def _fce_setup(ctx, inputs, output):
    logits, target, ignore_index, label_smoothing, reduction = inputs[:5]
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(logits, target, output[1])
    ctx.args = (ignore_index, label_smoothing, reduction)


def _fce_backward(ctx, grad, _grad_lse):
    logits, target, lse = ctx.saved_tensors
    return _ops.fused_cross_entropy_backward(grad, logits, target, lse, *ctx.args), None, None, None, None


register_autograd("mytorch::fused_cross_entropy", _fce_backward, setup_context=_fce_setup)


def _check_divisor(op, divisor):
    if divisor is not None:
        torch._check(divisor.numel() == 1,
                     lambda: f"mytorch::{op}: expected a one-element divisor, got shape {tuple(divisor.shape)}")


@torch.library.register_fake("mytorch::fused_cross_entropy_grad")
def _fce_grad_fake(logits, target, ignore_index=-100, label_smoothing=0.0, reduction=_MEAN, divisor=None):
    _check_int_reduction("fused_cross_entropy_grad", reduction, allow_none=False)
    _check_divisor("fused_cross_entropy_grad", divisor)
    return logits.new_empty(()), _empty(logits)


def _fce_grad_setup(ctx, inputs, output):
    ctx.mark_non_differentiable(output[1])
    _hold_grads(ctx, output[1:])


def _fce_grad_backward(ctx, grad, _grad_logits):
    return _hand_over(ctx, grad) + (None,) * 5


register_autograd("mytorch::fused_cross_entropy_grad", _fce_grad_backward, setup_context=_fce_grad_setup)


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
    red = _reduction("fused_cross_entropy", reduction)
    if red != _NONE and logits.requires_grad and torch.is_grad_enabled():
        d = _divisor_tensor("fused_cross_entropy_grad", divisor, logits)
        return _call("fused_cross_entropy_grad", logits, target, ignore_index, label_smoothing, red, d)[0]
    d = _divisor_tensor("fused_cross_entropy", divisor, logits)
    loss = _ops.fused_cross_entropy(logits, target, ignore_index, label_smoothing, red)[0]
    return loss if d is None else (loss.float() / d).to(loss.dtype)


# ---- fused linear + cross-entropy ----
@torch.library.register_fake("mytorch::fused_linear_cross_entropy")
def _flce_fake(input, weight, target, ignore_index=-100, label_smoothing=0.0, reduction=_MEAN, chunk_size=0,
               divisor=None):
    _check_int_reduction("fused_linear_cross_entropy", reduction, allow_none=False)
    _check_divisor("fused_linear_cross_entropy", divisor)
    return input.new_empty(()), _empty(input), _empty(weight)


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
    op = "fused_linear_cross_entropy"
    return _ops.fused_linear_cross_entropy(input, weight, target, ignore_index, label_smoothing,
                                           _reduction(op, reduction, allow_none=False), chunk_size,
                                           _divisor_tensor(op, divisor, input))[0]
