"""mytorch::flash_attn on the CPU: parity with a float64 reference and with ATen's SDPA
for every option, gradcheck, opcheck, dropout, bad input."""
import math

import pytest
import torch
import torch.nn.functional as F
from expecttest import TestCase

import mytorch_ext  # noqa: F401
from mytorch_ext.ops.attention import check_inputs

fa = torch.ops.mytorch.flash_attn
fa_bwd = torch.ops.mytorch.flash_attn_backward


def visible(Nq, Nk, causal=False, window=(-1, -1)):
    """(Nq, Nk) bool: key j visible from query i, bottom-right aligned (flash-attn)."""
    i, j, off = torch.arange(Nq)[:, None], torch.arange(Nk)[None], Nk - Nq
    wl, wr = window
    if causal:
        wr = 0 if wr < 0 else min(wr, 0)
    vis = torch.ones(Nq, Nk, dtype=torch.bool)
    if wl >= 0:
        vis &= j >= i + off - wl
    if wr >= 0:
        vis &= j <= i + off + wr
    return vis


def reference(q, k, v, *, causal=False, window=(-1, -1), softcap=0.0, alibi=None, mask=None,
              scale=None):
    """float64 math over (batch, seqlen, heads, head_dim); flash-attn semantics
    (bottom-right causal/windows, empty rows give 0). Returns out, lse."""
    B, Nq, Hq, D = q.shape
    Nk, Hk = k.shape[1], k.shape[2]
    scale = D ** -0.5 if scale is None else scale
    qq = q.double().transpose(1, 2)
    kk = k.double().transpose(1, 2).repeat_interleave(Hq // Hk, 1)
    vv = v.double().transpose(1, 2).repeat_interleave(Hq // Hk, 1)
    s = qq @ kk.transpose(-1, -2) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(Nq)[:, None]
    j = torch.arange(Nk)[None]
    off = Nk - Nq
    if alibi is not None:
        s = s - alibi.double().reshape(-1, Hq, 1, 1) * (i + off - j).abs()
    if mask is not None:
        s = s + (torch.where(mask, 0.0, -math.inf) if mask.dtype == torch.bool else mask.double())
    s = s.masked_fill(~visible(Nq, Nk, causal, window), -math.inf)
    empty = (s == -math.inf).all(-1, keepdim=True)  # rows that see no key
    s = s.masked_fill(empty, 0.0)
    p = torch.softmax(s, -1).masked_fill(empty, 0.0)
    lse = torch.logsumexp(s, -1).masked_fill(empty[..., 0], -math.inf)
    return (p @ vv).transpose(1, 2), lse


def head_dims(D):
    """D is one head_dim, or (head_dim of q and k, head_dim of v)."""
    return D if isinstance(D, tuple) else (D, D)


def qkv(B, Nq, Nk, Hq, Hk, D, dtype=torch.float32, requires_grad=False):
    D, Dv = head_dims(D)
    t = [torch.randn(B, n, h, d, dtype=dtype) for n, h, d in ((Nq, Hq, D), (Nk, Hk, D), (Nk, Hk, Dv))]
    return [x.requires_grad_(requires_grad) for x in t]


def run(q, k, v, grad=None, **kw):
    """Forward through the op (autograd of mytorch::flash_attn) and optional backward."""
    out, lse = fa(q, k, v, kw.get("dropout_p", 0.0), kw.get("scale"), kw.get("causal", False),
                  *kw.get("window", (-1, -1)), kw.get("softcap", 0.0), kw.get("alibi"), None, None,
                  0, 0, kw.get("seed", 0), kw.get("mask"), False)
    grads = None
    if grad is not None:
        grads = torch.autograd.grad(out, (q, k, v), grad)
    return out, lse, grads


def check(out, ref, rtol, atol):
    torch.testing.assert_close(out.double(), ref.double(), rtol=rtol, atol=atol)


# (B, Nq, Nk, Hq, Hk, D, options)
CASES = [
    (1, 1, 1, 1, 1, 8, {}),
    (2, 17, 17, 4, 4, 64, {}),
    (2, 17, 17, 4, 2, 64, {"causal": True}),
    (1, 255, 255, 2, 1, 32, {"causal": True}),
    (1, 1000, 1000, 2, 2, 64, {}),
    (1, 1000, 1000, 2, 2, 64, {"causal": True}),
    (2, 100, 37, 3, 1, 128, {"causal": True}),   # more queries than keys: empty rows
    (1, 37, 255, 2, 2, 256, {"causal": True}),   # more keys than queries
    (1, 255, 255, 4, 2, 40, {"window": (31, 7)}),
    (1, 255, 200, 2, 2, 64, {"window": (16, -1), "causal": True}),
    (1, 300, 300, 2, 2, 24, {"window": (-1, 0)}),
    (2, 17, 255, 2, 1, 64, {"softcap": 5.0, "causal": True}),
    (2, 255, 255, 4, 2, 64, {"alibi": "heads"}),
    (2, 100, 130, 2, 2, 64, {"alibi": "batch_heads", "causal": True}),
    (2, 17, 17, 2, 2, 64, {"scale": 0.3, "softcap": 2.0, "window": (3, 4)}),
    (2, 70, 90, 2, 2, 64, {"mask": "bool"}),
    (1, 130, 67, 4, 2, 32, {"mask": "float"}),
    # head_dims that are not multiples of 8 or of the SIMD width; v's head_dim != q's
    (2, 17, 23, 3, 1, 1, {}),
    (1, 70, 90, 2, 2, 13, {"causal": True}),
    (1, 130, 67, 4, 2, 33, {"window": (9, 5), "softcap": 4.0}),
    (1, 65, 65, 1, 1, 255, {"causal": True}),
    (2, 40, 50, 2, 1, (12, 20), {"alibi": "heads"}),
    (1, 77, 70, 2, 2, (40, 7), {"mask": "bool"}),
]


def make_options(opts, B, Nq, Nk, Hq, dtype):
    kw = dict(opts)
    if kw.get("alibi") == "heads":
        kw["alibi"] = torch.rand(Hq)
    elif kw.get("alibi") == "batch_heads":
        kw["alibi"] = torch.rand(B, Hq)
    if kw.get("mask") == "bool":
        m = torch.rand(B, 1, Nq, Nk) > 0.3
        m[0, 0, 3] = False  # a row that attends to nothing
        kw["mask"] = m
    elif kw.get("mask") == "float":
        kw["mask"] = torch.randn(1, Hq, Nq, Nk)
    return kw


def ref_of(q, k, v, kw):
    return reference(q, k, v, causal=kw.get("causal", False), window=kw.get("window", (-1, -1)),
                     softcap=kw.get("softcap", 0.0), alibi=kw.get("alibi"), mask=kw.get("mask"),
                     scale=kw.get("scale"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[:6]}-{'-'.join(c[6])}")
def test_matches_reference_fp32(case):
    B, Nq, Nk, Hq, Hk, D, opts = case
    q, k, v = qkv(B, Nq, Nk, Hq, Hk, D, requires_grad=True)
    kw = make_options(opts, B, Nq, Nk, Hq, torch.float32)
    g = torch.randn(B, Nq, Hq, head_dims(D)[1])
    out, lse, grads = run(q, k, v, grad=g, **kw)

    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref, ref_lse = ref_of(qd, kd, vd, kw)
    ref_grads = torch.autograd.grad(ref, (qd, kd, vd), g.double())
    check(out, ref, 2e-5, 2e-5)
    finite = ref_lse.isfinite()
    check(lse[finite], ref_lse[finite], 2e-5, 2e-5)
    assert torch.isposinf(lse[~finite]).all()  # rows that see no key: lse = +inf, out = 0
    for name, a, r in zip("qkv", grads, ref_grads):
        check(a, r, 1e-4, 1e-4)


def test_matches_aten_sdpa_cpu():
    """Against ATen's own CPU SDPA (fp32), (batch, heads, seqlen, head_dim) layout."""
    for N in (1, 17, 255, 1000):
        for causal in (False, True):
            for hk in (4, 2):
                q = torch.randn(2, 4, N, 64, requires_grad=True)
                k = torch.randn(2, hk, N, 64, requires_grad=True)
                v = torch.randn(2, hk, N, 64, requires_grad=True)
                ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hk != 4)
                out, _ = fa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal)
                out = out.transpose(1, 2)
                torch.testing.assert_close(out, ref, rtol=2e-5, atol=2e-5)
                g = torch.randn_like(ref)
                rg = torch.autograd.grad(ref, (q, k, v), g)
                mg = torch.autograd.grad(out, (q, k, v), g)
                for a, r in zip(mg, rg):
                    torch.testing.assert_close(a, r, rtol=1e-4, atol=1e-4)


def aten_sdpa(q, k, v, causal=False, window=(-1, -1)):
    """ATen's CPU SDPA on (batch, seqlen, heads, head_dim) tensors, bottom-right masks."""
    qb, kb, vb = (t.transpose(1, 2) for t in (q, k, v))
    mask = visible(q.shape[1], k.shape[1], causal, window)
    out = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, enable_gqa=True)
    return out.transpose(1, 2)


# (B, Nq, Nk, Hq, Hk, D or (D, Dv), options); every query sees at least one key
ODD_SDPA = [
    (2, 33, 47, 2, 2, 1, {}),
    (1, 65, 65, 2, 1, 3, {"causal": True}),
    (2, 17, 100, 4, 2, 12, {"causal": True}),
    (1, 130, 70, 2, 2, 33, {}),
    (1, 9, 200, 1, 1, 100, {"window": (20, 3)}),
    (1, 70, 66, 2, 2, 255, {}),
    (2, 50, 77, 2, 1, (12, 20), {}),
    (1, 64, 64, 2, 2, (40, 7), {"causal": True}),
]


@pytest.mark.parametrize("case", ODD_SDPA, ids=lambda c: f"{c[:6]}-{'-'.join(c[6])}")
def test_odd_head_dims_match_aten_sdpa_cpu(case):
    """Any head_dim in [1, 256] (v's may differ), unequal q/k lengths: out and grads as ATen's."""
    B, Nq, Nk, Hq, Hk, D, opts = case
    q, k, v = qkv(B, Nq, Nk, Hq, Hk, D, requires_grad=True)
    ref = aten_sdpa(q, k, v, **opts)
    out, _, _ = run(q, k, v, **opts)
    torch.testing.assert_close(out, ref, rtol=2e-5, atol=2e-5)
    g = torch.randn_like(ref)
    for a, r in zip(torch.autograd.grad(out, (q, k, v), g), torch.autograd.grad(ref, (q, k, v), g)):
        torch.testing.assert_close(a, r, rtol=1e-4, atol=1e-4)


# float64: the saved lse is float32, so the backward's recomputed P (and the gradients)
# agree to about 1e-7
@pytest.mark.parametrize("dtype,tol,grad_tol", [(torch.float64, 1e-10, 1e-6), (torch.bfloat16, 2e-2, 8e-2)])
def test_odd_head_dim_dtypes_match_aten_sdpa_cpu(dtype, tol, grad_tol):
    q, k, v = qkv(2, 29, 41, 4, 2, 13, dtype=dtype, requires_grad=True)
    ref = aten_sdpa(q, k, v, causal=True)
    out, _, _ = run(q, k, v, causal=True)
    assert out.dtype == dtype
    torch.testing.assert_close(out, ref, rtol=tol, atol=tol)
    g = torch.randn_like(ref)
    for a, r in zip(torch.autograd.grad(out, (q, k, v), g), torch.autograd.grad(ref, (q, k, v), g)):
        torch.testing.assert_close(a, r, rtol=grad_tol, atol=grad_tol)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precisions_compute_in_fp32(dtype):
    q, k, v = qkv(2, 77, 90, 4, 2, 64, dtype=dtype, requires_grad=True)
    g = torch.randn(2, 77, 4, 64, dtype=dtype)
    out, lse, grads = run(q, k, v, grad=g, causal=True)
    assert out.dtype == dtype and lse.dtype == torch.float32
    assert all(x.dtype == dtype for x in grads)
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref, ref_lse = reference(qd, kd, vd, causal=True)
    rg = torch.autograd.grad(ref, (qd, kd, vd), g.double())
    tol = 1e-2 if dtype == torch.bfloat16 else 2e-3
    check(out, ref, tol, tol)
    check(lse, ref_lse, 1e-5, 1e-5)  # lse is computed from the exact half inputs in fp32
    for a, r in zip(grads, rg):
        check(a, r, 4 * tol, 4 * tol)


def test_any_strides_with_contiguous_last_dim():
    base = torch.randn(2, 4, 3 * 67, 64)  # (B, H, N, D) storage, every other token
    q = base[:, :, ::3].transpose(1, 2)
    k = torch.randn(2, 90, 2, 128)[..., :64]
    v = torch.randn(2, 2, 90, 64).transpose(1, 2)
    for t in (q, k, v):
        assert not t.is_contiguous()
    out, lse = fa(q, k, v, causal=True)
    ref, ref_lse = reference(q, k, v, causal=True)
    check(out, ref, 2e-5, 2e-5)
    g = torch.randn(2, 67, 4, 64).transpose(1, 2).contiguous().transpose(1, 2)
    dq, dk, dv = fa_bwd(g, q, k, v, out, lse, 0.0, 64 ** -0.5, True, -1, -1, 0.0, None, None, None,
                        0, 0, 0, False)
    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    rg = torch.autograd.grad(reference(qd, kd, vd, causal=True)[0], (qd, kd, vd), g.double())
    for a, r in zip((dq, dk, dv), rg):
        check(a, r, 1e-4, 1e-4)


@pytest.mark.parametrize("opts", [{}, {"causal": True}, {"window": (5, 3), "softcap": 3.0}])
def test_varlen_matches_per_sequence(opts):
    lens_q, lens_k = [17, 1, 0, 64, 100], [17, 30, 5, 64, 80]
    cu_q = torch.tensor([0] + lens_q).cumsum(0).int()
    cu_k = torch.tensor([0] + lens_k).cumsum(0).int()
    H, Hk, D = 4, 2, 32
    q = torch.randn(int(cu_q[-1]), H, D, requires_grad=True)
    k = torch.randn(int(cu_k[-1]), Hk, D, requires_grad=True)
    v = torch.randn(int(cu_k[-1]), Hk, D, requires_grad=True)
    out, lse = fa(q, k, v, 0.0, None, opts.get("causal", False), *opts.get("window", (-1, -1)),
                  opts.get("softcap", 0.0), None, cu_q, cu_k, max(lens_q), max(lens_k))
    assert lse.shape == (H, q.shape[0])
    g = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), g)
    for b in range(len(lens_q)):
        sq, sk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        qb, kb, vb = (t.detach()[s][None].double().requires_grad_() for t, s in ((q, sq), (k, sk), (v, sk)))
        ref, ref_lse = reference(qb, kb, vb, causal=opts.get("causal", False),
                                 window=opts.get("window", (-1, -1)), softcap=opts.get("softcap", 0.0))
        check(out[sq], ref[0], 2e-5, 2e-5)
        fin = ref_lse[0].isfinite()
        check(lse[:, sq][fin], ref_lse[0][fin], 2e-5, 2e-5)
        if qb.numel() and kb.numel():
            rg = torch.autograd.grad(ref, (qb, kb, vb), g[sq][None].double())
            for a, r, s in zip(grads, rg, (sq, sk, sk)):
                check(a[s], r[0], 1e-4, 1e-4)


def test_dropout_keeps_and_rescales_probabilities():
    """With v = identity (seqlen_k = head_dim), out is the dropped-out P itself."""
    p, N = 0.3, 64
    q, k = torch.randn(2, N, 3, N), torch.randn(2, N, 3, N)
    v = torch.eye(N).expand(2, 3, N, N).transpose(1, 2).contiguous()
    out, _ = fa(q, k, v, p, None, False, -1, -1, 0.0, None, None, None, 0, 0, 1234)
    probs, _ = reference(q, k, v)
    kept = out != 0
    check(out[kept], probs[kept] / (1 - p), 1e-5, 1e-6)
    frac = 1 - kept.double().mean().item()
    assert abs(frac - p) < 0.02, frac
    again, _ = fa(q, k, v, p, None, False, -1, -1, 0.0, None, None, None, 0, 0, 1234)
    assert torch.equal(again, out)
    other, _ = fa(q, k, v, p, None, False, -1, -1, 0.0, None, None, None, 0, 0, 1235)
    assert not torch.equal(other != 0, kept)


GRADCHECK = [
    (2, 5, 7, 2, 1, 8, {}),
    (1, 9, 6, 2, 2, 16, {"causal": True}),
    (1, 7, 9, 2, 1, 8, {"window": (2, 1), "softcap": 1.5}),
    (2, 6, 6, 2, 2, 8, {"alibi": "heads", "causal": True}),
    (1, 8, 8, 2, 2, 8, {"dropout_p": 0.25, "seed": 7}),
    (1, 6, 5, 2, 2, 8, {"mask": "float", "scale": 0.7}),
    (1, 5, 7, 2, 1, (5, 3), {"causal": True}),
    (2, 4, 6, 1, 1, 1, {"window": (1, 1), "softcap": 2.0}),
]


@pytest.mark.parametrize("case", GRADCHECK, ids=lambda c: "-".join(c[6]) or "plain")
def test_gradcheck_float64(case):
    B, Nq, Nk, Hq, Hk, D, opts = case
    q, k, v = qkv(B, Nq, Nk, Hq, Hk, D, dtype=torch.float64, requires_grad=True)
    kw = make_options(opts, B, Nq, Nk, Hq, torch.float64)
    assert torch.autograd.gradcheck(lambda a, b, c: run(a, b, c, **kw)[0], (q, k, v))


def test_gradcheck_varlen_float64():
    cu_q = torch.tensor([0, 3, 3, 8], dtype=torch.int32)
    cu_k = torch.tensor([0, 4, 6, 11], dtype=torch.int32)
    q = torch.randn(8, 2, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(11, 1, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(11, 1, 8, dtype=torch.float64, requires_grad=True)

    def f(a, b, c):
        return fa(a, b, c, 0.0, None, True, -1, -1, 0.0, None, cu_q, cu_k, 5, 5)[0]

    assert torch.autograd.gradcheck(f, (q, k, v))


@pytest.mark.parametrize("dtype,D", [(torch.float32, (12, 5)), (torch.bfloat16, 16), (torch.float16, 16)])
def test_opcheck(dtype, D):
    q, k, v = qkv(2, 9, 11, 4, 2, D, dtype=dtype, requires_grad=True)
    torch.library.opcheck(fa.default, (q, k, v), {"causal": True, "softcap": 2.0})
    out, lse = fa(q.detach(), k.detach(), v.detach())
    args = (torch.randn_like(out), q.detach(), k.detach(), v.detach(), out, lse, 0.0, 0.25, False,
            -1, -1, 0.0, None, None, None, 0, 0, 0, False)
    torch.library.opcheck(fa_bwd.default, args)


def test_opcheck_varlen_float32():
    cu_q = torch.tensor([0, 3, 3, 8], dtype=torch.int32)
    cu_k = torch.tensor([0, 4, 6, 11], dtype=torch.int32)
    q = torch.randn(8, 2, 7, requires_grad=True)
    k, v = (torch.randn(11, 1, 7, requires_grad=True) for _ in range(2))
    torch.library.opcheck(fa.default, (q, k, v, 0.0, None, True, -1, -1, 0.0, None, cu_q, cu_k, 5, 5))


def test_mask_of_fewer_dims_broadcasts_from_the_right():
    q, k, v = qkv(2, 9, 11, 4, 2, 12)
    for mask in (torch.randn(9, 11), torch.rand(4, 1, 11) > 0.2):
        full = mask.expand(2, 4, 9, 11)
        torch.testing.assert_close(fa(q, k, v, attn_mask=mask), fa(q, k, v, attn_mask=full), rtol=0, atol=0)


def test_nan_input_gives_nan_row_not_an_empty_one():
    q, k, v = qkv(1, 3, 5, 1, 1, 8)
    q[0, 1, 0, 2] = float("nan")
    out, lse = fa(q, k, v)
    assert out[0, 1].isnan().all() and lse[0, 0, 1].isnan()
    assert out[0, ::2].isfinite().all() and lse[0, 0, ::2].isfinite().all()


def test_empty_and_masked_everything():
    q, k, v = qkv(1, 0, 5, 2, 2, 8)
    out, lse = fa(q, k, v)
    assert out.shape == (1, 0, 2, 8) and lse.shape == (1, 2, 0)
    q, k, v = qkv(1, 4, 0, 2, 2, 8)
    out, lse = fa(q, k, v)
    assert (out == 0).all() and torch.isposinf(lse).all()
    q, k, v = qkv(1, 4, 6, 2, 2, 8)
    out, lse = fa(q, k, v, attn_mask=torch.zeros(1, 1, 4, 6, dtype=torch.bool))
    assert (out == 0).all() and torch.isposinf(lse).all()


def err(fn):
    """'ExceptionType: first line of the message' of the error fn raises."""
    with pytest.raises((RuntimeError, ValueError)) as e:
        fn()
    return f"{type(e.value).__name__}: {str(e.value).splitlines()[0]}"


def check_inputs_err(*args, **kw):
    """The message of the Python-side checks (the GPU op's) for the same inputs."""
    return err(lambda: check_inputs(*args, **kw))


class TestBadInput(TestCase):
    def test_messages(self):
        q, k, v = qkv(2, 5, 6, 4, 2, 16)
        self.assertExpectedInline(err(lambda: fa(q, k[:1], v[:1])), """ValueError: mytorch::flash_attn: expected q, k, v with the same batch size, got q (2, 5, 4, 16) float32, k (1, 6, 2, 16) float32, v (1, 6, 2, 16) float32""")
        self.assertExpectedInline(err(lambda: fa(q, k[..., :8], v[..., :8])), """ValueError: mytorch::flash_attn: expected q and k with the same head_dim, got q (2, 5, 4, 16) float32, k (2, 6, 2, 8) float32, v (2, 6, 2, 8) float32""")
        self.assertExpectedInline(err(lambda: fa(q, k, v[:, :5])), """ValueError: mytorch::flash_attn: expected k and v of the same shape but for head_dim, got q (2, 5, 4, 16) float32, k (2, 6, 2, 16) float32, v (2, 5, 2, 16) float32""")
        k3, v3 = qkv(2, 6, 6, 3, 3, 16)[1:]
        self.assertExpectedInline(err(lambda: fa(q, k3, v3)), """ValueError: mytorch::flash_attn: expected the heads of k, v to divide the heads of q, got 4 and 3 (q (2, 5, 4, 16) float32, k (2, 6, 3, 16) float32, v (2, 6, 3, 16) float32)""")
        big = qkv(1, 3, 3, 1, 1, 264)
        self.assertExpectedInline(err(lambda: fa(*big)), """ValueError: mytorch::flash_attn: expected head_dim in [1, 256], got 264 (q (1, 3, 1, 264) float32, k (1, 3, 1, 264) float32, v (1, 3, 1, 264) float32)""")
        big_v = qkv(1, 3, 3, 1, 1, (8, 300))
        self.assertExpectedInline(err(lambda: fa(*big_v)), """ValueError: mytorch::flash_attn: expected the head_dim of v in [1, 256], got 300 (q (1, 3, 1, 8) float32, k (1, 3, 1, 8) float32, v (1, 3, 1, 300) float32)""")
        ints = [t.long() for t in (q, k, v)]
        self.assertExpectedInline(err(lambda: fa(*ints)), """ValueError: mytorch::flash_attn: expected q, k, v of dtype float16, bfloat16, float32 or float64, got q (2, 5, 4, 16) int64, k (2, 6, 2, 16) int64, v (2, 6, 2, 16) int64""")
        self.assertExpectedInline(err(lambda: fa(q, k.double(), v)), """ValueError: mytorch::flash_attn: expected q, k, v of one dtype, got q (2, 5, 4, 16) float32, k (2, 6, 2, 16) float64, v (2, 6, 2, 16) float32""")
        qs = torch.randn(2, 5, 4, 32)[..., ::2]
        self.assertExpectedInline(err(lambda: fa(qs, k, v)), """ValueError: mytorch::flash_attn: expected q with a contiguous last dim, got strides (640, 128, 32, 2)""")
        self.assertExpectedInline(err(lambda: fa(q[0], k, v)), """ValueError: mytorch::flash_attn: expected q, k, v of layout (batch, seqlen, heads, head_dim), got q (5, 4, 16) float32, k (2, 6, 2, 16) float32, v (2, 6, 2, 16) float32""")
        self.assertExpectedInline(err(lambda: fa(q, k, v, dropout_p=1.0)), """ValueError: mytorch::flash_attn: expected dropout_p in [0, 1), got 1.0""")
        self.assertExpectedInline(err(lambda: fa(q, k, v, softcap=-0.5)), """ValueError: mytorch::flash_attn: expected softcap >= 0, got -0.5""")
        self.assertExpectedInline(err(lambda: fa(q, k, v, alibi_slopes=torch.rand(3))), """ValueError: mytorch::flash_attn: expected alibi_slopes float32 of shape (4,) or (batch, 4), got alibi_slopes (3,) float32""")
        mask = torch.ones(2, 1, 5, 7, dtype=torch.bool)
        self.assertExpectedInline(err(lambda: fa(q, k, v, attn_mask=mask)), """ValueError: mytorch::flash_attn: expected attn_mask broadcastable to (2, 4, 5, 6), got attn_mask (2, 1, 5, 7) bool""")
        self.assertExpectedInline(err(lambda: fa(q, k, v, attn_mask=mask[..., :6].int())), """ValueError: mytorch::flash_attn: expected attn_mask of dtype bool or float, got attn_mask (2, 1, 5, 6) int32""")

    def test_varlen_messages(self):
        q, k, v = torch.randn(10, 2, 8), torch.randn(12, 2, 8), torch.randn(12, 2, 8)
        good_k = torch.tensor([0, 5, 12], dtype=torch.int32)

        def call(cu_q, cu_k=good_k, max_q=10):
            return err(lambda: fa(q, k, v, 0.0, None, False, -1, -1, 0.0, None, cu_q, cu_k, max_q, 10))

        self.assertExpectedInline(call(torch.tensor([0, 4, 10], dtype=torch.int32), torch.tensor([0, 5, 12, 12], dtype=torch.int32)), """ValueError: mytorch::flash_attn: expected cu_seqlens_q and cu_seqlens_k of one length, got 3 and 4""")
        self.assertExpectedInline(call(torch.tensor([0, 6, 4, 10], dtype=torch.int32)), """ValueError: mytorch::flash_attn: expected cu_seqlens_q to start at 0 and never decrease, got [0, 6, 4, 10]""")
        self.assertExpectedInline(call(torch.tensor([0, 6, 9], dtype=torch.int32)), """ValueError: mytorch::flash_attn: expected cu_seqlens_q[-1] == q.shape[0], got 9 and 10 (q (10, 2, 8) float32)""")
        self.assertExpectedInline(call(torch.tensor([1, 6, 10], dtype=torch.int32)), """ValueError: mytorch::flash_attn: expected cu_seqlens_q to start at 0 and never decrease, got [1, 6, 10]""")
        self.assertExpectedInline(call(torch.tensor([0, 6, 10])), """ValueError: mytorch::flash_attn: expected cu_seqlens_q a 1-D int32 tensor of batch+1 offsets, got cu_seqlens_q (3,) int64""")
        self.assertExpectedInline(call(torch.tensor([0, 6, 10], dtype=torch.int32), max_q=5), """ValueError: mytorch::flash_attn: expected max_seqlen_q >= the longest sequence, got 5 < 6""")
        self.assertExpectedInline(call(torch.tensor([0, 6, 10], dtype=torch.int32), max_q=-1), """ValueError: mytorch::flash_attn: expected max_seqlen_q >= 0, got -1""")
        self.assertExpectedInline(err(lambda: fa(q, k, v, 0.0, None, False, -1, -1, 0.0, None, good_k, None, 10, 10)), """ValueError: mytorch::flash_attn: expected both cu_seqlens_q and cu_seqlens_k or neither""")

    def test_varlen_device_assert_conditions(self):
        """The conditions the Python launchers hand to torch._assert_async for CUDA offsets
        (CUDA reports them asynchronously); on CPU tensors the assert raises at once."""
        from mytorch_ext.ops.attention import _assert_cu_seqlens_async

        x = torch.randn(10, 2, 8)

        def check(cu, max_len):
            _assert_cu_seqlens_async("mytorch::flash_attn", x, "q", torch.tensor(cu, dtype=torch.int32), max_len)

        for good, max_len in (([0, 6, 6, 10], 6), ([0, 10], 10)):
            check(good, max_len)  # passes
        for bad, max_len in (([0, 6, 4, 10], 10), ([1, 6, 10], 10), ([0, 4, 9], 10), ([0, 6, 10], 5)):
            self.assertEqual(err(lambda: check(bad, max_len)), (
                "RuntimeError: mytorch::flash_attn: expected cu_seqlens_q to start at 0, never decrease and "
                f"end at q.shape[0] = 10, with no sequence longer than max_seqlen_q = {max_len}"), bad)

    def test_backward_messages(self):
        q, k, v = qkv(1, 5, 5, 2, 2, (8, 4))
        out, lse = fa(q, k, v)
        args = [out, q, k, v, out, lse, 0.0, 0.3, False, -1, -1, 0.0, None, None, None, 0, 0, 0, False]
        bad = list(args)
        bad[5] = lse[:, :, :4]
        self.assertExpectedInline(err(lambda: fa_bwd(*bad)), """ValueError: mytorch::flash_attn_backward: expected lse float32 of shape (1, 2, 5), got lse (1, 2, 4) float32""")
        bad = list(args)
        bad[0] = out[:, :4]
        self.assertExpectedInline(err(lambda: fa_bwd(*bad)), """ValueError: mytorch::flash_attn_backward: expected grad_out and out of shape (1, 5, 2, 4) (q's with the head_dim of v), got grad_out (1, 4, 2, 4) float32, out (1, 5, 2, 4) float32""")
        bad = list(args)
        bad[0] = out.double()
        self.assertExpectedInline(err(lambda: fa_bwd(*bad)), """ValueError: mytorch::flash_attn_backward: expected grad_out and out of q's dtype, got grad_out (1, 5, 2, 4) float64, out (1, 5, 2, 4) float32, q (1, 5, 2, 8) float32""")


def bad_calls():
    """(args of check_inputs / of the op's forward after q, k, v) for inputs that fail."""
    q, k, v = qkv(2, 5, 6, 4, 2, 16)
    cu = torch.tensor([0, 4, 10], dtype=torch.int32)
    vq, vk = torch.randn(10, 4, 16), torch.randn(10, 2, 16)
    mask = torch.ones(2, 1, 5, 6, dtype=torch.bool)
    return [
        ((q, k[:1], v[:1]), {}),
        ((q, k[..., :8], v[..., :8]), {}),
        ((q, k, v[:, :5]), {}),
        ((q, *qkv(2, 6, 6, 3, 3, 16)[1:]), {}),
        (tuple(qkv(1, 3, 3, 1, 1, 264)), {}),
        (tuple(qkv(1, 3, 3, 1, 1, (8, 0))), {}),
        (tuple(t.long() for t in (q, k, v)), {}),
        ((q, k.double(), v), {}),
        ((q.half(), k.half(), v.half()), {"attn_mask": mask.int()}),
        ((q, k, v), {"attn_mask": mask[..., :5]}),
        ((q, k, v), {"attn_mask": mask[0, 0, :, :4]}),
        ((q, k, v), {"attn_mask": mask[None]}),
        ((torch.randn(2, 5, 4, 32)[..., ::2], k, v), {}),
        ((q[0], k, v), {}),
        ((q, k, v), {"dropout_p": -0.25}),
        ((q, k, v), {"softcap": -1.0}),
        ((q, k, v), {"alibi_slopes": torch.rand(2, 4, dtype=torch.float64)}),
        ((q, k, v), {"alibi_slopes": torch.rand(3, 4)}),
        ((vq, vk, vk), {"cu_seqlens_q": cu, "cu_seqlens_k": cu, "max_seqlen_q": 5, "max_seqlen_k": 6}),
        ((vq, vk, vk), {"cu_seqlens_q": cu, "cu_seqlens_k": cu.long(), "max_seqlen_q": 6, "max_seqlen_k": 6}),
        ((vq, vk, vk), {"cu_seqlens_q": cu, "cu_seqlens_k": cu[:2], "max_seqlen_q": 6, "max_seqlen_k": 6}),
        ((vq, vk, vk), {"cu_seqlens_q": cu, "cu_seqlens_k": cu.flip(0), "max_seqlen_q": 6, "max_seqlen_k": 6}),
        ((vq, vk, vk), {"cu_seqlens_q": cu, "cu_seqlens_k": cu, "max_seqlen_q": 6, "max_seqlen_k": 6,
                        "attn_mask": mask}),
        ((vq, vk, vk), {"cu_seqlens_q": cu, "max_seqlen_q": 6}),
    ]


@pytest.mark.parametrize("i", range(len(bad_calls())))
def test_cpu_messages_are_the_python_checks(i):
    """The C++ kernel raises what check_inputs (the GPU op's checks) raises, same type."""
    (q, k, v), kw = bad_calls()[i]
    expected = check_inputs_err(q, k, v, **kw)
    args = dict(kw)
    got = err(lambda: fa(q, k, v, **args))
    assert got == expected


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("seed", range(4))
def test_single_key_dv_is_the_sum_of_dout(dtype, seed):
    """Each query sees one key, so P = 1 and dV is the sum of dO over the queries: rounded
    once from the exact sum (an exact tie between two neighbours may round either way, as
    the float32 accumulation lands on either side of it)."""
    torch.manual_seed(seed)
    q = torch.randn(1, 339, 12, 59, dtype=dtype, requires_grad=True)
    k, v = (torch.randn(1, 1, 12, 59, dtype=dtype, requires_grad=True) for _ in range(2))
    out = mytorch_ext.flash_attn(q, k, v)
    g = torch.randn_like(out)
    out.backward(g)
    exact = g.double().sum(1, keepdim=True)
    want = exact.to(dtype)
    off = v.grad != want
    if off.any():
        lo = torch.minimum(want, v.grad).double()
        hi = torch.maximum(want, v.grad).double()
        tie = (lo + hi) / 2
        assert torch.equal(exact[off], tie[off]), (v.grad[off], exact[off])
