"""One entry per torch.ops.mytorch op: how every op test calls it and what it must match.

`op(name, ...)` adds the entry `OPS[name]` for `torch.ops.mytorch.<name>`. Its fields:

- `samples`: fixed calls, () -> [(args, kwargs)], built fresh each time. The opcheck sweep
  (tests/ops/test_opcheck_all.py), the CUDA coverage test (tests/cuda/test_cuda_coverage.py,
  CUDA against CPU within `cuda_tol`) and the mixed-device test run them.
- `sample`, `ref`, `dtypes`, `grad`, `tol`, `grad_tol`: a hypothesis draw, (draw, dtype) ->
  (args, kwargs) with `TensorCase` placeholders, and its reference on CPU tensors (in float64
  unless `exact_ref`). The fuzzer (tests/hardening/test_fuzz_mytorch_ops.py) compares the op
  with `ref` on drawn calls, gradients of the `grad` positions included; the bad-input sweep
  (tests/hardening/test_bad_inputs.py) spoils one argument of a drawn call at a time.
- `backward_of`: a backward op reached through that forward op's autograd. The fuzzed calls of
  the forward must reach it, and an op with no `sample` of its own gets its bad-input calls there.
- `error_names`, `known_defects`: the names an error message of the op may use besides its own,
  and the bad-input cases where it knowingly differs from ATen (each must still differ).

Every consumer reads `OPS`, and each has a coverage test that fails for a registered mytorch::
op without an entry here, or for an entry whose op is not registered. A new op needs one entry.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

_HERE = Path(__file__).resolve().parent
if str(_HERE / "hardening") not in sys.path:  # TensorCase and the drawing helpers
    sys.path.insert(0, str(_HERE / "hardening"))

from strategies import (FLOATS, FP32_64, GRAD_TOL, TOL, broadcast_shapes, dims_of, shapes,  # noqa: E402
                        tensors)

import mytorch_ext  # noqa: E402,F401  registers the ops

A = torch.ops.aten
M = torch.ops.mytorch
NAN, INF = float("nan"), float("inf")
# CUDA against the CPU kernel on the fixed samples: (rtol, atol)
CUDA_TOL = (2e-4, 2e-5)


class Defect(NamedTuple):
    """A bad-input case where the op knowingly differs from ATen (see test_bad_inputs.py)."""
    what: str                        # what differs
    call: Callable                   # () -> (args, kwargs): a spoiled call on the CPU that shows it
    rounding_dependent: bool = False  # whether it shows depends on the build's floating-point code


@dataclasses.dataclass
class OpInfo:
    name: str                        # the op, e.g. "mytorch::add"
    samples: Callable | None = None  # () -> [(args, kwargs)]: fixed calls
    sample: Callable | None = None   # (draw, dtype) -> (args, kwargs): a drawn call
    ref: Callable | None = None      # reference for drawn calls, on CPU tensors
    dtypes: tuple = FLOATS           # the dtypes drawn calls use
    tol: dict = dataclasses.field(default_factory=lambda: TOL)            # dtype -> (rtol, atol)
    grad_tol: dict = dataclasses.field(default_factory=lambda: GRAD_TOL)  # the same for gradients
    cuda_tol: tuple = CUDA_TOL       # CUDA against the CPU kernel on `samples`
    grad: tuple = ()                 # positions of the args that get gradients
    backward_of: str | None = None   # the forward op whose autograd reaches this backward op
    call: Callable | None = None     # what runs instead of torch.ops.mytorch.<name>
    ref_dtypes: bool = True          # the reference at the input dtypes gives the result dtypes
    grad_output: int = 0             # which result the gradient flows from
    mutates: tuple = ()              # positions of args updated in place (compared after the call)
    exact_ref: bool = False          # reference at the input dtypes, not float64
    check: Callable | None = None    # a property of (cpu args, result) where no reference exists
    ref_uses_dtype: bool = False     # ref takes _dtype=, the input dtype before the float64 upcast
    error_names: tuple = ()          # other op names its error messages may use
    known_defects: dict = dataclasses.field(default_factory=dict)  # bad-input kind -> Defect
    variants: dict = dataclasses.field(default_factory=dict)  # suffix -> fields of a further drawn case
    random: bool = False             # results depend on random numbers: compared by structure on CUDA
    cuda_skip: str | None = None     # why the CUDA coverage test does not run `samples`
    no_opcheck: str | None = None    # why opcheck cannot run (then `samples` may be None)
    opcheck_utils: tuple | None = None  # the opcheck tests to run, when not all of them can
    covers: tuple = ()               # the ops the drawn calls must reach (fuzz_cases sets it)

    @property
    def short(self) -> str:
        return self.name.split("::")[-1]

    @property
    def fn(self):
        """What runs: `call`, or the registered op (looked up when used, so that an entry for an op
        that is not registered fails its own tests and the coverage tests, not the import)."""
        return self.call if self.call is not None else getattr(M, self.short)


OPS: dict[str, OpInfo] = {}


def op(name, samples=None, sample=None, ref=None, **fields):
    assert name not in OPS, f"two entries for mytorch::{name}"
    OPS[name] = OpInfo(f"mytorch::{name}", samples, sample, ref, **fields)


def registered_ops():
    """The short names of every registered mytorch:: op."""
    return sorted(n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("mytorch::"))


def fuzz_cases() -> dict[str, OpInfo]:
    """The fuzzer's cases: each entry with a `sample` under its op name, its `covers` set to
    itself and the backward ops that name it, and its variants as "<op>.<suffix>" (a variant
    takes the fields it names and the defaults)."""
    out = {}
    for e in OPS.values():
        if e.sample is not None:
            e.covers = (e.name,) + tuple(b.name for b in OPS.values() if b.backward_of == e.short)
            out[e.name] = e
        for suffix, fields in e.variants.items():
            out[f"{e.name}.{suffix}"] = OpInfo(e.name, **fields)
            out[f"{e.name}.{suffix}"].covers = (e.name,)
    return out


# ---- fixed calls ----
def r(*shape, grad=False, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


def pos(*shape, grad=False):
    return (torch.rand(*shape) + 0.2).requires_grad_(grad)


def call(*args, **kwargs):
    return args, kwargs


def _t(*shape, fill=None, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=dtype) if fill is None else \
        torch.tensor(fill, dtype=dtype).reshape(shape)


# ---- drawn calls ----
def T(draw, shape, dtype, **kw):
    return draw(tensors(tuple(shape), dtype, **kw))


def second_dtype(draw, dtype, dtypes):
    """The other operand's dtype: mostly the same, sometimes one that promotes."""
    return draw(st.sampled_from([dtype, dtype, *dtypes]))


# ---- elementwise: binary (broadcasting, type promotion) ----
def _calls_binary():
    return [call(r(3, 4, grad=True), r(4, grad=True))]


def _calls_compare():
    return [call(r(3, 4), r(4))]


def _binary(values_b="normal", kw=None):
    def sample(draw, dtype):
        sa, sb = draw(broadcast_shapes(2))
        a = T(draw, sa, dtype)
        b = T(draw, sb, second_dtype(draw, dtype, FLOATS), values=values_b)
        return (a, b), (draw(kw) if kw is not None else {})
    return sample


def _div_rounding(draw, dtype):
    (a, b), _ = _binary("positive")(draw, dtype)
    return (a, b), {"rounding_mode": draw(st.sampled_from(["trunc", "floor"]))}


_alpha = st.fixed_dictionaries({}, optional={"alpha": st.sampled_from([2, -0.5, 1])})
op("add", _calls_binary, _binary(kw=_alpha), lambda a, b, alpha=1: torch.add(a, b, alpha=alpha))
op("sub", _calls_binary, _binary(kw=_alpha), lambda a, b, alpha=1: torch.sub(a, b, alpha=alpha))
op("mul", _calls_binary, _binary(), torch.mul, grad=(0, 1))
op("div", lambda: [call(r(3, 4, grad=True), pos(4, grad=True)), call(r(3, 4), pos(4), "floor")],
   _binary(values_b="positive"), torch.div, grad=(0, 1),
   variants={"rounding": dict(sample=_div_rounding, exact_ref=True,
                              ref=lambda a, b, rounding_mode: torch.div(a, b, rounding_mode=rounding_mode))})
op("maximum", _calls_binary, _binary(), torch.maximum)
op("minimum", _calls_binary, _binary(), torch.minimum)
op("pow", lambda: [call(pos(2, 5, grad=True), r(2, 5, grad=True))], _binary(), torch.pow)
# comparisons at the input dtypes: a float64 0-dim operand does not promote a float32 tensor,
# so comparing in float64 would be another question
op("eq", _calls_compare, _binary(), torch.eq, exact_ref=True)
op("ne", _calls_compare, _binary(), torch.ne, exact_ref=True)
op("lt", _calls_compare, _binary(), torch.lt, exact_ref=True)
op("le", _calls_compare, _binary(), torch.le, exact_ref=True)
op("gt", _calls_compare, _binary(), torch.gt, exact_ref=True)
op("ge", _calls_compare, _binary(), torch.ge, exact_ref=True)


def _scale(draw, dtype):
    shape = draw(shapes(max_dims=3))
    scale_shape = draw(st.sampled_from([(), (1,)]))
    return (T(draw, shape, dtype, allow_expand=False),
            T(draw, scale_shape, dtype, values=draw(st.sampled_from(["normal", "int:1:2"])))), {}


op("scale_", lambda: [call(r(3, 4), torch.tensor(2.5)), call(r(3, 4), torch.tensor([1.0]))],
   _scale, lambda x, s: (x * s.reshape(()),), mutates=(0,), ref_dtypes=False)


# ---- elementwise: unary, with their backward ops through autograd ----
def _calls_unary():
    return [call(r(2, 5, grad=True))]


def _calls_unary_positive():
    return [call(pos(2, 5, grad=True))]


def _calls_act_backward(forward_of=None):
    def make():
        x = r(3, 5)
        y = forward_of(x) if forward_of else x
        return [call(r(3, 5), y)]
    return make


def _unary(values="normal"):
    def sample(draw, dtype):
        return (T(draw, draw(shapes()), dtype, values=values),), {}
    return sample


def _grad_and(op_values="normal"):
    def sample(draw, dtype):
        shape = draw(shapes())
        return (T(draw, shape, dtype), T(draw, shape, dtype, values=op_values)), {}
    return sample


def _threshold_bw(draw, dtype):
    (g, x), _ = _grad_and()(draw, dtype)
    return (g, x, draw(st.sampled_from([0, 0.5, -1.0]))), {}


op("neg", _calls_unary, _unary(), torch.neg, grad=(0,))
op("abs", _calls_unary, _unary(), torch.abs, grad=(0,))
op("exp", _calls_unary, _unary(), torch.exp, grad=(0,))
op("tanh", _calls_unary, _unary(), torch.tanh, grad=(0,))
op("sigmoid", _calls_unary, _unary(), torch.sigmoid, grad=(0,))
op("relu", _calls_unary, _unary(), torch.relu, grad=(0,))
op("silu", _calls_unary, _unary(), F.silu, grad=(0,))
op("reciprocal", _calls_unary_positive, _unary(), torch.reciprocal, grad=(0,))
op("log", _calls_unary_positive, _unary("positive"), torch.log, grad=(0,))
op("sqrt", _calls_unary_positive, _unary("positive"), torch.sqrt, grad=(0,))
op("rsqrt", _calls_unary_positive, _unary("positive"), torch.rsqrt, grad=(0,))
op("sigmoid_backward", _calls_act_backward(torch.sigmoid), _grad_and("unit"), A.sigmoid_backward,
   backward_of="sigmoid")
op("tanh_backward", _calls_act_backward(torch.tanh), _grad_and(), A.tanh_backward, backward_of="tanh")
op("silu_backward", _calls_act_backward(), _grad_and(), A.silu_backward, backward_of="silu")
op("threshold_backward", lambda: [call(r(3, 5), r(3, 5), 0.0)], _threshold_bw, A.threshold_backward,
   backward_of="relu")


# ---- elementwise: three operands, scalars, casts ----
def _where(draw, dtype):
    sc, sa, sb = draw(broadcast_shapes(3))
    return (T(draw, sc, torch.bool, values="bool"), T(draw, sa, dtype),
            T(draw, sb, second_dtype(draw, dtype, FLOATS))), {}


_bound = st.one_of(st.none(), st.sampled_from([-0.5, 0.0, 0.7, 2]))


def _clamp(draw, dtype):
    (x,), _ = _unary()(draw, dtype)
    return (x, draw(_bound), draw(_bound)), {}


def _clamp_tensor(draw, dtype):
    sx, s1, s2 = draw(broadcast_shapes(3))
    lo = draw(st.one_of(st.none(), st.just(T(draw, s1, dtype))))
    hi = draw(st.one_of(st.none(), st.just(T(draw, s2, dtype))))
    return (T(draw, sx, dtype), lo, hi), {}


def _masked_fill(draw, dtype):
    sx, sm = draw(broadcast_shapes(2))
    return (T(draw, sx, dtype), T(draw, sm, torch.bool, values="bool"),
            draw(st.sampled_from([0.0, -1.5, float("-inf"), 3]))), {}


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


def _cast(draw, dtype):
    (x,), _ = _unary()(draw, dtype)
    return (x, draw(st.sampled_from([*FLOATS, torch.int64, torch.int32, torch.bool]))), {}


op("where", lambda: [call(torch.rand(3, 1) > 0.5, r(3, 4, grad=True), r(4, grad=True))],
   _where, torch.where, grad=(1, 2))
op("clamp", lambda: [call(r(3, 5, grad=True), -0.5, 0.5), call(r(3, 5), None, 0.1)],
   _clamp, torch.clamp, grad=(0,))
op("clamp_tensor", lambda: [call(r(3, 5), r(5) - 1, r(3, 1) + 1)], _clamp_tensor, torch.clamp)
op("masked_fill", lambda: [call(r(3, 5, grad=True), torch.rand(5) > 0.5, 2.0)],
   _masked_fill, torch.masked_fill, grad=(0,))
op("addcmul", lambda: [call(r(3, 4, grad=True), r(4, grad=True), r(3, 1, grad=True), 2)],
   _with_value(), lambda x, a, b, value=1: torch.addcmul(x, a, b, value=value), grad=(0, 1, 2))
op("addcdiv", lambda: [call(r(3, 4, grad=True), r(4, grad=True), pos(3, 1, grad=True), 0.5)],
   _with_value("positive"), lambda x, a, b, value=1: torch.addcdiv(x, a, b, value=value), grad=(0, 1, 2))
op("lerp", lambda: [call(r(3, 4, grad=True), r(3, 4, grad=True), torch.rand(4, requires_grad=True))],
   _ternary("unit"), torch.lerp, grad=(0, 1, 2))
op("cast", lambda: [call(r(3, 4, grad=True), torch.bfloat16), call(r(3, 4), torch.int64)],
   _cast, lambda x, dtype: x.to(dtype), exact_ref=True)


# ---- activation ----
def _gelu(draw, dtype):
    (x,), _ = _unary()(draw, dtype)
    return (x,), {"approximate": draw(st.sampled_from(["none", "tanh"]))}


def _gelu_bw(draw, dtype):
    (g, x), _ = _grad_and()(draw, dtype)
    return (g, x), {"approximate": draw(st.sampled_from(["none", "tanh"]))}


def _bias_gelu(draw, dtype):
    shape = draw(shapes(min_dims=1))
    return (T(draw, shape, dtype), T(draw, shape[-1:], dtype), draw(st.sampled_from(["none", "tanh"]))), {}


def _bias_gelu_bw(draw, dtype):
    (x, b, ap), _ = _bias_gelu(draw, dtype)
    return (dataclasses.replace(x, seed=x.seed + 1, layout="contiguous"), x, b, ap), {}


def _bias_gelu_bw_ref(g, x, b, ap):
    x = x.detach().requires_grad_()
    b = b.detach().requires_grad_()
    return torch.autograd.grad(F.gelu(x + b, approximate=ap), (x, b), g)


def _swiglu(draw, dtype):
    shape = draw(shapes())
    return (T(draw, shape, dtype), T(draw, shape, dtype)), {}


def _swiglu_bw(draw, dtype):
    shape = draw(shapes())
    return (T(draw, shape, dtype), T(draw, shape, dtype), T(draw, shape, dtype)), {}


def _swiglu_bw_ref(g, a, b):
    a = a.detach().requires_grad_()
    b = b.detach().requires_grad_()
    return torch.autograd.grad(F.silu(a) * b, (a, b), g)


op("gelu", lambda: [call(r(3, 7, grad=True), "tanh"), call(r(3, 7, grad=True))],
   _gelu, lambda x, approximate="none": F.gelu(x, approximate=approximate), grad=(0,))
op("gelu_backward", lambda: [call(r(3, 7), r(3, 7), "none")],
   _gelu_bw, lambda g, x, approximate="none": A.gelu_backward(g, x, approximate=approximate),
   backward_of="gelu")
op("hardswish", _calls_unary, _unary(), F.hardswish, grad=(0,))
op("hardsigmoid", _calls_unary, _unary(), F.hardsigmoid, grad=(0,))
op("hardswish_backward", _calls_act_backward(), _grad_and(), A.hardswish_backward, backward_of="hardswish",
   known_defects={"nan_inf": Defect(
       "NaN x gives a NaN gradient; ATen's scalar path (short tensors, tails) returns the incoming gradient "
       "while its vector path gives NaN",
       lambda: ([_t(2), _t(2, fill=[NAN, 0.5])], {}))})
op("hardsigmoid_backward", _calls_act_backward(), _grad_and(), A.hardsigmoid_backward,
   backward_of="hardsigmoid")
op("bias_gelu", lambda: [call(r(4, 12, grad=True), r(12, grad=True), "tanh")],
   _bias_gelu, lambda x, b, ap: F.gelu(x + b, approximate=ap), grad=(0, 1))
op("bias_gelu_backward", lambda: [call(r(4, 12), r(4, 12), r(12), "none")],
   _bias_gelu_bw, _bias_gelu_bw_ref, backward_of="bias_gelu")
op("swiglu", lambda: [call(r(4, 12, grad=True), r(4, 12, grad=True))],
   _swiglu, lambda a, b: F.silu(a) * b, grad=(0, 1))
op("swiglu_backward", lambda: [call(r(4, 12), r(4, 12), r(4, 12))], _swiglu_bw, _swiglu_bw_ref,
   backward_of="swiglu")


# ---- rope ----
def _rope_tables(seq=3, half=4):
    ang = torch.arange(seq).float()[:, None] * torch.rand(half)[None]
    return ang.cos(), ang.sin()


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


op("rope", lambda: [call(r(2, 3, 2, 8, grad=True), *_rope_tables(), False),
                    call(r(2, 3, 2, 8, grad=True), *_rope_tables(3, 2), True)],
   _rope, rope_ref, grad=(0,))
op("rope_backward", lambda: [call(r(2, 3, 2, 8), *_rope_tables(), True)],
   _rope, lambda g, c, s, i: rope_ref(g, c, -s, i), backward_of="rope")
op("rope_", lambda: [call(r(2, 3, 2, 8), *_rope_tables(), False)],
   lambda d, t: _rope(d, t, True), lambda x, c, s, i: (rope_ref(x, c, s, i),), mutates=(0,), ref_dtypes=False)


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


def _prod_ref(x, dim=None, keepdim=False):
    if dim is None or len(dim) == 0:
        out = torch.prod(x)
        return out.reshape([1] * x.dim()) if keepdim else out
    out = x
    for d in sorted([d % max(x.dim(), 1) for d in dim], reverse=True):
        out = torch.prod(out, d, keepdim=keepdim)
    return out


def _lse_ref(x, dim, keepdim=False):
    # mytorch's reductions read dim=[] as every dim; ATen's logsumexp rejects it.
    return torch.logsumexp(x, dim if dim else list(range(x.dim())), keepdim)


def _one_dim(optional=False):
    def sample(draw, dtype):
        shape = draw(shapes())
        dim = draw(dims_of(len(shape)))
        if optional and draw(st.booleans()):
            dim = None
        return (T(draw, shape, dtype),), {"dim": dim, "keepdim": draw(st.booleans())}
    return sample


op("sum", lambda: [call(r(3, 4, 5, grad=True), [1], True), call(r(3, 4, 5, grad=True))],
   _reduce(dtype_kw=True),
   lambda x, dim=None, keepdim=False, dtype=None: torch.sum(x, _aten_dims(dim), keepdim, dtype=dtype), grad=(0,))
op("mean", lambda: [call(r(3, 4, 5, grad=True), [0, 2])], _reduce(dtype_kw=True),
   lambda x, dim=None, keepdim=False, dtype=None: torch.mean(x, _aten_dims(dim), keepdim, dtype=dtype), grad=(0,))
# Known gap: mytorch::prod has no gradient formula (its backward raises a clear error), so
# its gradients are not compared.
op("prod", lambda: [call(r(3, 4, 5), [1])], _reduce("unit"), _prod_ref)
op("amax", lambda: [call(r(3, 4, 5, grad=True), [1])], _reduce(allow_none=False),
   lambda x, dim=(), keepdim=False: torch.amax(x, dim, keepdim), grad=(0,))
op("amin", lambda: [call(r(3, 4, 5, grad=True), [])], _reduce(allow_none=False),
   lambda x, dim=(), keepdim=False: torch.amin(x, dim, keepdim), grad=(0,))
op("max_dim", lambda: [call(r(3, 4, 5, grad=True), 2)], _one_dim(),
   lambda x, dim, keepdim=False: tuple(torch.max(x, dim, keepdim)), grad=(0,), exact_ref=True,
   error_names=("mytorch::max",))
op("min_dim", lambda: [call(r(3, 4, 5, grad=True), 0, True)], _one_dim(),
   lambda x, dim, keepdim=False: tuple(torch.min(x, dim, keepdim)), grad=(0,), exact_ref=True,
   error_names=("mytorch::min",))
op("argmax", lambda: [call(r(3, 4, 5), 1)], _one_dim(True),
   lambda x, dim=None, keepdim=False: torch.argmax(x, dim, keepdim), exact_ref=True, error_names=("mytorch::max",))
op("argmin", lambda: [call(r(3, 4, 5))], _one_dim(True),
   lambda x, dim=None, keepdim=False: torch.argmin(x, dim, keepdim), exact_ref=True, error_names=("mytorch::min",))
# dim=[] reduces every dim, as dim=None; the reference says None because ATen's backward for
# dim=[] scales by 2 / (1 - correction), not 2 / (numel - correction) as its forward implies
op("var", lambda: [call(r(3, 4, 5, grad=True), [1], 1.0)], _reduce(correction=True),
   lambda x, dim=None, correction=1, keepdim=False:
   torch.var(x, None if dim == [] else dim, correction=correction, keepdim=keepdim), grad=(0,))
op("std", lambda: [call(r(3, 4, 5, grad=True), None, 0.0, True)], _reduce(correction=True),
   lambda x, dim=None, correction=1, keepdim=False:
   torch.std(x, None if dim == [] else dim, correction=correction, keepdim=keepdim), grad=(0,))
op("logsumexp", lambda: [call(r(3, 4, 5, grad=True), [2])], _reduce(allow_none=False), _lse_ref, grad=(0,))


# ---- index ----
_INDEX_DTYPES = st.sampled_from([torch.int64, torch.int32])


def _index_select(draw, dtype):
    shape = draw(shapes(min_dims=1))
    dim = draw(dims_of(len(shape)))
    size = shape[dim]
    n = draw(st.integers(0, 5)) if size > 0 else 0
    idx = T(draw, (n,), draw(_INDEX_DTYPES), values=f"int:0:{max(size, 1)}", layout="contiguous")
    return (T(draw, shape, dtype), dim, idx), {}


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


def _index(draw, dtype):
    shape = draw(shapes(min_dims=1))
    pos_ = draw(st.integers(0, len(shape) - 1))
    if draw(st.booleans()):
        idx = T(draw, (draw(st.integers(0, 5)) if shape[pos_] else 0,), draw(_INDEX_DTYPES),
                values=f"int:{-shape[pos_]}:{max(shape[pos_], 1)}", layout="contiguous")
    else:
        idx = T(draw, (shape[pos_],), torch.bool, values="bool", layout="contiguous")
    return (T(draw, shape, dtype), [None] * pos_ + [idx]), {}


def _index_put(draw, dtype):
    shape = draw(shapes(min_dims=1))
    pos_ = draw(st.integers(0, len(shape) - 1))
    accumulate = draw(st.booleans())
    n = shape[pos_]
    if accumulate:
        k = draw(st.integers(0, 5)) if n else 0
        idx = T(draw, (k,), torch.int64, values=f"int:0:{max(n, 1)}", layout="contiguous")
    else:  # distinct positions: a repeated one has no defined winner
        k = draw(st.integers(0, n))
        idx = T(draw, (k,), torch.int64, values=f"perm:{n}", layout="contiguous")
    vshape = list(shape)
    vshape[pos_] = k
    vshape = vshape[pos_:] if draw(st.booleans()) else vshape  # broadcasts either way
    return (T(draw, shape, dtype), [None] * pos_ + [idx], T(draw, vshape, dtype), accumulate), {}


def _cat(draw, dtype):
    shape = draw(shapes(min_dims=1))
    dim = draw(dims_of(len(shape)))
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        s = list(shape)
        s[dim] = draw(st.integers(0, 4))
        parts.append(T(draw, s, dtype))
    return (parts, dim), {}


def _nonzero(draw, dtype):
    return (T(draw, draw(shapes()), dtype, values="int:-1:2"),), {}


op("index_select", lambda: [call(r(5, 4, grad=True), 0, torch.tensor([3, 0, 3]))],
   _index_select, torch.index_select, grad=(0,))
op("gather", lambda: [call(r(5, 4, grad=True), 0, torch.tensor([[0, 3, 1, 1], [2, 2, 4, 0]]))],
   _gather_like, torch.gather, grad=(0,))
op("scatter_add", lambda: [call(r(5, 4, grad=True), 0, torch.tensor([[0, 3, 1, 1], [2, 2, 4, 0]]),
                                r(2, 4, grad=True))],
   lambda d, t: _gather_like(d, t, True), torch.scatter_add, grad=(0, 3))
op("index", lambda: [call(r(5, 4, grad=True), [torch.tensor([3, 0, 3])]),
                     call(r(5, 4), [None, torch.tensor([1, 2])])],
   _index, lambda x, indices: x[tuple(slice(None) if i is None else i for i in indices)], grad=(0,))
op("index_put", lambda: [call(r(5, 4), [torch.tensor([3, 0, 3])], r(3, 4), True)],
   _index_put, lambda x, indices, values, accumulate=False: A.index_put(x, indices, values, accumulate),
   grad=(0, 2))
op("cat", lambda: [call([r(5, 4, grad=True), r(5, 2, grad=True)], 1)], _cat, torch.cat)
op("nonzero", lambda: [call(torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]]))], _nonzero, torch.nonzero,
   exact_ref=True)


# ---- gemm ----
_side = st.integers(0, 7)
_scales = st.fixed_dictionaries({"beta": st.sampled_from([1, 0, 0.5]), "alpha": st.sampled_from([1, -2.0])})


def _mm(draw, dtype):
    n, k, m = draw(_side), draw(_side), draw(_side)
    return (T(draw, (n, k), dtype), T(draw, (k, m), dtype)), {}


def _bmm(draw, dtype):
    b, n, k, m = draw(st.integers(0, 3)), draw(_side), draw(_side), draw(_side)
    return (T(draw, (b, n, k), dtype), T(draw, (b, k, m), dtype)), {}


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


op("mm", lambda: [call(r(4, 5, grad=True), r(5, 3, grad=True))], _mm, torch.mm, grad=(0, 1))
op("bmm", lambda: [call(r(2, 3, 5, grad=True), r(2, 5, 4, grad=True))], _bmm, torch.bmm, grad=(0, 1))
op("addmm", lambda: [call(r(4, grad=True), r(3, 5, grad=True), r(5, 4, grad=True), beta=0.5, alpha=2)],
   _addmm, lambda s, a, b, beta=1, alpha=1: torch.addmm(s, a, b, beta=beta, alpha=alpha), grad=(0, 1, 2))
op("baddbmm", lambda: [call(r(2, 3, 4, grad=True), r(2, 3, 5, grad=True), r(2, 5, 4, grad=True), alpha=0.3)],
   _baddbmm, lambda s, a, b, beta=1, alpha=1: torch.baddbmm(s, a, b, beta=beta, alpha=alpha), grad=(0, 1, 2))
op("linear", lambda: [call(r(2, 3, 5, grad=True), r(4, 5, grad=True), r(4, grad=True)),
                      call(r(3, 5), r(4, 5), None)],
   _linear, F.linear, grad=(0, 1, 2))


# ---- softmax ----
def _calls_softmax_backward(fwd):
    def make():
        y = getattr(M, fwd)(r(3, 7, 2), 1)
        return [call(r(3, 7, 2), y, 1)]
    return make


def _softmax(draw, dtype):
    shape = draw(shapes())
    return (T(draw, shape, dtype), draw(dims_of(len(shape)))), {}


op("softmax", lambda: [call(r(3, 7, 2, grad=True), 1)], _softmax, lambda x, dim: torch.softmax(x, dim),
   grad=(0,))
op("log_softmax", lambda: [call(r(3, 7, 2, grad=True), -1)], _softmax, lambda x, dim: torch.log_softmax(x, dim),
   grad=(0,))
op("softmax_backward", _calls_softmax_backward("softmax"), backward_of="softmax")
op("log_softmax_backward", _calls_softmax_backward("log_softmax"), backward_of="log_softmax")


# ---- norm ----
def _calls_layer_norm_backward():
    x = r(4, 3, 6)
    _, mean, rstd = M.layer_norm(x, [6], None, None, 1e-5)
    return [call(r(4, 3, 6), x, [6], mean, rstd, r(6))]


def _calls_rms_norm_backward():
    x = r(4, 3, 6)
    _, rstd = M.rms_norm(x, [6], None, 1e-6)
    return [call(r(4, 3, 6), x, [6], rstd, None)]


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


def _rms_norm(draw, dtype):
    x, ns, w, _ = _norm_args(draw, dtype, affine_bias=False)
    return (x, ns, w, draw(st.sampled_from([None, 1e-6, 1e-3]))), {}


def _rms_ref(x, ns, w, eps, _dtype=None):
    if eps is None:  # the default eps is that of the input dtype, not of the float64 reference
        eps = torch.finfo(_dtype or x.dtype).eps
    return tuple(A._fused_rms_norm(x, ns, w, eps))


op("layer_norm", lambda: [call(r(4, 3, 6, grad=True), [6], r(6, grad=True), r(6, grad=True), 1e-5),
                          call(r(4, 3, 6, grad=True), [3, 6], None, None, 1e-3)],
   _layer_norm, _ln_ref, grad=(0, 2, 3),
   known_defects={"nan_inf": Defect(
       "the saved mean of a row holding -Inf is -Inf (exact); ATen's Welford pass gives NaN",
       lambda: ([_t(1, fill=[-INF]), [1], None, None, 1e-5], {}))})
op("layer_norm_backward", _calls_layer_norm_backward, backward_of="layer_norm")
op("rms_norm", lambda: [call(r(4, 3, 6, grad=True), [6], r(6, grad=True), 1e-6)],
   _rms_norm, _rms_ref, ref_uses_dtype=True, grad=(0, 2))
op("rms_norm_backward", _calls_rms_norm_backward, backward_of="rms_norm")


# ---- loss ----
def _calls_fused_cross_entropy_backward():
    x, t = r(4, 12), torch.tensor([1, -100, 11, 0])
    _, lse = M.fused_cross_entropy(x, t)
    return [call(torch.tensor(1.0), x, t, lse, -100, 0.0, 1)]


def _calls_nll_loss_backward():
    x, t, w = torch.log_softmax(r(6, 5), 1), torch.tensor([0, 4, 1, -100, 2, 3]), pos(5)
    _, tw = M.nll_loss(x, t, w, 1, -100)
    return [call(torch.tensor(1.0), x, t, w, 1, -100, tw)]


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


_REDUCTIONS = ["none", "mean", "sum"]  # F.*'s names of the ops' at::Reduction ints


def _ce(draw, dtype):
    x, t, w, ignore = _classes(draw, dtype)
    return (x, t, w, draw(st.sampled_from([0, 1, 2])), ignore, draw(st.sampled_from([0.0, 0.1]))), {}


def _mse(draw, dtype):
    shape = draw(shapes())
    return (T(draw, shape, dtype), T(draw, shape, dtype), draw(st.sampled_from([0, 1, 2]))), {}


def _fused_ce(draw, dtype):
    x, t, _, ignore = _classes(draw, dtype, one_d=False)
    return (x, t), {"ignore_index": ignore, "label_smoothing": draw(st.sampled_from([0.0, 0.2])),
                    "reduction": draw(st.sampled_from([0, 1, 2]))}


def _fused_ce_ref(x, t, ignore_index=-100, label_smoothing=0.0, reduction=1):
    loss = F.cross_entropy(x, t, ignore_index=ignore_index, label_smoothing=label_smoothing,
                           reduction=_REDUCTIONS[reduction])
    return loss, torch.logsumexp(x, -1)


def _fused_ce_grad(draw, dtype):
    args, kw = _fused_ce(draw, dtype)
    kw["reduction"] = draw(st.sampled_from([1, 2]))
    return args, kw


def _fused_ce_grad_ref(x, t, ignore_index=-100, label_smoothing=0.0, reduction=1):
    x = x.detach().requires_grad_()
    loss = F.cross_entropy(x, t, ignore_index=ignore_index, label_smoothing=label_smoothing,
                           reduction=_REDUCTIONS[reduction])
    (gx,) = torch.autograd.grad(loss, (x,))
    return loss.detach(), gx


def _flce(draw, dtype):
    n, h, v = draw(st.integers(0, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 7))
    ignore = draw(st.sampled_from([-100, 0]))
    return (T(draw, (n, h), dtype), T(draw, (v, h), dtype),
            T(draw, (n,), torch.int64, values=f"int:0:{v}", layout="contiguous")), {
        "ignore_index": ignore, "label_smoothing": draw(st.sampled_from([0.0, 0.1])),
        "reduction": draw(st.sampled_from([1, 2])), "chunk_size": draw(st.sampled_from([0, 1, 3]))}


def _flce_ref(x, w, t, ignore_index=-100, label_smoothing=0.0, reduction=1, chunk_size=0):
    x = x.detach().requires_grad_()
    w = w.detach().requires_grad_()
    loss = F.cross_entropy(x @ w.T, t, ignore_index=ignore_index, label_smoothing=label_smoothing,
                           reduction=_REDUCTIONS[reduction])
    gx, gw = torch.autograd.grad(loss, (x, w), allow_unused=True)
    return loss.detach(), gx, gw


op("cross_entropy", lambda: [call(r(6, 5, grad=True), torch.tensor([0, 4, 1, -100, 2, 3]), pos(5), 1, -100, 0.1)],
   _ce, lambda x, t, w, r, ig, ls: F.cross_entropy(x, t, w, reduction=_REDUCTIONS[r], ignore_index=ig,
                                                   label_smoothing=ls),
   grad=(0,))
op("cross_entropy_backward", lambda: [call(r(6), r(6, 5), torch.tensor([0, 4, 1, -100, 2, 3]), None, 0, -100,
                                           0.0)],
   backward_of="cross_entropy")
op("nll_loss", lambda: [call(r(6, 5, grad=True), torch.tensor([0, 4, 1, -100, 2, 3]), pos(5), 2, -100)],
   _nll, _nll_ref, grad=(0,), call=lambda x, t, w, r, ig: _loss_only(M.nll_loss(x, t, w, r, ig), r))
op("nll_loss_backward", _calls_nll_loss_backward, backward_of="nll_loss")
op("mse_loss", lambda: [call(r(6, 5, grad=True), r(6, 5, grad=True), 1)],
   _mse, lambda a, b, r: F.mse_loss(a, b, reduction=_REDUCTIONS[r]), grad=(0, 1))
op("mse_loss_backward", lambda: [call(torch.tensor(2.0), r(6, 5), r(6, 5), 2)], backward_of="mse_loss")
op("fused_cross_entropy", lambda: [call(r(4, 12, grad=True), torch.tensor([1, -100, 11, 0]), -100, 0.1, 1),
                                   call(r(4, 12, grad=True), torch.tensor([1, 2, 11, 0]), -100, 0.0, 0)],
   _fused_ce, _fused_ce_ref, grad=(0,), ref_dtypes=False,
   known_defects={"nan_inf": Defect(
       "a row holding +Inf has lse +Inf (as torch.logsumexp), so a finite target's loss is +Inf where ATen's "
       "cross_entropy (through log_softmax) gives NaN",
       lambda: ([_t(1, 3, fill=[-INF, 0.2, INF]), torch.tensor([0])],
                {"ignore_index": -100, "label_smoothing": 0.0, "reduction": 0}))})
op("fused_cross_entropy_backward", _calls_fused_cross_entropy_backward, backward_of="fused_cross_entropy")
op("fused_cross_entropy_grad",
   lambda: [call(r(4, 12, grad=True), torch.tensor([1, -100, 11, 0]), -100, 0.1, 1),
            call(r(4, 12, grad=True), torch.tensor([1, 2, 11, 0]), -100, 0.0, 2),
            call(r(4, 12, grad=True), torch.tensor([1, 2, 11, 0]), -100, 0.0, 2, torch.tensor(3))],
   _fused_ce_grad, _fused_ce_grad_ref, ref_dtypes=False,
   known_defects={"nan_inf": Defect(
       "an ignored row's gradient is 0 even with -Inf logits; ATen's gradient there is NaN",
       lambda: ([_t(1, 1, fill=[-INF]), torch.tensor([0])],
                {"ignore_index": 0, "label_smoothing": 0.0, "reduction": 2}))})
op("fused_linear_cross_entropy",
   lambda: [call(r(4, 12, grad=True), r(5, 12, grad=True), torch.tensor([0, 4, -100, 2]), -100, 0.0, 1, 2),
            call(r(4, 12, grad=True), r(5, 12, grad=True), torch.tensor([0, 4, -100, 2]), -100, 0.0, 1, 0,
                 torch.tensor(2.5))],
   _flce, _flce_ref, dtypes=FP32_64, ref_dtypes=False,
   known_defects={"nan_inf": Defect(
       "an ignored row contributes no gradient even with -Inf logits; ATen's gradient there is NaN",
       lambda: ([_t(1, 1, fill=[-INF]), _t(1, 1), torch.tensor([0])],
                {"ignore_index": 0, "label_smoothing": 0.0, "reduction": 1, "chunk_size": 0}))})


# ---- embedding ----
def _embedding(draw, dtype):
    v, d = draw(st.integers(1, 6)), draw(st.integers(0, 5))
    idx = T(draw, draw(shapes(max_dims=2, max_side=5)), torch.int64, values=f"int:0:{v}")
    return (T(draw, (v, d), dtype), idx, draw(st.sampled_from([-1, 0, v - 1]))), {}


def _embedding_bw(draw, dtype):
    v, d = draw(st.integers(1, 6)), draw(st.integers(0, 5))
    ishape = draw(shapes(max_dims=2, max_side=5))
    return (T(draw, (*ishape, d), dtype), T(draw, ishape, torch.int64, values=f"int:0:{v}"), v,
            draw(st.sampled_from([-1, 0])), draw(st.booleans())), {}


op("embedding", lambda: [call(r(6, 4, grad=True), torch.tensor([[1, 0, 5], [5, 5, 2]]), 5)],
   _embedding, lambda w, i, p: F.embedding(i, w, padding_idx=None if p < 0 else p), grad=(0,))
op("embedding_backward", lambda: [call(r(2, 3, 4), torch.tensor([[1, 0, 5], [5, 5, 2]]), 6, 0, False)],
   _embedding_bw, A.embedding_dense_backward)


# ---- dropout ----
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


def _dropout_bw(draw, dtype):
    shape = draw(shapes())
    return (T(draw, shape, dtype), T(draw, shape, torch.bool, values="bool"),
            draw(st.sampled_from([0.0, 2.0, 1.25]))), {}


op("dropout", lambda: [call(r(4, 6, grad=True), 0.4, True, None)],
   _dropout, lambda x, p, train: None, ref_dtypes=False, check=_dropout_check, random=True)
op("dropout_backward", lambda: [call(r(4, 6), torch.rand(4, 6) > 0.4, 2.0)],
   _dropout_bw, lambda g, m, s: g * m * s)


# ---- conv ----
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


_CONV_PADDING_DEFECT = "padding is skipped, not multiplied by zero: a NaN/Inf weight gives 0 at padded outputs " \
                       "where ATen gives NaN"

op("conv2d", lambda: [call(r(2, 4, 7, 6, grad=True), r(6, 2, 3, 3, grad=True), r(6, grad=True),
                           [2, 1], [1, 1], [1, 1], 2)],
   lambda d, t: _conv(d, t, 2), F.conv2d, grad=(0, 1, 2),
   known_defects={"nan_inf": Defect(_CONV_PADDING_DEFECT, lambda: (
       [_t(1, 2, 1, 1), _t(2, 1, 1, 1, fill=[NAN, -INF]), None, [1, 1], [0, 1], [1, 1], 2], {}))})
op("conv2d_backward", lambda: [call(r(2, 6, 4, 6), r(2, 4, 7, 6), r(6, 2, 3, 3), [2, 1], [1, 1], [1, 1], 2,
                                    [True, True, True])],
   backward_of="conv2d")
op("conv1d", lambda: [call(r(2, 3, 9, grad=True), r(4, 3, 3, grad=True), None, [1], [1], [1], 1)],
   lambda d, t: _conv(d, t, 1), F.conv1d, grad=(0, 1, 2),
   known_defects={"nan_inf": Defect(_CONV_PADDING_DEFECT, lambda: (
       [_t(1, 2, 1), _t(2, 1, 1, fill=[NAN, -INF]), None, [1], [1], [1], 2], {}))})
op("conv1d_backward", lambda: [call(r(2, 4, 9), r(2, 3, 9), r(4, 3, 3), [1], [1], [1], 1, [True, True, False])],
   backward_of="conv1d")


# ---- pool ----
def _calls_max_pool2d_backward():
    x = r(2, 3, 9, 8)
    _, idx = M.max_pool2d(x, [3, 3], [2, 2], [1, 1], [1, 1], False)
    return [call(r(*idx.shape), x, idx)]


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


def _avg_pool(draw, dtype):
    k, stride, pad, _, hw = _pool_geometry(draw, dilation=False)
    lead = draw(st.sampled_from([(), (2,)])) + (draw(st.integers(1, 3)),)
    return (T(draw, (*lead, *hw), dtype), k, stride, pad, draw(st.booleans()), draw(st.booleans()),
            draw(st.sampled_from([None, 3]))), {}


def _adaptive(draw, dtype):
    shape = (draw(st.integers(0, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 7)), draw(st.integers(1, 7)))
    return (T(draw, shape, dtype), [draw(st.integers(1, 5)), draw(st.integers(1, 5))]), {}


op("max_pool2d", lambda: [call(r(2, 3, 9, 8, grad=True), [3, 3], [2, 2], [1, 1], [1, 1], True)],
   _max_pool, lambda x, k, s, p, d, c: tuple(A.max_pool2d_with_indices(x, k, s, p, d, c)),
   grad=(0,), exact_ref=True)
op("max_pool2d_backward", _calls_max_pool2d_backward, backward_of="max_pool2d")
op("avg_pool2d", lambda: [call(r(2, 3, 9, 8, grad=True), [3, 2], [2, 1], [1, 1], False, True, None)],
   _avg_pool, lambda x, k, s, p, c, i, d: A.avg_pool2d(x, k, s, p, c, i, d), grad=(0,))
op("avg_pool2d_backward", lambda: [call(r(2, 3, 5, 9), r(2, 3, 9, 8), [3, 2], [2, 1], [1, 1], False, True,
                                        None)],
   backward_of="avg_pool2d")
op("adaptive_avg_pool2d", lambda: [call(r(2, 3, 9, 8, grad=True), [4, 3])],
   _adaptive, A._adaptive_avg_pool2d, grad=(0,))
op("adaptive_avg_pool2d_backward", lambda: [call(r(2, 3, 4, 3), r(2, 3, 9, 8))],
   backward_of="adaptive_avg_pool2d")


# ---- batchnorm ----
def _calls_batch_norm_update_stats():
    x = r(4, 3, 5, 2)
    _, sm, si = M.batch_norm(x, None, None, None, None, True, 1e-5)
    return [call(r(3), pos(3), sm, si, 0.1, 1e-5, 40)]


def _calls_batch_norm_backward():
    x = r(4, 3, 5, 2)
    _, sm, si = M.batch_norm(x, None, None, None, None, True, 1e-5)
    return [call(r(4, 3, 5, 2), x, r(3), r(3), pos(3), sm, si, True, 1e-5, [True, True, True]),
            call(r(4, 3, 5, 2), x, None, r(3), pos(3), None, None, False, 1e-5, [True, False, False])]


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


def _bn_update(draw, dtype):
    c = draw(st.integers(0, 4))
    return (T(draw, (c,), dtype, layout="contiguous"), T(draw, (c,), dtype, values="positive", layout="contiguous"),
            T(draw, (c,), dtype), T(draw, (c,), dtype, values="positive"),
            draw(st.sampled_from([0.1, 0.5])), 1e-5, draw(st.integers(2, 9))), {}


def _bn_update_ref(rm, rv, mean, invstd, momentum, eps, count):
    var = (1.0 / (invstd * invstd) - eps) * count / (count - 1)
    return (1 - momentum) * rm + momentum * mean, (1 - momentum) * rv + momentum * var


op("batch_norm", lambda: [call(r(4, 3, 5, 2, grad=True), r(3, grad=True), r(3, grad=True), r(3), pos(3), True, 1e-5),
                          call(r(4, 3, 5, 2, grad=True), None, None, r(3), pos(3), False, 1e-5)],
   _batch_norm, _batch_norm_ref, grad=(0, 1, 2), dtypes=FP32_64)  # float32/64 by design
op("batch_norm_update_stats_", _calls_batch_norm_update_stats,
   _bn_update, _bn_update_ref, mutates=(0, 1), ref_dtypes=False, dtypes=FP32_64)
op("batch_norm_backward", _calls_batch_norm_backward, backward_of="batch_norm")


# ---- upsample ----
def _upsample(draw, dtype, bilinear):
    shape = (draw(st.integers(0, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    out = [draw(st.integers(1, 9)), draw(st.integers(1, 9))]
    scales = draw(st.sampled_from([(None, None), (out[0] / shape[2], out[1] / shape[3])]))
    if bilinear:
        return (T(draw, shape, dtype), out, draw(st.booleans()), *scales), {}
    return (T(draw, shape, dtype), out, *scales), {}


op("upsample_nearest2d", lambda: [call(r(2, 3, 4, 5, grad=True), [7, 9], None, None)],
   lambda d, t: _upsample(d, t, False), A.upsample_nearest2d, grad=(0,))
op("upsample_nearest2d_backward", lambda: [call(r(2, 3, 7, 9), [2, 3, 4, 5], None, None)],
   backward_of="upsample_nearest2d")
op("upsample_bilinear2d", lambda: [call(r(2, 3, 4, 5, grad=True), [8, 10], False, 2.0, 2.0)],
   lambda d, t: _upsample(d, t, True), A.upsample_bilinear2d, grad=(0,),
   known_defects={"nan_inf": Defect(
       "an Inf input meets a zero interpolation weight (0 * Inf = NaN) at other output positions than in ATen",
       lambda: ([_t(1, 1, 1, 1, fill=[-INF]), [2, 3], False, None, None], {}), rounding_dependent=True)})
op("upsample_bilinear2d_backward", lambda: [call(r(2, 3, 8, 10), [2, 3, 4, 5], True, None, None)],
   backward_of="upsample_bilinear2d")


# ---- attention ----
_TRITON_ON_CUDA = "flash_attn on CUDA is the Triton kernel (fp16/bf16): tests/triton"


def _calls_flash_attn():
    q, k, v = (r(2, 5, 2, 8, grad=True) for _ in range(3))
    return [call(q, k, v, causal=True)]


def _calls_flash_attn_backward():
    q, k, v = (r(2, 5, 2, 8) for _ in range(3))
    out, lse = M.flash_attn(q, k, v)
    return [call(r(2, 5, 2, 8), q, k, v, out, lse, 0.0, 8 ** -0.5, False, -1, -1, 0.0, None, None, None,
                 0, 0, 0, False)]


def _calls_flash_attn_with_kvcache():
    # decode step with a new token appended (rotary), then a paged prefill chunk
    q, kc, vc, k, v = r(2, 1, 4, 8), r(2, 6, 2, 8), r(2, 6, 2, 8), r(2, 1, 2, 8), r(2, 1, 2, 8)
    cos, sin = _rope_tables(seq=7, half=2)
    seqlens = torch.tensor([3, 5], dtype=torch.int32)
    pages = torch.tensor([[2, 0], [1, 3]], dtype=torch.int32)
    return [call(q, kc, vc, k, v, cos, sin, seqlens, causal=True),
            call(r(2, 3, 4, 8), r(4, 16, 2, 8), r(4, 16, 2, 8), r(2, 3, 2, 8), r(2, 3, 2, 8),
                 cache_seqlens=seqlens, block_table=pages, causal=True, num_splits=2)]


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


def _attn_scores(q, k, softmax_scale, causal, window_left, window_right, softcap):
    """Scores (B, H, N_q, N_k) of (B, N, H, D) inputs with GQA, softcap, and keys outside the
    causal range or window (bottom-right aligned) at -inf; and the (N_q, N_k) mask of kept keys."""
    n_q, h, d = q.shape[1:]
    n_k, hk = k.shape[1], k.shape[2]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    s = torch.einsum("bmhd,bnhd->bhmn", q, k.repeat_interleave(h // hk, 2)) * scale
    if softcap > 0:
        s = softcap * torch.tanh(s / softcap)
    i, j = torch.arange(n_q)[:, None], torch.arange(n_k)[None, :]
    keep = torch.ones(n_q, n_k, dtype=torch.bool)
    wr = 0 if causal else window_right
    if wr >= 0:
        keep &= j <= i + n_k - n_q + wr
    if window_left >= 0:
        keep &= j >= i + n_k - n_q - window_left
    return s.masked_fill(~keep, float("-inf")), keep


def flash_attn_ref(q, k, v, softmax_scale=None, causal=False, window_left=-1, window_right=-1, softcap=0.0,
                   attn_mask=None):
    """Attention in (B, N, H, D); bottom-right aligned masks; a row with no key gives 0 and lse +inf."""
    h, hk = q.shape[2], k.shape[2]
    s, _ = _attn_scores(q, k, softmax_scale, causal, window_left, window_right, softcap)
    v = v.repeat_interleave(h // hk, 2)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        s = s.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:  # a float mask is additive (as SDPA's)
        s = s + attn_mask.to(s.dtype)
    lse = torch.logsumexp(s, -1)
    p = torch.where(torch.isneginf(lse)[..., None], 0.0, torch.exp(s - lse[..., None]))
    out = torch.einsum("bhmn,bnhd->bmhd", p, v)
    return out, torch.where(torch.isneginf(lse), float("inf"), lse).float()


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
    if str(_HERE / "ops") not in sys.path:
        sys.path.insert(0, str(_HERE / "ops"))
    from kvcache_ref import reference
    return reference(q, kc, vc, k, v, window_size=(window_left, window_right), **kw)


op("flash_attn", _calls_flash_attn, _flash_attn, flash_attn_ref, grad=(0, 1, 2), ref_dtypes=False,
   cuda_skip=_TRITON_ON_CUDA,
   known_defects={"nan_inf": Defect(
       "in the dense kernel (17 queries or more, or more queries than keys) a query row with a +Inf score gets "
       "lse NaN (Inf - Inf in the running max) where ATen's logsumexp gives +Inf",
       lambda: ([_t(1, 17, 2, 16, fill=[0.5] * 16 + [-INF] + [0.0] * 14 + [INF] + [0.0] * (16 * 2 * 16)),
                 _t(1, 1, 1, 16, fill=[-1.0] + [0.0] * 14 + [1.0]), _t(1, 1, 1, 16)],
                {"softmax_scale": None, "causal": False, "softcap": 0.0}))})
op("flash_attn_backward", _calls_flash_attn_backward, backward_of="flash_attn", cuda_skip=_TRITON_ON_CUDA)
op("flash_attn_with_kvcache", _calls_flash_attn_with_kvcache, _kvcache, _kvcache_ref, call=_kvcache_run,
   ref_dtypes=False)

_FP8 = torch.float8_e4m3fn


def _calls_flash_attn_fp8():
    q8, k8, v8, qd, kd, vd = mytorch_ext.quantize_fp8(r(2, 5, 4, 64), r(2, 7, 2, 64), r(2, 7, 2, 64))
    return [call(q8, k8, v8, qd, kd, vd, causal=True),
            call(q8, k8, v8, qd.amax().reshape(1), kd.amax().reshape(1), vd.amax().reshape(1), window_left=2,
                 softcap=5.0)]


def _flash_attn_fp8(draw, dtype):
    """float8 q, k, v (head_dim 64 or 128, the op's only ones) with float32 descales, per
    (batch, kv head) or one element each."""
    b, sq, sk = draw(st.integers(1, 2)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    hk = draw(st.integers(1, 2))
    h, d = hk * draw(st.integers(1, 2)), draw(st.sampled_from([64, 128]))
    lay = draw(st.sampled_from(["contiguous", "transposed_seq"]))
    qkv = tuple(_attn_tensor(draw, shape, dtype, lay) for shape in ((b, sq, h, d), (b, sk, hk, d), (b, sk, hk, d)))
    ds = tuple(T(draw, draw(st.sampled_from([(b, hk), (1,)])), torch.float32, values="positive",
                 layout="contiguous") for _ in range(3))
    kw = {"softmax_scale": draw(st.sampled_from([None, 0.1])), "causal": draw(st.booleans()),
          "softcap": draw(st.sampled_from([0.0, 5.0]))}
    if draw(st.booleans()):
        kw["window_left"], kw["window_right"] = draw(st.integers(-1, 3)), draw(st.integers(-1, 3))
    return qkv + ds, kw


def flash_attn_fp8_ref(q, k, v, q_descale, k_descale, v_descale, softmax_scale=None, causal=False,
                       window_left=-1, window_right=-1, softcap=0.0):
    """Attention of the dequantized inputs (x * descale over each kv head's group), out in
    bfloat16. The product runs over each row's kept keys only: a key outside the causal range
    or the window contributes nothing, not even a NaN of its v (the kernels skip key blocks
    outside a row's range; the entry's known defect is where they do not)."""
    b, h, hk = q.shape[0], q.shape[2], k.shape[2]

    def deq(x, ds):
        ds = ds.reshape(-1, 1).expand(b, hk) if ds.numel() == 1 else ds
        return x * ds.repeat_interleave(x.shape[2] // hk, 1)[:, None, :, None]
    q, k, v = deq(q, q_descale), deq(k, k_descale), deq(v, v_descale)
    s, keep = _attn_scores(q, k, softmax_scale, causal, window_left, window_right, softcap)
    lse = torch.logsumexp(s, -1)
    lse = torch.where(torch.isneginf(lse), float("inf"), lse)
    v = v.repeat_interleave(h // hk, 2)
    p = torch.exp(s - lse[..., None])  # lse +inf (no key): p = 0
    pv = p[..., None] * v.permute(0, 2, 1, 3)[:, :, None]  # (b, h, m, n, d)
    out = torch.where(keep[None, None, :, :, None], pv, 0.0).sum(3).permute(0, 2, 1, 3)
    return out.to(torch.bfloat16), lse.float()


op("flash_attn_fp8", _calls_flash_attn_fp8, _flash_attn_fp8, flash_attn_fp8_ref, dtypes=(_FP8,),
   ref_dtypes=False, tol={torch.bfloat16: (8e-3, 1e-3), torch.float32: (1e-5, 1e-5)},  # out, lse
   cuda_skip="flash_attn_fp8 on CUDA is the Hopper kernel or the bf16 path: tests/cuda/test_attention_fp8_cuda.py",
   # opcheck's schema test compares inputs with allclose, which float8 lacks on the CPU;
   # tests/ops/test_attention_fp8.py checks bitwise that the op mutates nothing
   opcheck_utils=("test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic"),
   known_defects={"nan_inf": Defect(
       "a NaN in v at a key a query row does not see still reaches that row when the key shares the "
       "kernel's block of keys with visible ones, or when the row sees no key at all: its zero weight "
       "times NaN, as in flash_attn (whose nan_inf entry covers the same), where the reference leaves "
       "masked keys out",
       lambda: ([_t(1, 2, 1, 64).to(_FP8), _t(1, 1, 1, 64).to(_FP8),
                 _t(1, 1, 1, 64, fill=[NAN] + [0.5] * 63).to(_FP8), torch.ones(1, 1), torch.ones(1, 1),
                 torch.ones(1, 1)], {"causal": True}))})


# ---- optim (in place on lists of tensors) ----
def _opt_state(n):
    return [[torch.zeros(5), torch.zeros(3, 2)] for _ in range(n)]


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


op("sgd_step_", lambda: [call([r(5), r(3, 2)], [r(5), r(3, 2)], *_opt_state(1), 0.1, 0.9)],
   _sgd, sgd_ref, mutates=(0, 2), ref_dtypes=False)
op("adam_step_", lambda: [call([r(5), r(3, 2)], [r(5), r(3, 2)], *_opt_state(2), [],
                               [torch.tensor(1.0), torch.tensor(1.0)], 0.01),
                          call([r(5), r(3, 2)], [r(5), r(3, 2)], *_opt_state(2), [],
                               [torch.tensor(2.0), torch.tensor(2.0)], 0.01, 0.9, 0.999, 0.01, 1e-8, False, False, True)],
   _adam, adam_ref, mutates=(0, 2, 3, 4), ref_dtypes=False)
