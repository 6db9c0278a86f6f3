"""mytorch:: ops given tensors on two devices (cpu and mytorch, or mytorch:0 and mytorch:1)
raise a clear RuntimeError that names the op and both devices; they never compute."""
import pytest
import torch
from expecttest import TestCase

import mytorch_ext  # noqa: F401
from helpers import first_line
from opinfo import OPS

M = torch.ops.mytorch


def r(*shape, device="cpu"):
    return torch.randn(*shape, device=device)


def idx(*values, device="cpu"):
    return torch.tensor(values, device=device)


# op -> call with its first tensor on d1 and another on d2
CASES = {
    "mm": lambda d1, d2: M.mm(r(3, 4, device=d1), r(4, 2, device=d2)),
    "linear": lambda d1, d2: M.linear(r(3, 4, device=d1), r(2, 4, device=d2)),
    "add": lambda d1, d2: M.add(r(3, 4, device=d1), r(4, device=d2)),
    "where": lambda d1, d2: M.where(torch.ones(3, 4, dtype=torch.bool, device=d1), r(3, 4, device=d1),
                                    r(3, 4, device=d2)),
    "index_select": lambda d1, d2: M.index_select(r(5, 4, device=d1), 0, idx(1, 0, device=d2)),
    "gather": lambda d1, d2: M.gather(r(5, 4, device=d1), 0, idx([0, 1, 2, 3], device=d2)),
    "cat": lambda d1, d2: M.cat([r(2, 3, device=d1), r(2, 3, device=d2)]),
    "layer_norm": lambda d1, d2: M.layer_norm(r(3, 6, device=d1), [6], r(6, device=d2), None, 1e-5),
    "rms_norm": lambda d1, d2: M.rms_norm(r(3, 6, device=d1), [6], r(6, device=d2), 1e-6),
    "fused_cross_entropy": lambda d1, d2: M.fused_cross_entropy(r(4, 5, device=d1), idx(0, 1, 2, 3, device=d2)),
    "fused_linear_cross_entropy": lambda d1, d2: M.fused_linear_cross_entropy(
        r(4, 6, device=d1), r(5, 6, device=d1), idx(0, 1, 2, 3, device=d2)),
    "cross_entropy": lambda d1, d2: M.cross_entropy(r(4, 5, device=d1), idx(0, 1, 2, 3, device=d2)),
    "nll_loss": lambda d1, d2: M.nll_loss(r(4, 5, device=d1), idx(0, 1, 2, 3, device=d2)),
    "mse_loss": lambda d1, d2: M.mse_loss(r(4, 5, device=d1), r(4, 5, device=d2)),
    "embedding": lambda d1, d2: M.embedding(r(6, 4, device=d1), idx(1, 5, device=d2)),
    "conv2d": lambda d1, d2: M.conv2d(r(1, 2, 5, 5, device=d1), r(3, 2, 3, 3, device=d2)),
    "conv1d": lambda d1, d2: M.conv1d(r(1, 2, 5, device=d1), r(3, 2, 3, device=d2)),
    "batch_norm": lambda d1, d2: M.batch_norm(r(2, 3, 4, 4, device=d1), r(3, device=d2), None, None, None,
                                              True, 1e-5),
    "swiglu": lambda d1, d2: M.swiglu(r(3, 4, device=d1), r(3, 4, device=d2)),
}
PAIRS = [("cpu", "mytorch:0"), ("mytorch:0", "cpu"), ("mytorch:0", "mytorch:1")]


@pytest.mark.parametrize("d1,d2", PAIRS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_two_devices_raise_naming_the_op(name, d1, d2):
    msg = first_line(lambda: CASES[name](d1, d2))
    assert msg.startswith(f"mytorch::{name}: "), msg
    assert d1 in msg and d2 in msg, msg


class TestMixedDeviceMessages(TestCase):
    def test_pinned_messages(self):
        self.assertExpectedInline(first_line(lambda: CASES["mm"]("cpu", "mytorch:0")), """\
mytorch::mm: expected self and mat2 on the same device, got cpu and mytorch:0""")
        self.assertExpectedInline(first_line(lambda: CASES["fused_cross_entropy"]("mytorch:0", "cpu")), """\
mytorch::fused_cross_entropy: expected logits and target on the same device, got mytorch:0 and cpu""")
        self.assertExpectedInline(first_line(lambda: CASES["conv2d"]("mytorch:0", "mytorch:1")), """\
mytorch::conv2d: expected input and weight on the same device, got mytorch:0 and mytorch:1""")


# ---- every op: its first fixed sample (tests/opinfo.py) with one tensor moved to the other device ----
SAMPLES = {name: e.samples for name, e in OPS.items() if e.samples is not None}

# Tensors that may stay on another device, with the reason.
MAY_DIFFER = {
    ("adam_step_", 5): "steps are step counts read as scalars; torch.optim keeps them on the CPU",
    ("batch_norm_backward", 3): "running_mean is unused when training (the sample's training=True)",
    ("batch_norm_backward", 4): "running_var is unused when training (the sample's training=True)",
}


def tensor_slots(args):
    """(position, list index or None) of every tensor argument."""
    out = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            out.append((i, None))
        elif isinstance(a, (list, tuple)):
            out += [(i, j) for j, t in enumerate(a) if isinstance(t, torch.Tensor)]
    return out


def place(args, device, odd_slot, odd_device):
    def to(t, slot):
        return t.detach().to(odd_device if slot == odd_slot else device)

    res = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            res.append(to(a, (i, None)))
        elif isinstance(a, (list, tuple)):
            res.append([to(t, (i, j)) if isinstance(t, torch.Tensor) else t for j, t in enumerate(a)])
        else:
            res.append(a)
    return res


# ops whose first sample takes two tensors or more (the others have nothing to mix)
MIXABLE = sorted(n for n, make in SAMPLES.items() if len(tensor_slots(make()[0][0])) >= 2)


def test_may_differ_names_real_tensor_arguments():
    assert len(MIXABLE) > 60
    for name, pos in MAY_DIFFER:
        args, _ = SAMPLES[name]()[0]
        assert any(s[0] == pos for s in tensor_slots(args)), (name, pos)


@pytest.mark.parametrize("device,odd", [("mytorch", "cpu"), ("cpu", "mytorch")])
@pytest.mark.parametrize("name", MIXABLE)
def test_every_op_rejects_a_tensor_on_another_device(name, device, odd):
    args, kwargs = SAMPLES[name]()[0]
    slots = [s for s in tensor_slots(args) if (name, s[0]) not in MAY_DIFFER]
    failures = []
    for slot in slots:
        a = place(args, device, slot, odd)
        try:
            getattr(M, name)(*a, **kwargs)
            failures.append(f"{slot}: no error")
        except RuntimeError as e:
            msg = str(e).splitlines()[0]
            odd_name = "cpu" if odd == "cpu" else "mytorch:0"
            if not msg.startswith(f"mytorch::{name}") or odd_name not in msg:
                failures.append(f"{slot}: {msg}")
    assert not failures, f"mytorch::{name}, one tensor on {odd}, the rest on {device}: {failures}"
