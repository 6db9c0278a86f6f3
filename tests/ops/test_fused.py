"""Fused training ops (fused cross-entropy, bias+GELU, SwiGLU, RoPE, fused linear
cross-entropy, multi-tensor AdamW/SGD): ATen parity on every device present, backward
against ATen autograd, gradcheck in float64, opcheck, error text. layer_norm, rms_norm,
softmax and log_softmax are tested in test_norm.py / test_softmax.py (CPU) and
tests/cuda/test_cuda_fused.py (CUDA kernels)."""
import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext.ops.fused as fz
from helpers import CPU_DTYPES, assert_close, devices

ops = torch.ops.mytorch
DEVICES = devices()


def dtypes_for(device):
    return CPU_DTYPES if device == "cpu" else (torch.float32, torch.bfloat16, torch.float16)


def ref_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def check_fwd_bwd(fn, ref_fn, inputs, dtype, grad_tol_dtype=None):
    """Forward and backward of fn against ref_fn computed in float32 (float64) from the same values."""
    xs = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    rs = [t.detach().to(ref_dtype(dtype) if t.is_floating_point() else t.dtype).requires_grad_(t.is_floating_point())
          for t in inputs]
    y, r = fn(*xs), ref_fn(*rs)
    assert_close(y, r.to(dtype), dtype)
    g = torch.randn_like(r)
    y.backward(g.to(y.dtype))
    r.backward(g)
    for a, b in zip(xs, rs):
        if a.is_floating_point():
            assert_close(a.grad, b.grad.to(dtype), grad_tol_dtype or dtype)


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
            return fz.fused_cross_entropy(x, t, -100, smoothing, reduction)

        def ref(x):
            return F.cross_entropy(x, t, ignore_index=-100, label_smoothing=smoothing, reduction=reduction)

        check_fwd_bwd(fn, ref, [x], dtype)


def test_fused_cross_entropy_gradcheck():
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    t = torch.tensor([1, -100, 5, 0])
    for red in ("mean", "sum", "none"):
        assert torch.autograd.gradcheck(lambda x: fz.fused_cross_entropy(x, t, -100, 0.2, red), (x,))


def test_fused_cross_entropy_custom_ignore_index():
    x = torch.randn(6, 5)
    t = torch.tensor([0, 3, 3, 4, 1, 3])
    assert_close(fz.fused_cross_entropy(x, t, ignore_index=3), F.cross_entropy(x, t, ignore_index=3))


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
            return fz.fused_linear_cross_entropy(x, w, t, -100, 0.05, reduction, chunk) * 1.5

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
    _retained_backwards(lambda x, w: fz.fused_linear_cross_entropy(x, w, t),
                        lambda x, w: F.cross_entropy(x @ w.t(), t), [x, w])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_fused_cross_entropy_hands_over_its_gradient(device, reduction):
    x = torch.randn(7, 13, device=device, requires_grad=True)
    t = torch.randint(0, 13, (7,), device=device)
    t[1] = -100
    loss, g = ops.fused_cross_entropy_grad(x, t, -100, 0.1, reduction)
    ptr = g.data_ptr()
    del g
    (loss * 3).backward()
    assert x.grad.data_ptr() == ptr
    x2 = x.detach().clone().requires_grad_()
    (F.cross_entropy(x2, t, label_smoothing=0.1, reduction=reduction) * 3).backward()
    assert_close(x.grad, x2.grad)
    _retained_backwards(lambda x: fz.fused_cross_entropy(x, t, -100, 0.1, reduction),
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
        check_fwd_bwd(lambda x: fz.fused_cross_entropy(x, t, -100, 0.1, reduction, divisor=divisor),
                      lambda x: F.cross_entropy(x, t, label_smoothing=0.1, reduction=reduction) / d, [x], x.dtype)
        with torch.no_grad():
            assert_close(fz.fused_cross_entropy(x, t, -100, 0.1, reduction, divisor=divisor),
                         F.cross_entropy(x, t, label_smoothing=0.1, reduction=reduction) / d)
    # the division needs no pass of its own: the forward's gradient comes already divided
    xg = x.detach().clone().requires_grad_()
    loss, g = ops.fused_cross_entropy_grad(xg, t, -100, 0.0, reduction, torch.tensor(4.0, device=device))
    xr = x.detach().clone().requires_grad_()
    (F.cross_entropy(xr, t, reduction=reduction) / 4).backward()
    assert_close(g, xr.grad)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_fused_linear_cross_entropy_divisor(device, reduction):
    x = torch.randn(10, 16, device=device)
    w = torch.randn(37, 16, device=device) / 4
    t = torch.randint(0, 37, (10,), device=device)
    t[2] = -100
    n = torch.tensor(7, device=device)
    check_fwd_bwd(lambda x, w: fz.fused_linear_cross_entropy(x, w, t, -100, 0.0, reduction, 3, divisor=n),
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
            loss = fz.fused_cross_entropy(x, t, **kw)
        assert calls.ops[0] == want, calls.ops
        assert_close(loss, F.cross_entropy(x, t, **kw))


# ---- scale_ (the fused linear + cross-entropy backward) ----
@pytest.mark.parametrize("device", DEVICES)
def test_scale_(device):
    for dtype in dtypes_for(device):
        for s in (2.5, -0.5, 1.0, 0.0):
            x = torch.randn(5, 7, dtype=dtype, device=device)
            want = (x.double() * s).to(dtype)
            ops.scale_(x, torch.tensor(s, device=device))
            assert_close(x, want)
        x = torch.randn(6, 4, dtype=dtype, device=device)
        xt = x.t()  # not contiguous: written back in place
        want = (xt.double() * 3).to(dtype)
        ops.scale_(xt, torch.tensor([3.0], dtype=torch.float64, device=device))
        assert_close(xt, want)
        assert_close(x, want.t())


@pytest.mark.parametrize("device", DEVICES)
def test_scale_by_one_leaves_the_bits(device):
    x = torch.tensor([float("nan"), -0.0, float("inf"), 1e-40, 3.0], device=device)
    before = x.clone()
    ops.scale_(x, torch.ones((), device=device))
    assert torch.equal(x.view(torch.int32).cpu(), before.view(torch.int32).cpu())


# ---- bias + GELU, SwiGLU ----
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("shape", [(7,), (5, 9), (3, 4, 64), (0, 5)])
def test_bias_gelu(device, approximate, shape):
    for dtype in dtypes_for(device):
        x = torch.randn(shape, dtype=dtype, device=device) * 2
        b = torch.randn(shape[-1], dtype=dtype, device=device)
        check_fwd_bwd(lambda x, b: fz.bias_gelu(x, b, approximate),
                      lambda x, b: F.gelu(x + b, approximate=approximate), [x, b] if x.numel() else [x, b], dtype,
                      torch.bfloat16 if dtype != torch.float64 and dtype != torch.float32 else None)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", [(7,), (5, 9), (3, 4, 64), (0,)])
def test_swiglu(device, shape):
    for dtype in dtypes_for(device):
        a = torch.randn(shape, dtype=dtype, device=device) * 2
        b = torch.randn(shape, dtype=dtype, device=device)
        check_fwd_bwd(fz.swiglu, lambda a, b: F.silu(a) * b, [a, b], dtype)


def test_activation_gradcheck():
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, b: fz.bias_gelu(x, b, "none"), (x, b))
    assert torch.autograd.gradcheck(lambda x, b: fz.bias_gelu(x, b, "tanh"), (x, b))
    y = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(fz.swiglu, (x, y))


# ---- rotary embedding ----
def rope_ref(x, cos, sin, interleaved):
    """Reference: Llama's rotate_half, or GPT-J's pairs, on the first rotary_dim features."""
    rd = 2 * cos.shape[-1]
    c = cos[:, None, :].to(x.dtype)
    s = sin[:, None, :].to(x.dtype)
    xr, xp = x[..., :rd], x[..., rd:]
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        o1, o2 = x1 * c - x2 * s, x2 * c + x1 * s
        out = torch.stack([o1, o2], dim=-1).flatten(-2)
    else:
        x1, x2 = xr[..., : rd // 2], xr[..., rd // 2:]
        out = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
    return torch.cat([out, xp], dim=-1)


def rope_tables(seq, half, device, dtype=torch.float32):
    inv = 1.0 / (10000 ** (torch.arange(half, dtype=torch.float64) / half))
    ang = torch.arange(seq, dtype=torch.float64)[:, None] * inv[None]
    return ang.cos().to(device=device, dtype=dtype), ang.sin().to(device=device, dtype=dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("shape,half", [((2, 5, 3, 16), 8), ((7, 2, 10), 3), ((1, 4, 2, 64), 16)])
def test_rope(device, interleaved, shape, half):
    for dtype in dtypes_for(device):
        x = torch.randn(shape, dtype=dtype, device=device)
        cos, sin = rope_tables(shape[-3], half, device)
        check_fwd_bwd(lambda x: fz.rope(x, cos, sin, interleaved), lambda x: rope_ref(x, cos, sin, interleaved),
                      [x], dtype)
        y = x.clone()
        out = fz.rope(y, cos, sin, interleaved, inplace=True)
        assert out.data_ptr() == y.data_ptr()
        assert_close(y, rope_ref(x.to(ref_dtype(dtype)), cos, sin, interleaved).to(dtype), dtype)


def test_rope_gradcheck_and_table_dtype():
    x = torch.randn(2, 3, 2, 8, dtype=torch.float64, requires_grad=True)
    cos, sin = rope_tables(3, 4, "cpu", torch.float64)
    assert torch.autograd.gradcheck(lambda x: fz.rope(x, cos, sin), (x,))
    assert torch.autograd.gradcheck(lambda x: fz.rope(x, cos, sin, True), (x,))
    xb = torch.randn(2, 3, 2, 8, dtype=torch.bfloat16)
    cb, sb = rope_tables(3, 4, "cpu", torch.bfloat16)
    assert_close(fz.rope(xb, cb, sb), rope_ref(xb.float(), cb.float(), sb.float(), False).bfloat16())


# ---- multi-tensor optimizers ----
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_adamw_matches_torch(device, dtype):
    shapes = [(3, 5), (70001,), (1,), (16, 16)]
    ps = [torch.randn(s, device=device, dtype=dtype) for s in shapes]
    ref = [p.detach().clone().float().requires_grad_() for p in ps]
    opt = torch.optim.AdamW(ref, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    ms = [torch.zeros_like(p) for p in ps]
    vs = [torch.zeros_like(p) for p in ps]
    for step in range(1, 4):
        gs = [torch.randn_like(p) for p in ps]
        for r, g in zip(ref, gs):
            r.grad = g.float()
        opt.step()
        fz.fused_adamw_(ps, gs, ms, vs, lr=1e-2, beta1=0.9, beta2=0.95, weight_decay=0.1, eps=1e-8, step=step)
    for p, r in zip(ps, ref):
        assert_close(p, r.detach().to(dtype), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.9, False), (0.9, True)])
def test_fused_sgd_matches_torch(device, momentum, nesterov):
    shapes = [(3, 5), (70001,), (7,)]
    ps = [torch.randn(s, device=device) for s in shapes]
    ref = [p.detach().clone().requires_grad_() for p in ps]
    opt = torch.optim.SGD(ref, lr=0.1, momentum=momentum, nesterov=nesterov, weight_decay=0.01)
    bufs = [torch.empty_like(p) for p in ps] if momentum else []
    for step in range(3):
        gs = [torch.randn_like(p) for p in ps]
        for r, g in zip(ref, gs):
            r.grad = g.clone()
        opt.step()
        fz.fused_sgd_(ps, gs, bufs, lr=0.1, momentum=momentum, weight_decay=0.01, nesterov=nesterov,
                      first_step=step == 0)
    for p, r in zip(ps, ref):
        assert_close(p, r.detach())


# ---- opcheck ----
@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    oc = torch.library.opcheck
    x = torch.randn(4, 12, device=device, requires_grad=True)
    b = torch.randn(12, device=device, requires_grad=True)
    g = torch.randn(4, 12, device=device)
    t = torch.tensor([1, -100, 11, 0], device=device)
    oc(ops.fused_cross_entropy.default, (x, t, -100, 0.1, "mean"))
    oc(ops.fused_cross_entropy.default, (x, t, -100, 0.0, "none"))
    _, lse = ops.fused_cross_entropy(x.detach(), t)
    oc(ops.fused_cross_entropy_grad.default, (x, t, -100, 0.1, "mean"))
    oc(ops.fused_cross_entropy_grad.default, (x, t, -100, 0.0, "sum"))
    oc(ops.fused_cross_entropy_grad.default, (x, t, -100, 0.0, "sum", torch.tensor(3, device=device)))
    oc(ops.fused_cross_entropy_grad.default, (x, t, -100, 0.1, "mean", torch.tensor(0.5, device=device)))
    oc(ops.fused_cross_entropy_backward.default, (torch.tensor(1.0, device=device), x.detach(), t, lse, -100, 0.0, "mean"))
    wt = torch.randn(5, 12, device=device, requires_grad=True)
    oc(ops.fused_linear_cross_entropy.default, (x, wt, torch.tensor([0, 4, -100, 2], device=device), -100, 0.0,
                                                "mean", 2))
    oc(ops.fused_linear_cross_entropy.default, (x, wt, torch.tensor([0, 4, -100, 2], device=device), -100, 0.0,
                                                "sum", 0, torch.tensor(5.0, device=device)))
    oc(ops.scale_.default, (torch.randn(3, 5, device=device), torch.tensor(0.5, device=device)))
    oc(ops.scale_.default, (torch.randn(3, 5, device=device), torch.tensor([1.0], device=device)))
    oc(ops.bias_gelu.default, (x, b, "tanh"))
    oc(ops.bias_gelu_backward.default, (g, x.detach(), b.detach(), "none"))
    oc(ops.swiglu.default, (x, torch.randn(4, 12, device=device, requires_grad=True)))
    oc(ops.swiglu_backward.default, (g, x.detach(), torch.randn(4, 12, device=device)))
    xr = torch.randn(2, 3, 2, 8, device=device, requires_grad=True)
    cos, sin = rope_tables(3, 4, device)
    oc(ops.rope.default, (xr, cos, sin, False))
    oc(ops.rope_backward.default, (torch.randn(2, 3, 2, 8, device=device), cos, sin, True))
    oc(ops.rope_.default, (torch.randn(2, 3, 2, 8, device=device), cos, sin, False))
    ps = [torch.randn(5, device=device), torch.randn(3, 2, device=device)]
    gs = [torch.randn_like(p) for p in ps]
    oc(ops.fused_adamw_.default, (ps, gs, [torch.zeros_like(p) for p in ps], [torch.zeros_like(p) for p in ps],
                                  1e-3, 0.9, 0.999, 0.01, 1e-8, 1))
    oc(ops.fused_sgd_.default, (ps, gs, [torch.zeros_like(p) for p in ps], 0.1, 0.9, 0.0, 0.0, False, True))


def test_compiles_without_graph_break():
    def f(x, w, b, t):
        h = fz.bias_gelu(fz.rms_norm(x, 8, w), b)
        return fz.fused_cross_entropy(fz.swiglu(h, h) + fz.log_softmax(h, -1), t)

    args = (torch.randn(4, 8), torch.randn(8), torch.randn(8), torch.tensor([0, 1, 2, 3]))
    compiled = torch.compile(f, fullgraph=True, backend="eager")
    assert_close(compiled(*args), f(*args))


class TestFusedBadInput(TestCase):
    def msg(self, fn, exc=RuntimeError):
        with self.assertRaises(exc) as cm:
            fn()
        return str(cm.exception).splitlines()[0]

    def test_fused_cross_entropy_target(self):
        self.assertExpectedInline(self.msg(lambda: fz.fused_cross_entropy(torch.randn(2, 3), torch.tensor([0, 3])), IndexError), """mytorch::fused_cross_entropy: expected every target in [0, 3) or equal to ignore_index -100, got target[1] = 3""")
        self.assertExpectedInline(self.msg(lambda: fz.fused_cross_entropy(torch.randn(2, 3), torch.tensor([0, 1]), reduction="avg")), """mytorch::fused_cross_entropy: expected reduction to be 'none', 'mean' or 'sum', got 'avg'""")
        self.assertExpectedInline(self.msg(lambda: fz.fused_cross_entropy(torch.randn(2, 3), torch.tensor([0.0, 1.0]))), """mytorch::fused_cross_entropy: expected target to have dtype in (Long), got Float""")

    def test_fused_cross_entropy_divisor(self):
        x, t = torch.randn(2, 3, requires_grad=True), torch.tensor([0, 1])
        self.assertExpectedInline(self.msg(lambda: fz.fused_cross_entropy(x, t, divisor=torch.ones(2))), """mytorch::fused_cross_entropy_grad: expected a one-element divisor, got shape [2]""")
        self.assertExpectedInline(self.msg(lambda: fz.fused_cross_entropy(x, t, divisor=torch.tensor(True))), """mytorch::fused_cross_entropy_grad: expected a floating or integer divisor, got Bool""")

    def test_fused_linear_ce(self):
        self.assertExpectedInline(self.msg(lambda: fz.fused_linear_cross_entropy(torch.randn(2, 3), torch.randn(5, 4), torch.tensor([0, 1]))), """mytorch::fused_linear_cross_entropy: expected input [N, H] and weight [V, H] with the same H, got [2, 3] and [5, 4]""")

    def test_scale_(self):
        self.assertExpectedInline(self.msg(lambda: ops.scale_(torch.randn(2, 3), torch.ones(2))), """mytorch::scale_: expected a one-element scale, got shape [2]""")
        self.assertExpectedInline(self.msg(lambda: ops.scale_(torch.ones(2, dtype=torch.int64), torch.ones(()))), """mytorch::scale_: expected self to have dtype in (Float, Double, BFloat16, Half), got Long""")

    def test_bias_gelu_and_swiglu(self):
        self.assertExpectedInline(self.msg(lambda: fz.bias_gelu(torch.randn(2, 3), torch.randn(2))), """mytorch::bias_gelu: expected bias of shape [x.size(-1)], got x [2, 3] and bias [2]""")
        self.assertExpectedInline(self.msg(lambda: fz.swiglu(torch.randn(2, 3), torch.randn(3, 2))), """mytorch::swiglu: expected a and b to have the same shape, got [2, 3] and [3, 2]""")

    def test_rope(self):
        cos, sin = rope_tables(3, 5, "cpu")
        self.assertExpectedInline(self.msg(lambda: fz.rope(torch.randn(1, 3, 2, 8), cos, sin)), """mytorch::rope: expected cos and sin of shape (seq, rotary_dim / 2) with seq = 3 and rotary_dim <= 8, got [3, 5]""")

    def test_optimizers(self):
        p = [torch.randn(3)]
        self.assertExpectedInline(self.msg(lambda: fz.fused_adamw_(p, [torch.randn(4)], [torch.zeros(3)], [torch.zeros(3)], lr=1e-3, step=1)), """mytorch::fused_adamw_: expected grads[0] to be contiguous and match params[0] (Float [3]), got Float [4]""")
        self.assertExpectedInline(self.msg(lambda: fz.fused_sgd_(p, [torch.randn(3)], lr=0.1, momentum=0.9)), """mytorch::fused_sgd_: expected momentum_buffers (one per param) when momentum is 0.9""")
