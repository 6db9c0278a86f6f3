"""apply_to's module forwards (and the fused cross-entropy wrapper) call their mytorch op
through mytorch_ext._C._eager_calls in eager mode and through torch.ops otherwise
(torch.compile, a TorchFunctionMode, an argument with __torch_function__): both give the same
output, the same backward node and the same gradients."""
import types

import pytest
import torch
from torch.overrides import TorchFunctionMode

from mytorch_ext import _eager_calls
from mytorch_ext.ops import loss
from mytorch_ext.patching import hf


def _layer_norm():
    m = torch.nn.LayerNorm(16)
    return types.MethodType(hf._layer_norm_forward, m), (torch.randn(3, 5, 16),), list(m.parameters())


def _rms_norm():
    m = torch.nn.Module()
    m.weight = torch.nn.Parameter(torch.randn(16))
    m.variance_epsilon = 1e-6
    return types.MethodType(hf._rms_forward, m), (torch.randn(3, 5, 16),), [m.weight]


def _gelu():
    return types.MethodType(hf._gelu_tanh_forward, torch.nn.Module()), (torch.randn(3, 16),), []


def _swiglu():
    m = torch.nn.Module()
    m.gate_proj, m.up_proj, m.down_proj = (torch.nn.Linear(16, 16) for _ in range(3))
    return types.MethodType(hf._swiglu_forward, m), (torch.randn(3, 16),), list(m.parameters())


def _fused_cross_entropy():
    target = torch.randint(0, 16, (6,))
    return (lambda x: loss.fused_cross_entropy(x, target)), (torch.randn(6, 16),), []


FORWARDS = {"layer_norm": _layer_norm, "rms_norm": _rms_norm, "gelu": _gelu, "swiglu": _swiglu,
            "fused_cross_entropy_grad": _fused_cross_entropy}


class _Spy(TorchFunctionMode):
    """Records the mytorch ops that reach __torch_function__ (torch.ops calls do)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if "mytorch" in str(func):
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def _run(fwd, inputs, params):
    leaves = [x.requires_grad_() for x in inputs] + params
    out = fwd(*inputs)
    grads = torch.autograd.grad(out, leaves, torch.ones_like(out))
    return out, out.grad_fn.name(), grads


def _recording(monkeypatch):
    """The bindings with each call recorded by name."""
    calls = []
    real = _eager_calls._bound

    def wrap(name):
        def call(*args):
            calls.append(name)
            return getattr(real, name)(*args)
        return call
    names = ("layer_norm", "rms_norm", "gelu", "swiglu", "rope", "fused_cross_entropy_grad")
    monkeypatch.setattr(_eager_calls, "_bound", types.SimpleNamespace(**{n: wrap(n) for n in names}))
    return calls


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", list(FORWARDS))
def test_bound_call_matches_torch_ops(op, device, monkeypatch):
    torch.manual_seed(0)
    with torch.device(device):
        fwd, inputs, params = FORWARDS[op]()
    assert inputs[0].device.type == device
    bound = _recording(monkeypatch)
    spy = _Spy()
    out, node, grads = _run(fwd, inputs, params)  # eager: the binding
    assert bound == [op]
    with spy:
        out_ops, node_ops, grads_ops = _run(fwd, inputs, params)  # torch.ops, seen by the mode
    assert bound == [op] and any(op in name for name in spy.ops), (bound, spy.ops)
    assert node == node_ops, (node, node_ops)
    assert torch.equal(out, out_ops)
    for g, g_ops in zip(grads, grads_ops):
        if device == "cpu":
            assert torch.equal(g, g_ops)
        else:  # a CUDA weight gradient may sum its rows in another order on each call
            torch.testing.assert_close(g, g_ops)


def test_torch_function_argument_takes_torch_ops():
    """An argument with __torch_function__ sends the call through torch.ops, so the subclass
    sees the mytorch op, and the result is the plain tensor's."""
    fwd, inputs, _ = _gelu()

    class Sub(torch.Tensor):
        seen = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if "mytorch" in str(func):
                cls.seen.append(str(func))
            return super().__torch_function__(func, types, args, kwargs or {})

    x = inputs[0]
    assert torch.equal(fwd(x.as_subclass(Sub)).as_subclass(torch.Tensor), fwd(x))
    assert any("gelu" in name for name in Sub.seen), Sub.seen


def test_rope_bound_call_matches_torch_ops(monkeypatch):
    torch.manual_seed(1)
    bound = _recording(monkeypatch)
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 6, 8)
    ang = torch.randn(1, 6, 4)
    cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)

    def original(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
        raise AssertionError("the mytorch rope takes these inputs")

    rope = hf._make_rope(original)
    eager = rope(q, k, cos, sin)
    assert bound == ["rope", "rope"]
    with _Spy() as spy:
        traced = rope(q, k, cos, sin)
    assert sum("rope" in name for name in spy.ops) == 2, spy.ops
    for a, b in zip(eager, traced):
        assert torch.equal(a, b)
