"""Bad input for every registered mytorch:: op: wrong dtypes, wrong devices, wrong ranks,
NaN/Inf, huge and negative sizes, mismatched shapes.

The sweep iterates the registered op list, so a new op without an entry in tests/opinfo.py
fails it. Each op gets a valid drawn call (from its entry's `sample`, or for a backward op,
the call its forward's autograd makes), then one argument at a time is spoiled:

- ops with an ATen reference must match it where they return, and raise a clear error
  naming the op (or one of its entry's `error_names`) where ATen raises (they may refuse
  more than ATen, with a clear error);
- backward ops, which have no standalone reference, must raise a clear error or return
  (their values are checked by the gradient fuzzing); NaN/Inf must not raise;
- a tensor on another device must always raise a clear error.
An entry's `known_defects` lists the cases where the op knowingly differs from ATen: the
sweep lets them pass, and test_known_defects_still_fail asserts that each still differs.
A crash ends the worker and a hang trips the guard in conftest.py: both fail the run.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import mytorch_ext
from helpers import flat_tensors
from opinfo import OPS, registered_ops as _registered_short
from oracle import _describe, check_call, op_names
from strategies import DEVICE, OpLog, has_device, is_clear_error, realize

DEVICES = ["cpu"] + ([DEVICE] if has_device() else [])
HUGE, NEGATIVE = 2**40, -3


def registered_ops():
    return [f"mytorch::{n}" for n in _registered_short()]


def _entry(name):
    return OPS.get(name.split("::")[1])


def direct_spec(name):
    """The entry whose drawn calls call op `name` directly."""
    e = _entry(name)
    return e if e is not None and e.sample is not None else None


def covering_spec(name):
    """The forward entry whose autograd calls backward op `name`, with gradients to draw."""
    e = _entry(name)
    fwd = OPS.get(e.backward_of) if e is not None and e.backward_of else None
    return fwd if fwd is not None and fwd.sample is not None and fwd.grad else None


class Capture(OpLog):
    """Records the first call of one op (its arguments) while a block runs."""

    def __init__(self, name):
        super().__init__()
        self.name, self.call = name, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.call is None and func._schema.name == self.name:
            self.call = ([a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args],
                         dict(kwargs or {}))
        return func(*args, **(kwargs or {}))


def captured_call(spec, name, data):
    """The arguments autograd passes to backward op `name` for a drawn call of spec."""
    args, kwargs = spec.sample(data.draw, torch.float32)
    cpu = list(realize(args, "cpu"))
    for i in spec.grad:
        if isinstance(cpu[i], torch.Tensor):
            cpu[i] = cpu[i].detach().requires_grad_()
    cap = Capture(name)
    with cap:
        try:
            out = spec.fn(*cpu, **realize(kwargs, "cpu"))
            out = out[spec.grad_output] if isinstance(out, (tuple, list)) else out
            out.backward(torch.ones_like(out))
        except Exception:  # noqa: BLE001  a drawn call its forward rejects: draw another
            pass
    assume(cap.call is not None)
    return cap.call


# ---- spoiling one argument ----
def tensor_slots(args, kwargs):
    """(container, key) for every tensor argument, lists of tensors included."""
    slots = []
    for c in (args, kwargs):
        for k in (range(len(c)) if isinstance(c, list) else list(c)):
            v = c[k]
            if isinstance(v, torch.Tensor):
                slots.append((c, k))
            elif isinstance(v, list):
                slots += [(v, j) for j in range(len(v)) if isinstance(v[j], torch.Tensor)]
    return slots


def int_slots(schema, args, kwargs):
    """(container, key, is_list) for every int / int[] argument, by the schema."""
    out = []
    for i, a in enumerate(schema.arguments):
        t = str(a.type)
        if not (t.startswith("int") or t.startswith("Optional[int") or t.startswith("List[int")):
            continue
        if i < len(args):
            c, k = args, i
        elif a.name in kwargs:
            c, k = kwargs, a.name
        else:
            continue
        if isinstance(c[k], int) and not isinstance(c[k], bool):
            out.append((c, k, False))
        elif isinstance(c[k], list) and c[k] and all(isinstance(v, int) for v in c[k]):
            out.append((c, k, True))
    return out


def copy_call(args, kwargs):
    """Fresh tensors for each spoiled call: an in-place op must not feed the next one."""
    def cp(v):
        if isinstance(v, torch.Tensor):
            return v.clone()
        return [cp(x) for x in v] if isinstance(v, list) else v
    return [cp(a) for a in args], {k: cp(v) for k, v in kwargs.items()}


def with_nan_inf(t):
    t = t.clone()
    flat = t.view(-1) if t.is_contiguous() else None
    if flat is None:
        t = t.contiguous()
        flat = t.view(-1)
    for pos, v in zip((0, -1, flat.numel() // 2), (float("nan"), float("inf"), float("-inf"))):
        if flat.numel():
            flat[pos] = v
    return t


def spoiled_calls(schema, args, kwargs):
    """(kind, what, args, kwargs) for each way to spoil one argument of a valid call."""
    for c, k in tensor_slots(args, kwargs):
        t = c[k]

        def swap(new, c=c, k=k):
            c[k], old = new, c[k]
            try:
                return copy_call(args, kwargs)
            finally:
                c[k] = old
        what = f"tensor {k} {tuple(t.shape)}:{t.dtype}"
        bad_dtype = torch.int32 if t.is_floating_point() else torch.float32
        yield "wrong_dtype", f"{what} as {bad_dtype}", *swap(t.to(bad_dtype))
        yield "wrong_rank", f"{what} with a leading dim", *swap(torch.stack([t, t]))
        if t.dim() >= 1 and t.shape[0] > 0:
            yield "wrong_rank", f"{what} without its first dim", *swap(t.select(0, 0))
        if t.dim() >= 1:
            shape = list(t.shape)
            shape[-1] += 1
            yield "mismatched_shape", f"{what} as {tuple(shape)}", *swap(torch.zeros(shape, dtype=t.dtype, device=t.device))
        if t.is_floating_point() and t.numel():
            yield "nan_inf", f"{what} with NaN, Inf and -Inf", *swap(with_nan_inf(t))
        if t.dim() >= 1 and has_device() and len(tensor_slots(args, kwargs)) > 1:
            yield "wrong_device", f"{what} on the other device", *swap(OtherDevice(t))
    for c, k, is_list in int_slots(schema, args, kwargs):
        for kind, v in SIZE_SPOILS:
            old = c[k]
            c[k] = [v] * len(old) if is_list else v
            try:
                yield kind, f"int argument {k} = {c[k]}", *copy_call(args, kwargs)
            finally:
                c[k] = old


class OtherDevice:
    """Marks the one tensor that goes to the other device (cpu <-> mytorch)."""

    def __init__(self, t):
        self.t = t


def to_device(obj, device):
    if isinstance(obj, OtherDevice):
        return obj.t.to("cpu" if device == DEVICE else DEVICE)
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, list):
        return [to_device(o, device) for o in obj]
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def judge(name, spec, kind, what, cpu_args, cpu_kwargs, device, fn):
    """None when the spoiled call behaved; else a one-line description."""
    dev_args, dev_kwargs = to_device(cpu_args, device), to_device(cpu_kwargs, device)
    where = f"{name} on {device}, {kind}: {what}"
    if spec is not None and kind != "wrong_device":
        try:
            check_call(spec, cpu_args, cpu_kwargs, dev_args, dev_kwargs, device, stricter_ok=kind != "nan_inf")
        except AssertionError as e:
            return f"{where}: {str(e).splitlines()[0][:600]}"
        return None
    try:
        fn(*dev_args, **dev_kwargs)
    except Exception as e:  # noqa: BLE001
        if kind == "nan_inf":
            return f"{where}: raised on NaN/Inf: {e!r}"[:600]
        problem = is_clear_error(e, op_names(_Named(name)))
        return None if problem is None else f"{where}: unclear error ({problem}): {str(e)[:300]!r}"
    if kind == "wrong_device":
        if cpu_scalars_only(dev_args, dev_kwargs, name):
            # a 0-dim CPU tensor is a scalar operand next to tensors on another device (as
            # on CUDA): the result must then be the reference's
            if spec is None:
                return None
            try:
                check_call(spec, to_device(cpu_args, "cpu"), to_device(cpu_kwargs, "cpu"), dev_args, dev_kwargs,
                           device)
            except AssertionError as e:
                return f"{where}: {str(e).splitlines()[0][:600]}"
            return None
        return f"{where}: returned a result for tensors on two devices ({_describe(dev_args, dev_kwargs)})"
    return None


def cpu_scalars_only(args, kwargs, name=""):
    """True where every CPU tensor is 0-dim and some tensor is on another device. For cat,
    1-D empty tensors count as absent too: ATen's cat skips them, device included."""
    ts = [t for t in flat_tensors([args, kwargs])]
    if name == "mytorch::cat":
        ts = [t for t in ts if tuple(t.shape) != (0,)]
        if len({t.device for t in ts}) <= 1:
            return True
    return any(t.device.type != "cpu" for t in ts) and all(t.dim() == 0 for t in ts if t.device.type == "cpu")


# (op, kind) -> Defect(what differs, a spoiled call on the CPU that shows it, ...), from the
# entries' `known_defects`. The sweep does not fail on these; test_known_defects_still_fail
# asserts each call still fails, so a fix forces its entry out. Keep these few.
KNOWN_DEFECTS = {(e.name, kind): d for e in OPS.values() for kind, d in e.known_defects.items()}


def test_known_defects_name_registered_ops():
    unknown = [op for op, _ in KNOWN_DEFECTS if op not in registered_ops()]
    assert not unknown, f"known_defects of ops that are not registered: {unknown}"


# Huge sizes are left out of the sanitizer build's run: ATen's references allocate some of
# them with `new`, which ASan cannot fail as std::bad_alloc (it stops the process).
SIZE_SPOILS = [("negative_size", NEGATIVE)] if mytorch_ext.build_info().get("sanitize") else \
    [("huge_size", HUGE), ("negative_size", NEGATIVE)]


@pytest.mark.parametrize("key", sorted(KNOWN_DEFECTS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_known_defects_still_fail(key):
    """Strict: each listed case must still fail the sweep's rule; a fix must remove its entry."""
    name, kind = key
    defect = KNOWN_DEFECTS[key]
    if defect.rounding_dependent and mytorch_ext.build_info().get("sanitize"):
        pytest.skip("whether 0 * Inf appears here depends on how an interpolation weight rounds, "
                    "which differs in the -O1 sanitizer build")
    spec = direct_spec(name)
    args, kwargs = defect.call()
    p = judge(name, spec, kind, "the known case", args, kwargs, "cpu", spec.fn if spec else None)
    if p is None and defect.rounding_dependent:
        pytest.skip("this build's floating-point code generation does not reach the case "
                    "(the portable default rounds the interpolation weight away from 0 * Inf)")
    assert p is not None, f"{name} {kind} passes now: remove it from the entry's known_defects ({defect.what})"


class _Named:
    def __init__(self, name):
        self.name, self.error_names = name, ()


def test_every_registered_op_has_a_bad_input_spec():
    missing = [n for n in registered_ops() if direct_spec(n) is None and covering_spec(n) is None]
    assert not missing, (f"ops the bad-input sweep cannot call (give their entry in tests/opinfo.py a `sample`, "
                         f"or for a backward op, `backward_of`): {missing}")


@pytest.mark.parametrize("name", registered_ops())
def test_bad_inputs(name):
    spec = direct_spec(name)
    cover = None if spec is not None else covering_spec(name)
    assert spec is not None or cover is not None, f"{name}: no spec to draw a valid call from"
    short = name.split("::")[1]
    op = getattr(torch.ops.mytorch, short)
    fn = spec.fn if spec is not None else op
    schema = op.default._schema
    tried = set()

    # each example spoils every argument on both devices: half the profile's examples
    # (6 under ci, 200 under long) keep the default run within its time budget
    @settings(max_examples=max(1, settings.default.max_examples // 2))
    @given(data=st.data())
    def run(data):
        if spec is not None:
            dtype = data.draw(st.sampled_from(spec.dtypes), label="dtype")
            args, kwargs = spec.sample(data.draw, dtype)
            args, kwargs = list(realize(args, "cpu")), realize(kwargs, "cpu")
        else:
            args, kwargs = captured_call(cover, name, data)
        problems = []
        for kind, what, a, k in spoiled_calls(schema, args, kwargs):
            tried.add(kind)
            for device in DEVICES:
                p = judge(name, spec, kind, what, a, k, device, fn)
                if p and (name, kind) not in KNOWN_DEFECTS:  # listed ones are checked strictly below
                    problems.append(p)
        assert not problems, "\n".join(problems[:12])

    run()
    assert {"wrong_dtype", "wrong_rank"} <= tried, f"{name}: the sweep spoiled too little ({sorted(tried)})"
