"""The backward engine: accumulation, shared subgraphs, retain_graph, no_grad, errors."""
import numpy as np
import pytest
import torch
from expecttest import assert_expected_inline

import mytorch


def leaf(*shape, seed=0):
    arr = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return mytorch.tensor(arr, requires_grad=True), torch.tensor(arr, requires_grad=True)


def test_diamond_graph_matches_torch():
    (a, ta), (b, tb) = leaf(3, 4), leaf(4, seed=1)
    for x, y, lib in ((a, b, mytorch), (ta, tb, torch)):
        h = x * y
        out = (h.tanh() * h + h.exp() / 3 - x).sum()
        out.backward()
    torch.testing.assert_close(a.grad.data, ta.grad)
    torch.testing.assert_close(b.grad.data, tb.grad)


def test_gradient_accumulates_over_backward_calls():
    a, ta = leaf(5)
    for _ in range(3):
        (a * a).sum().backward()
    torch.testing.assert_close(a.grad.data, 3 * 2 * ta.detach())


def test_retain_graph_and_double_backward_error():
    a, ta = leaf(5)
    out = (a.exp() * 2).sum()
    out.backward(retain_graph=True)
    out.backward()
    torch.testing.assert_close(a.grad.data, 2 * 2 * ta.detach().exp())
    with pytest.raises(RuntimeError) as e:
        out.backward()
    assert_expected_inline(str(e.value), """Trying to backward through the graph a second time (or directly access saved tensors after they have already been freed). Saved intermediate values of the graph are freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or if you need to access saved intermediate values after calling backward.""")


def test_backward_with_gradient_for_non_scalar():
    a, ta = leaf(2, 3)
    g = np.arange(6, dtype=np.float32).reshape(2, 3)
    (a * 3).backward(mytorch.tensor(g))
    torch.testing.assert_close(a.grad.data, torch.tensor(g) * 3)


def test_backward_errors_match_torch():
    a = mytorch.ones(3)
    with pytest.raises(RuntimeError) as e:
        (a * 2).sum().backward()
    assert_expected_inline(str(e.value), """element 0 of tensors does not require grad and does not have a grad_fn""")
    b = mytorch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError) as e:
        (b * 2).backward()
    assert_expected_inline(str(e.value), """grad can be implicitly created only for scalar outputs""")
    with pytest.raises(RuntimeError) as e:
        (b * 2).backward(mytorch.ones(2))
    assert_expected_inline(str(e.value), """Mismatch in shape: grad_output[0] has a shape of torch.Size([2]) and output[0] has a shape of torch.Size([3]).""")


def test_no_grad_records_nothing():
    a = mytorch.ones(3, requires_grad=True)
    with mytorch.no_grad():
        b = a * 2
    assert not b.requires_grad and b.grad_fn is None

    @mytorch.no_grad()
    def f(x):
        return x * 2
    assert not f(a).requires_grad
    assert (a * 2).requires_grad and mytorch.is_grad_enabled()


def test_detach_and_leaf_flags():
    a = mytorch.ones(3, requires_grad=True)
    b = a * 2
    assert a.is_leaf and not b.is_leaf
    d = b.detach()
    assert d.is_leaf and not d.requires_grad and d.data is b.data
    with pytest.raises(RuntimeError, match="only change requires_grad flags of leaf"):
        b.requires_grad_(False)
    with pytest.raises(RuntimeError, match="floating point dtype can require gradients"):
        mytorch.tensor([1, 2], requires_grad=True)


def test_inputs_that_need_no_grad_get_none():
    a = mytorch.ones(3, requires_grad=True)
    c = mytorch.ones(3)
    (a * c).sum().backward()
    assert c.grad is None and a.grad is not None


def test_deep_chain_does_not_recurse():
    a = mytorch.ones(2, requires_grad=True)
    x = a
    for _ in range(5000):
        x = x * 1.0
    x.sum().backward()
    torch.testing.assert_close(a.grad.data, torch.ones(2))


def test_custom_function():
    class Cube(mytorch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.x = x
            return torch.ops.mytorch.mul(torch.ops.mytorch.mul(x, x), x)

        @staticmethod
        def backward(ctx, g):
            return torch.ops.mytorch.mul(g, torch.ops.mytorch.mul(ctx.x, ctx.x)) * 3

    a, ta = leaf(4)
    Cube.apply(a).sum().backward()
    torch.testing.assert_close(a.grad.data, 3 * ta.detach() ** 2)
