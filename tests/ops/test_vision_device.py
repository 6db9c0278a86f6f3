"""The vision aten ops (pooling, batch norm, upsampling, conv1d, grouped and depthwise conv2d)
run natively on the mytorch device (no CPU fallback), forward and backward, contiguous and
channels_last, and match CPU."""
import pytest
import torch
import torch.nn.functional as F

from helpers import no_fallbacks

pytestmark = pytest.mark.skipif(not hasattr(torch, "mytorch"), reason="no mytorch device in this build")

LAYOUTS = ["contiguous", "channels_last"]


def layout(t, name):
    return t.contiguous(memory_format=torch.channels_last) if name == "channels_last" else t


def run(fn, tensors, dev, grad_out):
    """fn on `dev`; returns its outputs and the grads of every floating-point input."""
    ins = [t.detach().to(dev).requires_grad_(t.is_floating_point()) for t in tensors]
    for t, d in zip(tensors, ins):
        assert d.stride() == t.stride()  # the layout under test reached the device
    out = fn(*ins)
    outs = out if isinstance(out, tuple) else (out,)
    grads = torch.autograd.grad(outs[0], [t for t in ins if t.requires_grad], grad_out.to(dev))
    return [o.detach().cpu() for o in outs], [g.cpu() for g in grads]


def check(fn, *tensors, rtol=1e-5, atol=1e-5):
    out = fn(*tensors)
    shape = (out[0] if isinstance(out, tuple) else out).shape
    grad_out = torch.randn(shape)
    ref_out, ref_grads = run(fn, tensors, "cpu", grad_out)
    with no_fallbacks():
        got_out, got_grads = run(fn, tensors, "mytorch", grad_out)
    for g, r in zip(got_out, ref_out):
        if r.is_floating_point():
            torch.testing.assert_close(g, r, rtol=rtol, atol=atol)
        else:
            assert torch.equal(g, r)
    assert len(got_grads) == len(ref_grads) > 0
    for g, r in zip(got_grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=rtol, atol=atol)


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_max_pool2d_with_indices(fmt):
    x = layout(torch.randn(2, 5, 11, 9), fmt)
    check(lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True), x)
    check(lambda t: F.max_pool2d(t, (2, 3), (2, 1), (1, 0), dilation=(1, 2), ceil_mode=True,
                                 return_indices=True), x)
    check(lambda t: F.max_pool2d(t, 2), x)


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_avg_pool2d(fmt):
    x = layout(torch.randn(2, 5, 11, 9), fmt)
    check(lambda t: F.avg_pool2d(t, 3, 2, 1), x)
    check(lambda t: F.avg_pool2d(t, (3, 2), (2, 1), (1, 1), ceil_mode=True, count_include_pad=False), x)
    check(lambda t: F.avg_pool2d(t, 2, divisor_override=3), x)


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_adaptive_avg_pool2d(fmt):
    x = layout(torch.randn(2, 5, 11, 9), fmt)
    for size in [(1, 1), (4, 3), (11, 9), (5, 7)]:
        check(lambda t: F.adaptive_avg_pool2d(t, size), x)


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_batch_norm_training_updates_running_stats(fmt):
    x = layout(torch.randn(4, 3, 5, 6) * 2 + 1, fmt)
    w, b = torch.randn(3), torch.randn(3)
    rm0, rv0 = torch.randn(3), torch.rand(3) + 0.5
    stats = {dev: (rm0.clone().to(dev), rv0.clone().to(dev)) for dev in ("cpu", "mytorch")}

    def bn(dev):
        def fn(t, wt, bt):
            return F.batch_norm(t, stats[dev][0], stats[dev][1], wt, bt, training=True, momentum=0.3, eps=1e-4)
        return fn

    g = torch.randn(x.shape)
    ref_out, ref_grads = run(bn("cpu"), (x, w, b), "cpu", g)
    with no_fallbacks():
        got_out, got_grads = run(bn("mytorch"), (x, w, b), "mytorch", g)
    torch.testing.assert_close(got_out[0], ref_out[0], rtol=1e-5, atol=1e-5)
    for a, r in zip(got_grads, ref_grads):
        torch.testing.assert_close(a, r, rtol=1e-5, atol=1e-5)
    for a, r in zip(stats["mytorch"], stats["cpu"]):
        assert a.is_mytorch
        torch.testing.assert_close(a.cpu(), r, rtol=1e-5, atol=1e-6)
    assert not torch.equal(stats["cpu"][0], rm0)  # the running stats did move


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_batch_norm_eval(fmt):
    x = layout(torch.randn(4, 3, 5, 6), fmt)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5
    check(lambda t, w, b: F.batch_norm(t, rm.to(t.device), rv.to(t.device), w, b, training=False), x,
          torch.randn(3), torch.randn(3))
    check(lambda t: F.batch_norm(t, rm.to(t.device), rv.to(t.device), training=False), x)


def test_batch_norm_modules_in_both_modes():
    x = torch.randn(6, 4, 3, 5)
    ref, dev = torch.nn.BatchNorm2d(4), torch.nn.BatchNorm2d(4)
    dev.load_state_dict(ref.state_dict())
    dev.to("mytorch")
    for train in (True, True, False):
        ref.train(train)
        dev.train(train)
        with no_fallbacks():
            y = dev(x.to("mytorch"))
        torch.testing.assert_close(y.cpu(), ref(x), rtol=1e-5, atol=1e-5)
    for k, v in ref.state_dict().items():
        torch.testing.assert_close(dev.state_dict()[k].cpu(), v, msg=k)
    assert ref.num_batches_tracked.item() == 2


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_upsample_nearest(fmt):
    x = layout(torch.randn(2, 3, 5, 7), fmt)
    check(lambda t: F.interpolate(t, scale_factor=2, mode="nearest"), x)
    check(lambda t: F.interpolate(t, size=(8, 4), mode="nearest"), x)
    check(lambda t: F.interpolate(t, scale_factor=(1.5, 0.6), mode="nearest"), x)


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_upsample_bilinear(fmt):
    x = layout(torch.randn(2, 3, 5, 7), fmt)
    for ac in (False, True):
        check(lambda t: F.interpolate(t, size=(9, 13), mode="bilinear", align_corners=ac), x)
        check(lambda t: F.interpolate(t, size=(3, 4), mode="bilinear", align_corners=ac), x)
    check(lambda t: F.interpolate(t, scale_factor=1.7, mode="bilinear"), x)


def test_conv1d():
    x = torch.randn(2, 6, 17)
    check(lambda t, w, b: F.conv1d(t, w, b, stride=2, padding=2, dilation=2), x, torch.randn(5, 6, 3),
          torch.randn(5), rtol=1e-4, atol=1e-4)
    check(lambda t, w: F.conv1d(t, w, groups=3), x, torch.randn(6, 2, 4), rtol=1e-4, atol=1e-4)
    check(lambda t, w: F.conv1d(t, w, padding="same"), x.transpose(1, 2).contiguous().transpose(1, 2),
          torch.randn(4, 6, 5), rtol=1e-4, atol=1e-4)  # strided input


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_grouped_conv2d(fmt):
    x = layout(torch.randn(2, 6, 9, 8), fmt)
    w = layout(torch.randn(9, 2, 3, 3), fmt)
    check(lambda t, wt, b: F.conv2d(t, wt, b, padding=1, groups=3), x, w, torch.randn(9), rtol=1e-4, atol=1e-4)
    check(lambda t, wt: F.conv2d(t, wt, stride=(2, 1), dilation=(1, 2), groups=3), x, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fmt", LAYOUTS)
def test_depthwise_conv2d(fmt):
    x = layout(torch.randn(2, 6, 9, 8), fmt)
    check(lambda t, wt, b: F.conv2d(t, wt, b, padding=1, groups=6), x, layout(torch.randn(6, 1, 3, 3), fmt),
          torch.randn(6), rtol=1e-4, atol=1e-4)
    check(lambda t, wt: F.conv2d(t, wt, stride=2, padding=2, groups=6), x,  # channel multiplier 2
          layout(torch.randn(12, 1, 5, 5), fmt), rtol=1e-4, atol=1e-4)
