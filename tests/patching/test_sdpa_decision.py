"""One decision for F.scaled_dot_product_attention: patch()'s route (CPU tensors) and the
mytorch device's SDPA backend (torch._fused_sdp_choice on device tensors) send the same calls
to mytorch's flash attention and leave the same ones to PyTorch's SDPA, as
_C._attention.sdpa_supported says (csrc/kernels/attention_sdpa.h)."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

import mytorch_ext
from mytorch_ext import _C

HAS_DEVICE = hasattr(torch, "mytorch")


def _t(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def _qkv(b=2, hq=4, hk=4, n=8, s=8, d=16, dv=None, dtype=torch.float32):
    return _t(b, hq, n, d, dtype=dtype), _t(b, hk, s, d, dtype=dtype), _t(b, hk, s, dv or d, dtype=dtype)


def _strided(b=2, h=4, n=8, d=16):
    """(b, h, n, d) with a non-contiguous last dim"""
    return _t(b, h, d, n).transpose(-1, -2)


def _case(q, k, v, mask=None, dropout_p=0.0, is_causal=False, enable_gqa=False):
    return (q, k, v), dict(attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, enable_gqa=enable_gqa)


_BOOL = torch.rand(8, 8) > 0.3
# name: (the call, whether mytorch's kernel takes it)
CASES = {
    "float32": (_case(*_qkv()), True),
    "float64": (_case(*_qkv(dtype=torch.float64)), True),
    "bfloat16": (_case(*_qkv(dtype=torch.bfloat16)), True),
    "float16": (_case(*_qkv(dtype=torch.float16)), True),
    "mixed_dtypes": (_case(_t(2, 4, 8, 16), *_qkv(dtype=torch.float64)[1:]), False),
    "three_dims": (_case(*(x[0] for x in _qkv())), False),
    "head_dim_256": (_case(*_qkv(d=256)), True),
    "head_dim_264": (_case(*_qkv(d=264)), False),
    "head_dim_1": (_case(*_qkv(d=1)), True),
    "head_dim_of_k_differs": (_case(_t(2, 4, 8, 16), _t(2, 4, 8, 24), _t(2, 4, 8, 24)), False),
    "head_dim_of_v_differs": (_case(*_qkv(d=12, dv=20)), True),
    "gqa": (_case(*_qkv(hq=4, hk=2), enable_gqa=True), True),
    "gqa_not_enabled": (_case(*_qkv(hq=4, hk=2)), False),
    "gqa_heads_do_not_divide": (_case(*_qkv(hq=4, hk=3), enable_gqa=True), False),
    "batch_differs": (_case(_t(2, 4, 8, 16), _t(3, 4, 8, 16), _t(3, 4, 8, 16)), False),
    "no_queries": (_case(*_qkv(n=0)), False),
    "no_keys": (_case(*_qkv(s=0)), False),
    "strided_last_dim": (_case(_strided(), _strided(), _strided()), True),
    "causal_fewer_queries": (_case(*_qkv(n=5, s=9), is_causal=True), True),
    "causal_more_queries": (_case(*_qkv(n=9, s=5), is_causal=True), True),
    "bool_mask": (_case(*_qkv(), mask=_BOOL), True),
    "float_mask_4d": (_case(*_qkv(), mask=_t(2, 1, 8, 8)), True),
    "float32_mask_bfloat16": (_case(*_qkv(dtype=torch.bfloat16), mask=_t(8, 8)), True),
    "float64_mask_float32": (_case(*_qkv(), mask=_t(8, 8, dtype=torch.float64)), False),
    "mask_5d": (_case(*_qkv(), mask=_t(1, 2, 1, 8, 8)), False),
    "mask_not_broadcastable": (_case(*_qkv(), mask=_t(9, 8)), False),
    "mask_and_causal": (_case(*_qkv(), mask=_BOOL, is_causal=True), False),
    "dropout": (_case(*_qkv(), dropout_p=0.3), True),
    "dropout_one": (_case(*_qkv(), dropout_p=1.0), False),
}


def _routed(args, kw):
    """Whether patch()'s route sent F.scaled_dot_product_attention to mytorch's kernel."""
    with mytorch_ext.patched(("sdpa",)):
        mytorch_ext.patch_stats(reset=True)
        try:
            F.scaled_dot_product_attention(*args, **kw)
        except RuntimeError:  # an invalid call: ATen's composite, which raises, ran
            pass
        stats = mytorch_ext.patch_stats().get("sdpa", {"mytorch": 0, "fallthrough": 0})
    assert stats["mytorch"] + stats["fallthrough"] == 1, stats
    return stats["mytorch"] == 1


def _device_takes(args, kw, mask_grad=False):
    """Whether the mytorch device's SDPA backend (the overrideable one) takes the call."""
    q, k, v = (x.to("mytorch") for x in args)
    mask = kw["attn_mask"]
    if mask is not None:
        mask = mask.to("mytorch").requires_grad_(mask_grad)
    choice = torch._fused_sdp_choice(q, k, v, attn_mask=mask, dropout_p=kw["dropout_p"],
                                     is_causal=kw["is_causal"], enable_gqa=kw["enable_gqa"])
    return choice == int(SDPBackend.OVERRIDEABLE)


def _decision(args, kw, mask_grad=False):
    return _C._attention.sdpa_supported(*args, kw["attn_mask"], kw["dropout_p"], kw["is_causal"],
                                        kw["enable_gqa"], mask_grad)


@pytest.mark.parametrize("name", list(CASES))
def test_patch_and_device_take_the_same_calls(name):
    (args, kw), expected = CASES[name]
    assert _decision(args, kw) == expected
    assert _routed(args, kw) == expected
    if HAS_DEVICE:
        assert _device_takes(args, kw) == expected


def test_a_mask_that_needs_a_gradient():
    """flash_attn gives attn_mask no gradient, so patch()'s route leaves such calls to ATen;
    the device's backend computes that gradient itself, so it takes them."""
    args, kw = _case(*_qkv(), mask=_t(8, 8).requires_grad_())
    assert not _decision(args, kw) and _decision(args, kw, mask_grad=True)
    assert not _routed(args, kw)
    if HAS_DEVICE:
        assert _device_takes(args, kw, mask_grad=True)
