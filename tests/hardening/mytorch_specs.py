"""How to draw valid arguments for every mytorch:: op, and its ATen reference.

A spec's `sample(draw, dtype)` returns (args, kwargs) with TensorCase placeholders; `ref`
computes the same result with ATen on CPU tensors. `grad` lists the argument positions the
fuzz test differentiates (through the op's autograd, which reaches its *_backward op);
`covers` names every registered op the spec reaches, checked against the op log.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from strategies import (FLOATS, FP32_64, TOL, broadcast_shapes, dims_of, shapes, tensors)

A = torch.ops.aten
M = torch.ops.mytorch


@dataclasses.dataclass
class Spec:
    name: str                      # the op, e.g. "mytorch::add"
    sample: Callable               # (draw, dtype) -> (args, kwargs)
    ref: Callable                  # ATen reference on CPU tensors
    dtypes: tuple = FLOATS
    grad: tuple = ()               # positions of the args that get gradients
    covers: tuple = ()             # other registered ops it reaches (backward ops)
    fn: Callable | None = None     # what runs; default torch.ops.mytorch.<name>
    ref_dtypes: bool = True        # the reference at the input dtypes gives the result dtypes
    grad_output: int = 0           # which result the gradient flows from
    mutates: tuple = ()            # positions of args updated in place (compared after the call)
    exact_ref: bool = False        # reference at the input dtypes, not float64
    check: Callable | None = None  # a property of (cpu args, result) where no reference exists
    ref_uses_dtype: bool = False   # ref takes _dtype=, the input dtype before the float64 upcast
    aliases: tuple = ()            # other op names its error messages may use

    def __post_init__(self):
        if self.fn is None:
            op = getattr(M, self.name.split("::")[1])
            self.fn = op
        self.covers = (self.name,) + tuple(self.covers)


SPECS: dict[str, Spec] = {}


def spec(name, sample, ref, **kw):
    SPECS[f"mytorch::{name}"] = Spec(f"mytorch::{name}", sample, ref, **kw)


def T(draw, shape, dtype, **kw):
    return draw(tensors(tuple(shape), dtype, **kw))


def second_dtype(draw, dtype, dtypes):
    """The other operand's dtype: mostly the same, sometimes one that promotes."""
    return draw(st.sampled_from([dtype, dtype, *dtypes]))


# ---- elementwise binary (broadcasting, type promotion) ----
def _binary(values_b="normal", kw=None):
    def sample(draw, dtype):
        sa, sb = draw(broadcast_shapes(2))
        a = T(draw, sa, dtype)
        b = T(draw, sb, second_dtype(draw, dtype, FLOATS), values=values_b)
        return (a, b), (draw(kw) if kw is not None else {})
    return sample


_alpha = st.fixed_dictionaries({}, optional={"alpha": st.sampled_from([2, -0.5, 1])})
spec("add", _binary(kw=_alpha), lambda a, b, alpha=1: torch.add(a, b, alpha=alpha))
spec("sub", _binary(kw=_alpha), lambda a, b, alpha=1: torch.sub(a, b, alpha=alpha))
spec("mul", _binary(), torch.mul, grad=(0, 1))
spec("div", _binary(values_b="positive"), torch.div, grad=(0, 1))
spec("maximum", _binary(), torch.maximum)
spec("minimum", _binary(), torch.minimum)
spec("pow", _binary(), torch.pow)
for _cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
    # at the input dtypes: a float64 0-dim operand does not promote a float32 tensor, so
    # comparing in float64 would be another question
    spec(_cmp, _binary(), getattr(torch, _cmp), exact_ref=True)


def _div_rounding(draw, dtype):
    (a, b), _ = _binary("positive")(draw, dtype)
    return (a, b), {"rounding_mode": draw(st.sampled_from(["trunc", "floor"]))}


SPECS["mytorch::div.rounding"] = Spec("mytorch::div", _div_rounding,
                                      lambda a, b, rounding_mode: torch.div(a, b, rounding_mode=rounding_mode),
                                      exact_ref=True)


# ---- elementwise unary, with their backward ops through autograd ----
def _unary(values="normal"):
    def sample(draw, dtype):
        return (T(draw, draw(shapes()), dtype, values=values),), {}
    return sample


def _act(name, values="normal", backward=None):
    spec(name, _unary(values), getattr(torch, name) if hasattr(torch, name) else getattr(F, name),
         grad=(0,), covers=(backward,) if backward else ())


for _n in ("neg", "abs", "exp", "tanh", "sigmoid", "relu", "reciprocal"):
    _act(_n, backward={"tanh": "mytorch::tanh_backward", "sigmoid": "mytorch::sigmoid_backward",
                       "relu": "mytorch::threshold_backward"}.get(_n))
for _n in ("log", "sqrt", "rsqrt"):
    _act(_n, "positive")
spec("silu", _unary(), F.silu, grad=(0,), covers=("mytorch::silu_backward",))
spec("hardswish", _unary(), F.hardswish, grad=(0,), covers=("mytorch::hardswish_backward",))
spec("hardsigmoid", _unary(), F.hardsigmoid, grad=(0,), covers=("mytorch::hardsigmoid_backward",))


def _gelu(draw, dtype):
    (x,), _ = _unary()(draw, dtype)
    return (x,), {"approximate": draw(st.sampled_from(["none", "tanh"]))}


spec("gelu", _gelu, lambda x, approximate="none": F.gelu(x, approximate=approximate), grad=(0,),
     covers=("mytorch::gelu_backward",))


def _grad_and(op_values="normal"):
    def sample(draw, dtype):
        shape = draw(shapes())
        return (T(draw, shape, dtype), T(draw, shape, dtype, values=op_values)), {}
    return sample


spec("sigmoid_backward", _grad_and("unit"), A.sigmoid_backward)
spec("tanh_backward", _grad_and(), A.tanh_backward)
spec("silu_backward", _grad_and(), A.silu_backward)
spec("hardswish_backward", _grad_and(), A.hardswish_backward)
spec("hardsigmoid_backward", _grad_and(), A.hardsigmoid_backward)


def _threshold_bw(draw, dtype):
    (g, x), _ = _grad_and()(draw, dtype)
    return (g, x, draw(st.sampled_from([0, 0.5, -1.0]))), {}


spec("threshold_backward", _threshold_bw, A.threshold_backward)


def _gelu_bw(draw, dtype):
    (g, x), _ = _grad_and()(draw, dtype)
    return (g, x), {"approximate": draw(st.sampled_from(["none", "tanh"]))}


spec("gelu_backward", _gelu_bw, lambda g, x, approximate="none": A.gelu_backward(g, x, approximate=approximate))


# ---- elementwise with three operands, scalars, casts ----
def _where(draw, dtype):
    sc, sa, sb = draw(broadcast_shapes(3))
    return (T(draw, sc, torch.bool, values="bool"), T(draw, sa, dtype),
            T(draw, sb, second_dtype(draw, dtype, FLOATS))), {}


spec("where", _where, torch.where, grad=(1, 2))

_bound = st.one_of(st.none(), st.sampled_from([-0.5, 0.0, 0.7, 2]))


def _clamp(draw, dtype):
    (x,), _ = _unary()(draw, dtype)
    return (x, draw(_bound), draw(_bound)), {}


spec("clamp", _clamp, torch.clamp, grad=(0,))


def _clamp_tensor(draw, dtype):
    sx, s1, s2 = draw(broadcast_shapes(3))
    lo = draw(st.one_of(st.none(), st.just(T(draw, s1, dtype))))
    hi = draw(st.one_of(st.none(), st.just(T(draw, s2, dtype))))
    return (T(draw, sx, dtype), lo, hi), {}


spec("clamp_tensor", _clamp_tensor, torch.clamp)


def _masked_fill(draw, dtype):
    sx, sm = draw(broadcast_shapes(2))
    return (T(draw, sx, dtype), T(draw, sm, torch.bool, values="bool"),
            draw(st.sampled_from([0.0, -1.5, float("-inf"), 3]))), {}


spec("masked_fill", _masked_fill, torch.masked_fill, grad=(0,))


def _ternary(values_c="normal"):
    def sample(draw, dtype):
        s = draw(broadcast_shapes(3))
        return (T(draw, s[0], dtype), T(draw, s[1], dtype), T(draw, s[2], dtype, values=values_c)), {}
    return sample


def _with_value(values_c="normal"):
    def sample(draw, dtype):
        args, _ = _ternary(values_c)(draw, dtype)
        return args, {"value": draw(st.sampled_from([1, -0.5, 2.0]))}
    return sample


spec("addcmul", _with_value(), lambda x, a, b, value=1: torch.addcmul(x, a, b, value=value), grad=(0, 1, 2))
spec("addcdiv", _with_value("positive"), lambda x, a, b, value=1: torch.addcdiv(x, a, b, value=value),
     grad=(0, 1, 2))
spec("lerp", _ternary("unit"), torch.lerp, grad=(0, 1, 2))


def _cast(draw, dtype):
    (x,), _ = _unary()(draw, dtype)
    return (x, draw(st.sampled_from([*FLOATS, torch.int64, torch.int32, torch.bool]))), {}


spec("cast", _cast, lambda x, dtype: x.to(dtype), grad=(), exact_ref=True)


# ---- reductions ----
@st.composite
def _dim_list(draw, ndim, allow_none=True):
    if allow_none and draw(st.booleans()):
        return None
    n = max(ndim, 1)
    dims = draw(st.lists(st.integers(0, n - 1), unique=True, max_size=n))
    return [d - n if draw(st.booleans()) else d for d in dims]


def _reduce(values="normal", dtype_kw=False, allow_none=True, correction=False, min_dims=0):
    def sample(draw, dtype):
        shape = draw(shapes(min_dims=min_dims))
        x = T(draw, shape, dtype, values=values)
        kw = {"dim": draw(_dim_list(len(shape), allow_none)), "keepdim": draw(st.booleans())}
        if dtype_kw:
            kw["dtype"] = draw(st.sampled_from([None, torch.float64, torch.float32]))
        if correction:
            kw["correction"] = draw(st.sampled_from([0, 1, 2]))
        return (x,), kw
    return sample


def _aten_dims(dim):
    return dim if dim is not None else []


spec("sum", _reduce(dtype_kw=True),
     lambda x, dim=None, keepdim=False, dtype=None: torch.sum(x, _aten_dims(dim), keepdim, dtype=dtype), grad=(0,))
spec("mean", _reduce(dtype_kw=True),
     lambda x, dim=None, keepdim=False, dtype=None: torch.mean(x, _aten_dims(dim), keepdim, dtype=dtype), grad=(0,))


def _prod_ref(x, dim=None, keepdim=False):
    if dim is None or len(dim) == 0:
        out = torch.prod(x)
        return out.reshape([1] * x.dim()) if keepdim else out
    out = x
    for d in sorted([d % max(x.dim(), 1) for d in dim], reverse=True):
        out = torch.prod(out, d, keepdim=keepdim)
    return out


# Known gap: mytorch::prod has no gradient formula (its backward raises a clear error), so
# its gradients are not compared.
spec("prod", _reduce("unit"), _prod_ref)
spec("amax", _reduce(allow_none=False), lambda x, dim=(), keepdim=False: torch.amax(x, dim, keepdim), grad=(0,))
spec("amin", _reduce(allow_none=False), lambda x, dim=(), keepdim=False: torch.amin(x, dim, keepdim), grad=(0,))
# dim=[] reduces every dim, as dim=None; the reference says None because ATen's backward for
# dim=[] scales by 2 / (1 - correction), not 2 / (numel - correction) as its forward implies
spec("var", _reduce(correction=True), lambda x, dim=None, correction=1, keepdim=False:
     torch.var(x, None if dim == [] else dim, correction=correction, keepdim=keepdim), grad=(0,))
spec("std", _reduce(correction=True), lambda x, dim=None, correction=1, keepdim=False:
     torch.std(x, None if dim == [] else dim, correction=correction, keepdim=keepdim), grad=(0,))
def _lse_ref(x, dim, keepdim=False):
    # mytorch's reductions read dim=[] as every dim; ATen's logsumexp rejects it.
    return torch.logsumexp(x, dim if dim else list(range(x.dim())), keepdim)


spec("logsumexp", _reduce(allow_none=False), _lse_ref,
     grad=(0,))


def _one_dim(optional=False):
    def sample(draw, dtype):
        shape = draw(shapes())
        dim = draw(dims_of(len(shape)))
        if optional and draw(st.booleans()):
            dim = None
        return (T(draw, shape, dtype),), {"dim": dim, "keepdim": draw(st.booleans())}
    return sample


spec("max_dim", _one_dim(), lambda x, dim, keepdim=False: tuple(torch.max(x, dim, keepdim)), grad=(0,),
     exact_ref=True, aliases=("mytorch::max",))
spec("min_dim", _one_dim(), lambda x, dim, keepdim=False: tuple(torch.min(x, dim, keepdim)), grad=(0,),
     exact_ref=True, aliases=("mytorch::min",))
spec("argmax", _one_dim(True), lambda x, dim=None, keepdim=False: torch.argmax(x, dim, keepdim), exact_ref=True,
     aliases=("mytorch::max",))
spec("argmin", _one_dim(True), lambda x, dim=None, keepdim=False: torch.argmin(x, dim, keepdim), exact_ref=True,
     aliases=("mytorch::min",))


# ---- indexing ----
_INDEX_DTYPES = st.sampled_from([torch.int64, torch.int32])


def _index_select(draw, dtype):
    shape = draw(shapes(min_dims=1))
    dim = draw(dims_of(len(shape)))
    size = shape[dim]
    n = draw(st.integers(0, 5)) if size > 0 else 0
    idx = T(draw, (n,), draw(_INDEX_DTYPES), values=f"int:0:{max(size, 1)}", layout="contiguous")
    return (T(draw, shape, dtype), dim, idx), {}


spec("index_select", _index_select, torch.index_select, grad=(0,))


def _gather_like(draw, dtype, with_src=False):
    shape = draw(shapes(min_dims=1))
    dim = draw(dims_of(len(shape)))
    size = shape[dim]
    ishape = [draw(st.integers(0, s)) for s in shape]
    ishape[dim] = draw(st.integers(0, 5)) if size > 0 else 0
    idx = T(draw, ishape, torch.int64, values=f"int:0:{max(size, 1)}")
    x = T(draw, shape, dtype)
    if with_src:
        # src larger than index is valid, but ATen's own scatter_add backward (the
        # reference) rejects it, so the gradient check uses src of index's shape.
        sshape = list(ishape)
        return (x, dim, idx, T(draw, sshape, dtype)), {}
    return (x, dim, idx), {}


spec("gather", _gather_like, torch.gather, grad=(0,))
spec("scatter_add", lambda d, t: _gather_like(d, t, True), torch.scatter_add, grad=(0, 3))


def _index(draw, dtype):
    shape = draw(shapes(min_dims=1))
    pos = draw(st.integers(0, len(shape) - 1))
    if draw(st.booleans()):
        idx = T(draw, (draw(st.integers(0, 5)) if shape[pos] else 0,), draw(_INDEX_DTYPES),
                values=f"int:{-shape[pos]}:{max(shape[pos], 1)}", layout="contiguous")
    else:
        idx = T(draw, (shape[pos],), torch.bool, values="bool", layout="contiguous")
    return (T(draw, shape, dtype), [None] * pos + [idx]), {}


spec("index", _index, lambda x, indices: x[tuple(slice(None) if i is None else i for i in indices)], grad=(0,))


def _index_put(draw, dtype):
    shape = draw(shapes(min_dims=1))
    pos = draw(st.integers(0, len(shape) - 1))
    accumulate = draw(st.booleans())
    n = shape[pos]
    if accumulate:
        k = draw(st.integers(0, 5)) if n else 0
        idx = T(draw, (k,), torch.int64, values=f"int:0:{max(n, 1)}", layout="contiguous")
    else:  # distinct positions: a repeated one has no defined winner
        k = draw(st.integers(0, n))
        idx = T(draw, (k,), torch.int64, values=f"perm:{n}", layout="contiguous")
    vshape = list(shape)
    vshape[pos] = k
    vshape = vshape[pos:] if draw(st.booleans()) else vshape  # broadcasts either way
    return (T(draw, shape, dtype), [None] * pos + [idx], T(draw, vshape, dtype), accumulate), {}


spec("index_put", _index_put,
     lambda x, indices, values, accumulate=False: A.index_put(x, indices, values, accumulate), grad=(0, 2))


def _cat(draw, dtype):
    shape = draw(shapes(min_dims=1))
    dim = draw(dims_of(len(shape)))
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        s = list(shape)
        s[dim] = draw(st.integers(0, 4))
        parts.append(T(draw, s, dtype))
    return (parts, dim), {}


spec("cat", _cat, torch.cat, grad=())


def _nonzero(draw, dtype):
    return (T(draw, draw(shapes()), dtype, values="int:-1:2"),), {}


spec("nonzero", _nonzero, torch.nonzero, exact_ref=True)


# ---- gemm ----
_side = st.integers(0, 7)


def _mm(draw, dtype):
    n, k, m = draw(_side), draw(_side), draw(_side)
    return (T(draw, (n, k), dtype), T(draw, (k, m), dtype)), {}


def _bmm(draw, dtype):
    b, n, k, m = draw(st.integers(0, 3)), draw(_side), draw(_side), draw(_side)
    return (T(draw, (b, n, k), dtype), T(draw, (b, k, m), dtype)), {}


_scales = st.fixed_dictionaries({"beta": st.sampled_from([1, 0, 0.5]), "alpha": st.sampled_from([1, -2.0])})


def _addmm(draw, dtype):
    (a, b), _ = _mm(draw, dtype)
    out = (a.shape[0], b.shape[1])
    sshape = draw(st.sampled_from([out, out[1:], (1, out[1]), (out[0], 1), ()]))
    return (T(draw, sshape, dtype), a, b), draw(_scales)


def _baddbmm(draw, dtype):
    (a, b), _ = _bmm(draw, dtype)
    out = (a.shape[0], a.shape[1], b.shape[2])
    sshape = draw(st.sampled_from([out, out[1:], (1, 1, out[2])]))
    return (T(draw, sshape, dtype), a, b), draw(_scales)


def _linear(draw, dtype):
    lead = draw(shapes(max_dims=2, max_side=4))
    k, n = draw(_side), draw(_side)
    bias = draw(st.one_of(st.none(), st.just(T(draw, (n,), dtype))))
    return (T(draw, (*lead, k), dtype), T(draw, (n, k), dtype), bias), {}


spec("mm", _mm, torch.mm, grad=(0, 1))
spec("bmm", _bmm, torch.bmm, grad=(0, 1))
spec("addmm", _addmm, lambda s, a, b, beta=1, alpha=1: torch.addmm(s, a, b, beta=beta, alpha=alpha), grad=(0, 1, 2))
spec("baddbmm", _baddbmm, lambda s, a, b, beta=1, alpha=1: torch.baddbmm(s, a, b, beta=beta, alpha=alpha),
     grad=(0, 1, 2))
spec("linear", _linear, F.linear, grad=(0, 1, 2))


# ---- softmax ----
def _softmax(draw, dtype):
    shape = draw(shapes())
    return (T(draw, shape, dtype), draw(dims_of(len(shape)))), {}


spec("softmax", _softmax, lambda x, dim: torch.softmax(x, dim), grad=(0,), covers=("mytorch::softmax_backward",))
spec("log_softmax", _softmax, lambda x, dim: torch.log_softmax(x, dim), grad=(0,),
     covers=("mytorch::log_softmax_backward",))


# ---- norms ----
def _norm_args(draw, dtype, affine_bias=True):
    # Normalized dims hold at least one value: over none, mean and rstd are undefined
    # (ATen reports mean 0, mytorch NaN).
    ns = list(draw(shapes(min_dims=1, max_dims=2, min_side=1)))
    shape = list(draw(shapes(max_dims=2))) + ns
    w = draw(st.one_of(st.none(), st.just(T(draw, ns, dtype))))
    b = draw(st.one_of(st.none(), st.just(T(draw, ns, dtype)))) if affine_bias else None
    return T(draw, shape, dtype), ns, w, b


def _layer_norm(draw, dtype):
    x, ns, w, b = _norm_args(draw, dtype)
    return (x, ns, w, b, draw(st.sampled_from([1e-5, 1e-3]))), {}


def _ln_ref(x, ns, w, b, eps):
    # mean and rstd in the accumulation dtype (float32 for 16-bit inputs), as ATen's CUDA kernels
    # and its reference for devices other than the CPU; ATen's CPU kernel keeps the input's dtype
    out, mean, rstd = A.native_layer_norm(x, ns, w, b, eps)
    acc = torch.float32 if x.dtype in (torch.bfloat16, torch.float16) else x.dtype
    return out, mean.to(acc), rstd.to(acc)


spec("layer_norm", _layer_norm, _ln_ref, grad=(0, 2, 3), covers=("mytorch::layer_norm_backward",))


def _rms_norm(draw, dtype):
    x, ns, w, _ = _norm_args(draw, dtype, affine_bias=False)
    return (x, ns, w, draw(st.sampled_from([None, 1e-6, 1e-3]))), {}


def _rms_ref(x, ns, w, eps, _dtype=None):
    if eps is None:  # the default eps is that of the input dtype, not of the float64 reference
        eps = torch.finfo(_dtype or x.dtype).eps
    return tuple(A._fused_rms_norm(x, ns, w, eps))


spec("rms_norm", _rms_norm, _rms_ref, ref_uses_dtype=True,
     grad=(0, 2), covers=("mytorch::rms_norm_backward",))


# ---- losses ----
def _classes(draw, dtype, spatial=False, one_d=True):
    c = draw(st.integers(1, 6))
    kind = draw(st.sampled_from(["1d", "2d", "2d", "4d"] if spatial else (["1d", "2d"] if one_d else ["2d"])))
    n = draw(st.integers(0, 5))
    if kind == "1d":
        shape, tshape = (c,), ()
    elif kind == "2d":
        shape, tshape = (n, c), (n,)
    else:
        h, w = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        shape, tshape = (n, c, h, w), (n, h, w)
    ignore = draw(st.sampled_from([-100, 0, c - 1]))
    target = T(draw, tshape, torch.int64, values=f"int:0:{c}", layout="contiguous")
    weight = draw(st.one_of(st.none(), st.just(T(draw, (c,), dtype, values="positive"))))
    return T(draw, shape, dtype), target, weight, ignore


def _nll_ref(x, t, w, reduction, ignore):
    f = A.nll_loss2d_forward if x.dim() == 4 else A.nll_loss_forward
    if x.dim() == 4:  # ATen's nll_loss2d_backward refuses a non-contiguous input (same values)
        x = x.contiguous()
    return _loss_only(tuple(f(x, t, w, reduction, ignore)), reduction)


def _loss_only(out, reduction):
    """total_weight is undefined with reduction='none' (ATen fills it arbitrarily)."""
    return out[:1] if reduction == 0 else out


def _nll(draw, dtype):
    x, t, w, ignore = _classes(draw, dtype, spatial=True)
    return (x, t, w, draw(st.sampled_from([0, 1, 2])), ignore), {}


spec("nll_loss", _nll, _nll_ref, grad=(0,), covers=("mytorch::nll_loss_backward",),
     fn=lambda x, t, w, r, ig: _loss_only(M.nll_loss(x, t, w, r, ig), r))

_REDUCTIONS = ["none", "mean", "sum"]


def _ce(draw, dtype):
    x, t, w, ignore = _classes(draw, dtype)
    return (x, t, w, draw(st.sampled_from([0, 1, 2])), ignore, draw(st.sampled_from([0.0, 0.1]))), {}


spec("cross_entropy", _ce, lambda x, t, w, r, ig, ls: F.cross_entropy(
    x, t, w, reduction=_REDUCTIONS[r], ignore_index=ig, label_smoothing=ls),
    grad=(0,), covers=("mytorch::cross_entropy_backward",))


def _mse(draw, dtype):
    shape = draw(shapes())
    return (T(draw, shape, dtype), T(draw, shape, dtype), draw(st.sampled_from([0, 1, 2]))), {}


spec("mse_loss", _mse, lambda a, b, r: F.mse_loss(a, b, reduction=_REDUCTIONS[r]), grad=(0, 1),
     covers=("mytorch::mse_loss_backward",))


def _fused_ce(draw, dtype):
    x, t, _, ignore = _classes(draw, dtype, one_d=False)
    return (x, t), {"ignore_index": ignore, "label_smoothing": draw(st.sampled_from([0.0, 0.2])),
                    "reduction": draw(st.sampled_from(_REDUCTIONS))}


def _fused_ce_ref(x, t, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    loss = F.cross_entropy(x, t, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction)
    return loss, torch.logsumexp(x, -1)


spec("fused_cross_entropy", _fused_ce, _fused_ce_ref, grad=(0,), ref_dtypes=False,
     covers=("mytorch::fused_cross_entropy_backward",))


def _fused_ce_grad(draw, dtype):
    args, kw = _fused_ce(draw, dtype)
    kw["reduction"] = draw(st.sampled_from(["mean", "sum"]))
    return args, kw


def _fused_ce_grad_ref(x, t, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    x = x.detach().requires_grad_()
    loss = F.cross_entropy(x, t, ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction)
    (gx,) = torch.autograd.grad(loss, (x,))
    return loss.detach(), gx


spec("fused_cross_entropy_grad", _fused_ce_grad, _fused_ce_grad_ref, ref_dtypes=False)


def _flce(draw, dtype):
    n, h, v = draw(st.integers(0, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 7))
    ignore = draw(st.sampled_from([-100, 0]))
    return (T(draw, (n, h), dtype), T(draw, (v, h), dtype),
            T(draw, (n,), torch.int64, values=f"int:0:{v}", layout="contiguous")), {
        "ignore_index": ignore, "label_smoothing": draw(st.sampled_from([0.0, 0.1])),
        "reduction": draw(st.sampled_from(["mean", "sum"])), "chunk_size": draw(st.sampled_from([0, 1, 3]))}


def _flce_ref(x, w, t, ignore_index=-100, label_smoothing=0.0, reduction="mean", chunk_size=0):
    x = x.detach().requires_grad_()
    w = w.detach().requires_grad_()
    loss = F.cross_entropy(x @ w.T, t, ignore_index=ignore_index, label_smoothing=label_smoothing,
                           reduction=reduction)
    gx, gw = torch.autograd.grad(loss, (x, w), allow_unused=True)
    return loss.detach(), gx, gw


spec("fused_linear_cross_entropy", _flce, _flce_ref, dtypes=FP32_64, ref_dtypes=False)


def _scale(draw, dtype):
    shape = draw(shapes(max_dims=3))
    scale_shape = draw(st.sampled_from([(), (1,)]))
    return (T(draw, shape, dtype, allow_expand=False),
            T(draw, scale_shape, dtype, values=draw(st.sampled_from(["normal", "int:1:2"])))), {}


spec("scale_", _scale, lambda x, s: (x * s.reshape(()),), mutates=(0,), ref_dtypes=False)


# ---- embedding, dropout ----
def _embedding(draw, dtype):
    v, d = draw(st.integers(1, 6)), draw(st.integers(0, 5))
    idx = T(draw, draw(shapes(max_dims=2, max_side=5)), torch.int64, values=f"int:0:{v}")
    return (T(draw, (v, d), dtype), idx, draw(st.sampled_from([-1, 0, v - 1]))), {}


spec("embedding", _embedding, lambda w, i, p: F.embedding(i, w, padding_idx=None if p < 0 else p), grad=(0,))


def _embedding_bw(draw, dtype):
    v, d = draw(st.integers(1, 6)), draw(st.integers(0, 5))
    ishape = draw(shapes(max_dims=2, max_side=5))
    return (T(draw, (*ishape, d), dtype), T(draw, ishape, torch.int64, values=f"int:0:{v}"), v,
            draw(st.sampled_from([-1, 0])), draw(st.booleans())), {}


spec("embedding_backward", _embedding_bw, A.embedding_dense_backward)


def _dropout(draw, dtype):
    return (T(draw, draw(shapes()), dtype), draw(st.sampled_from([0.0, 0.3, 1.0])), draw(st.booleans())), {}


def _dropout_check(args, result):
    """Random values have no reference: out is x * mask / (1 - p), the mask keeps about 1 - p."""
    x, p, train = args
    out, mask = result
    x, out, mask = x.cpu(), out.cpu(), mask.cpu()
    assert out.shape == x.shape and out.dtype == x.dtype and mask.dtype == torch.bool, (out, mask)
    if not train or p == 0:
        # unchanged, NaN included (torch.equal counts NaN != NaN)
        torch.testing.assert_close(out, x, rtol=0, atol=0, equal_nan=True,
                                   msg="dropout changed its input with p=0 or train=False")
    elif p == 1:
        assert not mask.any() and torch.equal(out, torch.zeros_like(x)), "p=1 kept values"
    else:
        expected = torch.where(mask, x.double() / (1 - p), 0.0)
        rtol, atol = TOL[x.dtype]
        torch.testing.assert_close(out.double(), expected, rtol=rtol, atol=atol, equal_nan=True)


spec("dropout", _dropout, lambda x, p, train: None, ref_dtypes=False, check=_dropout_check)


def _dropout_bw(draw, dtype):
    shape = draw(shapes())
    return (T(draw, shape, dtype), T(draw, shape, torch.bool, values="bool"), draw(st.sampled_from([0.0, 2.0, 1.25]))), {}


spec("dropout_backward", _dropout_bw, lambda g, m, s: g * m * s)


# ---- fused ----
def _bias_gelu(draw, dtype):
    shape = draw(shapes(min_dims=1))
    return (T(draw, shape, dtype), T(draw, shape[-1:], dtype), draw(st.sampled_from(["none", "tanh"]))), {}


spec("bias_gelu", _bias_gelu, lambda x, b, ap: F.gelu(x + b, approximate=ap), grad=(0, 1),
     covers=("mytorch::bias_gelu_backward",))


def _bias_gelu_bw(draw, dtype):
    (x, b, ap), _ = _bias_gelu(draw, dtype)
    return (dataclasses.replace(x, seed=x.seed + 1, layout="contiguous"), x, b, ap), {}


def _bias_gelu_bw_ref(g, x, b, ap):
    x = x.detach().requires_grad_()
    b = b.detach().requires_grad_()
    return torch.autograd.grad(F.gelu(x + b, approximate=ap), (x, b), g)


spec("bias_gelu_backward", _bias_gelu_bw, _bias_gelu_bw_ref)


def _swiglu(draw, dtype):
    shape = draw(shapes())
    return (T(draw, shape, dtype), T(draw, shape, dtype)), {}


spec("swiglu", _swiglu, lambda a, b: F.silu(a) * b, grad=(0, 1), covers=("mytorch::swiglu_backward",))


def _swiglu_bw(draw, dtype):
    shape = draw(shapes())
    return (T(draw, shape, dtype), T(draw, shape, dtype), T(draw, shape, dtype)), {}


def _swiglu_bw_ref(g, a, b):
    a = a.detach().requires_grad_()
    b = b.detach().requires_grad_()
    return torch.autograd.grad(F.silu(a) * b, (a, b), g)


spec("swiglu_backward", _swiglu_bw, _swiglu_bw_ref)


def _rope_args(draw, dtype, in_place=False):
    lead = draw(shapes(max_dims=1, max_side=3))
    s, h = draw(st.integers(0, 5)), draw(st.integers(1, 3))
    half = draw(st.integers(1, 4))  # rotary_dim 0 is rejected by design
    d = 2 * half + draw(st.sampled_from([0, 2]))
    angles = T(draw, (s, half), torch.float64, layout="contiguous")
    x = T(draw, (*lead, s, h, d), dtype, layout="contiguous") if in_place else T(draw, (*lead, s, h, d), dtype)
    return x, angles, draw(st.booleans())  # in place: x must be contiguous (a clear error otherwise)


def rope_ref(x, cos, sin, interleaved=False):
    half = cos.shape[-1]
    c, s = cos[:, None, :], sin[:, None, :]
    out = x.clone()
    if interleaved:
        x1, x2 = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        out[..., 0:2 * half:2] = x1 * c - x2 * s
        out[..., 1:2 * half:2] = x2 * c + x1 * s
    else:
        x1, x2 = x[..., :half], x[..., half:2 * half]
        out[..., :half] = x1 * c - x2 * s
        out[..., half:2 * half] = x2 * c + x1 * s
    return out


def _rope(draw, dtype, in_place=False):
    x, ang, inter = _rope_args(draw, dtype, in_place)
    cos = dataclasses.replace(ang, dtype=dtype, values="unit")
    sin = dataclasses.replace(ang, dtype=dtype, values="unit", seed=ang.seed + 1)
    return (x, cos, sin, inter), {}


spec("rope", _rope, rope_ref, grad=(0,), covers=("mytorch::rope_backward",))
spec("rope_backward", _rope, lambda g, c, s, i: rope_ref(g, c, -s, i))
spec("rope_", lambda d, t: _rope(d, t, True), lambda x, c, s, i: (rope_ref(x, c, s, i),), mutates=(0,), ref_dtypes=False)


# ---- optimizers (in place on lists of tensors) ----
def _param_lists(draw, dtype, n_lists, positive=()):
    shapes_ = draw(st.lists(shapes(max_dims=2, max_side=5), min_size=1, max_size=3))
    out = []
    for j in range(n_lists):
        out.append([T(draw, s, dtype, values="positive" if j in positive else "normal", layout="contiguous")
                    for s in shapes_])
    return out


_lr = st.sampled_from([0.1, 1e-3])


def _sgd(draw, dtype):
    p, g, buf = _param_lists(draw, dtype, 3)
    return (p, g, buf, draw(_lr), draw(st.sampled_from([0.0, 0.9])), draw(st.sampled_from([0.0, 0.1])),
            draw(st.sampled_from([0.0, 0.01])), draw(st.booleans()), draw(st.booleans()), draw(st.booleans())), {}


def sgd_ref(params, grads, bufs, lr, momentum, dampening, wd, nesterov, maximize, first_step):
    params, bufs = [p.clone() for p in params], [b.clone() for b in bufs]
    for i, (p, g) in enumerate(zip(params, grads)):
        g = -g if maximize else g
        if wd != 0:  # as torch.optim.SGD: no weight-decay term at all when it is 0 (Inf * 0 is NaN)
            g = g + wd * p
        if momentum != 0:
            b = bufs[i]
            b.copy_(g if first_step else momentum * b + (1 - dampening) * g)
            g = g + momentum * b if nesterov else b
        p.sub_(lr * g)
    return params, bufs


spec("sgd_step_", _sgd, sgd_ref, mutates=(0, 2), ref_dtypes=False)


def _fused_sgd(draw, dtype):
    (p, g, b, lr, m, d, wd, nest, _, first), _ = _sgd(draw, dtype)
    return (p, g, b if m else [], lr, m, d, wd, nest, first), {}  # no buffers without momentum


spec("fused_sgd_", _fused_sgd,
     lambda p, g, b, lr, m, d, wd, nest, first: sgd_ref(p, g, b, lr, m, d, wd, nest, False, first),
     mutates=(0, 2), ref_dtypes=False)


def adam_ref(params, grads, m1, m2, vmax, steps, lr, b1, b2, wd, eps, amsgrad, maximize, decoupled):
    params, m1, m2, vmax = ([t.clone() for t in ts] for ts in (params, m1, m2, vmax))
    for i, (p, g) in enumerate(zip(params, grads)):
        step = float(steps[i])
        g = -g if maximize else g
        if decoupled:
            p.mul_(1 - lr * wd)
        elif wd != 0:  # as torch.optim.Adam: no weight-decay term when it is 0 (Inf * 0 is NaN)
            g = g + wd * p
        m1[i].lerp_(g, 1 - b1)  # as torch's Adam/AdamW, fused included (-Inf m1 and finite g give NaN)
        m2[i].mul_(b2).add_((1 - b2) * g * g)
        v = m2[i]
        if amsgrad:
            vmax[i].copy_(torch.maximum(vmax[i], m2[i]))
            v = vmax[i]
        bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
        bc2_sqrt = torch.tensor(bc2, dtype=torch.float64).sqrt()  # NaN for a nonsense step (as torch's Adam)
        p.sub_(lr / bc1 * m1[i] / (v.sqrt() / bc2_sqrt + eps))
    return params, m1, m2, vmax


def _adam(draw, dtype):
    p, g, m1, m2, vmax = _param_lists(draw, dtype, 5, positive=(3, 4))
    amsgrad = draw(st.booleans())
    steps = [dataclasses.replace(t, shape=(), dtype=torch.float32, values="int:1:5") for t in p]
    return (p, g, m1, m2, vmax if amsgrad else [], steps, draw(_lr), 0.9, draw(st.sampled_from([0.999, 0.9])),
            draw(st.sampled_from([0.0, 0.01])), 1e-8, amsgrad, draw(st.booleans()), draw(st.booleans())), {}


spec("adam_step_", _adam, adam_ref, mutates=(0, 2, 3, 4), ref_dtypes=False)


def _fused_adamw(draw, dtype):
    p, g, m1, m2 = _param_lists(draw, dtype, 4, positive=(3,))
    return (p, g, m1, m2, draw(_lr), 0.9, 0.999, draw(st.sampled_from([0.0, 0.01])), 1e-8,
            draw(st.integers(1, 4))), {}


def _fused_adamw_ref(p, g, m1, m2, lr, b1, b2, wd, eps, step):
    out = adam_ref(p, g, m1, m2, [], [step] * len(p), lr, b1, b2, wd, eps, False, False, True)
    return out[:3]


spec("fused_adamw_", _fused_adamw, _fused_adamw_ref, mutates=(0, 2, 3), ref_dtypes=False)


# ---- vision ----
def _conv(draw, dtype, nd):
    n, g = draw(st.integers(0, 2)), draw(st.integers(1, 2))
    cin, cout = g * draw(st.integers(1, 2)), g * draw(st.integers(1, 2))
    k = [draw(st.integers(1, 3)) for _ in range(nd)]
    stride = [draw(st.integers(1, 2)) for _ in range(nd)]
    pad = [draw(st.integers(0, 1)) for _ in range(nd)]
    dil = [draw(st.integers(1, 2)) for _ in range(nd)]
    spatial = [draw(st.integers(dil[i] * (k[i] - 1) + 1 - 2 * pad[i], 6)) for i in range(nd)]
    spatial = [max(s, 1) for s in spatial]
    bias = draw(st.one_of(st.none(), st.just(T(draw, (cout,), dtype))))
    return (T(draw, (n, cin, *spatial), dtype), T(draw, (cout, cin // g, *k), dtype), bias,
            stride, pad, dil, g), {}


spec("conv2d", lambda d, t: _conv(d, t, 2), F.conv2d, grad=(0, 1, 2), covers=("mytorch::conv2d_backward",))
spec("conv1d", lambda d, t: _conv(d, t, 1), F.conv1d, grad=(0, 1, 2), covers=("mytorch::conv1d_backward",))


def _pool_geometry(draw, dilation=True):
    k = [draw(st.integers(1, 3)) for _ in range(2)]
    stride = draw(st.one_of(st.just([]), st.lists(st.integers(1, 2), min_size=2, max_size=2)))
    pad = [draw(st.integers(0, kk // 2)) for kk in k]
    dil = [draw(st.integers(1, 2)) for _ in range(2)] if dilation else [1, 1]
    hw = [draw(st.integers(dil[i] * (k[i] - 1) + 1, 7)) for i in range(2)]
    return k, stride, pad, dil, hw


def _max_pool(draw, dtype):
    k, stride, pad, dil, hw = _pool_geometry(draw)
    lead = draw(st.sampled_from([(), (2,)])) + (draw(st.integers(1, 3)),)
    return (T(draw, (*lead, *hw), dtype), k, stride, pad, dil, draw(st.booleans())), {}


spec("max_pool2d", _max_pool, lambda x, k, s, p, d, c: tuple(A.max_pool2d_with_indices(x, k, s, p, d, c)),
     grad=(0,), covers=("mytorch::max_pool2d_backward",), exact_ref=True)


def _avg_pool(draw, dtype):
    k, stride, pad, _, hw = _pool_geometry(draw, dilation=False)
    lead = draw(st.sampled_from([(), (2,)])) + (draw(st.integers(1, 3)),)
    return (T(draw, (*lead, *hw), dtype), k, stride, pad, draw(st.booleans()), draw(st.booleans()),
            draw(st.sampled_from([None, 3]))), {}


spec("avg_pool2d", _avg_pool, lambda x, k, s, p, c, i, d: A.avg_pool2d(x, k, s, p, c, i, d), grad=(0,),
     covers=("mytorch::avg_pool2d_backward",))


def _adaptive(draw, dtype):
    shape = (draw(st.integers(0, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 7)), draw(st.integers(1, 7)))
    return (T(draw, shape, dtype), [draw(st.integers(1, 5)), draw(st.integers(1, 5))]), {}


spec("adaptive_avg_pool2d", _adaptive, A._adaptive_avg_pool2d, grad=(0,),
     covers=("mytorch::adaptive_avg_pool2d_backward",))


def _batch_norm(draw, dtype):
    c = draw(st.integers(1, 3))
    training = draw(st.booleans())
    # n >= 1: ATen's own native_batch_norm_backward (the reference) dies of SIGFPE on an
    # empty batch in eval mode; mytorch's kernels handle it (test_bad_inputs covers n = 0).
    n = draw(st.integers(2 if training else 1, 3))
    shape = (n, c, *[draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2)))])
    affine = draw(st.booleans())
    stats = (not training) or draw(st.booleans())
    w = T(draw, (c,), dtype) if affine else None
    b = T(draw, (c,), dtype) if affine else None
    rm = T(draw, (c,), dtype, layout="contiguous") if stats else None
    rv = T(draw, (c,), dtype, values="positive", layout="contiguous") if stats else None
    return (T(draw, shape, dtype), w, b, rm, rv, training, draw(st.sampled_from([1e-5, 1e-3]))), {}


def _batch_norm_ref(x, w, b, rm, rv, training, eps):
    # the checks of torch.batch_norm: native_batch_norm itself does not check these sizes
    # and writes out of bounds (heap corruption) when they differ from x's channels
    c = x.shape[1] if x.dim() > 1 else 1
    for name, t in (("weight", w), ("bias", b), ("running_mean", rm), ("running_var", rv)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    rm = rm.clone() if rm is not None else None
    rv = rv.clone() if rv is not None else None
    # contiguous weight: ATen's native_batch_norm_backward gives a wrong input gradient for a
    # strided weight in training mode (same values, so the comparison is unchanged)
    w = w.contiguous() if w is not None else None
    return tuple(A.native_batch_norm(x, w, b, rm, rv, training, 0.1, eps))


spec("batch_norm", _batch_norm, _batch_norm_ref, grad=(0, 1, 2), dtypes=FP32_64,  # float32/64 by design
     covers=("mytorch::batch_norm_backward",))


def _bn_update(draw, dtype):
    c = draw(st.integers(0, 4))
    return (T(draw, (c,), dtype, layout="contiguous"), T(draw, (c,), dtype, values="positive", layout="contiguous"),
            T(draw, (c,), dtype), T(draw, (c,), dtype, values="positive"),
            draw(st.sampled_from([0.1, 0.5])), 1e-5, draw(st.integers(2, 9))), {}


def _bn_update_ref(rm, rv, mean, invstd, momentum, eps, count):
    var = (1.0 / (invstd * invstd) - eps) * count / (count - 1)
    return (1 - momentum) * rm + momentum * mean, (1 - momentum) * rv + momentum * var


spec("batch_norm_update_stats_", _bn_update, _bn_update_ref, mutates=(0, 1), ref_dtypes=False, dtypes=FP32_64)


def _upsample(draw, dtype, bilinear):
    shape = (draw(st.integers(0, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    out = [draw(st.integers(1, 9)), draw(st.integers(1, 9))]
    scales = draw(st.sampled_from([(None, None), (out[0] / shape[2], out[1] / shape[3])]))
    if bilinear:
        return (T(draw, shape, dtype), out, draw(st.booleans()), *scales), {}
    return (T(draw, shape, dtype), out, *scales), {}


spec("upsample_nearest2d", lambda d, t: _upsample(d, t, False), A.upsample_nearest2d, grad=(0,),
     covers=("mytorch::upsample_nearest2d_backward",))
spec("upsample_bilinear2d", lambda d, t: _upsample(d, t, True), A.upsample_bilinear2d, grad=(0,),
     covers=("mytorch::upsample_bilinear2d_backward",))


# ---- attention ----
def _flash_attn(draw, dtype):
    b, sq, sk = draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    hk = draw(st.integers(1, 2))
    h = hk * draw(st.integers(1, 2))
    d = draw(st.sampled_from([8, 16]))  # head_dim: a multiple of 8 (checked by the op)
    kw = {"softmax_scale": draw(st.sampled_from([None, 0.3])), "causal": draw(st.booleans()),
          "softcap": draw(st.sampled_from([0.0, 5.0]))}
    if draw(st.booleans()):
        kw["window_left"], kw["window_right"] = draw(st.integers(-1, 3)), draw(st.integers(-1, 3))
    if draw(st.booleans()):
        kw["attn_mask"] = T(draw, draw(st.sampled_from([(sq, sk), (b, 1, sq, sk), (1, h, sq, sk)])), torch.bool,
                            values="bool")
    # The op requires a unit stride in head_dim (a clear error otherwise): transposed
    # (seq <-> heads) and contiguous layouts only.
    lay = draw(st.sampled_from(["contiguous", "transposed_seq"]))
    return tuple(_attn_tensor(draw, shape, dtype, lay) for shape in
                 ((b, sq, h, d), (b, sk, hk, d), (b, sk, hk, d))), kw


def _attn_tensor(draw, shape, dtype, layout):
    t = T(draw, shape, dtype, layout="contiguous")
    return t if layout == "contiguous" else dataclasses.replace(t, layout="transposed_seq")


def flash_attn_ref(q, k, v, softmax_scale=None, causal=False, window_left=-1, window_right=-1, softcap=0.0,
                   attn_mask=None):
    """Attention in (B, N, H, D); bottom-right aligned masks; a row with no key gives 0 and lse +inf."""
    bsz, n_q, h, d = q.shape
    n_k, hk = k.shape[1], k.shape[2]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    k, v = k.repeat_interleave(h // hk, 2), v.repeat_interleave(h // hk, 2)
    s = torch.einsum("bmhd,bnhd->bhmn", q, k) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(n_q)[:, None]
    j = torch.arange(n_k)[None, :]
    keep = torch.ones(n_q, n_k, dtype=torch.bool)
    wr = 0 if causal else window_right
    if wr >= 0:
        keep &= j <= i + n_k - n_q + wr
    if window_left >= 0:
        keep &= j >= i + n_k - n_q - window_left
    s = s.masked_fill(~keep, float("-inf"))
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        s = s.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:  # a float mask is additive (as SDPA's)
        s = s + attn_mask.to(s.dtype)
    lse = torch.logsumexp(s, -1)
    p = torch.where(torch.isneginf(lse)[..., None], 0.0, torch.exp(s - lse[..., None]))
    out = torch.einsum("bhmn,bnhd->bmhd", p, v)
    return out, torch.where(torch.isneginf(lse), float("inf"), lse).float()


spec("flash_attn", _flash_attn, flash_attn_ref, grad=(0, 1, 2), ref_dtypes=False,
     covers=("mytorch::flash_attn_backward",))


def _kvcache(draw, dtype):
    """A decode / chunk step: dense caches (batch 1-2, cache_batch_idx sometimes) or a paged
    cache (batch 1: random pages may repeat, so that two sequences never share a slot)."""
    paged = draw(st.booleans())
    b = 1 if paged else draw(st.integers(1, 2))
    hk = draw(st.integers(1, 2))
    h, d = hk * draw(st.integers(1, 2)), draw(st.sampled_from([8, 16]))
    sq = draw(st.integers(1, 3))
    snew = draw(st.integers(0, sq))
    lay = draw(st.sampled_from(["contiguous", "transposed_seq"]))
    kw = {"causal": draw(st.booleans()), "softcap": draw(st.sampled_from([0.0, 5.0])),
          "num_splits": draw(st.sampled_from([0, 1, 3]))}
    if draw(st.booleans()):
        kw["window_left"] = draw(st.integers(0, 4))
    if paged:
        nb = draw(st.integers(1, 2))
        cap, rows = 16 * nb, nb + 1
        kw["block_table"] = T(draw, (1, nb), torch.int32, values=f"int:0:{rows}", layout="contiguous")
    else:
        cap = draw(st.integers(3, 9))
        rows = b + draw(st.integers(0, 1))
        if rows > b:
            kw["cache_batch_idx"] = T(draw, (b,), torch.int32, values=f"perm:{rows}", layout="contiguous")
    kw["cache_seqlens"] = T(draw, (b,), torch.int32, values=f"int:0:{cap - snew + 1}", layout="contiguous")
    cache = [_attn_tensor(draw, (rows, cap if not paged else 16, hk, d), dtype, lay) for _ in range(2)]
    new = [_attn_tensor(draw, (b, snew, hk, d), dtype, lay) for _ in range(2)] if snew else [None, None]
    if snew and draw(st.booleans()):
        half = draw(st.sampled_from([2, d // 2]))
        kw["rotary_cos"], kw["rotary_sin"] = (T(draw, (cap + 1, half), dtype, values="unit", layout="contiguous")
                                              for _ in range(2))
        kw["rotary_interleaved"] = draw(st.booleans())
    return (_attn_tensor(draw, (b, sq, h, d), dtype, lay), *cache, *new), kw


def _kvcache_run(q, kc, vc, k=None, v=None, **kw):
    """The op's result and the caches it updated."""
    out, lse = M.flash_attn_with_kvcache(q, kc, vc, k, v, **kw)
    return out, lse, kc, vc


def _kvcache_ref(q, kc, vc, k=None, v=None, window_left=-1, window_right=-1, num_splits=0, **kw):
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent.parent / "ops"))
    from kvcache_ref import reference
    return reference(q, kc, vc, k, v, window_size=(window_left, window_right), **kw)


spec("flash_attn_with_kvcache", _kvcache, _kvcache_ref, fn=_kvcache_run, ref_dtypes=False)
