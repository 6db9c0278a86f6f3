"""A decode step under GQA/MQA through patch()'s SDPA route and the Hugging Face attention: one
query per head reaches flash_attn as SDPA gave it, and the CPU kernel's few-queries route
(csrc/kernels/cpu/attention.cpp, few_queries; tests/ops/test_attention_few_queries.py) takes
the query heads of each key head together. Same results as SDPA, with masks, gradients,
dropout and under torch.compile."""
import pytest
import torch
import torch.nn.functional as F
from torch.profiler import profile

import mytorch_ext
from mytorch_ext.patching import hf


def _flash_q_shapes(fn, op="mytorch::flash_attn"):
    with profile(record_shapes=True) as p:
        out = fn()
    return out, [list(e.input_shapes[0]) for e in p.events() if e.name == op]


def _inputs(b=3, hq=8, hk=2, nk=37, d=32, grad=False, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, h, n, d, generator=g, dtype=dtype).requires_grad_(grad)
               for h, n in ((hq, 1), (hk, nk), (hk, nk)))
    masks = {"none": None, "bool": torch.rand(b, 1, 1, nk, generator=g) > 0.3,
             "float": torch.randn(b, 1, 1, nk, generator=g, dtype=dtype), "2d": torch.rand(1, nk, generator=g) > 0.3}
    return q, k, v, masks


@pytest.mark.parametrize("mask", ["none", "bool", "float", "2d"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_decode_equals_sdpa(mask, dtype):
    q, k, v, masks = _inputs(dtype=dtype)
    m = masks[mask]
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                          attn_mask=m if m is None or m.dtype == torch.bool else m.double(),
                                          enable_gqa=True)
    with mytorch_ext.patched(["sdpa"]):
        got, shapes = _flash_q_shapes(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True))
    assert shapes == [[3, 1, 8, 32]]  # (batch, one query, heads, head_dim)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got.double(), want, atol=tol, rtol=tol)


def test_hf_attention_decode_step():
    """The transformers attention function with one query and a bool mask with holes: the
    kvcache op, the mask as its key_mask, q as (batch, one query, heads, head_dim)."""
    q, k, v, masks = _inputs()

    class Attn:
        is_causal = True

    with torch.no_grad():
        (got, _), shapes = _flash_q_shapes(
            lambda: hf.mytorch_attention_forward(Attn(), q, k, v, masks["bool"][..., :37].clone()),
            "mytorch::flash_attn_with_kvcache")
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=masks["bool"], enable_gqa=True).transpose(1, 2)
    torch.testing.assert_close(got, want)
    assert shapes == [[3, 1, 8, 32]], shapes


@pytest.mark.parametrize("case", ["grad", "causal", "dropout", "mask_per_head", "two_queries", "no_gqa"])
def test_other_decode_calls(case):
    q, k, v, masks = _inputs(grad=case == "grad")
    kw = dict(enable_gqa=True)
    if case == "causal":
        kw["is_causal"] = True
    if case == "mask_per_head":
        kw["attn_mask"] = torch.rand(3, 8, 1, 37, generator=torch.Generator().manual_seed(1)) > 0.3
    if case == "two_queries":
        q = torch.cat([q, q], 2)
    if case == "no_gqa":
        k, v = k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)
    if case == "dropout":
        kw["dropout_p"] = 0.5
    with mytorch_ext.patched(["sdpa"]):
        got, shapes = _flash_q_shapes(lambda: F.scaled_dot_product_attention(q, k, v, **kw))
    assert shapes == [[3, q.shape[2], 8, 32]], shapes
    if case != "dropout":
        torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, **kw), atol=1e-5, rtol=1e-5)
    if case == "grad":
        got.sum().backward()
        assert q.grad is not None and k.grad is not None


def test_grouped_decode_under_compile():
    q, k, v, masks = _inputs()
    m = masks["bool"]
    with mytorch_ext.patched(["sdpa"]):
        f = torch.compile(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True),
                          fullgraph=True)
        got = f(q, k, v, m)
    torch.testing.assert_close(got, F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True))
