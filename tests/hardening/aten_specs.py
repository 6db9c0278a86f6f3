"""ATen ops on the mytorch device, fuzzed against ATen on the CPU.

Each case is an `OpInfo` (tests/opinfo.py) whose `call` is a torch function (functional,
in-place or out=) on mytorch tensors and whose `ref` is the same call on CPU tensors in float64. `covers` names
the registered PrivateUse1 kernels the case must reach (checked against the op log).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from opinfo import OPS, OpInfo, T
from strategies import FLOATS, FP32_64, broadcast_shapes, shapes

CASES: dict[str, OpInfo] = {}


# Where ATen on the CPU raises too, the device's error may be worded as ATen words it: any
# catchable, non-internal error passes (mytorch's own ops are held to naming themselves).
ATEN_MESSAGES = ("",)


def case(key, sample, fn, covers, dtypes=FLOATS, ref=None, **kw):
    CASES[key] = OpInfo(key, sample=sample, ref=ref or fn, dtypes=dtypes, call=fn, error_names=ATEN_MESSAGES, **kw)
    CASES[key].covers = tuple(covers)


def _same_shape_binary(draw, dtype):
    sa, sb = draw(broadcast_shapes(2))
    out = torch.broadcast_shapes(sa, sb)
    return (T(draw, out, dtype, allow_expand=False), T(draw, sb, dtype)), {}


def _binary(draw, dtype):
    sa, sb = draw(broadcast_shapes(2))
    return (T(draw, sa, dtype), T(draw, sb, dtype)), {}


def _tensor_scalar(draw, dtype):
    return (T(draw, draw(shapes()), dtype, allow_expand=False), draw(st.sampled_from([2, -0.5, 3.0]))), {}


def _inplace(name):
    return lambda a, b: getattr(a.clone(), name + "_")(b)


BINARY = {"add": "add.Tensor add.out add_.Tensor add.Scalar add_.Scalar",
          "sub": "sub.Tensor sub.out sub_.Tensor sub.Scalar sub_.Scalar",
          "mul": "mul.Tensor mul.out mul_.Tensor mul.Scalar mul_.Scalar",
          "div": "div.Tensor div.out div_.Tensor div.Scalar div_.Scalar",
          "maximum": "maximum maximum.out", "minimum": "minimum minimum.out",
          "pow": "pow.Tensor_Tensor pow.Tensor_Tensor_out pow_.Tensor pow.Tensor_Scalar pow_.Scalar",
          "eq": "eq.Tensor eq.Tensor_out eq_.Tensor eq.Scalar eq_.Scalar",
          "ne": "ne.Tensor ne.Tensor_out ne_.Tensor ne.Scalar ne_.Scalar",
          "lt": "lt.Tensor lt.Tensor_out lt_.Tensor lt.Scalar lt_.Scalar",
          "le": "le.Tensor le.Tensor_out le_.Tensor le.Scalar le_.Scalar",
          "gt": "gt.Tensor gt.Tensor_out gt_.Tensor gt.Scalar gt_.Scalar",
          "ge": "ge.Tensor ge.Tensor_out ge_.Tensor ge.Scalar ge_.Scalar",
          "logical_and": "logical_and logical_and.out logical_and_",
          "logical_or": "logical_or logical_or.out logical_or_",
          "floor_divide": "floor_divide floor_divide.out floor_divide_.Tensor"}

for _name, _ops in BINARY.items():
    _ops = ["aten::" + o for o in _ops.split()]
    _fn = getattr(torch, _name)
    case(f"{_name}", _binary, _fn, [o for o in _ops if "_." not in o and ".out" not in o and "Scalar" not in o][:1])
    case(f"{_name}.out", _binary, lambda a, b, _fn=_fn: _fn(a, b, out=_empty_out(_fn, a, b)),
         [o for o in _ops if o.endswith("out")])
    if _name not in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "maximum", "minimum"):
        case(f"{_name}_", _same_shape_binary, _inplace(_name), [o for o in _ops if "_." in o and "Scalar" not in o or o.endswith(_name + "_")])
    for _o in [o for o in _ops if "Scalar" in o and not o.endswith("out")]:
        _op = getattr(getattr(torch.ops.aten, _o[6:].split(".")[0]), _o.split(".")[1])
        _in_place = _o.split(".")[0].endswith("_")
        case(_o[6:], _tensor_scalar, lambda a, b, _op=_op, _ip=_in_place: _op(a.clone() if _ip else a, b), [_o],
             ref=(lambda a, b, _fn=_fn, _n=_name, _ip=_in_place: getattr(a.clone(), _n + "_")(b) if _ip else _fn(a, b)))


def _empty_out(fn, *args):
    return torch.empty(0, dtype=fn(*[a.cpu() for a in args]).dtype, device=args[0].device)


UNARY = {"abs": "abs abs.out abs_", "neg": "neg neg.out neg_", "exp": "exp exp.out exp_",
         "log": "log log.out log_", "sqrt": "sqrt sqrt.out sqrt_", "rsqrt": "rsqrt rsqrt.out rsqrt_",
         "tanh": "tanh tanh.out tanh_", "sigmoid": "sigmoid sigmoid.out sigmoid_",
         "reciprocal": "reciprocal reciprocal.out reciprocal_", "sign": "sign sign.out sign_",
         "relu": "relu relu_", "logical_not": "logical_not logical_not.out logical_not_",
         "sin": "sin.out", "cos": "cos.out"}
_POSITIVE = {"log", "sqrt", "rsqrt"}

for _name, _ops in UNARY.items():
    _ops = ["aten::" + o for o in _ops.split()]
    _fn = getattr(torch, _name)
    _values = "positive" if _name in _POSITIVE else "normal"

    def _s(draw, dtype, _values=_values):
        return (T(draw, draw(shapes()), dtype, values=_values),), {}

    def _s_own(draw, dtype, _values=_values):
        return (T(draw, draw(shapes()), dtype, values=_values, allow_expand=False),), {}
    if f"aten::{_name}" in _ops:
        case(_name, _s, _fn, [f"aten::{_name}"])
    if f"aten::{_name}.out" in _ops:
        case(f"{_name}.out", _s, lambda x, _fn=_fn: _fn(x, out=_empty_out(_fn, x)), [f"aten::{_name}.out"])
    if f"aten::{_name}_" in _ops:
        case(f"{_name}_", _s_own, lambda x, _n=_name: getattr(x.clone(), _n + "_")(), [f"aten::{_name}_"])

for _name, _cov in (("gelu", "gelu gelu_"), ("silu", "silu silu_"), ("hardswish", "hardswish hardswish_"),
                    ("hardsigmoid", "hardsigmoid hardsigmoid_")):
    _fn = getattr(F, _name)

    def _s(draw, dtype):
        return (T(draw, draw(shapes()), dtype, allow_expand=False),), {}
    case(f"F.{_name}", _s, _fn, [f"aten::{_name}", f"aten::{_name}_backward"], grad=(0,))
    case(f"F.{_name}_", _s, lambda x, _n=_name: getattr(torch.ops.aten, _n + "_")(x.clone()),
         [f"aten::{_cov.split()[1]}"])


# ---- the mytorch:: specs' ATen counterparts, through torch functions on the device ----
def _from_mytorch(key, fn, covers, **kw):
    s = OPS[key.split("::")[1]]
    CASES[f"via.{key.split('::')[1]}"] = OpInfo(f"via.{key}", sample=s.sample, ref=s.ref,
                                               dtypes=kw.get("dtypes", s.dtypes), call=fn,
                                               error_names=ATEN_MESSAGES,
                                               grad=kw.get("grad", s.grad), exact_ref=s.exact_ref,
                                               ref_dtypes=s.ref_dtypes, ref_uses_dtype=s.ref_uses_dtype,
                                               grad_output=s.grad_output)
    CASES[f"via.{key.split('::')[1]}"].covers = tuple("aten::" + c for c in covers.split())


for _key, _covers in {
    "mytorch::where": "where.self", "mytorch::clamp": "clamp", "mytorch::clamp_tensor": "clamp.Tensor",
    "mytorch::masked_fill": "masked_fill.Scalar", "mytorch::addcmul": "addcmul", "mytorch::addcdiv": "addcdiv",
    "mytorch::lerp": "lerp.Tensor", "mytorch::sum": "sum.dim_IntList", "mytorch::mean": "mean.dim",
    "mytorch::amax": "amax", "mytorch::amin": "amin", "mytorch::var": "var.correction",
    "mytorch::std": "std.correction", "mytorch::logsumexp": "logsumexp", "mytorch::max_dim": "max.dim",
    "mytorch::min_dim": "min.dim", "mytorch::argmax": "argmax", "mytorch::argmin": "argmin",
    "mytorch::index_select": "index_select", "mytorch::gather": "gather", "mytorch::scatter_add": "scatter_add",
    "mytorch::index": "index.Tensor", "mytorch::index_put": "index_put", "mytorch::cat": "cat",
    "mytorch::nonzero": "nonzero", "mytorch::mm": "mm", "mytorch::bmm": "bmm", "mytorch::addmm": "addmm",
    "mytorch::baddbmm": "baddbmm", "mytorch::softmax": "_softmax _softmax_backward_data",
    "mytorch::log_softmax": "_log_softmax _log_softmax_backward_data",
    "mytorch::layer_norm": "native_layer_norm native_layer_norm_backward",
    "mytorch::mse_loss": "mse_loss mse_loss_backward", "mytorch::cross_entropy": "_log_softmax nll_loss_forward",
    "mytorch::embedding": "embedding embedding_dense_backward", "mytorch::conv2d": "convolution convolution_backward",
    "mytorch::max_pool2d": "max_pool2d_with_indices max_pool2d_with_indices_backward",
    "mytorch::avg_pool2d": "avg_pool2d avg_pool2d_backward",
    "mytorch::adaptive_avg_pool2d": "_adaptive_avg_pool2d _adaptive_avg_pool2d_backward",
    "mytorch::upsample_nearest2d": "upsample_nearest2d upsample_nearest2d_backward",
    "mytorch::upsample_bilinear2d": "upsample_bilinear2d upsample_bilinear2d_backward",
    "mytorch::prod": "prod",
}.items():
    _s = OPS[_key.split("::")[1]]
    # Known gap: the device's convolution has float32/float64 kernels only (bfloat16 and
    # float16 raise a clear error, where ATen's CPU convolution computes them).
    _from_mytorch(_key, _s.ref, _covers, **({"dtypes": FP32_64} if _key == "mytorch::conv2d" else {}))
