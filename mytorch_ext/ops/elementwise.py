"""mytorch:: elementwise ops: fake kernels, autograd, public wrappers.

Results follow ATen's broadcasting and type promotion and are contiguous, so each
fake kernel is the ATen op on fake tensors, laid out contiguously.
"""
from __future__ import annotations

import torch

from ._autograd import register_autograd

_m = torch.ops.mytorch


def _contig(ref):
    return torch.empty(ref.shape, dtype=ref.dtype, device=ref.device)


def _reg_fake(name, aten_fn):
    torch.library.register_fake(f"mytorch::{name}")(lambda *a, **k: _contig(aten_fn(*a, **k)))


_ROUNDING = (None, "trunc", "floor")


def _div_fake(a, b, rounding_mode=None):
    torch._check(rounding_mode in _ROUNDING,
                 lambda: f"mytorch::div: expected rounding_mode to be None, 'trunc' or 'floor', got '{rounding_mode}'")
    return _contig(torch.div(a, b, rounding_mode=rounding_mode))


torch.library.register_fake("mytorch::div")(_div_fake)

for _name, _fn in {
    "add": lambda a, b, alpha=1: torch.add(a, b, alpha=alpha),
    "sub": lambda a, b, alpha=1: torch.sub(a, b, alpha=alpha),
    "mul": torch.mul, "maximum": torch.maximum, "minimum": torch.minimum, "pow": torch.pow,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "where": torch.where,
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
    "silu": torch.nn.functional.silu, "reciprocal": torch.reciprocal,
    "sigmoid_backward": torch.ops.aten.sigmoid_backward,
    "tanh_backward": torch.ops.aten.tanh_backward,
    "silu_backward": torch.ops.aten.silu_backward,
    "threshold_backward": torch.ops.aten.threshold_backward,
    "clamp": lambda x, min=None, max=None: torch.clamp(x, min, max),
    "clamp_tensor": lambda x, min=None, max=None: torch.clamp(x, min, max),
    "masked_fill": torch.masked_fill,
    "addcmul": lambda x, t1, t2, value=1: torch.addcmul(x, t1, t2, value=value),
    "addcdiv": lambda x, t1, t2, value=1: torch.addcdiv(x, t1, t2, value=value),
    "lerp": torch.lerp,
    "cast": lambda x, dtype: x.to(dtype),
}.items():
    _reg_fake(_name, _fn)


# ---- autograd ----
def sum_to(g: torch.Tensor, shape) -> torch.Tensor:
    """Sum g down to `shape` (undo broadcasting) with mytorch's reduction."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.dim() - len(shape)
    dims = list(range(lead)) + [lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1]
    r = _m.sum(g, dims, True) if dims else g
    if lead:
        r = r.reshape(shape)
    return r


def _float_grad(t):
    return t.is_floating_point()


def _saver(*names):
    def setup(ctx, inputs, output):
        ctx.save_for_backward(*[t if isinstance(t, torch.Tensor) else None for t in inputs], output)
        ctx.scalars = [None if isinstance(t, torch.Tensor) else t for t in inputs]
    return setup


def _save_all(ctx, inputs, output):
    tensors = [t if isinstance(t, torch.Tensor) else None for t in inputs]
    ctx.save_for_backward(*tensors, output)
    ctx.args = [None if isinstance(t, torch.Tensor) else t for t in inputs]


def _reg_grad(name, bwd):
    register_autograd(f"mytorch::{name}", bwd, setup_context=_save_all)


def _add_bwd(ctx, g):
    a, b, _, _ = ctx.saved_tensors
    alpha = ctx.args[2]
    gb = g if alpha == 1 else _m.mul(g, torch.tensor(alpha, dtype=g.dtype))
    return sum_to(g, a.shape), sum_to(gb, b.shape), None


def _sub_bwd(ctx, g):
    a, b, _, _ = ctx.saved_tensors
    gb = _m.mul(g, torch.tensor(-ctx.args[2], dtype=g.dtype))
    return sum_to(g, a.shape), sum_to(gb, b.shape), None


def _mul_bwd(ctx, g):
    a, b, _ = ctx.saved_tensors
    return sum_to(_m.mul(g, b), a.shape), sum_to(_m.mul(g, a), b.shape)


def _div_bwd(ctx, g):
    a, b, _, y = ctx.saved_tensors
    if ctx.args[2] is not None:  # rounding: piecewise constant
        return sum_to(_m.mul(g, torch.zeros((), dtype=g.dtype)), a.shape), \
            sum_to(_m.mul(g, torch.zeros((), dtype=g.dtype)), b.shape), None
    ga = _m.div(g, b)
    gb = _m.neg(_m.mul(ga, y))
    return sum_to(ga, a.shape), sum_to(gb, b.shape), None


def _minmax_bwd(pick):
    def bwd(ctx, g):
        a, b, _ = ctx.saved_tensors
        half = _m.mul(g, torch.tensor(0.5, dtype=g.dtype))
        zero = torch.zeros((), dtype=g.dtype)
        tie = _m.eq(a, b)
        ga = _m.where(tie, half, _m.where(pick(a, b), g, zero))
        gb = _m.where(tie, half, _m.where(pick(b, a), g, zero))
        return sum_to(ga, a.shape), sum_to(gb, b.shape)
    return bwd


def _pow_bwd(ctx, g):
    a, b, y = ctx.saved_tensors
    one = torch.ones((), dtype=b.dtype)
    ga = _m.mul(_m.mul(g, b), _m.pow(a, _m.sub(b, one)))
    # d/db a^b = a^b log a, taken as 0 where a == 0 and b >= 0 (as ATen does)
    mask = _m.eq(a, torch.zeros((), dtype=a.dtype))
    loga = _m.where(mask, torch.zeros((), dtype=a.dtype), _m.log(a))
    gb = _m.mul(_m.mul(g, y), loga)
    return sum_to(ga, a.shape), sum_to(gb, b.shape)


def _where_bwd(ctx, g):
    c, a, b, _ = ctx.saved_tensors
    zero = torch.zeros((), dtype=g.dtype)
    return None, sum_to(_m.where(c, g, zero), a.shape), sum_to(_m.where(c, zero, g), b.shape)


def _unary(fn):
    def bwd(ctx, g):
        x, y = ctx.saved_tensors
        return fn(g, x, y)
    return bwd


def _clamp_bwd(ctx, g):
    x, _, _, _ = ctx.saved_tensors
    lo, hi = ctx.args[1], ctx.args[2]
    keep = torch.ones((), dtype=torch.bool)
    if lo is not None:
        keep = _m.ge(x, torch.tensor(lo, dtype=x.dtype))
    if hi is not None:
        le = _m.le(x, torch.tensor(hi, dtype=x.dtype))
        keep = _m.where(keep, le, torch.zeros((), dtype=torch.bool))
    return _m.where(keep, g, torch.zeros((), dtype=g.dtype)), None, None


def _masked_fill_bwd(ctx, g):
    x, mask, _ = ctx.saved_tensors[:3]
    return _m.masked_fill(g, mask, 0.0), None, None


def _scaled(t, value):
    return t if value == 1 else _m.mul(t, torch.tensor(value, dtype=t.dtype))


def _addcmul_bwd(ctx, g):
    x, t1, t2 = ctx.saved_tensors[:3]
    gv = _scaled(g, ctx.args[3])
    return sum_to(g, x.shape), sum_to(_m.mul(gv, t2), t1.shape), sum_to(_m.mul(gv, t1), t2.shape), None


def _addcdiv_bwd(ctx, g):
    x, t1, t2 = ctx.saved_tensors[:3]
    g1 = _m.div(_scaled(g, ctx.args[3]), t2)
    g2 = _m.neg(_m.div(_m.mul(g1, t1), t2))
    return sum_to(g, x.shape), sum_to(g1, t1.shape), sum_to(g2, t2.shape), None


def _lerp_bwd(ctx, g):
    x, end, w = ctx.saved_tensors[:3]
    gend = _m.mul(g, w)
    return sum_to(_m.sub(g, gend), x.shape), sum_to(gend, end.shape), sum_to(_m.mul(g, _m.sub(end, x)), w.shape)


def _no_grad_formula(name):
    def bwd(ctx, *grads):
        raise NotImplementedError(f"mytorch::{name}: no gradient formula yet; "
                                  "call it under torch.no_grad() or use the ATen op for training")
    return bwd


def _cast_bwd(ctx, g):
    x = ctx.saved_tensors[0]
    return _m.cast(g, x.dtype), None


_reg_grad("add", _add_bwd)
_reg_grad("sub", _sub_bwd)
_reg_grad("mul", _mul_bwd)
_reg_grad("div", _div_bwd)
_reg_grad("maximum", _minmax_bwd(lambda p, q: _m.gt(p, q)))
_reg_grad("minimum", _minmax_bwd(lambda p, q: _m.lt(p, q)))
_reg_grad("pow", _pow_bwd)
_reg_grad("where", _where_bwd)
_reg_grad("neg", _unary(lambda g, x, y: _m.neg(g)))
# At most one CPU scalar per call: a 0-dim x on another device allows no more.
_reg_grad("abs", _unary(lambda g, x, y: _m.where(_m.lt(x, torch.zeros((), dtype=x.dtype)), _m.neg(g),
                                                 _m.where(_m.eq(x, torch.zeros((), dtype=x.dtype)),
                                                          torch.zeros((), dtype=g.dtype), g))))
_reg_grad("exp", _unary(lambda g, x, y: _m.mul(g, y)))
_reg_grad("log", _unary(lambda g, x, y: _m.div(g, x)))
_reg_grad("sqrt", _unary(lambda g, x, y: _m.div(g, _m.mul(y, torch.tensor(2.0, dtype=y.dtype)))))
_reg_grad("rsqrt", _unary(lambda g, x, y: _m.mul(g, _m.mul(_m.pow(y, torch.tensor(3.0, dtype=y.dtype)),
                                                           torch.tensor(-0.5, dtype=y.dtype)))))
_reg_grad("tanh", _unary(lambda g, x, y: _m.tanh_backward(g, y)))
_reg_grad("sigmoid", _unary(lambda g, x, y: _m.sigmoid_backward(g, y)))
_reg_grad("relu", _unary(lambda g, x, y: _m.threshold_backward(g, y, 0)))
_reg_grad("silu", _unary(lambda g, x, y: _m.silu_backward(g, x)))
_reg_grad("reciprocal", _unary(lambda g, x, y: _m.neg(_m.mul(g, _m.mul(y, y)))))
_reg_grad("clamp", _clamp_bwd)
_reg_grad("masked_fill", _masked_fill_bwd)
_reg_grad("cast", _cast_bwd)
_reg_grad("addcmul", _addcmul_bwd)
_reg_grad("addcdiv", _addcdiv_bwd)
_reg_grad("lerp", _lerp_bwd)
_reg_grad("clamp_tensor", _no_grad_formula("clamp_tensor"))


# ---- public wrappers ----
def add(a, b, alpha=1):
    return _m.add(a, b, alpha)


def div(a, b, rounding_mode=None):
    return _m.div(a, b, rounding_mode)


def cast(x, dtype):
    return _m.cast(x, dtype)
