"""flash_attn's CPU forward with a few queries (decode steps, short chunks: seqlen_q <= 16, or
<= 4 in bfloat16 where the AMX kernel runs) goes to the decoding kernel of
flash_attn_with_kvcache over k and v as a filled cache (csrc/kernels/cpu/attention.cpp,
few_queries). Checked here: the result is that kernel's bit for bit, it matches the float64
reference (out and lse), the backward through its lse is right, and the calls it does not
cover (more queries than keys, a mask, ALiBi, dropout, v of another head dim, more queries)
stay on the dense kernel and stay correct."""
import pytest
import torch

import mytorch_ext  # noqa: F401
from helpers import attention_reference

fa = torch.ops.mytorch.flash_attn
kv = torch.ops.mytorch.flash_attn_with_kvcache


def _qkv(nq, nk, hq=8, hk=2, d=64, dtype=torch.float32, b=2, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(b, n, h, d, generator=g).to(dtype).requires_grad_(grad)
            for n, h in ((nq, hq), (nk, hk), (nk, hk))]


def _flash(q, k, v, causal=False, wl=-1, wr=-1, softcap=0.0, mask=None, alibi=None, dropout=0.0):
    return fa(q, k, v, dropout, None, causal, wl, wr, softcap, alibi, None, None, 0, 0, 0, mask, False, None)


CASES = {"plain": {}, "causal": dict(causal=True), "window": dict(wl=5, wr=0), "softcap": dict(softcap=5.0),
         "causal_window_softcap": dict(causal=True, wl=7, softcap=3.0)}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("nq", [1, 3, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_takes_the_decoding_kernel_and_matches_float64(case, nq, dtype):
    kw = CASES[case]
    q, k, v = _qkv(nq, 37, dtype=dtype)
    out, lse = _flash(q, k, v, **kw)
    want, want_lse = kv(q, k, v, None, None, None, None, None, None, None, None, None, kw.get("causal", False),
                        kw.get("wl", -1), kw.get("wr", -1), kw.get("softcap", 0.0), True, None, 0)
    assert torch.equal(out, want) and torch.equal(lse, want_lse)
    ref, ref_lse, pv = attention_reference(q, k, v, 64 ** -0.5, kw.get("causal", False), kw.get("wl", -1),
                                           kw.get("wr", -1), kw.get("softcap", 0.0))
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2e-3}[dtype]
    assert ((out.double() - ref).abs() <= tol * (pv + 1)).all()
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-5, rtol=0)  # lse is float32


def test_bfloat16_decode_step():
    q, k, v = _qkv(1, 300, hq=16, hk=4, d=128, dtype=torch.bfloat16)
    out, lse = _flash(q, k, v, causal=True)
    ref, ref_lse, pv = attention_reference(q, k, v, 128 ** -0.5, True)
    assert ((out.double() - ref).abs() <= 2 ** -8 * (pv + ref.abs()) + 1e-3).all()
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-4, rtol=0)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_through_its_lse(causal):
    q, k, v = _qkv(4, 29, dtype=torch.float64, grad=True)
    out = mytorch_ext.flash_attn(q, k, v, causal=causal)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), g)
    ref = attention_reference(q, k, v, 64 ** -0.5, causal)[0].to(out.dtype)
    assert torch.allclose(out, ref, atol=1e-12)
    # the reference's autograd in float64 (attention_reference's out is differentiable)
    want = torch.autograd.grad(ref, (q, k, v), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)  # P from the float32 lse


UNCOVERED = {
    "more queries than keys": dict(nq=8, nk=5, kw=dict(causal=True)),
    "mask": dict(nq=2, nk=20, kw=dict(mask=torch.rand(2, 1, 2, 20, generator=torch.Generator().manual_seed(2)) > 0.2)),
    "alibi": dict(nq=2, nk=20, kw=dict(alibi=torch.rand(8), causal=True)),
    "17 queries": dict(nq=17, nk=40, kw={}),
}


@pytest.mark.parametrize("name", list(UNCOVERED))
def test_other_calls_stay_dense(name):
    c = UNCOVERED[name]
    q, k, v = _qkv(c["nq"], c["nk"], dtype=torch.float64)
    out, lse = _flash(q, k, v, **c["kw"])
    if name == "mask":
        m = c["kw"]["mask"]
        s = (q.transpose(1, 2) @ k.repeat_interleave(4, 2).permute(0, 2, 3, 1)) * 64 ** -0.5
        want = torch.softmax(s.masked_fill(~m, float("-inf")), -1) @ v.repeat_interleave(4, 2).transpose(1, 2)
        torch.testing.assert_close(out, want.transpose(1, 2))
    elif name == "alibi":
        assert out.isfinite().all()
    else:
        ref, ref_lse, _ = attention_reference(q, k, v, 64 ** -0.5, c["kw"].get("causal", False))
        torch.testing.assert_close(out, ref)
        assert torch.equal(lse.isinf(), ref_lse.isinf())  # rows with no key: lse +inf, as the contract says


def _padding_mask(b, nq, nk, first, last, gap=None):
    m = torch.zeros(b, 1, nq, nk, dtype=torch.bool)
    for i in range(b):
        m[i, ..., first[i]:last[i] + 1] = True
    if gap is not None:
        m[gap[0], ..., gap[1]] = False
    return m


@pytest.mark.parametrize("nq", [1, 5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_padded_batch_mask_takes_the_key_ranges(nq, dtype):
    """A mask that keeps one run of keys per sequence (left and right padding), the same for
    every head and query, runs the decoding kernel with cache_leftpad / cache_seqlens."""
    q, k, v = _qkv(nq, 30, b=3, dtype=dtype)
    first, last = [0, 4, 9], [29, 29, 20]
    m = _padding_mask(3, 1, 30, first, last)
    out, lse = _flash(q, k, v, mask=m)
    lo, hi = torch.tensor(first, dtype=torch.int32), torch.tensor(last, dtype=torch.int32) + 1
    want, want_lse = kv(q, k, v, None, None, None, None, hi, None, lo, None, None, False, -1, -1, 0.0, True, None, 0)
    assert torch.equal(out, want) and torch.equal(lse, want_lse)
    s = (q.double().transpose(1, 2) @ k.double().repeat_interleave(4, 2).permute(0, 2, 3, 1)) * 64 ** -0.5
    ref = torch.softmax(s.masked_fill(~m, float("-inf")), -1) @ v.double().repeat_interleave(4, 2).transpose(1, 2)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out.double(), ref.transpose(1, 2), atol=tol, rtol=tol)
    additive = torch.zeros(m.shape, dtype=dtype).masked_fill(~m, float("-inf"))
    assert torch.equal(_flash(q, k, v, mask=additive)[0], out)  # the same mask as 0 / -inf


@pytest.mark.parametrize("kind", ["gap", "per_head", "other_values", "empty_row"])
def test_other_masks_stay_dense_and_correct(kind):
    q, k, v = _qkv(1, 30, b=2, dtype=torch.float64)
    m = _padding_mask(2, 1, 30, [0, 3], [29, 25], gap=(1, 10) if kind == "gap" else None)
    if kind == "per_head":
        m = m.expand(2, 8, 1, 30).clone()
        m[:, 3, :, 0] = False
    if kind == "empty_row":
        m[0] = False
    mask = m if kind != "other_values" else torch.zeros(m.shape, dtype=torch.float64).masked_fill(~m, -3.0)
    out, lse = _flash(q, k, v, mask=mask)
    s = (q.transpose(1, 2) @ k.repeat_interleave(4, 2).permute(0, 2, 3, 1)) * 64 ** -0.5
    s = s + mask if kind == "other_values" else s.masked_fill(~m, float("-inf"))
    ref = torch.softmax(s, -1) @ v.repeat_interleave(4, 2).transpose(1, 2)
    if kind == "empty_row":  # a row with no key gives 0 (the contract), SDPA's math gives NaN
        ref = torch.nan_to_num(ref, nan=0.0)
    torch.testing.assert_close(out, ref.transpose(1, 2))
