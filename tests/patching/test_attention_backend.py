"""set_attention_backend(): which kernel serves plain attention calls on CUDA (PyTorch's SDPA
where its cuDNN backend is faster and the call is large, mytorch's flash_attn elsewhere). CPU
calls and calls with a mask or dropout always run mytorch's kernel."""
import pytest
import torch
import torch.nn.functional as F

import mytorch_ext
from mytorch_ext.patching import aten


@pytest.fixture(autouse=True)
def _restore_backend():
    yield
    mytorch_ext.set_attention_backend("auto")


def _route_of(q, **kw):
    mytorch_ext.patch(["sdpa"])
    mytorch_ext.patch_stats(reset=True)
    F.scaled_dot_product_attention(q, q, q, **kw)
    stats = mytorch_ext.patch_stats()["sdpa"]
    mytorch_ext.unpatch()
    return "mytorch" if stats["mytorch"] else "fallthrough"


def test_bad_mode_names_the_choices():
    with pytest.raises(ValueError, match=r"set_attention_backend: expected one of \('auto', 'mytorch', 'sdpa'\), got 'cudnn'"):
        mytorch_ext.set_attention_backend("cudnn")
    assert aten.attention_backend() == "auto"


def test_cpu_calls_stay_on_the_cpu_kernel():
    q = torch.randn(1, 2, 16, 32)
    for mode in aten.ATTENTION_BACKENDS:
        mytorch_ext.set_attention_backend(mode)
        assert _route_of(q, is_causal=True) == "mytorch", mode


@pytest.mark.gpu
def test_cuda_policy():
    q = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.bfloat16)
    mytorch_ext.set_attention_backend("mytorch")
    assert _route_of(q, is_causal=True) == "mytorch"
    mytorch_ext.set_attention_backend("sdpa")
    assert _route_of(q, is_causal=True) == "fallthrough"
    mask = torch.ones(64, 64, dtype=torch.bool, device="cuda").tril()
    assert _route_of(q, attn_mask=mask) == "mytorch"  # masks stay on mytorch's kernel
    mytorch_ext.set_attention_backend("auto")
    hopper = torch.cuda.get_device_capability()[0] == 9 and torch.backends.cuda.cudnn_sdp_enabled()
    # "auto": a small call stays on mytorch's kernel (its host time is the shorter); one with
    # AUTO_SDPA_MIN_WORK of work goes to cuDNN's SDPA on Hopper, where its kernel is faster
    assert _route_of(q, is_causal=True) == "mytorch"
    big = torch.randn(1, 8, 4096, 128, device="cuda", dtype=torch.bfloat16)
    assert 8 * 4096 * 4096 * 128 == aten.AUTO_SDPA_MIN_WORK
    assert _route_of(big) == ("fallthrough" if hopper else "mytorch")
    assert _route_of(big, is_causal=True) == "mytorch"  # causal: half the work
    mytorch_ext.set_attention_backend("sdpa")
    assert _route_of(big, is_causal=True) == "fallthrough"  # every plain call, whatever its size
