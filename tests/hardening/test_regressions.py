"""Fixed cases the fuzzing and the bad-input sweep once found: each stays fixed.

Every check compares with ATen (or torch's own optimizer) on the same values, or asserts a
clear error that names the op.
"""
from __future__ import annotations

import pytest
import torch

from strategies import DEVICE, has_device

M = torch.ops.mytorch
NAN, INF = float("nan"), float("inf")
needs_device = pytest.mark.skipif(not has_device(), reason="the mytorch device is not registered")


def raises_naming(op, fn):
    with pytest.raises((RuntimeError, ValueError, IndexError, TypeError)) as e:
        fn()
    assert f"mytorch::{op}" in str(e.value), str(e.value)


def test_linear_with_in_features_0():
    x, w = torch.zeros(2, 0, requires_grad=True), torch.zeros(3, 0, requires_grad=True)
    y = M.linear(x, w, None)
    assert y.shape == (2, 3) and not y.any()
    gx, gw = torch.autograd.grad(y.sum(), (x, w))
    assert gx.shape == x.shape and gw.shape == w.shape


@pytest.mark.parametrize("correction", [0, 1, 2, 3])
@pytest.mark.parametrize("values", [[1.5], [1.5, 2.0], [1.5, 1.5, 2.0]])
def test_var_std_gradient_without_degrees_of_freedom(values, correction):
    x = torch.tensor(values, dtype=torch.float64).reshape(() if len(values) == 1 else (-1,))
    for mine, ref in ((M.var, torch.var), (M.std, torch.std)):
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        with pytest.warns(UserWarning) if len(values) <= correction else _nothing():
            (ge,) = torch.autograd.grad(ref(b, None, correction=correction), b)
        (ga,) = torch.autograd.grad(mine(a, None, correction, False), a)
        torch.testing.assert_close(ga, ge, equal_nan=True)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


@needs_device
def test_masked_fill_on_the_device_broadcasts_out_of_place_only():
    for xs, ms in (((), (3,)), ((1, 2), (4, 1, 2)), ((1, 0), (2, 0))):
        x, m = torch.randn(xs), torch.rand(ms) > 0.5
        out = torch.masked_fill(x.to(DEVICE), m.to(DEVICE), 2.0)
        torch.testing.assert_close(out.cpu(), torch.masked_fill(x, m, 2.0))
    with pytest.raises(RuntimeError, match="mytorch::masked_fill"):
        torch.zeros((), device=DEVICE).masked_fill_(torch.ones(3, dtype=torch.bool, device=DEVICE), 1.0)


def test_dtype_checks_as_aten():
    raises_naming("lerp", lambda: M.lerp(torch.zeros(2, dtype=torch.int32), torch.zeros(2), torch.zeros(2)))
    raises_naming("lerp", lambda: M.lerp(torch.zeros(2), torch.zeros(2), torch.zeros(2, dtype=torch.float64)))
    M.lerp(torch.zeros(2), torch.ones(2), torch.tensor(0.5, dtype=torch.float64))  # a 0-dim weight may differ
    raises_naming("index_put", lambda: M.index_put(torch.zeros(3), [torch.tensor([0])], torch.ones(1, dtype=torch.float64), False))
    raises_naming("addmm", lambda: M.addmm(torch.zeros(2, 2, dtype=torch.int32), torch.zeros(2, 2), torch.zeros(2, 2), beta=0))
    raises_naming("addmm", lambda: M.addmm(torch.zeros(2, 3), torch.zeros(2, 2), torch.zeros(2, 2), beta=0))
    raises_naming("masked_fill", lambda: M.masked_fill(torch.zeros(0, dtype=torch.int32), torch.ones((), dtype=torch.bool), -INF))


def test_sizes_that_cannot_fit_are_refused_clearly():
    big = 2**40
    raises_naming("avg_pool2d", lambda: M.avg_pool2d(torch.zeros(1, 1, 1), [1, 1], [big, big], [0, 0], False, False, None))
    raises_naming("max_pool2d", lambda: M.max_pool2d(torch.zeros(1, 1, 1), [1, 1], [], [0, 0], [big, big], False))
    raises_naming("adaptive_avg_pool2d", lambda: M.adaptive_avg_pool2d(torch.zeros(0, 1, 1, 1), [big, big]))
    raises_naming("upsample_nearest2d", lambda: M.upsample_nearest2d(torch.zeros(0, 1, 1, 1), [big, big], None, None))
    raises_naming("conv1d", lambda: M.conv1d(torch.zeros(1, 1, 1), torch.zeros(1, 1, 1), None, [1], [big], [1], 1))
    raises_naming("embedding", lambda: M.embedding(torch.zeros(2, 3), torch.tensor([0]), big))
    assert M.embedding_backward(torch.zeros(0), torch.tensor(0), big, -1, False).shape == (big, 0)
    raises_naming("embedding_backward", lambda: M.embedding_backward(torch.zeros(0, 1), torch.zeros(0, dtype=torch.long), -3, -1, False))


def test_zero_dim_index_cases():
    x = torch.tensor(2.5)
    torch.testing.assert_close(M.gather(x, 0, torch.zeros(1, dtype=torch.long)), torch.gather(x, 0, torch.zeros(1, dtype=torch.long)))
    torch.testing.assert_close(M.gather(torch.tensor([1.0, 2.0]), 0, torch.tensor(1)), torch.tensor(2.0))
    raises_naming("index_select", lambda: M.index_select(x, 0, torch.zeros(0, dtype=torch.long)))
    raises_naming("scatter_add", lambda: M.scatter_add(torch.zeros(1), 0, torch.zeros(1, dtype=torch.long), torch.zeros(0)))
    raises_naming("clamp_tensor", lambda: M.clamp_tensor(torch.zeros(2), torch.zeros(0), None))
    raises_naming("batch_norm_update_stats_", lambda: M.batch_norm_update_stats_(
        torch.tensor(0.0), torch.ones(1), torch.zeros(1), torch.ones(1), 0.1, 1e-5, 2))


def test_non_finite_values_as_aten():
    g, m = torch.tensor([INF, -1.0, NAN]), torch.tensor([False, True, False])
    torch.testing.assert_close(M.dropout_backward(g, m, 2.0), torch.ops.aten.native_dropout_backward(g, m, 2.0), equal_nan=True)
    x = torch.tensor([NAN, 1.0, INF])
    out, mask = M.dropout(x, 0.0, True)
    torch.testing.assert_close(out, x, rtol=0, atol=0, equal_nan=True)
    assert M.hardswish_backward(torch.ones(1), torch.tensor([NAN])).isnan().all()
    _, lse = M.fused_cross_entropy(torch.tensor([[-INF, -INF]]), torch.tensor([0]), ignore_index=-100,
                                   label_smoothing=0.0, reduction=0)
    assert lse.item() == -INF


def test_optimizers_as_torch_with_non_finite_state():
    p, g = [torch.tensor([-INF])], [torch.tensor([0.25])]
    M.sgd_step_(p, g, [], 0.1, 0.0, 0.0, 0.0, False, False, False)  # weight decay 0 adds no 0 * Inf term
    assert p[0].item() == -INF
    args = ([torch.tensor([0.5])], [torch.tensor([0.25])], [torch.tensor([-INF])], [torch.tensor([0.2])])
    ref = [[t.clone() for t in ts] for ts in args]
    M.adam_step_(*args, [], [torch.tensor(1.0)], 0.1, 0.9, 0.999, 0.0, 1e-8, False, False, True)
    torch._fused_adamw_(*ref, [], [torch.tensor(1.0)], lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8,
                        amsgrad=False, maximize=False)
    for a, b in zip(args, ref):
        torch.testing.assert_close(a[0], b[0], equal_nan=True)


def test_adam_step_errors_name_the_registered_op():
    one = [torch.tensor(0.5)]
    raises_naming("adam_step_", lambda: M.adam_step_(one, [torch.zeros(2)], [torch.tensor(0.0)], [torch.tensor(0.1)], [],
                                                     [torch.tensor(1.0)], 0.1, 0.9, 0.999, 0.0, 1e-8, False, False, True))


@needs_device
def test_device_checks():
    d = DEVICE
    # several 0-dim CPU tensors are scalars next to a device tensor (as one is on CUDA)
    out = M.addcmul(torch.tensor(1.0), torch.ones(2, device=d), torch.tensor(3.0), value=1)
    torch.testing.assert_close(out.cpu(), torch.full((2,), 4.0))
    raises_naming("sgd_step_", lambda: M.sgd_step_([torch.zeros(1)], [torch.zeros(1)], [torch.zeros(1, device=d)],
                                                   0.1, 0.0, 0.0, 0.0, False, False, False))
    x = torch.randn(1, 1)
    raises_naming("batch_norm_backward", lambda: M.batch_norm_backward(
        x, x, None, torch.zeros(1), torch.ones(1), torch.zeros(0, device=d), torch.zeros(0), False, 1e-5,
        [True, False, False]))


def test_amsgrad_max_keeps_nan():
    p, g, m, v = ([torch.tensor([x])] for x in (0.5, 0.25, 0.1, 0.2))
    vmax = [torch.tensor([NAN])]
    M.adam_step_(p, g, m, v, vmax, [torch.tensor(1.0)], 0.1, 0.9, 0.999, 0.0, 1e-8, True, False, False)
    assert vmax[0].isnan().all() and p[0].isnan().all()  # as torch.maximum in torch's Adam


@pytest.mark.parametrize("reduction,grad_shape", [(0, (3,)), (0, (5, 1)), (1, (0,)), (2, (2,))])
def test_cross_entropy_backward_checks_grad_output(reduction, grad_shape):
    """The sanitizer build found grad_output read past its end when its size did not match
    the reduction (one per sample for 'none', one element otherwise)."""
    x, t = torch.randn(5, 4), torch.tensor([0, 3, 1, 2, 0])
    g = torch.ones(grad_shape)
    raises_naming("cross_entropy_backward", lambda: M.cross_entropy_backward(g, x, t, None, reduction, -100, 0.0))
    # the matching shapes still work
    good = torch.ones(5) if reduction == 0 else torch.ones(())
    got = M.cross_entropy_backward(good, x, t, None, reduction, -100, 0.0)
    xr = x.clone().requires_grad_()
    loss = torch.nn.functional.cross_entropy(xr, t, reduction=["none", "mean", "sum"][reduction])
    (want,) = torch.autograd.grad(loss, xr, good)
    torch.testing.assert_close(got, want)
