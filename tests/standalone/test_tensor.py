"""Tensor attributes, conversions, repr, and the errors users hit first."""
import numpy as np
import pytest
import torch
from expecttest import assert_expected_inline

import mytorch


def test_attributes_and_conversions():
    t = mytorch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert t.shape == (2, 3) and t.dtype == mytorch.float32 and t.device == "cpu"
    assert t.ndim == 2 and t.numel() == 6 and len(t) == 2 and t.size(1) == 3
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert isinstance(t.numpy(), np.ndarray) and t.numpy().sum() == 21
    assert t[1, 2].item() == 6.0
    assert t.to(mytorch.float64).dtype == torch.float64
    assert not t.requires_grad and t.grad is None
    u = mytorch.tensor(np.arange(4))
    assert u.dtype == mytorch.int64
    assert mytorch.zeros(2, 3).shape == (2, 3) and mytorch.ones((4,)).tolist() == [1, 1, 1, 1]
    assert mytorch.arange(5).tolist() == [0, 1, 2, 3, 4]


def test_views_share_storage():
    t = mytorch.zeros(4, 6)
    v = t[1:3, ::2]
    v[:] = 1.0  # write through the view
    assert t.sum().item() == 6.0
    assert t.T.shape == (6, 4) and t.reshape(2, 12).data.data_ptr() == t.data.data_ptr()


def test_repr():
    mytorch.manual_seed(0)
    t = mytorch.tensor([[1.0, -2.5], [3.25, 4.0]], requires_grad=True)
    assert_expected_inline(repr(t), """\
tensor([[ 1.0000, -2.5000],
        [ 3.2500,  4.0000]], requires_grad=True)""")
    assert_expected_inline(repr(t * 2), """\
tensor([[ 2.0000, -5.0000],
        [ 6.5000,  8.0000]], grad_fn=<MulBackward>)""")
    assert_expected_inline(repr(mytorch.arange(3)), """tensor([0, 1, 2])""")
    assert_expected_inline(repr(mytorch.tensor([1.5], dtype=mytorch.float64)), """tensor([1.5000], dtype=float64)""")


def test_errors_shape_mismatch():
    a, b = mytorch.ones(2, 3), mytorch.ones(4)
    with pytest.raises(RuntimeError) as e:
        a + b
    assert "(2, 3)" in str(e.value).replace("[", "(").replace("]", ")") or "2, 3" in str(e.value)
    assert "add" in str(e.value)
    with pytest.raises(RuntimeError) as e:
        a @ b
    assert_expected_inline(str(e.value), """matmul: shapes (2, 3) and (4,) cannot be multiplied (3 != 4)""")


def test_errors_dtype_and_item():
    a = mytorch.ones(2, 3)
    with pytest.raises(RuntimeError) as e:
        a @ mytorch.ones(3, 2, dtype=mytorch.float64)
    assert_expected_inline(str(e.value), """matmul: expected both operands to have the same dtype, got torch.float32 and torch.float64 (shapes (2, 3) and (3, 2))""")
    with pytest.raises(RuntimeError) as e:
        a.item()
    assert_expected_inline(str(e.value), """a Tensor with 6 elements cannot be converted to Scalar""")
    with pytest.raises(RuntimeError) as e:
        mytorch.ones(2, requires_grad=True).numpy()
    assert_expected_inline(str(e.value), """Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.""")
