"""torch._utils.set_tensor_metadata / get_tensor_metadata on device tensors: the keys are
kept on the tensor (BackendMeta) and survive torch.save / torch.load."""
import io

import torch
from torch._utils import get_tensor_metadata, set_tensor_metadata

import mytorch_ext  # noqa: F401

D = "mytorch"


def test_set_get():
    x = torch.randn(3, device=D)
    assert get_tensor_metadata(x) == {}
    set_tensor_metadata(x, {"channels_last_hint": True, "checked": False})
    assert get_tensor_metadata(x) == {"channels_last_hint": True, "checked": False}
    set_tensor_metadata(x, {"other": True})  # set replaces
    assert get_tensor_metadata(x) == {"other": True}


def test_conj_neg_bits_stay_torch_keys():
    x = torch.randn(3, dtype=torch.complex64).to(D).conj()
    md = get_tensor_metadata(x)
    assert md.get("conj") is True
    set_tensor_metadata(x, {"conj": True, "mine": True})
    md = get_tensor_metadata(x)
    assert md["conj"] is True and md["mine"] is True


def test_survives_save_and_load():
    x = torch.arange(4.0, device=D)
    set_tensor_metadata(x, {"version_1": True})
    buf = io.BytesIO()
    torch.save(x, buf)
    buf.seek(0)
    y = torch.load(buf)
    assert y.device.type == D and torch.equal(y.cpu(), x.cpu())
    assert get_tensor_metadata(y) == {"version_1": True}


def test_cpu_tensors_unchanged():
    x = torch.randn(2)
    set_tensor_metadata(x, {"k": True})
    assert get_tensor_metadata(x) == {}
