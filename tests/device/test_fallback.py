"""The CPU fallback: runs ops without a native kernel on CPU aliases of the same memory,
warns once per op, obeys MYTORCH_FALLBACK, and counts what fell back."""
import warnings

import pytest
import torch

import mytorch_ext
from helpers import no_fallbacks

D = "mytorch"


def fresh_op():
    """An op that no mytorch kernel family is likely to claim soon."""
    return lambda t: torch.special.i0e(t), "aten::special_i0e.out"


def test_counts_and_reset():
    op, name = fresh_op()
    x = torch.rand(5, device=D)
    mytorch_ext.reset_fallback_counts()
    assert mytorch_ext.fallback_counts() == {}
    op(x)
    op(x)
    assert mytorch_ext.fallback_counts()[name] == 2
    mytorch_ext.reset_fallback_counts()
    assert name not in mytorch_ext.fallback_counts()


def test_no_fallbacks_helper_catches_a_fallback():
    op, name = fresh_op()
    x = torch.rand(3, device=D)
    with pytest.raises(AssertionError, match=name):
        with no_fallbacks():
            op(x)
    with no_fallbacks(allow=[name]):
        op(x)


def test_results_match_cpu():
    x = torch.randn(6, 7)
    d = x.to(D)
    torch.testing.assert_close((d + 1).cpu(), x + 1)
    torch.testing.assert_close(torch.special.i0e(d).cpu(), torch.special.i0e(x))
    torch.testing.assert_close(d.sum(1).cpu(), x.sum(1))
    torch.testing.assert_close((d @ d.t()).cpu(), x @ x.t())
    torch.testing.assert_close(torch.cat([d, d], 0).cpu(), torch.cat([x, x], 0))
    torch.testing.assert_close(d[torch.tensor([0, 2])].cpu(), x[[0, 2]])  # cpu index tensor
    torch.testing.assert_close(d.t().exp().cpu(), x.t().exp())  # strided input
    v, i = d.max(1)
    assert v.is_mytorch and i.is_mytorch and torch.equal(i.cpu(), x.max(1).indices)


def test_in_place_and_out_write_the_device_memory():
    x = torch.randn(4, 5)
    d = x.to(D)
    ptr = d.data_ptr()
    r = d.mul_(2)
    assert r is d and d.data_ptr() == ptr
    torch.testing.assert_close(d.cpu(), x * 2)
    view = d[:, 1:3]
    view.exp_()  # in place on a strided view: writes through to the base
    e = x * 2
    e[:, 1:3] = e[:, 1:3].exp()
    torch.testing.assert_close(d.cpu(), e)
    out = torch.empty(0, device=D)  # out= that must grow
    res = torch.add(d, 1, out=out)
    assert res is out and out.shape == (4, 5) and out.is_mytorch
    torch.testing.assert_close(out.cpu(), e + 1)


def test_view_results_alias_the_device_memory():
    d = torch.arange(12.0, device=D).reshape(3, 4)
    u = d.unfold(1, 2, 2)  # a view op served by the fallback
    assert u.is_mytorch and u.untyped_storage().data_ptr() == d.untyped_storage().data_ptr()
    d.zero_()
    assert u.cpu().eq(0).all()
    c = torch.view_as_real(torch.zeros(3, dtype=torch.complex64, device=D))
    assert c.is_mytorch and c.shape == (3, 2)


def test_factories_with_a_device_argument():
    a = torch.arange(5, device="mytorch:1")
    assert a.device == torch.device("mytorch:1") and a.cpu().tolist() == [0, 1, 2, 3, 4]
    e = torch.eye(3, device=D)
    assert e.is_mytorch and torch.equal(e.cpu(), torch.eye(3))


def test_autograd_through_the_fallback():
    x = torch.randn(3, 4, dtype=torch.float64)
    d = x.to(D).requires_grad_()
    (d.sin() * d).sum().backward()
    torch.testing.assert_close(d.grad.cpu(), x.sin() + x * x.cos())


def test_convolution_overrideable_runs_natively():
    """The fallback cannot serve convolution_overrideable; the device has its own kernel."""
    x = torch.randn(2, 3, 8, 8)
    w = torch.randn(4, 3, 3, 3, requires_grad=True)
    with no_fallbacks():
        dx = x.to(D).requires_grad_()
        dw = w.detach().to(D).requires_grad_()
        y = torch.nn.functional.conv2d(dx, dw, padding=1, stride=2)
        y.square().sum().backward()
    xr = x.clone().requires_grad_()
    yr = torch.nn.functional.conv2d(xr, w, padding=1, stride=2)
    yr.square().sum().backward()
    torch.testing.assert_close(y.detach().cpu(), yr.detach())
    torch.testing.assert_close(dx.grad.cpu(), xr.grad)
    torch.testing.assert_close(dw.grad.cpu(), w.grad)


def test_warns_once_per_op(run):
    code = """
import warnings, torch, mytorch_ext
x = torch.rand(3, device="mytorch")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    torch.special.i0e(x); torch.special.i0e(x); torch.special.i0e(x)
msgs = [str(m.message) for m in w if "i0e" in str(m.message)]
print(len(msgs))
print(msgs[0].split(" (Triggered")[0])
"""
    r = run(code)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "1"
    assert lines[1] == ("mytorch: aten::special_i0e.out has no native kernel on the mytorch "
                        "device; it runs on the CPU through the fallback "
                        "(MYTORCH_FALLBACK=silent hides this warning, =error forbids it)")


def test_silent_mode_from_env(run):
    code = """
import warnings, torch, mytorch_ext
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    torch.special.i0e(torch.rand(3, device="mytorch"))
print(mytorch_ext.fallback_mode(), sum("fallback" in str(m.message) for m in w),
      mytorch_ext.fallback_counts()["aten::special_i0e.out"])
"""
    r = run(code, MYTORCH_FALLBACK="silent")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["silent", "0", "1"]


def test_error_mode_from_env(run):
    r = run("import torch, mytorch_ext; torch.special.i0e(torch.rand(3, device='mytorch'))",
            MYTORCH_FALLBACK="error")
    assert r.returncode != 0
    assert ("NotImplementedError: mytorch: aten::special_i0e.out has no native kernel on the "
            "mytorch device, and MYTORCH_FALLBACK=error forbids running it on the CPU") in r.stderr


def test_error_mode_from_python():
    op, name = fresh_op()
    x = torch.rand(3, device=D)
    mytorch_ext.set_fallback_mode("error")
    before = mytorch_ext.fallback_counts().get(name, 0)
    with pytest.raises(NotImplementedError, match="MYTORCH_FALLBACK=error forbids"):
        op(x)
    assert mytorch_ext.fallback_counts().get(name, 0) == before
    with no_fallbacks():  # native ops still run
        torch.empty(3, device=D).fill_(1).cpu()
    mytorch_ext.set_fallback_mode("silent")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        op(x)
    with pytest.raises(ValueError, match="must be 'warn', 'silent' or 'error', got 'loud'"):
        mytorch_ext.set_fallback_mode("loud")


def test_bad_env_mode(run):
    r = run("import torch, mytorch_ext; torch.special.i0e(torch.rand(3, device='mytorch'))",
            MYTORCH_FALLBACK="sometimes")
    assert r.returncode != 0 and "got 'sometimes'" in r.stderr
