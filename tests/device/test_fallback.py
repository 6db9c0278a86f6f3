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


class falls_back:
    """Asserts that each named op ran through the fallback inside the block, and that
    the ops it uses really have no native kernel (so the test keeps testing the fallback)."""

    def __init__(self, *names):
        self.names = names

    def __enter__(self):
        for name in self.names:
            op = name.split(".")[0]
            assert not torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1"), \
                f"{op} has a native kernel now: pick an op that still falls back"
        self.before = mytorch_ext.fallback_counts()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            after = mytorch_ext.fallback_counts()
            for name in self.names:
                assert after.get(name, 0) > self.before.get(name, 0), f"{name} did not fall back"
        return False


@pytest.fixture(autouse=True)
def _quiet_fallback():
    mytorch_ext.set_fallback_mode("silent")  # the device conftest restores the mode


def test_results_match_cpu():
    x = torch.randn(6, 7)
    d = x.to(D)
    with falls_back("aten::special_i0e.out", "aten::cumprod.out", "aten::erfinv.out",
                    "aten::atan2.out", "aten::sort.values_stable", "aten::topk.values"):
        got = {"i0e": torch.special.i0e(d), "cumprod": d.cumprod(1),
               "erfinv": torch.erfinv(d.tanh()),
               "atan2": torch.atan2(d, d.t().contiguous().t()),
               "i0e_strided": torch.special.i0e(d.t()),  # strided input
               "sort": d.sort(1), "topk": d.topk(3, 0)}
    want = {"i0e": torch.special.i0e(x), "cumprod": x.cumprod(1), "erfinv": torch.erfinv(x.tanh()),
            "atan2": torch.atan2(x, x), "i0e_strided": torch.special.i0e(x.t()),
            "sort": x.sort(1), "topk": x.topk(3, 0)}
    for k, w in want.items():
        g = got[k]
        if isinstance(w, torch.Tensor):
            assert g.is_mytorch, k
            torch.testing.assert_close(g.cpu(), w, msg=k)
        else:  # values and indices
            assert all(t.is_mytorch for t in g), k
            torch.testing.assert_close(g[0].cpu(), w[0], msg=k)
            assert torch.equal(g[1].cpu(), w[1]), k


def test_in_place_into_a_strided_view_writes_the_device_memory():
    x = torch.randn(4, 5)
    d = x.to(D)
    ptr = d.data_ptr()
    view = d[:, 1:4:2]
    assert not view.is_contiguous()
    with falls_back("aten::cosh.out"):
        r = view.cosh_()
    assert r is view and d.data_ptr() == ptr and view.data_ptr() == ptr + 4
    e = x.clone()
    e[:, 1:4:2] = e[:, 1:4:2].cosh()
    torch.testing.assert_close(d.cpu(), e)  # the base saw the write, the rest is untouched


@pytest.mark.parametrize("dev", ["mytorch:0", "mytorch:1"])
def test_out_tensor_that_must_be_resized(dev):
    x = torch.randn(4, 5)
    d = x.to(dev)
    out = torch.empty(0, device=dev)
    with falls_back("aten::cumprod.out"):
        res = torch.cumprod(d, 1, out=out)
    assert res is out and out.shape == (4, 5) and out.device == torch.device(dev)
    torch.testing.assert_close(out.cpu(), x.cumprod(1))
    # an out= whose storage is too small for the new shape gets new device memory
    small = torch.empty(3, device=dev)
    with falls_back("aten::special_i0e.out"), pytest.warns(UserWarning, match="was resized"):
        torch.special.i0e(d, out=small)
    assert small.shape == (4, 5) and small.device == torch.device(dev)
    assert small.untyped_storage().nbytes() >= 20 * 4
    torch.testing.assert_close(small.cpu(), torch.special.i0e(x))
    values = torch.empty(0, device=dev)
    indices = torch.empty(0, dtype=torch.long, device=dev)
    with falls_back("aten::sort.values_stable"):
        torch.sort(d, 0, out=(values, indices))
    assert values.shape == indices.shape == (4, 5)
    assert values.device == indices.device == torch.device(dev)
    assert torch.equal(values.cpu(), x.sort(0).values)
    assert torch.equal(indices.cpu(), x.sort(0).indices)


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
    # cosh's backward runs sinh; i0e's runs sgn and i1e: all of them through the fallback
    with falls_back("aten::cosh.out", "aten::sinh.out", "aten::special_i0e.out",
                    "aten::special_i1e.out"):
        (d.cosh() * torch.special.i0e(d)).sum().backward()
    assert d.grad.is_mytorch
    xr = x.clone().requires_grad_()
    (xr.cosh() * torch.special.i0e(xr)).sum().backward()
    torch.testing.assert_close(d.grad.cpu(), xr.grad)


def test_results_stay_on_the_inputs_device():
    x = torch.randn(5, 6)
    d = x.to("mytorch:1")
    assert torch.mytorch.current_device() == 0
    with falls_back("aten::special_i0e.out", "aten::cosh.out", "aten::cumprod.out",
                    "aten::topk.values"):
        outs = {"i0e": torch.special.i0e(d), "cosh": d.cosh(), "cumprod": d.cumprod(0)}
        v, i = d.topk(2)
        e = d.clone()
        e.cosh_()
    for k, t in [*outs.items(), ("topk values", v), ("topk indices", i), ("in place", e)]:
        assert t.device == torch.device("mytorch:1"), k
    torch.testing.assert_close(outs["cumprod"].cpu(), x.cumprod(0))
    torch.testing.assert_close(e.cpu(), x.cosh())
    assert torch.mytorch.current_device() == 0
    dx = d.detach().double().requires_grad_()
    with falls_back("aten::sinh.out"):
        dx.cosh().sum().backward()
    assert dx.grad.device == torch.device("mytorch:1")
    torch.testing.assert_close(dx.grad.cpu(), x.double().sinh())


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


def test_warns_once_per_op(run_ok):
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
    out = run_ok(code)
    lines = out.splitlines()
    assert lines[0] == "1"
    assert lines[1] == ("mytorch: aten::special_i0e.out has no native kernel on the mytorch "
                        "device; it runs on the CPU through the fallback "
                        "(MYTORCH_FALLBACK=silent hides this warning, =error forbids it)")


def test_silent_mode_from_env(run_ok):
    code = """
import warnings, torch, mytorch_ext
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    torch.special.i0e(torch.rand(3, device="mytorch"))
print(mytorch_ext.fallback_mode(), sum("fallback" in str(m.message) for m in w),
      mytorch_ext.fallback_counts()["aten::special_i0e.out"])
"""
    out = run_ok(code, MYTORCH_FALLBACK="silent")
    assert out.split() == ["silent", "0", "1"]


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
