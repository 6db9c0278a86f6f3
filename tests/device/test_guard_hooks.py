"""Device guard and hooks: device switching and two devices behave as on CUDA."""
import re

import pytest
import torch
from expecttest import TestCase

import mytorch_ext
from helpers import no_fallbacks


def test_ops_follow_their_inputs_not_the_current_device():
    x = torch.randn(3, 4, device="mytorch:1")
    assert torch.mytorch.current_device() == 0
    with no_fallbacks():
        y = x.clone()
        z = torch.empty_like(x)
        c = x.t().contiguous()
    for t in (y, z, c):
        assert t.device == torch.device("mytorch:1")
    mytorch_ext.set_fallback_mode("silent")
    mytorch_ext.reset_fallback_counts()
    assert torch.special.i0e(x).device == torch.device("mytorch:1")  # through the fallback
    assert mytorch_ext.fallback_counts() == {"aten::special_i0e.out": 1}
    assert torch.mytorch.current_device() == 0


def test_device_guard_restores_after_ops_on_another_device():
    torch.mytorch.set_device(1)
    x = torch.randn(4, device="mytorch:0")
    y = x * 2
    assert y.device.index == 0
    assert torch.mytorch.current_device() == 1


def test_tensors_on_two_devices():
    a = torch.arange(4.0).to("mytorch:0")
    b = a.to("mytorch:1")
    assert b.device.index == 1
    assert torch.equal(a.cpu(), b.cpu())
    b.add_(1)
    assert torch.equal(a.cpu(), torch.arange(4.0))  # distinct memory


def first_line(e):
    """The message without the op name, which depends on which kernel serves the op."""
    return re.sub(r" \(in aten::[^)]*\)$", "", str(e).split("\n")[0])


class TestMixedDevices(TestCase):
    def test_mixing_two_mytorch_devices_raises(self):
        a = torch.ones(3, device="mytorch:0")
        b = torch.ones(3, device="mytorch:1")
        with self.assertRaises(RuntimeError) as cm:
            a + b
        self.assertExpectedInline(first_line(cm.exception), """mytorch::add: expected all tensors on the same device, got mytorch:0 and mytorch:1""")

    def test_mixing_cpu_and_mytorch_raises(self):
        a = torch.ones(3, device="mytorch:0")
        with self.assertRaises(RuntimeError) as cm:
            torch.mul(a, torch.ones(3))
        self.assertExpectedInline(first_line(cm.exception), """mytorch::mul: expected all tensors on the same device, got mytorch:0 and cpu""")

    def test_cpu_scalar_tensor_is_allowed(self):
        a = torch.ones(3, device="mytorch:0")
        self.assertEqual((a * torch.tensor(2.0)).cpu().tolist(), [2.0, 2.0, 2.0])


def test_hooks_registered():
    assert torch._C._get_privateuse1_backend_name() == "mytorch"
    g = torch.Generator(device="mytorch:1")  # PrivateUse1HooksInterface::getNewGenerator
    assert g.device == torch.device("mytorch:1")
    assert torch.mytorch.default_generators[1].device == torch.device("mytorch:1")


def test_streams_and_events():
    s = torch.Stream(device="mytorch:1")
    assert s.device == torch.device("mytorch:1")
    s.synchronize()
    assert s.query()
    start = torch.Event(device="mytorch", enable_timing=True)
    end = torch.Event(device="mytorch", enable_timing=True)
    start.record()
    torch.randn(100, device="mytorch")
    end.record()
    end.synchronize()
    assert end.query()
    start.elapsed_time(end)  # the guard's elapsedTime hook answers for recorded timing events
    unrecorded = torch.Event(device="mytorch", enable_timing=True)
    with pytest.raises(ValueError, match="recorded"):
        start.elapsed_time(unrecorded)
    plain = torch.Event(device="mytorch")
    plain.record()
    with pytest.raises(ValueError, match="enable_timing"):
        plain.elapsed_time(end)


def test_unknown_index_in_guard():
    with pytest.raises(RuntimeError, match="invalid device index 3; there are 2 mytorch devices"):
        torch.mytorch.set_device(3)
    with pytest.raises(RuntimeError, match="invalid device index 2"):
        with torch.mytorch.device(2):
            pass
    assert torch.mytorch.current_device() == 0
