"""mytorch::flash_attn against a float64 reference, every option, forward and backward.

The error ||x - ref|| / ||ref|| of out, dq, dk, dv must be no worse than 1.5x the error of
SDPA on the same low-precision inputs (its flash backend where the options allow it; on the
CPU, and for softcap, flash-attn's own low-precision emulation of its kernel).
Without a GPU this runs the Triton kernels under TRITON_INTERPRET=1 at tiny shapes; on a GPU
the full set (odd lengths up to 4097, head_dim 32..256) runs.
"""
import math

import pytest
import torch

from fa_ref import DEVICE, GPU, reference, rel, sdpa_peer, setup_ops

import mytorch_ext
from mytorch_ext.ops import attention

OPS = setup_ops()
RATIO = 1.5


def _rand(*shape, dtype):
    return torch.randn(*shape, dtype=dtype, device=DEVICE)


def _grads(out, tensors, g):
    return torch.autograd.grad(out, tensors, g)


def _check(case, dtype, B, n_q, n_k, H, HK, D, **opt):
    q = _rand(B, n_q, H, D, dtype=dtype).requires_grad_()
    k = _rand(B, n_k, HK, D, dtype=dtype).requires_grad_()
    v = _rand(B, n_k, HK, D, dtype=dtype).requires_grad_()
    slopes = opt.get("slopes")
    out, lse = mytorch_ext.flash_attn(
        q, k, v, causal=opt.get("causal", False), softmax_scale=opt.get("scale"),
        window_size=(opt.get("wl", -1), opt.get("wr", -1)), softcap=opt.get("softcap", 0.0),
        alibi_slopes=slopes, deterministic=opt.get("deterministic", False), return_lse=True)
    g = _rand(B, n_q, H, D, dtype=dtype)
    grads = _grads(out, (q, k, v), g)

    opt.pop("deterministic", None)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref, ref_lse = reference(q64, k64, v64, **opt)
    ref_grads = _grads(ref, (q64, k64, v64), g.double())

    peer_opt = {k_: opt[k_] for k_ in ("scale", "causal", "wl", "wr", "slopes") if k_ in opt}
    # SDPA has no softcap, and on the CPU its "flash" kernel keeps P in float32 where FA2
    # rounds it to the input dtype: there the peer is flash-attn's low-precision emulation.
    if opt.get("softcap", 0.0) > 0 or not GPU:
        qp, kp, vp = (t.detach().clone().requires_grad_() for t in (q, k, v))
        peer, _ = reference(qp, kp, vp, upcast=False, **opt)
    else:
        qp, kp, vp = (t.detach().clone().requires_grad_() for t in (q, k, v))
        peer = sdpa_peer(qp, kp, vp, **peer_opt)
    peer_grads = _grads(peer, (qp, kp, vp), g)

    finite = torch.isfinite(ref_lse)
    assert torch.allclose(lse[finite], ref_lse[finite], atol=2e-2, rtol=1e-3), case
    assert torch.equal(torch.isinf(lse), ~finite), case
    for name, mine, theirs, exact in zip(("out", "dq", "dk", "dv"), (out,) + grads,
                                         (peer,) + peer_grads, (ref,) + ref_grads):
        assert mine.dtype == dtype and mine.shape == exact.shape
        if exact.norm() == 0:  # e.g. dq with a single key: rounding noise only, as SDPA's
            assert mine.abs().max() <= RATIO * theirs.abs().max() + 1e-3, (case, name)
            continue
        ours = rel(mine, exact)
        base = rel(torch.nan_to_num(theirs), exact)
        assert ours <= RATIO * base + 1e-6, f"{case} {name}: error {ours:.3g} vs SDPA {base:.3g}"


# Tiny shapes under the interpreter, the full set on a GPU.
if GPU:
    LENGTHS = [1, 17, 255, 1000, 4097]
    DIMS = [32, 64, 96, 128, 256]
else:
    LENGTHS = [1, 17, 40]
    DIMS = [16, 40]

BASE = [
    ("plain", {}),
    ("causal", {"causal": True}),
    ("window", {"wl": 7, "wr": 3}),
    ("window_left_causal", {"wl": 5, "causal": True}),
    ("softcap", {"softcap": 3.0}),
    ("alibi", {"slopes": "heads"}),
    ("alibi_batch_causal", {"slopes": "batch", "causal": True}),
    ("scale", {"scale": 0.3}),
    ("deterministic", {"deterministic": True}),
]


def _opts(raw, B, H):
    opt = dict(raw)
    if opt.get("slopes") == "heads":
        opt["slopes"] = torch.rand(H, device=DEVICE) * 0.5
    elif opt.get("slopes") == "batch":
        opt["slopes"] = torch.rand(B, H, device=DEVICE) * 0.5
    return opt


@pytest.mark.parametrize("name,raw", BASE, ids=[b[0] for b in BASE])
def test_options(name, raw):
    B, H, HK = 2, 4, 2
    D = DIMS[-1] if GPU else 16
    shapes = [(128, 128), (255, 1000), (1000, 255)] if GPU else [(17, 17), (9, 30), (30, 9)]
    for i, (n_q, n_k) in enumerate(shapes):
        # both dtypes on a GPU; one of them per shape under the (slow) interpreter
        dtypes = (torch.float16, torch.bfloat16) if GPU else ((torch.float16, torch.bfloat16)[i % 2],)
        for dtype in dtypes:
            _check((name, n_q, n_k, dtype), dtype, B, n_q, n_k, H, HK, D, **_opts(raw, B, H))


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("causal", [False, True])
def test_odd_lengths(n, causal):
    for D in DIMS:
        _check(("len", n, D, causal), torch.bfloat16, 1 if n > 1000 else 2, n, n, 2, 2, D,
               causal=causal)


@pytest.mark.parametrize("hk", [1, 2])
def test_gqa_mqa(hk):
    n = 300 if GPU else 20
    _check(("gqa", hk), torch.float16, 2, n, n + 7, 6, hk, 64 if GPU else 16, causal=True)


def test_head_dims_not_powers_of_2():
    dims = (8, 40, 72, 136, 200, 248) if GPU else (8, 24)
    for D in dims:
        _check(("dim", D), torch.float16, 1, 33, 47, 2, 1, D)


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_matches_per_sequence(causal):
    lens_q = [5, 1, 17, 0, 12] if not GPU else [300, 1, 1000, 0, 77]
    lens_k = [5, 9, 17, 4, 30] if not GPU else [300, 129, 1000, 33, 700]
    H, HK, D = 4, 2, 16 if not GPU else 128
    dt = torch.bfloat16
    cu_q = torch.tensor([0] + lens_q, device=DEVICE).cumsum(0).to(torch.int32)
    cu_k = torch.tensor([0] + lens_k, device=DEVICE).cumsum(0).to(torch.int32)
    q = _rand(sum(lens_q), H, D, dtype=dt).requires_grad_()
    k = _rand(sum(lens_k), HK, D, dtype=dt).requires_grad_()
    v = _rand(sum(lens_k), HK, D, dtype=dt).requires_grad_()
    out, lse = mytorch_ext.flash_attn_varlen(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k),
                                             causal=causal, return_lse=True)
    g = _rand(*q.shape, dtype=dt)
    dq, dk, dv = _grads(out, (q, k, v), g)
    assert lse.shape == (H, sum(lens_q))
    for i in range(len(lens_q)):
        sq = slice(int(cu_q[i]), int(cu_q[i + 1]))
        sk = slice(int(cu_k[i]), int(cu_k[i + 1]))
        if lens_q[i] == 0:
            continue
        qi, ki, vi = (t.detach()[s][None].double().requires_grad_() for t, s in
                      ((q, sq), (k, sk), (v, sk)))
        ref, ref_lse = reference(qi, ki, vi, causal=causal)
        rg = _grads(ref, (qi, ki, vi), g[sq][None].double())
        for mine, exact in zip((out[sq], dq[sq], dk[sk], dv[sk]), (ref[0],) + tuple(x[0] for x in rg)):
            if exact.norm() > 0:
                assert rel(mine, exact) < 1e-2, i
        fin = torch.isfinite(ref_lse[0])
        assert torch.allclose(lse[:, sq][fin], ref_lse[0][fin], atol=2e-2)
    assert dk[int(cu_k[3]):int(cu_k[4])].abs().max() == 0  # sequence with no queries


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_wrapper_with_mask(kind):
    B, H, L, S, D = 2, 3, (40 if not GPU else 333), (23 if not GPU else 517), (16 if not GPU else 64)
    dt = torch.float16
    q = _rand(B, H, L, D, dtype=dt).requires_grad_()
    k = _rand(B, H, S, D, dtype=dt).requires_grad_()
    v = _rand(B, H, S, D, dtype=dt).requires_grad_()
    if kind == "bool":
        mask = torch.rand(B, 1, L, S, device=DEVICE) > 0.3
        mask[:, :, :, 0] = True  # every row keeps a key
    else:
        mask = torch.randn(L, S, device=DEVICE, dtype=dt)
    out = mytorch_ext.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    g = _rand(*out.shape, dtype=dt)
    grads = _grads(out, (q, k, v), g)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    m64 = mask if kind == "bool" else mask.double()
    ref = torch.nn.functional.scaled_dot_product_attention(q64, k64, v64, attn_mask=m64)
    ref_grads = _grads(ref, (q64, k64, v64), g.double())
    qp, kp, vp = (t.detach().clone().requires_grad_() for t in (q, k, v))
    peer = torch.nn.functional.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask)
    peer_grads = _grads(peer, (qp, kp, vp), g)
    for mine, theirs, exact in zip((out,) + grads, (peer,) + peer_grads, (ref,) + ref_grads):
        assert rel(mine, exact) <= RATIO * rel(theirs, exact) + 1e-6


@pytest.mark.parametrize("L,S", [(20, 20), (12, 31), (31, 12)])
def test_sdpa_wrapper_causal_is_top_left(L, S):
    B, H, D = 1, 4, 16
    dt = torch.bfloat16
    q, k, v = (_rand(B, H, n, D, dtype=dt) for n in (L, S, S))
    out = mytorch_ext.scaled_dot_product_attention(q, k[:, :2], v[:, :2], is_causal=True,
                                                   enable_gqa=True)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k[:, :2].double().repeat_interleave(2, 1),
        v[:, :2].double().repeat_interleave(2, 1), is_causal=True)
    assert rel(out, ref) < 1e-2


def _dropout_keep(seed, B, n_q, n, H, p):
    """Recover the dropout mask of (seed, batch, head, row, col): q = 0 makes P uniform and
    v = identity puts P[i, j] * keep[i, j] / (1 - p) in out[i, j]."""
    q = torch.zeros(B, n_q, H, n, dtype=torch.float16, device=DEVICE)
    k = torch.zeros(B, n, H, n, dtype=torch.float16, device=DEVICE)
    v = torch.eye(n, dtype=torch.float16, device=DEVICE)[None, :, None, :].expand(B, n, H, n)
    out, _ = OPS.flash_attn(q, k, v.contiguous(), p, None, False, -1, -1, 0.0, None, None, None,
                            0, 0, seed)
    return (out > 0).permute(0, 2, 1, 3)  # (B, H, n_q, n_k)


@pytest.mark.parametrize("causal", [False, True])
def test_dropout_regenerates_mask_in_backward(causal):
    B, H, n_q, n, p, seed = 2, 2, 19, 32, 0.25, 1234
    keep = _dropout_keep(seed, B, n_q, n, H, p)
    frac = keep.float().mean().item()
    assert abs(frac - (1 - p)) < 0.05, frac
    assert not torch.equal(keep, _dropout_keep(seed + 1, B, n_q, n, H, p))
    dt = torch.float16
    q = _rand(B, n_q, H, n, dtype=dt).requires_grad_()
    k = _rand(B, n, H, n, dtype=dt).requires_grad_()
    v = _rand(B, n, H, n, dtype=dt).requires_grad_()
    out, _ = OPS.flash_attn(q, k, v, p, None, causal, -1, -1, 0.0, None, None, None, 0, 0, seed)
    g = _rand(*out.shape, dtype=dt)
    grads = _grads(out, (q, k, v), g)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref, _ = reference(q64, k64, v64, causal=causal, drop_keep=keep.double(), p=p)
    ref_grads = _grads(ref, (q64, k64, v64), g.double())
    for mine, exact in zip((out,) + grads, (ref,) + ref_grads):
        assert rel(mine, exact) < 3e-3


def test_dropout_wrapper_draws_fresh_seeds():
    q = _rand(1, 16, 2, 16, dtype=torch.float16)
    a = mytorch_ext.flash_attn(q, q, q, dropout_p=0.5)
    b = mytorch_ext.flash_attn(q, q, q, dropout_p=0.5)
    assert not torch.equal(a, b)


def test_deterministic_backward_is_bitwise_repeatable():
    n = 1000 if GPU else 40
    q, k, v = (_rand(2, n, 4, 64 if GPU else 16, dtype=torch.bfloat16).requires_grad_()
               for _ in range(3))
    g = torch.randn_like(q)
    runs = []
    for _ in range(2):
        out = mytorch_ext.flash_attn(q, k, v, causal=True, deterministic=True)
        runs.append(_grads(out, (q, k, v), g))
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def test_nan_input_gives_nan_output():
    q = _rand(1, 33, 2, 16, dtype=torch.float16)
    k = _rand(1, 33, 2, 16, dtype=torch.float16)
    q[0, 5, 1, 3] = float("nan")
    out = mytorch_ext.flash_attn(q, k, k, causal=True)
    assert torch.isnan(out[0, 5, 1]).all()
    assert not torch.isnan(out[0, :, 0]).any()
    k[0, 2, 0, 0] = float("nan")
    out = mytorch_ext.flash_attn(q, k, k)
    assert torch.isnan(out[0, :, 0]).all()


def test_empty_and_strided_inputs():
    big = _rand(2, 19, 3, 48, dtype=torch.float16)
    q = big[..., :16]  # strided: heads stride 48
    k = _rand(2, 26, 3, 16, dtype=torch.float16).transpose(0, 0)
    v = _rand(26, 2, 3, 16, dtype=torch.float16).transpose(0, 1)  # batch/seq swapped strides
    out = mytorch_ext.flash_attn(q, k, v)
    ref, _ = reference(q.double(), k.double(), v.double())
    assert rel(out, ref) < 1e-2
    e = mytorch_ext.flash_attn(q[:, :0], k, v)
    assert e.shape == (2, 0, 3, 16)


def test_backward_reads_a_strided_lse():
    """lse with rows that are not contiguous (a transposed copy) gives the same gradients as
    the contiguous one: the kernels step along lse's rows one float at a time."""
    n, D = (300, 64) if GPU else (40, 16)
    q, k, v = (_rand(2, n, 3, D, dtype=torch.bfloat16) for _ in range(3))
    g = torch.randn_like(q)
    out, lse = OPS.flash_attn(q, k, v, causal=True)
    args = (0.0, D ** -0.5, True, -1, -1, 0.0, None, None, None, 0, 0, 0, False)
    want = OPS.flash_attn_backward(g, q, k, v, out, lse, *args)
    strided = lse.transpose(1, 2).contiguous().transpose(1, 2)
    assert strided.stride(-1) != 1
    got = OPS.flash_attn_backward(g, q, k, v, out, strided, *args)
    for a, b in zip(got, want):
        assert torch.equal(a, b)


@pytest.mark.parametrize("causal,window", [(False, -1), (True, -1), (False, 37)])
def test_tma_forward_matches_pointer_forward(causal, window, monkeypatch):
    """The forward that loads tiles by TMA descriptors (a tuned-table choice on Hopper) gives
    the pointer-load forward's out and lse, odd lengths and GQA included."""
    from mytorch_ext.triton import flash_attn as fa
    from mytorch_ext.triton import flash_attn_config as fc

    if GPU and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA loads need an sm_90 or newer GPU")
    n_q, n_k, D = (1000, 777, 128) if GPU else (40, 23, 16)
    tile = dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3) if GPU else \
        dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)
    q = _rand(2, n_q, 4, D, dtype=torch.bfloat16)
    k, v = (_rand(2, n_k, 2, D, dtype=torch.bfloat16) for _ in range(2))
    monkeypatch.setattr(fc, "chosen", lambda *a, **kw: None)
    calls = []
    launch = fa._launch_fwd_tma
    monkeypatch.setattr(fa, "_launch_fwd_tma", lambda *a: (calls.append(1), launch(*a))[1])
    results = []
    for cfg in (tile, dict(tile, TMA=True)):
        monkeypatch.setattr(fa, "fwd_configs", lambda device, head_dim, cfg=cfg: [cfg])
        results.append(fa.flash_attn_forward(q, k, v, softmax_scale=D ** -0.5, causal=causal,
                                             window_left=window))
    assert fa._TMA_DISABLED is None, fa._TMA_DISABLED
    assert len(calls) == 1
    (o1, l1), (o2, l2) = results
    torch.testing.assert_close(o2.float(), o1.float(), atol=1e-2, rtol=1e-2)
    torch.testing.assert_close(l2, l1, atol=1e-3, rtol=1e-4)
