"""The Gluon Hopper forward of flash_attn (mytorch_ext/triton/flash_attn_hopper.py).

On an sm90 GPU, checked against a float64 reference and against the Triton kernel's error
on the same inputs:
- dtypes float16/bfloat16, head dims 64 and 128, GQA/MQA, causal (bottom-right, also with
  fewer keys than queries, where leading rows see no key), sliding windows, softcap, odd
  lengths, a single query block and many;
- the calls it does not cover (ALiBi, dropout, a mask, varlen, other head dims, float32)
  stay on the Triton kernels and stay correct; head_dim 64 with a window up to 8k keys or a
  causal mask up to 1k, where the Triton kernel is faster, is checked here through a forced
  dispatch;
- causal calls up to 8k on persistent programs in snake order give the bits of a program per
  tile;
- a GPU other than sm90 never reaches it;
- the op's C++ launcher replays it (the launcher tests compare the bits).
"""
import contextlib

import pytest
import torch

from helpers import attention_reference

GPU = torch.cuda.is_available()
SM90 = GPU and torch.cuda.get_device_capability()[0] == 9
pytestmark = pytest.mark.skipif(not SM90, reason="needs a Hopper (sm90) GPU")

if SM90:
    import mytorch_ext  # noqa: F401
    from mytorch_ext.triton import flash_attn as fa
    from mytorch_ext.triton import flash_attn_hopper as fh
    from mytorch_ext.triton import flash_attn_hopper_bwd as fhb


@contextlib.contextmanager
def _hopper(on, module, launcher):
    """Hopper kernels on or off for the block. Yields a dict whose "ran" says, after the block,
    whether module.launcher was called (the real one runs) and the kernels were still enabled
    at the end: a kernel that failed and fell back to Triton does not count as run."""
    saved, real = fa._HOPPER_DISABLED, getattr(module, launcher)
    calls = []
    record = {"ran": False, "why": None}

    def spy(*a, **k_):
        calls.append(1)
        return real(*a, **k_)

    fa._HOPPER_DISABLED = None if on else "off for the comparison"
    setattr(module, launcher, spy)
    try:
        yield record
        record["why"] = fa._HOPPER_DISABLED
        record["ran"] = bool(calls) and record["why"] is None
    finally:
        fa._HOPPER_DISABLED = saved
        setattr(module, launcher, real)


def _forward(q, k, v, hopper, **kw):
    """(out, lse), whether the Hopper kernel ran."""
    with _hopper(hopper, fh, "forward") as record:
        out = fa.flash_attn_forward(q, k, v, softmax_scale=q.shape[-1] ** -0.5, **kw)
    return out, (record["ran"], record["why"])


GEOMETRY = {
    "causal": dict(causal=True),
    "plain": dict(),
    "window": dict(window_left=100, window_right=37),
    "window_left_only": dict(window_left=256, window_right=0),
    "softcap_causal": dict(causal=True, softcap=30.0),
}
SHAPES = {  # B, n_q, n_k, H, HK
    "square": (2, 1024, 1024, 4, 4),
    "odd_gqa": (2, 1000, 1000, 4, 2),
    "short_q_mqa": (1, 384, 1024, 8, 1),
    "short_k": (1, 1024, 384, 2, 2),
    "tiny": (3, 77, 200, 2, 1),
    "long_gqa": (1, 2048, 2048, 4, 2),  # past SHORT_SEQLEN: the wide tiles
    # head dim 64's 192-row tiles: the last tile's third warpgroup has no query row
    "long_ragged": (1, 1030, 1500, 4, 2),
}


@pytest.mark.parametrize("geometry", list(GEOMETRY))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_matches_float64_reference(dtype, head_dim, shape, geometry, monkeypatch):
    torch.manual_seed(0)
    B, n_q, n_k, H, HK = SHAPES[shape]
    q = torch.randn(B, n_q, H, head_dim, device="cuda", dtype=dtype)
    k = torch.randn(B, n_k, HK, head_dim, device="cuda", dtype=dtype)
    v = torch.randn(B, n_k, HK, head_dim, device="cuda", dtype=dtype)
    kw = GEOMETRY[geometry]
    masked = geometry != "plain"
    if masked and head_dim == 64 and not fh.eligible(q, k, v, varlen=False, attn_mask=None, dropout_p=0.0,
                                                     alibi_slopes=None, masked=True,
                                                     window=kw.get("window_left", -1) >= 0):
        # the Triton kernel serves short masked calls at head_dim 64 (up to 1k causal, 8k
        # windows; test_head_dim_64_masked_dispatch checks the rule): run the Hopper kernel anyway
        monkeypatch.setattr(fh, "eligible", lambda *a, **k_: True)
    (out, lse), (hopper, why) = _forward(q, k, v, True, **kw)
    assert hopper, why
    (out_t, _), _ = _forward(q, k, v, False, **kw)
    ref, ref_lse, _ = attention_reference(q, k, v, head_dim ** -0.5, kw.get("causal", False),
                                          kw.get("window_left", -1), kw.get("window_right", -1),
                                          kw.get("softcap", 0.0))
    err = (out.double() - ref).abs().max().item()
    err_triton = (out_t.double() - ref).abs().max().item()
    assert err <= max(2 * err_triton, 2e-3), (err, err_triton)
    seen = torch.isfinite(ref_lse)
    torch.testing.assert_close(lse.double()[seen], ref_lse[seen], atol=1e-4, rtol=1e-5)
    # a row with no key: output 0 and lse +inf, as flash-attn
    assert (lse[~seen] == float("inf")).all()
    assert (out.transpose(1, 2)[~seen] == 0).all()


@pytest.mark.parametrize("head_dim", [64, 128])
def test_tile_follows_the_mask_and_length(head_dim, monkeypatch):
    """(BLOCK_M, BLOCK_N) by call: head dim 128 takes 64-key blocks under a causal mask up to
    SHORT_SEQLEN keys and 128-key blocks otherwise; head dim 64 takes 128-row tiles (two
    consumer warpgroups) up to SHORT_SEQLEN and 192-row tiles (three) past it."""
    seen = []
    real = fh.note_launch

    def record(kind, cfg, compiled):
        seen.append((cfg["BLOCK_M"], cfg["BLOCK_N"]))
        return real(kind, cfg, compiled)
    monkeypatch.setattr(fh, "note_launch", record)
    n0 = fh.SHORT_SEQLEN
    for n, kw in ((n0, dict(causal=True)), (n0 + 128, dict(causal=True)), (n0, dict()),
                  (n0 + 128, dict())):
        q, k, v = (torch.randn(1, n, 2, head_dim, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        if head_dim == 64:
            monkeypatch.setattr(fh, "eligible", lambda *a, **k_: True)
        _, (hopper, why) = _forward(q, k, v, True, **kw)
        assert hopper, why
    want = {128: [(128, 64), (128, 128), (128, 128), (128, 128)],
            64: [(128, 128), (192, 128), (128, 128), (192, 128)]}
    assert seen == want[head_dim]


UNCOVERED = {
    "alibi": lambda q: dict(alibi_slopes=torch.rand(q.shape[2], device="cuda")),
    "dropout": lambda q: dict(dropout_p=0.1, seed=7),
    "head_dim_96": None,
    "float32": None,
}


@pytest.mark.parametrize("case", list(UNCOVERED))
def test_uncovered_calls_stay_on_triton(case):
    D = 96 if case == "head_dim_96" else 64
    dtype = torch.float32 if case == "float32" else torch.bfloat16
    q, k, v = (torch.randn(1, 256, 2, D, device="cuda", dtype=dtype) for _ in range(3))
    kw = UNCOVERED[case](q) if UNCOVERED[case] else {}
    assert not fh.eligible(q, k, v, varlen=False, attn_mask=None,
                           dropout_p=kw.get("dropout_p", 0.0),
                           alibi_slopes=kw.get("alibi_slopes"))
    (out, _), (hopper, _) = _forward(q, k, v, True, causal=True, **kw)
    assert not hopper
    (ref, _), _ = _forward(q, k, v, False, causal=True, **kw)
    assert torch.equal(out, ref)  # the same Triton kernel ran both times


def test_head_dim_64_masked_dispatch():
    """Head dim 64: causal calls over 1k keys and window calls over 8k run here."""
    def ok(n, window):
        q, k, v = (torch.empty(1, n, 2, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        return fh.eligible(q, k, v, varlen=False, attn_mask=None, dropout_p=0.0, alibi_slopes=None,
                           masked=True, window=window)
    assert [ok(n, False) for n in (1024, 1025, 8192)] == [False, True, True]
    assert [ok(n, True) for n in (1024, 8192, 8193)] == [False, False, True]


def test_other_architectures_never_reach_it(monkeypatch):
    q, k, v = (torch.randn(1, 128, 2, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    assert fh.eligible(q, k, v, varlen=False, attn_mask=None, dropout_p=0.0, alibi_slopes=None)
    for cap in [(8, 0), (8, 9), (10, 0), (12, 0)]:
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *_a, _c=cap: _c)
        assert not fh.eligible(q, k, v, varlen=False, attn_mask=None, dropout_p=0.0,
                               alibi_slopes=None), cap


def test_op_replays_the_hopper_kernel():
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 640, 4, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    first = torch.ops.mytorch.flash_attn(q, k, v, causal=True)
    again = torch.ops.mytorch.flash_attn(q, k, v, causal=True)  # the C++ replay
    (out, lse), (hopper, why) = _forward(q, k, v, True, causal=True)
    assert hopper, why
    for got in (first, again):
        assert torch.equal(got[0], out) and torch.equal(got[1], lse)


def _causal_launch(q, k, v, fp8=None):
    """fh.forward (or fh.forward_fp8 with fp8 = descale) of a causal call: (out, lse)."""
    B, n, H, D = q.shape
    out = torch.empty(q.shape, dtype=torch.bfloat16 if fp8 is not None else q.dtype, device="cuda")
    lse = torch.empty(B, H, n, dtype=torch.float32, device="cuda")
    kw = dict(softmax_scale=D ** -0.5, softcap=0.0, group=H // k.shape[2], left=False, right=True,
              wl=0, wr=0)
    if fp8 is None:
        fh.forward(q, k, v, out, lse, **kw)
    else:
        fh.forward_fp8(q, k, v, fp8, out, lse, **kw)
    return out, lse


@pytest.mark.parametrize("kind", ["bf16-64", "bf16-128", "fp8-128"])
def test_causal_snake_rounds_match_a_program_per_tile(kind, monkeypatch):
    """Causal calls up to SNAKE_MAX_SEQLEN run on persistent programs that take their tiles in
    snake order. With more tiles than SMs (several rounds, the last one partial) the result is
    the one of a program per tile, bit for bit."""
    dtype, head_dim = kind.split("-")
    head_dim = int(head_dim)
    B, n, H, HK = 3, 2048, 16, 4
    n_sm = torch.cuda.get_device_properties(0).multi_processor_count
    assert B * H * (n // 128) > 2 * n_sm and n <= fh.SNAKE_MAX_SEQLEN
    g = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn(B, n, H, head_dim, device="cuda", generator=g, dtype=torch.bfloat16)
    k, v = (torch.randn(B, n, HK, head_dim, device="cuda", generator=g, dtype=torch.bfloat16)
            for _ in range(2))
    descale = None
    if dtype == "fp8":
        from mytorch_ext.ops.attention_fp8 import quantize_fp8
        q, k, v, qd, kd, vd = quantize_fp8(q, k, v)
        descale = torch.stack([d.expand(B, HK) for d in (qd, kd, vd)]).contiguous()
    snake = _causal_launch(q, k, v, descale)
    monkeypatch.setattr(fh, "SNAKE_MAX_SEQLEN", 0)
    per_tile = _causal_launch(q, k, v, descale)
    assert torch.equal(snake[0], per_tile[0]) and torch.equal(snake[1], per_tile[1])
    assert torch.isfinite(snake[0]).all()


def _reference_grads(q, k, v, g, causal, wl, wr):
    qd, kd, vd = (t.double().requires_grad_() for t in (q, k, v))
    out, _, _ = attention_reference(qd, kd, vd, q.shape[-1] ** -0.5, causal, wl, wr, 0.0)
    return torch.autograd.grad(out, (qd, kd, vd), g.double())


def _backward(q, k, v, g, hopper, **kw):
    """(dq, dk, dv), whether the Hopper dK/dV kernel ran."""
    scale = q.shape[-1] ** -0.5
    with _hopper(hopper, fhb, "backward_kv") as record:
        out, lse = fa.flash_attn_forward(q, k, v, softmax_scale=scale, **kw)
        grads = fa.flash_attn_backward(g, q, k, v, out, lse, softmax_scale=scale, **kw)
    return grads, (record["ran"], record["why"])


BWD_GEOMETRY = {"causal": dict(causal=True), "plain": dict(),
                "window": dict(window_left=100, window_right=37)}


@pytest.mark.parametrize("geometry", list(BWD_GEOMETRY))
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("head_dim", [64, 128])
def test_backward_matches_float64_reference(head_dim, shape, geometry):
    torch.manual_seed(2)
    B, n_q, n_k, H, HK = SHAPES[shape]
    dtype = torch.float16 if shape in ("odd_gqa", "short_k") else torch.bfloat16
    q = torch.randn(B, n_q, H, head_dim, device="cuda", dtype=dtype)
    k, v = (torch.randn(B, n_k, HK, head_dim, device="cuda", dtype=dtype) for _ in range(2))
    g = torch.randn_like(q)
    kw = BWD_GEOMETRY[geometry]
    got, (hopper, why) = _backward(q, k, v, g, True, **kw)
    assert hopper, why
    triton_grads, _ = _backward(q, k, v, g, False, **kw)
    ref = _reference_grads(q, k, v, g, kw.get("causal", False), kw.get("window_left", -1),
                           kw.get("window_right", -1))
    for name, x, t, r in zip(("dq", "dk", "dv"), got, triton_grads, ref):
        err = (x.double() - r).abs().max().item()
        err_triton = (t.double() - r).abs().max().item()
        assert torch.isfinite(x).all() and err <= max(2 * err_triton, 2e-3), (name, err, err_triton)


@pytest.mark.parametrize("head_dim", [64, 128])
def test_backward_blocks_follow_the_mask(head_dim, monkeypatch):
    """The dK/dV kernel's (BLOCK_M, BLOCK_N): head dim 64 without a mask takes 192 keys per
    program (three consumer warpgroups); with a causal mask or a window, and at head dim
    128, 128 keys (two)."""
    seen = []
    real = fhb.note_launch

    def record(kind, cfg, compiled):
        seen.append((kind, cfg["BLOCK_M"], cfg["BLOCK_N"]))
        return real(kind, cfg, compiled)
    monkeypatch.setattr(fhb, "note_launch", record)
    q, k, v, g = (torch.randn(1, 300, 2, head_dim, device="cuda", dtype=torch.bfloat16)
                  for _ in range(4))
    for kw in (dict(), dict(causal=True), dict(window_left=64, window_right=0)):
        _, (hopper, why) = _backward(q, k, v, g, True, **kw)
        assert hopper, why
    kv = [(m, n) for kind, m, n in seen if kind == "bwd_kv_tma"]
    assert kv == ([(64, 192), (64, 128), (64, 128)] if head_dim == 64 else [(64, 128)] * 3)


def test_backward_softcap_stays_on_triton():
    q, k, v, g = (torch.randn(1, 256, 2, 128, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    got, (hopper, _) = _backward(q, k, v, g, True, causal=True, softcap=20.0)
    assert not hopper
    ref, _ = _backward(q, k, v, g, False, causal=True, softcap=20.0)
    for x, r in zip(got, ref):
        assert torch.equal(x, r)


@pytest.mark.parametrize("causal", [True, False])  # head dim 64 without a mask: 192 keys a program
@pytest.mark.parametrize("head_dim", [64, 128])  # 64: dQ from the Triton kernel
def test_op_backward_replays_the_hopper_kernels(head_dim, causal):
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 640, 4, head_dim, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    g = torch.randn_like(q)
    out, lse = torch.ops.mytorch.flash_attn(q, k, v, causal=causal)
    args = (g, q, k, v, out, lse, 0.0, head_dim ** -0.5, causal, -1, -1, 0.0, None, None, None,
            0, 0, 0, False)
    first = torch.ops.mytorch.flash_attn_backward(*args)
    again = torch.ops.mytorch.flash_attn_backward(*args)  # the C++ replay
    expected, (hopper, why) = _backward(q, k, v, g, True, causal=causal)
    assert hopper, why
    for grads in (first, again):
        for x, r in zip(grads, expected):
            assert torch.equal(x, r)
