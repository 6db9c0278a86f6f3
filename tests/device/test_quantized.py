"""Per-tensor quantized tensors (qint8, quint8) on the device: quantize, dequantize,
int_repr, the parameters and copies to and from the CPU equal the CPU's; other schemes and
dtypes raise one error naming the op."""
import pytest
import torch

import mytorch_ext  # noqa: F401
from helpers import no_fallbacks

D = "mytorch"


@pytest.mark.parametrize("dtype", [torch.qint8, torch.quint8])
@pytest.mark.parametrize("scale,zero_point", [(0.05, 3), (0.3, 0), (1e-3, 100)])
def test_quantize_dequantize_match_cpu(dtype, scale, zero_point):
    if dtype == torch.qint8 and zero_point > 127:
        pytest.skip("zero_point out of range for qint8")
    x = torch.randn(5, 7) * 4  # values beyond the range: clamped
    qc = torch.quantize_per_tensor(x, scale, zero_point, dtype)
    with no_fallbacks():
        qd = torch.quantize_per_tensor(x.to(D), scale, zero_point, dtype)
        deq = qd.dequantize()
        rep = qd.int_repr()
    assert qd.device.type == D and qd.is_quantized and qd.dtype == dtype
    assert (qd.q_scale(), qd.q_zero_point(), qd.qscheme()) == (qc.q_scale(), qc.q_zero_point(),
                                                               torch.per_tensor_affine)
    assert rep.dtype == qc.int_repr().dtype and torch.equal(rep.cpu(), qc.int_repr())
    torch.testing.assert_close(deq.cpu(), qc.dequantize(), rtol=0, atol=1e-6)


def test_tensor_qparams_and_views_of_input():
    x = torch.randn(4, 6)
    qc = torch.quantize_per_tensor(x.t(), torch.tensor(0.1), torch.tensor(2), torch.quint8)
    qd = torch.quantize_per_tensor(x.to(D).t(), torch.tensor(0.1), torch.tensor(2), torch.quint8)
    assert torch.equal(qd.int_repr().cpu(), qc.int_repr())


@pytest.mark.parametrize("dtype", [torch.qint8, torch.quint8])
def test_copies_between_cpu_and_device(dtype):
    qc = torch.quantize_per_tensor(torch.randn(3, 4), 0.02, 5, dtype)
    up = qc.to(D)
    assert up.device.type == D and up.dtype == dtype and up.q_scale() == 0.02
    assert torch.equal(up.int_repr().cpu(), qc.int_repr())
    back = up.cpu()
    assert back.device.type == "cpu" and back.q_zero_point() == 5
    assert torch.equal(back.int_repr(), qc.int_repr())
    assert torch.equal(back.dequantize(), qc.dequantize())


def test_empty_and_repr():
    e = torch.empty(3, dtype=torch.qint8, device=D)
    assert e.is_quantized and e.q_scale() == 1.0 and e.q_zero_point() == 0
    q = torch.quantize_per_tensor(torch.tensor([0.5, -0.25]).to(D), 0.25, 0, torch.qint8)
    text = repr(q)
    assert "device='mytorch:0'" in text and "scale=0.25" in text and "qint8" in text


def test_unsupported_schemes_and_dtypes_raise_one_clear_error():
    x = torch.randn(2, 3, device=D)
    with pytest.raises(RuntimeError, match=r"mytorch::quantize_per_tensor: the mytorch device "
                                           r"supports per-tensor quantized qint8 and quint8 "
                                           r"tensors, got QInt32"):
        torch.quantize_per_tensor(x, 0.1, 0, torch.qint32)
    with pytest.raises(RuntimeError, match=r"mytorch::quantize_per_channel: per-channel "
                                           r"quantization is not supported on the mytorch device"):
        torch.quantize_per_channel(x, torch.tensor([0.1, 0.2]), torch.tensor([0, 0]), 0, torch.qint8)
    with pytest.raises(RuntimeError, match=r"mytorch::quantize_per_tensor_dynamic: dynamic "
                                           r"quantization is not supported"):
        torch.quantize_per_tensor_dynamic(x, torch.quint8, False)
    with pytest.raises(RuntimeError, match=r"mytorch::quantize_per_tensor: expected a float32 "
                                           r"tensor, got Double"):
        torch.quantize_per_tensor(x.double(), 0.1, 0, torch.qint8)
    with pytest.raises(RuntimeError, match=r"mytorch::quantize_per_tensor: zero_point 300 is out "
                                           r"of range for QUInt8"):
        torch.quantize_per_tensor(x, 0.1, 300, torch.quint8)
    with pytest.raises(RuntimeError, match=r"mytorch::_empty_affine_quantized: expected a "
                                           r"positive finite scale"):
        torch.quantize_per_tensor(x, 0.0, 0, torch.qint8)


def test_ops_without_quantized_kernels_name_the_op():
    q = torch.quantize_per_tensor(torch.randn(3).to(D), 0.1, 0, torch.qint8)
    with pytest.raises(NotImplementedError, match=r"aten::add"):
        q + q
