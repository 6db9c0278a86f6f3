"""torch.accelerator on the mytorch device: the current accelerator, device indices and
get_device_capability."""
import pytest
import torch

import mytorch_ext  # noqa: F401

D = "mytorch"

DENSE = {torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
         torch.float32, torch.float64, torch.complex32, torch.complex64, torch.complex128,
         torch.bool, torch.bfloat16, torch.float8_e5m2, torch.float8_e4m3fn,
         torch.float8_e5m2fnuz, torch.float8_e4m3fnuz, torch.uint16, torch.uint32, torch.uint64}


def test_current_accelerator():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device(D)
    assert torch.accelerator.device_count() == torch.mytorch.device_count()


@pytest.mark.parametrize("device", ["mytorch:0", "mytorch:1", 0, None, torch.device("mytorch:1")])
def test_get_device_capability(device):
    cap = torch.accelerator.get_device_capability(device)
    assert set(cap) == {"supported_dtypes"}
    assert set(cap["supported_dtypes"]) == DENSE
    assert torch.mytorch.get_device_capability(device) == cap


def test_every_reported_dtype_allocates_and_converts():
    dtypes = torch.accelerator.get_device_capability("mytorch:0")["supported_dtypes"]
    for dt in dtypes:
        x = torch.ones(4, dtype=dt).to(D)
        assert x.dtype == dt and x.device.type == D
        for other in (torch.float32, torch.int64):
            if dt.is_complex and not other.is_complex:
                continue
            torch.testing.assert_close(x.to(other).cpu(), torch.ones(4, dtype=dt).to(other))


def test_quantized_and_subbyte_dtypes_are_not_reported():
    dtypes = torch.accelerator.get_device_capability("mytorch:0")["supported_dtypes"]
    assert not {torch.qint8, torch.quint8, torch.qint32, torch.uint4, torch.int4} & set(dtypes)


def test_bad_index_raises():
    with pytest.raises(RuntimeError, match="mytorch: invalid device index 7"):
        torch.accelerator.get_device_capability("mytorch:7")
