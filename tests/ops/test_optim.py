"""The optim family: sgd_step_ and adam_step_ (any strides; on CUDA one launch for contiguous
lists) against torch.optim, opcheck, error text; stock torch.optim on the mytorch device."""
import copy

import pytest
import torch
from expecttest import TestCase

import mytorch_ext  # noqa: F401
from helpers import assert_close, devices
from mytorch_ext.ops.optim import adam_step_, sgd_step_
from ops_device import device_or_skip, no_fallbacks

m = torch.ops.mytorch
DEVICES = devices()


def _params(dtype=torch.float32):
    torch.manual_seed(1)
    return [torch.randn(7, 5, dtype=dtype), torch.randn(13, dtype=dtype), torch.randn(4, 9, dtype=dtype).t()]


def _grads(ps, k):
    g = torch.Generator().manual_seed(100 + k)
    return [torch.randn(p.shape, generator=g, dtype=p.dtype) for p in ps]


@pytest.mark.parametrize("kw", [dict(momentum=0.0), dict(momentum=0.9), dict(momentum=0.9, nesterov=True, weight_decay=0.01),
                                dict(momentum=0.8, dampening=0.3, maximize=True)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sgd_step_matches_torch_optim(kw, dtype):
    ref = [p.clone().requires_grad_() for p in _params(dtype)]
    ours = [p.clone() for p in _params(dtype)]
    opt = torch.optim.SGD(ref, lr=0.1, foreach=False, **kw)
    bufs = [torch.zeros_like(p) for p in ours]
    for k in range(3):
        gs = _grads(ours, k)
        for p, g in zip(ref, gs):
            p.grad = g.clone()
        opt.step()
        m.sgd_step_(ours, gs, bufs if kw.get("momentum") else [], 0.1, kw.get("momentum", 0.0),
                    kw.get("dampening", 0.0), kw.get("weight_decay", 0.0), kw.get("nesterov", False),
                    kw.get("maximize", False), k == 0)
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b.detach())


@pytest.mark.parametrize("kw", [dict(), dict(weight_decay=0.1, amsgrad=True), dict(maximize=True, betas=(0.8, 0.9))])
@pytest.mark.parametrize("adamw", [False, True])
def test_adam_step_matches_torch_optim(kw, adamw):
    ref = [p.clone().requires_grad_() for p in _params()]
    ours = [p.clone() for p in _params()]
    opt = (torch.optim.AdamW if adamw else torch.optim.Adam)(ref, lr=0.01, foreach=False, **kw)
    ms, vs, vmax = ([torch.zeros_like(p) for p in ours] for _ in range(3))
    b1, b2 = kw.get("betas", (0.9, 0.999))
    for k in range(3):
        gs = _grads(ours, k)
        for p, g in zip(ref, gs):
            p.grad = g.clone()
        opt.step()
        steps = [torch.tensor(float(k + 1)) for _ in ours]
        m.adam_step_(ours, gs, ms, vs, vmax if kw.get("amsgrad") else [], steps, 0.01, b1, b2,
                     kw.get("weight_decay", 0.01 if adamw else 0.0), 1e-8, kw.get("amsgrad", False),
                     kw.get("maximize", False), adamw)
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b.detach())


def test_bf16_params_compute_in_fp32():
    p = [torch.randn(64).bfloat16()]
    g = [torch.randn(64).bfloat16()]
    exp = (p[0].float() - 0.5 * g[0].float()).bfloat16()
    m.sgd_step_(p, g, [], 0.5)
    assert torch.equal(p[0], exp)


def test_opcheck_optim():
    ps, gs = [torch.randn(3, 4)], [torch.randn(3, 4)]
    torch.library.opcheck(m.sgd_step_.default, (ps, gs, [torch.zeros(3, 4)], 0.1, 0.9))
    torch.library.opcheck(m.adam_step_.default, (ps, gs, [torch.zeros(3, 4)], [torch.zeros(3, 4)], [],
                                                 [torch.tensor(1.0)], 0.01))


# ---- the public wrappers; on CUDA contiguous lists of one dtype take the one launch ----
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kw", [dict(), dict(amsgrad=True), dict(maximize=True)])
def test_adamw_wrapper_matches_torch(device, dtype, kw):
    shapes = [(3, 5), (70001,), (1,), (16, 16)]
    ps = [torch.randn(s, device=device, dtype=dtype) for s in shapes]
    ref = [p.detach().clone().float().requires_grad_() for p in ps]
    opt = torch.optim.AdamW(ref, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, **kw)
    ms, vs, vmax = ([torch.zeros_like(p) for p in ps] for _ in range(3))
    steps = [torch.zeros((), device=device) for _ in ps]  # on the device: read there, no host sync
    for _ in range(3):
        gs = [torch.randn_like(p) for p in ps]
        for r, g in zip(ref, gs):
            r.grad = g.float()
        opt.step()
        torch._foreach_add_(steps, 1)
        adam_step_(ps, gs, ms, vs, steps, lr=1e-2, beta1=0.9, beta2=0.95, weight_decay=0.1, eps=1e-8,
                   decoupled_weight_decay=True, max_exp_avg_sqs=vmax if kw.get("amsgrad") else (), **kw)
    for p, r in zip(ps, ref):
        assert_close(p, r.detach().to(dtype), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("momentum,nesterov,maximize", [(0.0, False, False), (0.9, False, False), (0.9, True, False),
                                                        (0.9, False, True)])
def test_sgd_wrapper_matches_torch(device, momentum, nesterov, maximize):
    shapes = [(3, 5), (70001,), (7,)]
    ps = [torch.randn(s, device=device) for s in shapes]
    ref = [p.detach().clone().requires_grad_() for p in ps]
    opt = torch.optim.SGD(ref, lr=0.1, momentum=momentum, nesterov=nesterov, weight_decay=0.01, maximize=maximize)
    bufs = [torch.empty_like(p) for p in ps] if momentum else []
    for step in range(3):
        gs = [torch.randn_like(p) for p in ps]
        for r, g in zip(ref, gs):
            r.grad = g.clone()
        opt.step()
        sgd_step_(ps, gs, bufs, lr=0.1, momentum=momentum, weight_decay=0.01, nesterov=nesterov,
                  maximize=maximize, first_step=step == 0)
    for p, r in zip(ps, ref):
        assert_close(p, r.detach())


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck_one_launch_lists(device):
    ps = [torch.randn(5, device=device), torch.randn(3, 2, device=device)]
    gs = [torch.randn_like(p) for p in ps]
    steps = [torch.ones((), device=device) for _ in ps]
    torch.library.opcheck(m.adam_step_.default, (ps, gs, [torch.zeros_like(p) for p in ps],
                                                 [torch.zeros_like(p) for p in ps], [], steps, 1e-3, 0.9, 0.999, 0.01,
                                                 1e-8, False, False, True))
    torch.library.opcheck(m.sgd_step_.default, (ps, gs, [torch.zeros_like(p) for p in ps], 0.1, 0.9, 0.0, 0.0,
                                                False, False, True))


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2)),
    ("Adam", dict(lr=1e-2)), ("Adam", dict(lr=1e-2, weight_decay=0.1, amsgrad=True)), ("AdamW", dict(lr=1e-2)),
    ("AdamW", dict(lr=1e-2, fused=True)), ("Adam", dict(lr=1e-2, fused=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, fused=True)),
])
def test_torch_optim_on_device_matches_cpu(name, kw):
    dev = device_or_skip()
    cpu_model = _model()
    dev_model = copy.deepcopy(cpu_model).to(dev)
    opt_c = getattr(torch.optim, name)(cpu_model.parameters(), **{**kw, "fused": False} if "fused" in kw else kw)
    opt_d = getattr(torch.optim, name)(dev_model.parameters(), **kw)
    x, y = torch.randn(5, 6), torch.randn(5, 3)
    for _ in range(3):
        for model, opt, xx, yy in ((cpu_model, opt_c, x, y), (dev_model, opt_d, x.to(dev), y.to(dev))):
            opt.zero_grad()
            ((model(xx) - yy) ** 2).sum().backward()
            if model is dev_model:
                with no_fallbacks():
                    opt.step()
            else:
                opt.step()
    for a, b in zip(dev_model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-5, atol=1e-6)


class TestOptimBadInput(TestCase):
    def test_length_mismatch(self):
        with self.assertRaises(RuntimeError) as cm:
            m.sgd_step_([torch.randn(3)], [], [], 0.1)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::sgd_step_: expected grads to have 1 tensors (one per param), got 0""")

    def test_shape_mismatch(self):
        with self.assertRaises(RuntimeError) as cm:
            m.sgd_step_([torch.randn(3)], [torch.randn(4)], [], 0.1)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::sgd_step_: expected grads[0] to have the shape of params[0] [3], got [4]""")

    def test_int_params(self):
        with self.assertRaises(RuntimeError) as cm:
            m.sgd_step_([torch.arange(3)], [torch.arange(3)], [], 0.1)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::sgd_step_: expected params to have dtype in (Float, Double, BFloat16, Half), got Long""")

    def test_wrappers(self):
        p = [torch.randn(3)]
        with self.assertRaises(RuntimeError) as cm:
            adam_step_(p, [torch.randn(4)], [torch.zeros(3)], [torch.zeros(3)], [torch.ones(())], lr=1e-3)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::adam_step_: expected grads[0] to have the shape of params[0] [3], got [4]""")
        with self.assertRaises(RuntimeError) as cm:
            sgd_step_(p, [torch.randn(3)], lr=0.1, momentum=0.9)
        self.assertExpectedInline(str(cm.exception).splitlines()[0], """mytorch::sgd_step_: expected momentum_buffers to have 1 tensors when momentum != 0, got 0""")
