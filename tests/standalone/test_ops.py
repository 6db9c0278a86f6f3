"""Every mytorch op against torch: values and gradients, odd shapes, broadcasting, views,
on each device present."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import mytorch
import mytorch.functional as F

from .helpers import LAYOUTS, check_op, devices

DEV = devices()




def pytest_generate_tests(metafunc):
    """Every layout on the CPU; one non-contiguous layout on each other device."""
    if "layout" in metafunc.fixturenames:
        metafunc.parametrize("device,layout", [(d, lay) for d in DEV
                                               for lay in (LAYOUTS if d == "cpu" else ("strided",))])
    elif "device" in metafunc.fixturenames:
        metafunc.parametrize("device", DEV)


# ---- elementwise ----
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: a.maximum(b) if isinstance(a, mytorch.Tensor) else torch.maximum(a, b),
    "minimum": lambda a, b: a.minimum(b) if isinstance(a, mytorch.Tensor) else torch.minimum(a, b),
}
BROADCASTS = [((3, 5), (3, 5)), ((3, 5), (5,)), ((4, 1, 7), (3, 1)), ((1,), (2, 3)), ((2, 3, 1), ())]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_binary(name, shapes, layout, device):
    low = 0.5 if name == "div" else -2.0  # keep the divisor away from 0
    check_op(shapes, BINARY[name], layout=layout, device=device, low=low, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fn", [lambda a: a + 2, lambda a: 3 - a, lambda a: a * -1.5,
                                lambda a: a / 4, lambda a: 2 / a, lambda a: a ** 2,
                                lambda a: a ** 3, lambda a: a ** 0.5, lambda a: -a],
                         ids=["add", "rsub", "mul", "div", "rdiv", "sq", "cube", "sqrt", "neg"])
def test_scalar_operands(fn, device):
    check_op([(4, 7)], fn, device=device, low=0.5, high=2.0, rtol=1e-4)


def test_pow_tensor_exponent(device):
    check_op([(3, 4), (4,)], lambda a, b: a ** b, device=device, low=0.5, high=2.0, rtol=1e-4)


UNARY = {
    "exp": (lambda a: a.exp(), -2.0),
    "log": (lambda a: a.log(), 0.1),
    "sqrt": (lambda a: a.sqrt(), 0.1),
    "abs": (lambda a: a.abs(), -2.0),
    "tanh": (lambda a: a.tanh(), -2.0),
    "sigmoid": (lambda a: a.sigmoid(), -2.0),
    "relu": (lambda a: a.relu(), -2.0),
    "clamp": (lambda a: a.clamp(-0.5, 0.7), -2.0),
    "gelu": ((TF.gelu, F.gelu), -3.0),
    "gelu_tanh": ((lambda a: TF.gelu(a, approximate="tanh"),
                   lambda a: F.gelu(a, approximate="tanh")), -3.0),
    "silu": ((TF.silu, F.silu), -3.0),
}


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 33)], ids=str)
def test_unary(name, shape, layout, device):
    fn, low = UNARY[name]
    fns = fn if isinstance(fn, tuple) else (fn, None)
    check_op([shape], *fns, layout=layout, device=device, low=low, rtol=1e-4, atol=1e-5)


def test_where_and_masked_fill(device):
    mask = np.random.default_rng(1).random((3, 5)) > 0.5
    check_op([(3, 5), (5,)], lambda a, b, m: torch.where(m, a, b),
             lambda a, b, m: mytorch.where(m, a, b), inputs=[mask], device=device)
    check_op([(3, 5)], lambda a, m: a.masked_fill(m, -1.0), inputs=[mask], device=device)


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(op, device):
    fn = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
          "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}[op]
    check_op([(3, 5), (5,)], fn, device=device, grad=False)
    check_op([(3, 5)], lambda a: fn(a, 0.25), device=device, grad=False)


# ---- reductions ----
REDUCE = [None, 0, 1, -1, (0, 2)]


@pytest.mark.parametrize("dim", REDUCE, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["sum", "mean", "var", "logsumexp"])
def test_reductions(name, dim, keepdim, layout, device):
    if name == "logsumexp" and dim is None:
        dim = (0, 1, 2)
    fn = lambda a: getattr(a, name)(dim=dim, keepdim=keepdim)  # noqa: E731
    check_op([(3, 4, 5)], fn, layout=layout, device=device, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min(name, layout, device):
    check_op([(3, 4, 5)], lambda a: getattr(a, name)(), layout=layout, device=device)
    for dim in (0, -1):
        for keep in (False, True):
            check_op([(3, 4, 5)], lambda a: getattr(a, name)(dim=dim, keepdim=keep),
                     layout=layout, device=device)


def test_argmax(device):
    check_op([(3, 4, 5)], lambda a: a.argmax(dim=1), device=device, grad=False)
    check_op([(3, 4, 5)], lambda a: a.argmax(), device=device, grad=False)


# ---- matmul ----
MATMUL = [((3, 4), (4, 5)), ((7,), (7, 2)), ((3, 7), (7,)), ((2, 3, 4), (4, 5)),
          ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((1, 1), (1, 1))]


@pytest.mark.parametrize("shapes", MATMUL, ids=str)
def test_matmul(shapes, layout, device):
    check_op(shapes, lambda a, b: a @ b, layout=layout, device=device, rtol=1e-4, atol=1e-4)


# ---- shapes and views ----
VIEWS = {
    "reshape": lambda a: a.reshape(4, -1),
    "view": lambda a: a.contiguous().view(2, 2, -1),
    "permute": lambda a: a.permute(2, 0, 1) * 1.0,
    "transpose": lambda a: a.transpose(0, 2),
    "T": lambda a: a.T,
    "expand": lambda a: a[:, :1].expand(4, 3, 5),
    "unsqueeze_squeeze": lambda a: a.unsqueeze(1).squeeze(1).unsqueeze(-1),
    "flatten": lambda a: a.flatten(1),
    "slice": lambda a: a[1:, ::2, -3:],
    "int_index": lambda a: a[1, :, 2],
    "ellipsis_none": lambda a: a[..., None, 1:4],
    "negative_step_free": lambda a: a[-1],
    "split": lambda a: a.split(2, dim=2)[1],
    "chunk": lambda a: a.chunk(2, dim=0)[0],
    "clone": lambda a: a.clone(),
}


@pytest.mark.parametrize("name", VIEWS)
def test_views(name, layout, device):
    check_op([(4, 3, 5)], VIEWS[name], layout=layout, device=device)


def test_tensor_index(device):
    idx = np.array([[2, 0], [1, 1]])
    check_op([(4, 3)], lambda a, i: a[i], inputs=[idx], device=device)


def test_cat_stack(device):
    check_op([(2, 3), (4, 3)], lambda a, b: torch.cat([a, b]) if isinstance(a, torch.Tensor)
             else mytorch.cat([a, b]), device=device)
    check_op([(2, 3), (2, 3)], lambda a, b: torch.stack([a, b], 1) if isinstance(a, torch.Tensor)
             else mytorch.stack([a, b], 1), device=device)


# ---- nn functions ----
def both(t_fn, m_fn):
    return dict(torch_fn=t_fn, mytorch_fn=m_fn)


@pytest.mark.parametrize("dim", [0, -1])
def test_softmax(dim, layout, device):
    check_op([(3, 17)], lambda a: TF.softmax(a, dim), lambda a: F.softmax(a, dim), layout=layout,
             device=device)
    check_op([(3, 17)], lambda a: TF.log_softmax(a, dim), lambda a: F.log_softmax(a, dim),
             layout=layout, device=device)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(reduction, device):
    check_op([(6, 11)], lambda a, y: TF.cross_entropy(a, y, reduction=reduction),
             lambda a, y: F.cross_entropy(a, y, reduction=reduction),
             inputs=[("int", (6,), 0, 11)], device=device)


def test_cross_entropy_ignore_index_and_smoothing(device):
    y = np.array([1, -100, 3, 0, -100])
    check_op([(5, 4)], lambda a, t: TF.cross_entropy(a, t, ignore_index=-100),
             lambda a, t: F.cross_entropy(a, t, ignore_index=-100), inputs=[y], device=device)
    check_op([(5, 4)], lambda a, t: TF.cross_entropy(a, t.clamp(0), label_smoothing=0.1),
             lambda a, t: F.cross_entropy(a, mytorch.tensor(np.clip(t.numpy(), 0, None),
                                                             device=device),
                                          label_smoothing=0.1), inputs=[y], device=device)


def test_mse_loss(device):
    check_op([(4, 5), (4, 5)], TF.mse_loss, F.mse_loss, device=device)


def test_layer_norm_rms_norm(layout, device):
    check_op([(3, 4, 10), (10,), (10,)], lambda x, w, b: TF.layer_norm(x, (10,), w, b),
             lambda x, w, b: F.layer_norm(x, (10,), w, b), layout=layout, device=device,
             rtol=1e-4, atol=1e-5)
    check_op([(3, 4, 10), (10,)], lambda x, w: TF.rms_norm(x, (10,), w, 1e-6),
             lambda x, w: F.rms_norm(x, (10,), w, 1e-6), layout=layout, device=device,
             rtol=1e-4, atol=1e-5)


def test_linear(layout, device):
    check_op([(2, 3, 7), (5, 7), (5,)], TF.linear, F.linear, layout=layout, device=device,
             rtol=1e-4, atol=1e-5)
    check_op([(4, 7), (5, 7)], TF.linear, F.linear, layout=layout, device=device, rtol=1e-4)


@pytest.mark.parametrize("stride,padding,groups", [(1, 0, 1), (2, 1, 1), (1, 1, 2)])
def test_conv2d(stride, padding, groups, device):
    check_op([(2, 4, 9, 7), (6, 4 // groups, 3, 3), (6,)],
             lambda x, w, b: TF.conv2d(x, w, b, stride, padding, 1, groups),
             lambda x, w, b: F.conv2d(x, w, b, stride, padding, 1, groups), device=device,
             rtol=1e-4, atol=1e-4)


def test_pools(device):
    check_op([(2, 3, 9, 8)], lambda x: TF.max_pool2d(x, 2), lambda x: F.max_pool2d(x, 2),
             device=device)
    check_op([(2, 3, 9, 8)], lambda x: TF.max_pool2d(x, 3, 2, 1), lambda x: F.max_pool2d(x, 3, 2, 1),
             device=device)
    check_op([(2, 3, 9, 8)], lambda x: TF.avg_pool2d(x, 2), lambda x: F.avg_pool2d(x, 2),
             device=device)


def test_batch_norm(device):
    rm_t, rv_t = torch.zeros(3, device=device), torch.ones(3, device=device)
    rm_m, rv_m = mytorch.zeros(3, device=device), mytorch.ones(3, device=device)
    check_op([(4, 3, 5, 5), (3,), (3,)],
             lambda x, w, b: TF.batch_norm(x, rm_t, rv_t, w, b, True, 0.1, 1e-5),
             lambda x, w, b: F.batch_norm(x, rm_m, rv_m, w, b, True, 0.1, 1e-5), device=device,
             rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rm_m.data, rm_t)
    torch.testing.assert_close(rv_m.data, rv_t)
    check_op([(4, 3, 5, 5), (3,), (3,)],
             lambda x, w, b: TF.batch_norm(x, rm_t, rv_t, w, b, False, 0.1, 1e-5),
             lambda x, w, b: F.batch_norm(x, rm_m, rv_m, w, b, False, 0.1, 1e-5), device=device,
             rtol=1e-4, atol=1e-4)


def test_embedding(device):
    idx = np.array([[0, 3, 3], [5, 1, 0]])
    check_op([(6, 4)], lambda w, i: TF.embedding(i, w), lambda w, i: F.embedding(i, w),
             inputs=[idx], device=device)


@pytest.mark.parametrize("causal", [False, True])
def test_attention(causal, device):
    # (batch, heads, seq, head_dim) for sdpa; odd sequence lengths
    check_op([(2, 3, 13, 16), (2, 3, 13, 16), (2, 3, 13, 16)],
             lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=causal),
             lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
             device=device, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n_q,n_k", [(5, 13), (13, 5)])
def test_attention_causal_unequal_lengths(n_q, n_k, device):
    """is_causal is top-left aligned, as torch's, when queries and keys differ in length."""
    check_op([(2, 3, n_q, 16), (2, 3, n_k, 16), (2, 3, n_k, 16)],
             lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True),
             lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
             device=device, rtol=1e-4, atol=1e-4)


def test_dropout(device):
    x = mytorch.ones(200, 300, device=device, requires_grad=True)
    y = F.dropout(x, 0.3)
    kept = y.data != 0
    frac = kept.float().mean().item()
    assert abs(frac - 0.7) < 0.01, frac
    torch.testing.assert_close(y.data[kept], torch.full_like(y.data[kept], 1 / 0.7))
    y.backward(mytorch.ones(200, 300, device=device))
    torch.testing.assert_close(x.grad.data, y.data)  # the same mask and scale
    assert F.dropout(x, 0.3, training=False) is x


def test_float64(device):
    check_op([(3, 4), (4,)], lambda a, b: (a * b).tanh().sum(-1), device=device,
             dtype=torch.float64)
