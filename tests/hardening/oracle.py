"""The one oracle of the hardening checks: a call must match ATen, or fail as ATen does.

`check_against_reference` runs the op of an OpInfo (an entry of tests/opinfo.py, or a case of
aten_specs.py) on a device and its ATen reference on the CPU (in float64). Where the reference
raises, the op must raise a clear error naming it; where the reference returns, the op must
return the same values, shapes and dtypes, within the entry's tolerances.
"""
from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from helpers import flat_tensors, map_tensors
from strategies import FP32_64, OpLog, assert_same, is_clear_error, realize, upcast


def op_names(spec):
    short = spec.name.split("::")[-1]
    return (spec.name, f"mytorch.{short}", f"mytorch::{short}", *spec.error_names)


def _call(fn, args, kwargs):
    try:
        return fn(*args, **kwargs), None
    except Exception as e:  # noqa: BLE001  every exception is judged below
        return None, e


def _contiguous(obj):
    """The float64 reference runs on contiguous copies (same values): ATen has layout-specific
    defects on bad input (a crash in a strided conv1d reference, a wrong batch_norm gradient
    for a strided weight) that are no part of what is compared."""
    return map_tensors(lambda t: t.contiguous(), obj)


def _dtypes(out):
    if isinstance(out, (tuple, list)):
        return [_dtypes(o) for o in out]
    return out.dtype if isinstance(out, torch.Tensor) else None


def _describe(args, kwargs):
    def d(o):
        if isinstance(o, torch.Tensor):
            return f"Tensor{tuple(o.shape)}:{o.dtype}:{o.device}:stride{o.stride()}"
        if isinstance(o, (list, tuple)):
            return type(o)(d(x) for x in o)
        return o
    return f"args={d(list(args))} kwargs={ {k: d(v) for k, v in kwargs.items()} }"


def check_against_reference(spec, args, kwargs, device, grads=True):
    """Returns the set of ops the call reached; raises AssertionError on any mismatch."""
    cpu_args, cpu_kwargs = realize(args, "cpu"), realize(kwargs, "cpu")
    dev_args, dev_kwargs = realize(args, device), realize(kwargs, device)
    seen = check_call(spec, cpu_args, cpu_kwargs, dev_args, dev_kwargs, device)
    if grads and spec.grad and _grad_dtype_ok(dev_args, spec) and seen is not None:
        log = OpLog()
        with log:
            _check_grads(spec, args, kwargs, device, f"{spec.name} on {device} with {_describe(dev_args, dev_kwargs)}")
        seen |= log.seen
    return seen or set()


def fuzz_against_reference(spec, devices) -> set:
    """Draws calls of spec (a dtype, then spec.sample) and checks each on every device with
    check_against_reference; returns the set of ops the calls reached."""
    reached = set()

    @given(data=st.data())
    def run(data):
        dtype = data.draw(st.sampled_from(spec.dtypes), label="dtype")
        args, kwargs = spec.sample(data.draw, dtype)
        for device in devices:
            reached.update(check_against_reference(spec, args, kwargs, device))

    run()
    return reached


def check_call(spec, cpu_args, cpu_kwargs, dev_args, dev_kwargs, device, stricter_ok=False):
    """One call of spec's op on dev_args against the reference on the same values on the CPU.
    Returns the ops reached, or None where the op raised (as the reference did).
    stricter_ok: a clear error is fine where ATen accepts the input (mytorch may accept less)."""
    names = op_names(spec)
    native, native_exc = (None, None)
    if spec.ref_dtypes or spec.exact_ref:
        native, native_exc = _call(spec.ref, cpu_args, cpu_kwargs)
    if spec.exact_ref:
        expected, ref_exc = native, native_exc
    else:
        ref_kwargs = upcast(cpu_kwargs)
        if spec.ref_uses_dtype:
            ref_kwargs["_dtype"] = next(t.dtype for t in flat_tensors(cpu_args))
        expected, ref_exc = _call(spec.ref, _contiguous(upcast(cpu_args)), _contiguous(ref_kwargs))

    where = f"{spec.name} on {device} with {_describe(dev_args, dev_kwargs)}"
    log = OpLog()
    with log:
        result, exc = _call(spec.fn, dev_args, dev_kwargs)

    if ref_exc is not None:
        assert exc is not None, f"{where}: returned a result where ATen raises {ref_exc!r}"
        problem = is_clear_error(exc, names)
        assert problem is None, f"{where}: unclear error ({problem}): {exc!r}"
        return None
    if exc is not None:
        if stricter_ok and is_clear_error(exc, names) is None:
            return None
        raise AssertionError(f"{where}: raised where ATen returns a result: {exc!r}") from exc

    if spec.check is not None:
        spec.check(cpu_args, result)
        return log.seen
    if spec.mutates:
        actual = tuple(dev_args[i] for i in spec.mutates)
        assert_same(actual, expected, None, where, tol=spec.tol)
        return log.seen
    dtypes = _dtypes(native) if native_exc is None and spec.ref_dtypes else None
    assert_same(result, expected, dtypes, where, tol=spec.tol)
    return log.seen


def _grad_dtype_ok(dev_args, spec):
    ts = [dev_args[i] for i in spec.grad if isinstance(dev_args[i], torch.Tensor)]
    return ts and all(t.dtype in FP32_64 for t in ts)


def _pick(out, i):
    return out[i] if isinstance(out, (tuple, list)) else out


def _grads(fn, args, kwargs, positions, grad_out_index, seed):
    args = list(args)
    leaves = []
    for i in positions:
        if isinstance(args[i], torch.Tensor):
            args[i] = args[i].detach().requires_grad_()
            leaves.append(args[i])
    out = _pick(fn(*args, **kwargs), grad_out_index)
    g = torch.Generator().manual_seed(seed)
    go = torch.randn(out.shape, generator=g, dtype=torch.float64).to(out.dtype).to(out.device)
    return torch.autograd.grad(out, leaves, go, allow_unused=True)


def _check_grads(spec, args, kwargs, device, where):
    dev_args, dev_kwargs = realize(args, device), realize(kwargs, device)
    cpu_args, cpu_kwargs = upcast(realize(args, "cpu")), upcast(realize(kwargs, "cpu"))
    if spec.ref_uses_dtype:
        cpu_kwargs["_dtype"] = next(t.dtype for t in flat_tensors(dev_args))
    actual = _grads(spec.fn, dev_args, dev_kwargs, spec.grad, spec.grad_output, 1)
    expected = _grads(spec.ref, cpu_args, cpu_kwargs, spec.grad, spec.grad_output, 1)
    for i, (a, e) in enumerate(zip(actual, expected)):
        if e is None:
            assert a is None or not a.any(), f"{where}: gradient {i} is nonzero where ATen's is None"
            continue
        assert a is not None, f"{where}: gradient {i} is None where ATen gives one"
        assert_same(a, e, None, f"{where}: gradient of arg {spec.grad[i]}", tol=spec.grad_tol)


