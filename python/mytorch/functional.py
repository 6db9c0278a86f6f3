"""Neural-network functions (as torch.nn.functional), each a forward and a backward kernel."""
from __future__ import annotations

import torch
from mytorch_ext.ops.attention import resolve_softmax_scale

from . import ops
from ._kernels import K
from .autograd import Function
from .random import next_seed
from .tensor import Tensor

relu, tanh, sigmoid, silu = ops.relu, ops.tanh, ops.sigmoid, ops.silu


def _pair(v):
    return [v, v] if isinstance(v, int) else list(v)


# ---- activations ----
def gelu(x, approximate: str = "none"):
    return ops.gelu(x, approximate)


# ---- softmax family ----
class Softmax(Function):
    """softmax, or log_softmax where log is set; each backward works from the output."""

    @staticmethod
    def forward(ctx, x, dim, log):
        ctx.out = (K.log_softmax if log else K.softmax)(x, dim)
        ctx.dim, ctx.log = dim, log
        return ctx.out

    @staticmethod
    def backward(ctx, g):
        grad = K.log_softmax_backward if ctx.log else K.softmax_backward
        return grad(g, ctx.out, ctx.dim), None, None


def softmax(x, dim: int = -1):
    return Softmax.apply(x, dim, False)


def log_softmax(x, dim: int = -1):
    return Softmax.apply(x, dim, True)


# ---- losses ----
_REDUCTION = {"none": 0, "mean": 1, "sum": 2}  # the kernels' int codes (at::Reduction)


def _reduction(op: str, reduction: str) -> int:
    if reduction not in _REDUCTION:
        raise RuntimeError(f"mytorch::{op}: expected reduction to be 'none', 'mean' or 'sum', got {reduction!r}")
    return _REDUCTION[reduction]


class CrossEntropy(Function):
    @staticmethod
    def forward(ctx, logits, target, reduction, ignore_index, label_smoothing):
        ctx.logits, ctx.target = logits, target
        red = _reduction("fused_cross_entropy", reduction)
        ctx.args = ignore_index, label_smoothing, red
        out, ctx.lse = K.fused_cross_entropy(logits, target, ignore_index, label_smoothing, red)
        return out

    @staticmethod
    def backward(ctx, g):
        grad = K.fused_cross_entropy_backward(g, ctx.logits, ctx.target, ctx.lse, *ctx.args)
        return grad, None, None, None, None


class MseLoss(Function):
    @staticmethod
    def forward(ctx, x, y, reduction):
        ctx.x, ctx.y, ctx.reduction = x, y, _reduction("mse_loss", reduction)
        return K.mse_loss(x, y, ctx.reduction)

    @staticmethod
    def backward(ctx, g):
        na, nb = ctx.needs_input_grad[:2]
        gx = K.mse_loss_backward(g, ctx.x, ctx.y, ctx.reduction)
        return gx if na else None, K.neg(gx) if nb else None, None


def cross_entropy(logits, target, reduction: str = "mean", ignore_index: int = -100,
                  label_smoothing: float = 0.0):
    """logits (N, C) or (N, C, d...) with integer targets (N) or (N, d...)."""
    if logits.ndim > 2:  # (N, C, d...) -> (N*d..., C)
        c = logits.shape[1]
        logits = logits.reshape(logits.shape[0], c, -1).transpose(1, 2).reshape(-1, c)
        target = target.reshape(-1)
    return CrossEntropy.apply(logits, target.data if isinstance(target, Tensor) else target,
                              reduction, ignore_index, label_smoothing)


def mse_loss(x, y, reduction: str = "mean"):
    return MseLoss.apply(x, y, reduction)


# ---- normalization ----
class LayerNorm(Function):
    @staticmethod
    def forward(ctx, x, shape, w, b, eps):
        out, ctx.mean, ctx.rstd = K.layer_norm(x, shape, w, b, eps)
        ctx.x, ctx.shape, ctx.w, ctx.b = x, shape, w, b
        return out

    @staticmethod
    def backward(ctx, g):
        _, _, nw, nb, _ = ctx.needs_input_grad
        gx, gw, gb = K.layer_norm_backward(g, ctx.x, ctx.shape, ctx.mean, ctx.rstd, ctx.w)
        return gx, None, gw if nw else None, gb if nb else None, None


class RmsNorm(Function):
    @staticmethod
    def forward(ctx, x, shape, w, eps):
        out, ctx.rstd = K.rms_norm(x, shape, w, eps)
        ctx.x, ctx.shape, ctx.w = x, shape, w
        return out

    @staticmethod
    def backward(ctx, g):
        gx, gw = K.rms_norm_backward(g, ctx.x, ctx.shape, ctx.rstd, ctx.w)
        return gx, None, gw if ctx.needs_input_grad[2] else None, None


class BatchNorm(Function):
    @staticmethod
    def forward(ctx, x, w, b, running_mean, running_var, training, momentum, eps):
        out, mean, invstd = K.batch_norm(x, w, b, running_mean, running_var, training, eps)
        if training and running_mean is not None:
            count = x.numel() // x.shape[1]
            K.batch_norm_update_stats_(running_mean, running_var, mean, invstd, momentum, eps, count)
        ctx.saved = x, w, running_mean, running_var, mean, invstd, training, eps
        return out

    @staticmethod
    def backward(ctx, g):
        nx, nw, nb = ctx.needs_input_grad[:3]
        gx, gw, gb = K.batch_norm_backward(g, *ctx.saved, [nx, nw, nb])
        return gx, gw, gb, None, None, None, None, None


def layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return LayerNorm.apply(x, shape, weight, bias, eps)


def rms_norm(x, normalized_shape, weight=None, eps: float | None = None):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return RmsNorm.apply(x, shape, weight, eps)


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
               momentum: float = 0.1, eps: float = 1e-5):
    rm = running_mean.data if running_mean is not None else None
    rv = running_var.data if running_var is not None else None
    return BatchNorm.apply(x, weight, bias, rm, rv, training, momentum, eps)


# ---- linear and convolution ----
class Linear(Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.x, ctx.w, ctx.has_bias = x, w, b is not None
        return K.linear(x, w, b)

    @staticmethod
    def backward(ctx, g):
        nx, nw, nb = ctx.needs_input_grad
        x, w = ctx.x, ctx.w
        g2 = g.reshape(-1, g.shape[-1])
        gx = K.mm(g2, w).reshape(x.shape) if nx else None
        gw = K.mm(g2.t(), x.reshape(-1, x.shape[-1])) if nw else None
        gb = K.sum(g2, [0], False) if nb else None
        return gx, gw, gb


def linear(x, weight, bias=None):
    return Linear.apply(x, weight, bias)


class Conv2d(Function):
    @staticmethod
    def forward(ctx, x, w, b, stride, padding, dilation, groups):
        ctx.x, ctx.w, ctx.args = x, w, (stride, padding, dilation, groups)
        return K.conv2d(x, w, b, stride, padding, dilation, groups)

    @staticmethod
    def backward(ctx, g):
        nx, nw, nb = ctx.needs_input_grad[:3]
        gx, gw, gb = K.conv2d_backward(g, ctx.x, ctx.w, *ctx.args, [nx, nw, nb])
        return gx, gw, gb, None, None, None, None


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups: int = 1):
    return Conv2d.apply(x, weight, bias, _pair(stride), _pair(padding), _pair(dilation), groups)


# ---- pooling ----
class MaxPool2d(Function):
    @staticmethod
    def forward(ctx, x, kernel, stride, padding, dilation, ceil_mode):
        out, ctx.idx = K.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
        ctx.x = x
        return out

    @staticmethod
    def backward(ctx, g):
        return (K.max_pool2d_backward(g, ctx.x, ctx.idx),) + (None,) * 5


class AvgPool2d(Function):
    @staticmethod
    def forward(ctx, x, *args):
        ctx.x, ctx.args = x, args
        return K.avg_pool2d(x, *args)

    @staticmethod
    def backward(ctx, g):
        return (K.avg_pool2d_backward(g, ctx.x, *ctx.args),) + (None,) * 6


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
    stride = kernel_size if stride is None else stride
    return MaxPool2d.apply(x, _pair(kernel_size), _pair(stride), _pair(padding), _pair(dilation),
                           ceil_mode)


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override=None):
    stride = kernel_size if stride is None else stride
    return AvgPool2d.apply(x, _pair(kernel_size), _pair(stride), _pair(padding), ceil_mode,
                           count_include_pad, divisor_override)


# ---- dropout and embedding ----
class Dropout(Function):
    @staticmethod
    def forward(ctx, x, p, seed):
        gen = None  # non-CPU devices draw from their own generator
        if x.device.type == "cpu":
            gen = torch.Generator().manual_seed(int(seed))
        out, ctx.mask = K.dropout(x, p, True, gen)
        ctx.scale = 0.0 if p >= 1 else 1.0 / (1.0 - p)
        return out

    @staticmethod
    def backward(ctx, g):
        return K.dropout_backward(g, ctx.mask, ctx.scale), None, None


def dropout(x, p: float = 0.5, training: bool = True):
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return x
    return Dropout.apply(x, p, next_seed())


class Embedding(Function):
    @staticmethod
    def forward(ctx, weight, idx, padding_idx):
        ctx.idx, ctx.num, ctx.padding_idx = idx, weight.shape[0], padding_idx
        return K.embedding(weight, idx, padding_idx)

    @staticmethod
    def backward(ctx, g):
        return K.embedding_backward(g, ctx.idx, ctx.num, ctx.padding_idx), None, None


def embedding(idx, weight, padding_idx: int = -1):
    return Embedding.apply(weight, idx.data if isinstance(idx, Tensor) else idx, padding_idx)


# ---- attention ----
class FlashAttn(Function):
    """(batch, seq, heads, head_dim) layout; the log-sum-exp stays for the backward."""

    @staticmethod
    def forward(ctx, q, k, v, causal, softmax_scale, dropout_p, seed, window_right=-1):
        out, lse = K.flash_attn(q, k, v, dropout_p=dropout_p, softmax_scale=softmax_scale,
                                causal=causal, window_right=window_right, seed=seed)
        ctx.saved = q, k, v, out, lse
        # the backward op takes the scale itself: the default resolved as the kernels do
        ctx.args = dropout_p, resolve_softmax_scale(softmax_scale, q.shape[-1]), causal, seed, window_right
        return out

    @staticmethod
    def backward(ctx, g):
        q, k, v, out, lse = ctx.saved
        p, scale, causal, seed, window_right = ctx.args
        dq, dk, dv = K.flash_attn_backward(
            g, q, k, v, out, lse, dropout_p=p, softmax_scale=scale, causal=causal, window_left=-1,
            window_right=window_right, softcap=0.0, alibi_slopes=None, cu_seqlens_q=None, cu_seqlens_k=None,
            max_seqlen_q=0, max_seqlen_k=0, seed=seed, deterministic=False)
        return dq, dk, dv, None, None, None, None, None


def flash_attn(q, k, v, causal: bool = False, softmax_scale: float | None = None,
               dropout_p: float = 0.0):
    """Attention over (batch, seq, heads, head_dim) tensors; softmax_scale None: 1/sqrt(head_dim)."""
    return FlashAttn.apply(q, k, v, causal, softmax_scale, dropout_p, next_seed() if dropout_p else 0)


def scaled_dot_product_attention(q, k, v, is_causal: bool = False, scale: float | None = None,
                                 dropout_p: float = 0.0):
    """As torch's: (batch, heads, seq, head_dim) in and out, through flash_attn. is_causal is
    top-left aligned, as torch's (flash_attn's causal is bottom-right): with fewer queries than
    keys the keys past the last query are never attended, so they are cut off (their gradient
    is zero); with more queries than keys, the bottom-right diagonal moves right by the
    difference (window_right)."""
    n_q, n_k = q.shape[2], k.shape[2]
    window_right = -1
    if is_causal and n_q < n_k:
        k, v = k[:, :, :n_q], v[:, :, :n_q]
    elif is_causal and n_q > n_k:
        is_causal, window_right = False, n_q - n_k
    out = FlashAttn.apply(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal, scale,
                          dropout_p, next_seed() if dropout_p else 0, window_right)
    return out.transpose(1, 2)

