"""The loss family. nll_loss / cross_entropy / mse_loss (+ backward): ATen parity, gradcheck,
opcheck, out-of-range targets. The large-vocabulary cross-entropies (fused_cross_entropy,
fused_cross_entropy_grad, fused_linear_cross_entropy): ATen parity on every device present,
backward against ATen autograd, the gradient handed over from the forward, divisor, gradcheck,
opcheck, error text."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext.ops.loss as L
from helpers import CPU_DTYPES, TOL, assert_close, check_fwd_bwd, devices, dtypes_for
from mytorch_ext.ops.activation import bias_gelu, swiglu
from mytorch_ext.ops.norm import rms_norm
from mytorch_ext.ops.softmax import log_softmax

ops = torch.ops.mytorch
REDUCTIONS = ["none", "mean", "sum"]
RED = {"none": 0, "mean": 1, "sum": 2}  # the ops take at::Reduction's int
DEVICES = devices()


def close(a, b, dtype, scale=1.0):
    rtol, atol = TOL[dtype]
    if dtype in (torch.bfloat16, torch.float16):
        rtol, atol = rtol * 2, atol * 4
    torch.testing.assert_close(a.double(), b.double(), rtol=rtol * scale, atol=atol * scale, equal_nan=True)


def _targets(n_shape, C, ignore_index, with_ignored):
    t = torch.randint(0, C, n_shape)
    if with_ignored and t.numel() > 1:
        t.view(-1)[::3] = ignore_index
    return t


def _up(x):
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def _class_input(shape, dtype, scale=1.0):
    """Inputs of `shape`, (C,) or (N, C, d1, ...), needing a gradient; C and the targets' shape."""
    C = shape[1] if len(shape) > 1 else shape[0]
    x = (torch.randn(shape, dtype=dtype) * scale).requires_grad_()
    return x, C, () if len(shape) == 1 else (shape[0], *shape[2:])


def _class_weight(C, dtype, weighted):
    return torch.rand(C, dtype=dtype) + 0.1 if weighted else None


def _close_with_grad(out, x, ref, xr, dtype):
    """out (of x) against ref (of xr, in float32), and their gradients for one random grad."""
    close(out, ref, dtype)
    g = torch.randn_like(ref)
    (gx,) = torch.autograd.grad(out, x, g.to(dtype))
    (gr,) = torch.autograd.grad(ref, xr, g)
    close(gx, gr, dtype)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(7, 5), (1, 1), (33, 127), (5,), (3, 4, 2, 3), (0, 4)], ids=str)
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_matches_aten(dtype, reduction, shape, weighted):
    x, C, tshape = _class_input(shape, dtype)
    t = _targets(tshape, C, 2, with_ignored=True) if C > 2 else torch.randint(0, C, tshape)
    w = _class_weight(C, dtype, weighted)
    out = L.nll_loss(x, t, w, ignore_index=2, reduction=reduction)
    xr = _up(x.detach()).requires_grad_()
    ref = F.nll_loss(xr, t, None if w is None else _up(w), ignore_index=2, reduction=reduction)
    if x.numel() == 0 and reduction == "mean":
        assert out.isnan().item() and ref.isnan().item()
        return
    _close_with_grad(out, x, ref, xr, dtype)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape", [(9, 7), (1, 257), (6,), (2, 5, 3)], ids=str)
def test_cross_entropy_matches_aten(dtype, reduction, smoothing, weighted, shape):
    x, C, tshape = _class_input(shape, dtype, scale=3)
    t = _targets(tshape, C, -100, with_ignored=True)
    w = _class_weight(C, dtype, weighted)
    out = L.cross_entropy(x, t, w, reduction=reduction, label_smoothing=smoothing)
    xr = _up(x.detach()).requires_grad_()
    ref = F.cross_entropy(xr, t, None if w is None else _up(w), reduction=reduction,
                          label_smoothing=smoothing)
    _close_with_grad(out, x, ref, xr, dtype)


@pytest.mark.parametrize("dtype", CPU_DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_loss_matches_aten(dtype, reduction):
    for shape in [(0,), (1,), (7, 33), (4097,), (2, 3, 5)]:
        x = torch.randn(shape, dtype=dtype).requires_grad_()
        y = torch.randn(shape, dtype=dtype).requires_grad_()
        out = L.mse_loss(x, y, reduction)
        xr, yr = _up(x.detach()).requires_grad_(), _up(y.detach()).requires_grad_()
        ref = F.mse_loss(xr, yr, reduction=reduction)
        close(out, ref, dtype)
        if x.numel() == 0:
            continue
        g = torch.randn_like(ref)
        gx, gy = torch.autograd.grad(out, (x, y), g.to(dtype))
        gxr, gyr = torch.autograd.grad(ref, (xr, yr), g)
        close(gx, gxr, dtype)
        close(gy, gyr, dtype)


def test_non_contiguous_inputs():
    x = torch.randn(10, 6).t()  # (6, 10), column-major
    t = torch.randint(0, 10, (6,))
    close(L.cross_entropy(x, t), F.cross_entropy(x, t), torch.float32)
    lp = torch.log_softmax(torch.randn(5, 14), 1)[:, ::2]
    t = torch.randint(0, 7, (5,))
    close(L.nll_loss(lp, t), F.nll_loss(lp, t), torch.float32)
    a, b = torch.randn(8, 6)[:, ::2], torch.randn(3, 8).t()
    close(L.mse_loss(a, b), F.mse_loss(a, b), torch.float32)


def test_gradcheck():
    d = dict(dtype=torch.float64, requires_grad=True)
    t = torch.tensor([0, 3, 1, -100, 2])
    w = torch.rand(4, dtype=torch.float64) + 0.5
    for red in REDUCTIONS:
        assert torch.autograd.gradcheck(lambda x: L.cross_entropy(x, t, w, reduction=red, label_smoothing=0.2),
                                        (torch.randn(5, 4, **d),))
        assert torch.autograd.gradcheck(lambda x: L.nll_loss(x, t, w, reduction=red),
                                        (torch.randn(5, 4, **d),))
        assert torch.autograd.gradcheck(lambda x, y: L.mse_loss(x, y, red),
                                        (torch.randn(3, 4, **d), torch.randn(3, 4, **d)))


def test_opcheck():
    x = torch.randn(6, 5, requires_grad=True)
    t = torch.tensor([0, 4, 1, -100, 2, 3])
    w = torch.rand(5) + 0.1
    for red in (0, 1, 2):
        torch.library.opcheck(ops.nll_loss.default, (x, t, w, red, -100))
        torch.library.opcheck(ops.cross_entropy.default, (x, t, None, red, -100, 0.1))
        torch.library.opcheck(ops.mse_loss.default, (x, torch.randn(6, 5, requires_grad=True), red))
    out, tw = ops.nll_loss(x.detach(), t, w, 1, -100)
    torch.library.opcheck(ops.nll_loss_backward.default, (torch.tensor(1.0), x.detach(), t, w, 1, -100, tw))
    torch.library.opcheck(ops.cross_entropy_backward.default, (torch.randn(6), x.detach(), t, w, 0, -100, 0.0))
    torch.library.opcheck(ops.mse_loss_backward.default, (torch.tensor(2.0), x.detach(), torch.randn(6, 5), 2))


# ---- fused_cross_entropy ----
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("n,c", [(5, 7), (33, 130), (1, 1)])
def test_fused_cross_entropy(device, reduction, smoothing, n, c):
    for dtype in dtypes_for(device):
        x = torch.randn(n, c, dtype=dtype, device=device) * 2
        t = torch.randint(0, c, (n,), device=device)
        if n > 2:
            t[::3] = -100

        def fn(x):
            return L.fused_cross_entropy(x, t, -100, smoothing, reduction)

        def ref(x):
            return F.cross_entropy(x, t, ignore_index=-100, label_smoothing=smoothing, reduction=reduction)

        check_fwd_bwd(fn, ref, [x], dtype)


def test_fused_cross_entropy_gradcheck():
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([1, -100, 5, 0])
    for red in ("mean", "sum", "none"):
        assert torch.autograd.gradcheck(lambda x: L.fused_cross_entropy(x, t, -100, 0.2, red), (x,))


def test_fused_cross_entropy_custom_ignore_index():
    x = torch.randn(6, 5)
    t = torch.tensor([0, 3, 3, 4, 1, 3])
    assert_close(L.fused_cross_entropy(x, t, ignore_index=3), F.cross_entropy(x, t, ignore_index=3))


# ---- fused linear + cross-entropy ----
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("chunk", [0, 3])
def test_fused_linear_cross_entropy(device, reduction, chunk):
    for dtype in ((torch.float32, torch.float64) if device == "cpu" else (torch.float32, torch.bfloat16)):
        n, h, v = 10, 16, 37
        x = torch.randn(n, h, dtype=dtype, device=device)
        w = torch.randn(v, h, dtype=dtype, device=device) / 4
        t = torch.randint(0, v, (n,), device=device)
        t[2] = -100

        def fn(x, w):
            return L.fused_linear_cross_entropy(x, w, t, -100, 0.05, reduction, chunk) * 1.5

        def ref(x, w):
            return F.cross_entropy(x @ w.t(), t, ignore_index=-100, label_smoothing=0.05, reduction=reduction) * 1.5

        tol = torch.bfloat16 if dtype == torch.bfloat16 else torch.float32
        check_fwd_bwd(fn, ref, [x, w], dtype, tol)


def _retained_backwards(loss_fn, ref_fn, inputs):
    """Backward of a retained graph several times with different loss gradients (the first 0.5,
    so the gradients held in place were scaled): each matches the reference."""
    loss = loss_fn(*inputs)
    for scale in (0.5, 2.0, 1.0):
        grads = torch.autograd.grad(loss * scale, inputs, retain_graph=True)
        refs = [t.detach().clone().requires_grad_() for t in inputs]
        want = torch.autograd.grad(ref_fn(*refs) * scale, refs)
        for g, w in zip(grads, want):
            assert_close(g, w)


@pytest.mark.parametrize("device", DEVICES)
def test_fused_linear_cross_entropy_hands_over_its_gradients(device):
    x = torch.randn(6, 8, device=device, requires_grad=True)
    w = torch.randn(11, 8, device=device, requires_grad=True)
    t = torch.randint(0, 11, (6,), device=device)
    loss, gi, gw = ops.fused_linear_cross_entropy(x, w, t)
    ptrs = gi.data_ptr(), gw.data_ptr()
    del gi, gw  # held here, autograd would copy them into .grad
    (loss * 2).backward()
    # the forward's gradients became .grad, scaled in place: no second buffer
    assert (x.grad.data_ptr(), w.grad.data_ptr()) == ptrs
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    (F.cross_entropy(x2 @ w2.t(), t) * 2).backward()
    assert_close(w.grad, w2.grad)
    assert_close(x.grad, x2.grad)
    _retained_backwards(lambda x, w: L.fused_linear_cross_entropy(x, w, t),
                        lambda x, w: F.cross_entropy(x @ w.t(), t), [x, w])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_fused_cross_entropy_hands_over_its_gradient(device, reduction):
    x = torch.randn(7, 13, device=device, requires_grad=True)
    t = torch.randint(0, 13, (7,), device=device)
    t[1] = -100
    loss, g = ops.fused_cross_entropy_grad(x, t, -100, 0.1, RED[reduction])
    ptr = g.data_ptr()
    del g
    (loss * 3).backward()
    assert x.grad.data_ptr() == ptr
    x2 = x.detach().clone().requires_grad_()
    (F.cross_entropy(x2, t, label_smoothing=0.1, reduction=reduction) * 3).backward()
    assert_close(x.grad, x2.grad)
    _retained_backwards(lambda x: L.fused_cross_entropy(x, t, -100, 0.1, reduction),
                        lambda x: F.cross_entropy(x, t, label_smoothing=0.1, reduction=reduction), [x])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_fused_cross_entropy_divisor(device, reduction):
    """divisor: the loss and its gradient divided in the same pass, whatever form it takes (a
    number, an int64 count on the device or on the CPU); training and eval agree."""
    x = torch.randn(9, 17, device=device) * 2
    t = torch.randint(0, 17, (9,), device=device)
    t[4] = -100
    for divisor in (3.5, torch.tensor(6, device=device), torch.tensor([2.5]), torch.tensor(4.0, dtype=torch.float64)):
        d = float(divisor)
        check_fwd_bwd(lambda x: L.fused_cross_entropy(x, t, -100, 0.1, reduction, divisor=divisor),
                      lambda x: F.cross_entropy(x, t, label_smoothing=0.1, reduction=reduction) / d, [x], x.dtype)
        with torch.no_grad():
            assert_close(L.fused_cross_entropy(x, t, -100, 0.1, reduction, divisor=divisor),
                         F.cross_entropy(x, t, label_smoothing=0.1, reduction=reduction) / d)
    # the division needs no pass of its own: the forward's gradient comes already divided
    xg = x.detach().clone().requires_grad_()
    loss, g = ops.fused_cross_entropy_grad(xg, t, -100, 0.0, RED[reduction], torch.tensor(4.0, device=device))
    xr = x.detach().clone().requires_grad_()
    (F.cross_entropy(xr, t, reduction=reduction) / 4).backward()
    assert_close(g, xr.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_fused_cross_entropy_grad_is_the_two_ops_in_one_pass_cpu(dtype):
    """On the CPU the one-pass op gives the bits of fused_cross_entropy followed by
    fused_cross_entropy_backward with the loss gradient 1 / divisor: loss and gradient, for
    either reduction, with and without smoothing, ignored rows and a divisor."""
    x = (torch.randn(9, 33) * 3).to(dtype)
    t = torch.randint(0, 33, (9,))
    t[[2, 5]] = -100
    for reduction in ("mean", "sum"):
        for smoothing in (0.0, 0.1):
            for divisor in (None, torch.tensor(3.0), torch.tensor(7)):
                loss, g = ops.fused_cross_entropy_grad(x, t, -100, smoothing, RED[reduction], divisor)
                want, lse = ops.fused_cross_entropy(x, t, -100, smoothing, RED[reduction])
                d = 1.0 if divisor is None else float(divisor)
                g_want = ops.fused_cross_entropy_backward(torch.tensor(1.0 / d, dtype=torch.float64), x, t, lse,
                                                          -100, smoothing, RED[reduction])
                if divisor is not None:
                    want = (want.double() * (1.0 / d)).to(dtype)
                assert torch.equal(loss, want), (reduction, smoothing, divisor)
                assert torch.equal(g, g_want), (reduction, smoothing, divisor)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_fused_linear_cross_entropy_divisor(device, reduction):
    x = torch.randn(10, 16, device=device)
    w = torch.randn(37, 16, device=device) / 4
    t = torch.randint(0, 37, (10,), device=device)
    t[2] = -100
    n = torch.tensor(7, device=device)
    check_fwd_bwd(lambda x, w: L.fused_linear_cross_entropy(x, w, t, -100, 0.0, reduction, 3, divisor=n),
                  lambda x, w: F.cross_entropy(x @ w.t(), t, reduction=reduction) / 7, [x, w], torch.float32)


def test_fused_cross_entropy_takes_the_one_pass_path_only_for_training():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Calls(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops = getattr(self, "ops", []) + [func.name()]
            return func(*args, **(kwargs or {}))

    x = torch.randn(4, 5, requires_grad=True)
    t = torch.tensor([0, 1, 2, 3])
    for kw, grad, want in (({}, True, "mytorch::fused_cross_entropy_grad"),
                           ({"reduction": "none"}, True, "mytorch::fused_cross_entropy"),
                           ({}, False, "mytorch::fused_cross_entropy")):
        with torch.set_grad_enabled(grad), Calls() as calls:
            loss = L.fused_cross_entropy(x, t, **kw)
        assert calls.ops[0] == want, calls.ops
        assert_close(loss, F.cross_entropy(x, t, **kw))


@pytest.mark.parametrize("device", DEVICES)
def test_fused_cross_entropy_opcheck(device):
    oc = torch.library.opcheck
    x = torch.randn(4, 12, device=device, requires_grad=True)
    t = torch.tensor([1, -100, 11, 0], device=device)
    oc(ops.fused_cross_entropy.default, (x, t, -100, 0.1, 1))
    oc(ops.fused_cross_entropy.default, (x, t, -100, 0.0, 0))
    _, lse = ops.fused_cross_entropy(x.detach(), t)
    oc(ops.fused_cross_entropy_grad.default, (x, t, -100, 0.1, 1))
    oc(ops.fused_cross_entropy_grad.default, (x, t, -100, 0.0, 2))
    oc(ops.fused_cross_entropy_grad.default, (x, t, -100, 0.0, 2, torch.tensor(3, device=device)))
    oc(ops.fused_cross_entropy_grad.default, (x, t, -100, 0.1, 1, torch.tensor(0.5, device=device)))
    oc(ops.fused_cross_entropy_backward.default, (torch.tensor(1.0, device=device), x.detach(), t, lse, -100, 0.0, 1))
    wt = torch.randn(5, 12, device=device, requires_grad=True)
    oc(ops.fused_linear_cross_entropy.default, (x, wt, torch.tensor([0, 4, -100, 2], device=device), -100, 0.0,
                                                1, 2))
    oc(ops.fused_linear_cross_entropy.default, (x, wt, torch.tensor([0, 4, -100, 2], device=device), -100, 0.0,
                                                2, 0, torch.tensor(5.0, device=device)))


def test_compiles_without_graph_break():
    def f(x, w, b, t):
        h = bias_gelu(rms_norm(x, 8, w), b)
        return L.fused_cross_entropy(swiglu(h, h) + log_softmax(h, -1), t)

    args = (torch.randn(4, 8), torch.randn(8), torch.randn(8), torch.tensor([0, 1, 2, 3]))
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    assert_close(compiled(*args), f(*args))


class TestLossBadInput(TestCase):
    def _msg(self, fn, exc=RuntimeError):
        with self.assertRaises(exc) as cm:
            fn()
        return str(cm.exception).splitlines()[0]

    def test_target_out_of_range(self):
        self.assertExpectedInline(
            self._msg(lambda: L.cross_entropy(torch.randn(3, 5), torch.tensor([0, 5, 1])), IndexError),
            """mytorch::cross_entropy: target 5 is out of bounds for 5 classes (expected a value in [0, 4] or ignore_index=-100)""")
        self.assertExpectedInline(
            self._msg(lambda: L.nll_loss(torch.randn(3, 5), torch.tensor([0, -1, 1])), IndexError),
            """mytorch::nll_loss: target -1 is out of bounds for 5 classes (expected a value in [0, 4] or ignore_index=-100)""")

    def test_target_shape(self):
        self.assertExpectedInline(
            self._msg(lambda: L.nll_loss(torch.randn(3, 5), torch.tensor([0, 1]))),
            """mytorch::nll_loss: expected target of shape [3] for input of shape [3, 5], got target of shape [2]""")

    def test_float_target(self):
        self.assertExpectedInline(
            self._msg(lambda: L.nll_loss(torch.randn(3, 5), torch.rand(3))),
            """mytorch::nll_loss: expected target to have an integer dtype (int64, int32, uint8), got Float""")

    def test_mse_shape(self):
        self.assertExpectedInline(
            self._msg(lambda: ops.mse_loss(torch.randn(3), torch.randn(4))),
            """mytorch::mse_loss: expected input and target to have the same shape, got [3] and [4]""")


class TestFusedCrossEntropyBadInput(TestCase):
    def msg(self, fn, exc=RuntimeError):
        with self.assertRaises(exc) as cm:
            fn()
        return str(cm.exception).splitlines()[0]

    def test_fused_cross_entropy_target(self):
        self.assertExpectedInline(self.msg(lambda: L.fused_cross_entropy(torch.randn(2, 3), torch.tensor([0, 3])), IndexError), """mytorch::fused_cross_entropy: expected every target in [0, 3) or equal to ignore_index -100, got target[1] = 3""")
        self.assertExpectedInline(self.msg(lambda: L.fused_cross_entropy(torch.randn(2, 3), torch.tensor([0, 1]), reduction="avg")), """mytorch::fused_cross_entropy: expected reduction to be 'none', 'mean' or 'sum', got 'avg'""")
        self.assertExpectedInline(self.msg(lambda: L.fused_cross_entropy(torch.randn(2, 3), torch.tensor([0.0, 1.0]))), """mytorch::fused_cross_entropy: expected target to have dtype in (Long), got Float""")

    def test_reduction(self):
        x, t = torch.randn(2, 3), torch.tensor([0, 1])
        self.assertExpectedInline(self.msg(lambda: ops.fused_cross_entropy(x, t, -100, 0.0, 3)), """mytorch::fused_cross_entropy: expected reduction to be 0 (none), 1 (mean) or 2 (sum), got 3""")
        self.assertExpectedInline(self.msg(lambda: ops.fused_cross_entropy_grad(x, t, -100, 0.0, 0)), """mytorch::fused_cross_entropy_grad: expected reduction to be 1 (mean) or 2 (sum), got 0""")
        self.assertExpectedInline(self.msg(lambda: L.fused_linear_cross_entropy(x, torch.randn(4, 3), t, reduction="none")), """mytorch::fused_linear_cross_entropy: expected reduction to be 'mean' or 'sum', got 'none'""")
        self.assertExpectedInline(self.msg(lambda: L.nll_loss(x, t, reduction="avg")), """mytorch::nll_loss: expected reduction to be 'none', 'mean' or 'sum', got 'avg'""")
        self.assertExpectedInline(self.msg(lambda: ops.nll_loss(x, t, None, -1)), """mytorch::nll_loss: expected reduction to be 0 (none), 1 (mean) or 2 (sum), got -1""")

    def test_fused_cross_entropy_divisor(self):
        x, t = torch.randn(2, 3, requires_grad=True), torch.tensor([0, 1])
        self.assertExpectedInline(self.msg(lambda: L.fused_cross_entropy(x, t, divisor=torch.ones(2))), """mytorch::fused_cross_entropy_grad: expected a one-element divisor, got shape [2]""")
        self.assertExpectedInline(self.msg(lambda: L.fused_cross_entropy(x, t, divisor=torch.tensor(True))), """mytorch::fused_cross_entropy_grad: expected a floating or integer divisor, got Bool""")

    def test_fused_linear_ce(self):
        self.assertExpectedInline(self.msg(lambda: L.fused_linear_cross_entropy(torch.randn(2, 3), torch.randn(5, 4), torch.tensor([0, 1]))), """mytorch::fused_linear_cross_entropy: expected input [N, H] and weight [V, H] with the same H, got [2, 3] and [5, 4]""")
