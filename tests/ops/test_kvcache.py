"""mytorch::flash_attn_with_kvcache on the CPU kernel (and the mytorch device) against a
float64 reference (tests/ops/kvcache_ref.py): the in-place append (the right slots written,
no other touched), rotary interleaved and not, paged caches with shuffled block tables,
cache_batch_idx, cache_leftpad, causal, windows, softcap, ALiBi, GQA/MQA, split counts,
head dims; opcheck, torch.compile, and the errors bad input gets (the fake kernel's
messages equal the CPU kernel's)."""
import math
import os
import sys

import pytest
import torch
from expecttest import TestCase

import mytorch_ext
from mytorch_ext.ops import kvcache

sys.path.insert(0, os.path.dirname(__file__))
from kvcache_ref import reference  # noqa: E402

OP = torch.ops.mytorch.flash_attn_with_kvcache
TOL = {torch.float64: 1e-10, torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}


def make_case(*, dtype=torch.float32, batch=2, seqlen_q=1, heads=4, heads_k=2, d=64, cap=150,
              seqlen_new=1, paged=False, block_size=16, rotary=None, leftpad=False,
              batch_idx=False, alibi=False, seed=0, device="cpu", full=False, key_mask=False):
    """(q, k_cache, v_cache, k, v, kwargs) of one call; rotary: None, "interleaved" or "half"
    (rotary_dim = d / 2). full: cache_seqlens fill the cache (no room left). key_mask: about a
    third of the cache positions hidden, a row's last key among them, a view with strides
    (1, batch) (the kernels take any strides); key_mask="expanded": one row for every sequence,
    expanded (strides (0, 1))."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    if paged:
        nb = -(-cap // block_size)
        cap = nb * block_size
        num_blocks = batch * nb + 3  # spare pages nobody uses
        k_cache = rnd(num_blocks, block_size, heads_k, d)
        block_table = torch.randperm(num_blocks, generator=g)[:batch * nb].reshape(batch, nb).int()
    else:
        k_cache = rnd(batch + 2 if batch_idx else batch, cap, heads_k, d)
        block_table = None
    v_cache = rnd(*k_cache.shape)
    if full:
        seqlens = torch.full((batch,), cap, dtype=torch.int32)
    else:
        seqlens = torch.randint(0, cap - seqlen_new + 1, (batch,), generator=g, dtype=torch.int32)
        seqlens[0] = cap - seqlen_new  # one sequence fills the cache to the last slot
    q = rnd(batch, seqlen_q, heads, d)
    k = rnd(batch, seqlen_new, heads_k, d) if seqlen_new else None
    v = rnd(batch, seqlen_new, heads_k, d) if seqlen_new else None
    kw = {"cache_seqlens": seqlens, "block_table": block_table}
    if rotary:
        angle = torch.rand(cap + 4, d // 4, generator=g, dtype=torch.float64) * 2 * math.pi
        kw.update(rotary_cos=angle.cos().to(dtype), rotary_sin=angle.sin().to(dtype),
                  rotary_interleaved=rotary == "interleaved")
    if leftpad:
        kw["cache_leftpad"] = (seqlens.double() * torch.rand(batch, generator=g, dtype=torch.float64)).int()
    if batch_idx:
        kw["cache_batch_idx"] = torch.randperm(batch + 2, generator=g)[:batch].int()
    if alibi:
        kw["alibi_slopes"] = torch.rand(heads, generator=g, dtype=torch.float64).float()
    if key_mask == "expanded":
        km = torch.rand(cap, generator=g) > 0.35
        km[int(seqlens[0]) + seqlen_new - 1] = False
        kw["key_mask"] = km.expand(batch, cap)
    elif key_mask:
        km = torch.rand(cap, batch, generator=g) > 0.35
        km[int(seqlens[0]) + seqlen_new - 1, 0] = False
        kw["key_mask"] = km.t()
    move = (lambda t: t.to(device) if isinstance(t, torch.Tensor) else t)
    return (move(q), move(k_cache), move(v_cache), move(k), move(v),
            {n: move(t) for n, t in kw.items()})


def written_mask(k_cache, kw, seqlen_new, batch):
    """True at the cache rows the append writes."""
    m = torch.zeros(k_cache.shape[:2], dtype=torch.bool)
    bs = k_cache.shape[1]
    for b in range(batch):
        for i in range(seqlen_new):
            pos = int(kw["cache_seqlens"][b]) + i
            if kw.get("block_table") is not None:
                m[int(kw["block_table"][b, pos // bs]), pos % bs] = True
            else:
                row = int(kw["cache_batch_idx"][b]) if kw.get("cache_batch_idx") is not None else b
                m[row, pos] = True
    return m


def check(case, *, num_splits=0, causal=False, window_size=(-1, -1), softcap=0.0, scale=None):
    q, kc, vc, k, v, kw = case
    dtype = q.dtype
    want, want_lse, want_kc, want_vc = reference(q, kc, vc, k, v, causal=causal, window_size=window_size,
                                                 softcap=softcap, softmax_scale=scale, **kw)
    kc2, vc2 = kc.clone(), vc.clone()
    out, lse = mytorch_ext.flash_attn_with_kvcache(
        q, kc2, vc2, k, v, causal=causal, window_size=window_size, softcap=softcap,
        softmax_scale=scale, num_splits=num_splits, return_softmax_lse=True, **kw)
    assert out.dtype == dtype and out.shape == q.shape and lse.shape == (q.shape[0], q.shape[2], q.shape[1])
    torch.testing.assert_close(out.cpu().double(), want, atol=TOL[dtype], rtol=TOL[dtype])
    assert torch.equal(torch.isinf(lse.cpu()), torch.isinf(want_lse))
    fin = torch.isfinite(want_lse)
    # lse is float32; q rotated in low precision is rounded to its dtype (as the cache is)
    torch.testing.assert_close(lse.cpu()[fin], want_lse[fin], atol=max(TOL[dtype], 2e-5), rtol=1e-5)
    # the append: written rows as the reference writes them, every other row untouched
    written = written_mask(kc, kw, 0 if k is None else k.shape[1], q.shape[0])
    assert torch.equal(kc2.cpu()[~written], kc.cpu()[~written]), "k_cache changed outside the new slots"
    assert torch.equal(vc2.cpu()[~written], vc.cpu()[~written]), "v_cache changed outside the new slots"
    assert torch.equal(vc2.cpu()[written], want_vc[written])
    if kw.get("rotary_cos") is None:
        assert torch.equal(kc2.cpu()[written], want_kc[written])
    else:  # rotated in the compute type, rounded once to the cache's dtype
        torch.testing.assert_close(kc2.cpu()[written].double(), want_kc[written].double(),
                                   atol=TOL[dtype] * 4, rtol=TOL[dtype] * 4)
    if k is not None:
        assert not torch.equal(kc2, kc), "nothing was appended"
    return out, lse


CASES = {
    # name: (make_case kwargs, check kwargs)
    "decode_gqa_rotary_interleaved": (dict(rotary="interleaved"), dict(causal=True)),
    "decode_mha_fp64_leftpad_batch_idx": (
        dict(dtype=torch.float64, heads=3, heads_k=3, d=32, leftpad=True, batch_idx=True, rotary="half"),
        dict(causal=True)),
    "chunk_rotary_half_noncausal": (dict(seqlen_q=3, seqlen_new=3, rotary="half"), dict()),
    "paged_shuffled_window_softcap_alibi": (
        dict(paged=True, seqlen_q=2, seqlen_new=2, alibi=True, leftpad=True, heads=4, heads_k=1),
        dict(causal=True, window_size=(37, -1), softcap=4.0, scale=0.1)),
    "paged_bf16_rotary": (dict(dtype=torch.bfloat16, paged=True, block_size=32, seqlen_q=4, seqlen_new=4,
                               rotary="interleaved", heads=8, heads_k=2), dict(causal=True)),
    "no_new_tokens_fp16_d256": (dict(dtype=torch.float16, seqlen_new=0, d=256, seqlen_q=2, cap=70),
                                dict(causal=True)),
    "window_right_mqa_d100": (dict(seqlen_q=5, seqlen_new=2, heads=6, heads_k=1, d=100),
                              dict(window_size=(20, 1))),
    "full_cache_no_cache_seqlens": (dict(seqlen_new=0, full=True), dict()),
    # one row per key (MHA, one query): bfloat16 rows widened inside the loops
    "decode_mha_bf16_rotary": (dict(dtype=torch.bfloat16, heads=3, heads_k=3, rotary="half", batch_idx=True),
                               dict(causal=True, num_splits=3)),
    # head dims that end in a partial vector of 16, with 16-bit rows over several key blocks
    "decode_gqa_bf16_d72": (dict(dtype=torch.bfloat16, heads=8, heads_k=2, d=72, cap=300), dict()),
    "decode_mha_fp16_d40": (dict(dtype=torch.float16, heads=3, heads_k=3, d=40, cap=300), dict(causal=True)),
    # keys hidden by key_mask: with splits and left padding, with a paged cache and a window
    "key_mask_gqa_leftpad_splits": (dict(key_mask=True, leftpad=True, seqlen_new=0, cap=300),
                                    dict(num_splits=4)),
    "key_mask_paged_window_bf16": (dict(key_mask=True, paged=True, seqlen_q=2, seqlen_new=2, dtype=torch.bfloat16,
                                        rotary="half", heads=8, heads_k=2), dict(causal=True, window_size=(40, -1))),
    "key_mask_mha_fp64_append": (dict(key_mask=True, dtype=torch.float64, heads=3, heads_k=3, d=32), dict(causal=True)),
    "key_mask_expanded": (dict(key_mask="expanded", batch=3, seqlen_new=0, cap=200), dict(num_splits=3)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_reference(name):
    make_kw, check_kw = CASES[name]
    case = make_case(**make_kw)
    if name == "full_cache_no_cache_seqlens":
        case[5].pop("cache_seqlens")
    check(case, **check_kw)


@pytest.mark.parametrize("num_splits", [1, 2, 3, 7, 16])
def test_split_counts(num_splits):
    """The same call split 1..16 ways agrees with the reference (MQA, batch 1: the shape
    split-KV is for), rows that see no key included (a window past the cache's start)."""
    case = make_case(batch=1, heads=4, heads_k=1, cap=700, seqlen_q=2, seqlen_new=2, rotary="half")
    out, lse = check(case, num_splits=num_splits, causal=True, window_size=(300, 0))
    out1, lse1 = check(make_case(batch=1, heads=4, heads_k=1, cap=700, seqlen_q=2, seqlen_new=2, rotary="half"),
                       num_splits=1, causal=True, window_size=(300, 0))
    torch.testing.assert_close(out, out1, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows", [4, 12, 40])
def test_rows_sharing_a_key_block(dtype, rows):
    """Query rows per kv head (group x queries) on both sides of the count at which the kernel
    transposes each key block (AVX-512: 8, AVX2: 4), head dims that end in a partial vector of
    8 and of 16, a last key block shorter than the others, softcap and a window."""
    heads, seqlen_q = {4: (4, 2), 12: (8, 3), 40: (20, 4)}[rows]
    for d in (36, 100):
        case = make_case(dtype=dtype, heads=heads, heads_k=2, d=d, cap=150, seqlen_q=seqlen_q,
                         seqlen_new=seqlen_q, seed=rows + d)
        check(case, causal=True)
        check(make_case(dtype=dtype, heads=heads, heads_k=2, d=d, cap=150, seqlen_q=seqlen_q,
                        seqlen_new=seqlen_q, seed=rows + d),
              causal=True, softcap=5.0, window_size=(70, -1))


def test_key_mask_hiding_every_key():
    """A sequence whose keys key_mask hides all: out 0 and lse +inf; the other sequence's rows
    are unchanged by it."""
    q, kc, vc, k, v, kw = make_case(key_mask=True, seqlen_new=0, cap=200)
    kw["key_mask"][1] = False
    out, lse = check((q, kc, vc, k, v, kw), num_splits=3)
    assert torch.equal(out[1], torch.zeros_like(out[1])) and torch.isinf(lse[1]).all()
    assert torch.isfinite(lse[0]).all()


def test_row_with_no_visible_key():
    """A window that ends before the first key: out 0 and lse +inf (flash-attn's convention)."""
    q, kc, vc, k, v, kw = make_case(batch=1, seqlen_q=3, seqlen_new=0)
    kw["cache_seqlens"] = torch.tensor([2], dtype=torch.int32)
    out, lse = mytorch_ext.flash_attn_with_kvcache(q, kc, vc, causal=True, num_splits=2,
                                                   return_softmax_lse=True, **kw)
    assert torch.equal(out[0, 0], torch.zeros_like(out[0, 0]))
    assert torch.isinf(lse[0, :, 0]).all() and torch.isfinite(lse[0, :, 1:]).all()


@pytest.mark.parametrize("d", [32, 96, 128, 256])
def test_head_dims(d):
    check(make_case(d=d, heads=2, heads_k=1, cap=90, seqlen_q=2, seqlen_new=2, rotary="interleaved"), causal=True)


def test_int_cache_seqlens_and_default_splits():
    """cache_seqlens as a Python int (all sequences alike), as flash-attn accepts it."""
    q, kc, vc, k, v, kw = make_case(batch=3, cap=64)
    kw.pop("cache_seqlens")
    kc2 = kc.clone()
    out = mytorch_ext.flash_attn_with_kvcache(q, kc2, vc.clone(), k, v, cache_seqlens=40, causal=True)
    want, *_ = reference(q, kc, vc, k, v, cache_seqlens=torch.full((3,), 40, dtype=torch.int32), causal=True)
    torch.testing.assert_close(out.double(), want, atol=2e-5, rtol=2e-5)
    assert torch.equal(kc2[:, 40], k[:, 0])


def test_mytorch_device_matches_cpu():
    """The same kernel on the mytorch device (host memory), caches updated in place there."""
    if not hasattr(torch, "mytorch"):
        mytorch_ext.register_device()
    cpu = make_case(paged=True, seqlen_q=2, seqlen_new=2, rotary="interleaved")
    dev = make_case(paged=True, seqlen_q=2, seqlen_new=2, rotary="interleaved", device="mytorch")
    out_c = mytorch_ext.flash_attn_with_kvcache(*cpu[:5], causal=True, **cpu[5])
    out_d = mytorch_ext.flash_attn_with_kvcache(*dev[:5], causal=True, **dev[5])
    assert out_d.device.type == "mytorch"
    assert torch.equal(out_d.cpu(), out_c)
    assert torch.equal(dev[1].cpu(), cpu[1])


def test_no_backward_and_the_caches_version():
    """An inference op: an output made from inputs that need a gradient raises at backward,
    naming the op (it never leaves their gradients silently empty); the in-place append moves
    the caches' version counters, so autograd sees that a cache it saved was changed."""
    q, kc, vc, k, v, kw = make_case()
    q.requires_grad_(True)
    before = kc._version, vc._version
    out = mytorch_ext.flash_attn_with_kvcache(q, kc, vc, k, v, causal=True, **kw)
    assert (kc._version, vc._version) == (before[0] + 1, before[1] + 1)
    assert out.requires_grad and out.grad_fn.name() == "FlashAttnWithKvcacheBackward"
    with pytest.raises(RuntimeError, match="mytorch::flash_attn_with_kvcache has no backward"):
        out.sum().backward()
    assert q.grad is None
    with torch.no_grad():
        assert not mytorch_ext.flash_attn_with_kvcache(q, kc, vc, causal=True, **kw).requires_grad
    w = torch.ones_like(kc, requires_grad=True)
    saved = (w * kc).sum()  # autograd saves kc for w's gradient
    mytorch_ext.flash_attn_with_kvcache(q.detach(), kc, vc, k, v, causal=True, **kw)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        saved.backward()


# ---------------------------------------------------------------- opcheck, torch.compile

def _op_args(case, **extra):
    q, kc, vc, k, v, kw = case
    args = (q, kc, vc, k, v, kw.get("rotary_cos"), kw.get("rotary_sin"), kw.get("cache_seqlens"),
            kw.get("cache_batch_idx"), kw.get("cache_leftpad"), kw.get("block_table"))
    return args, {"causal": True, **extra}


@pytest.mark.parametrize("paged", [False, True])
def test_opcheck(paged):
    case = make_case(paged=paged, seqlen_q=2, seqlen_new=2, rotary="half", leftpad=not paged,
                     batch_idx=not paged)
    args, kwargs = _op_args(case, num_splits=2)
    torch.library.opcheck(OP.default, args, kwargs)


def test_opcheck_key_mask():
    case = make_case(key_mask=True, seqlen_new=1)
    args, kwargs = _op_args(case, key_mask=case[5]["key_mask"])
    torch.library.opcheck(OP.default, args, kwargs)


def test_torch_compile_fullgraph():
    """One decode step compiled: the output and the in-place cache update equal eager's."""
    def step(q, kc, vc, k, v, seqlens, cos, sin):
        return mytorch_ext.flash_attn_with_kvcache(q, kc, vc, k, v, rotary_cos=cos, rotary_sin=sin,
                                                   cache_seqlens=seqlens, causal=True) * 2

    q, kc, vc, k, v, kw = make_case(rotary="interleaved")
    args = (kw["cache_seqlens"], kw["rotary_cos"], kw["rotary_sin"])
    kc_e, vc_e, kc_c, vc_c = kc.clone(), vc.clone(), kc.clone(), vc.clone()
    want = step(q, kc_e, vc_e, k, v, *args)
    got = torch.compile(step, fullgraph=True, backend="aot_eager")(q, kc_c, vc_c, k, v, *args)
    torch.testing.assert_close(got, want)
    assert torch.equal(kc_c, kc_e) and torch.equal(vc_c, vc_e) and not torch.equal(kc_c, kc)


# ---------------------------------------------------------------------------- bad input

def _bad(name):
    """(args, kwargs) of a call that must fail, and whether the fake kernel (shapes only)
    sees the problem too."""
    q, kc, vc, k, v, kw = make_case(paged=name.startswith("paged"), rotary="interleaved", seqlen_q=2,
                                    seqlen_new=2, cap=64)
    shape_level = True
    if name == "k_without_v":
        v = None
    elif name == "cache_too_short_values":
        kw["cache_seqlens"] = torch.tensor([63, 10], dtype=torch.int32)
        shape_level = False
    elif name == "cache_too_short_shape":
        k, v = torch.randn(2, 65, 2, 64), torch.randn(2, 65, 2, 64)
        kw.pop("rotary_cos"), kw.pop("rotary_sin")
    elif name == "no_cache_seqlens_with_new_tokens":
        kw.pop("cache_seqlens")
    elif name == "paged_block_past_num_blocks":
        kw["block_table"][1, 0] = kc.shape[0]
        shape_level = False
    elif name == "paged_block_size_not_tile":
        kc, vc = kc[:, :15], vc[:, :15]
    elif name == "rotary_too_short_values":
        kw["rotary_cos"], kw["rotary_sin"] = kw["rotary_cos"][:20], kw["rotary_sin"][:20]
        kw["cache_seqlens"] = torch.tensor([19, 3], dtype=torch.int32)
        shape_level = False
    elif name == "rotary_too_short_shape":
        kw["rotary_cos"], kw["rotary_sin"] = kw["rotary_cos"][:1], kw["rotary_sin"][:1]
    elif name == "batch_idx_out_of_range":
        kw["cache_batch_idx"] = torch.tensor([0, 5], dtype=torch.int32)
        shape_level = False
    elif name == "cache_seqlens_int64":
        kw["cache_seqlens"] = kw["cache_seqlens"].long()
    elif name == "rotary_without_k":
        k = v = None
    elif name == "key_mask_int":
        kw["key_mask"] = torch.ones(2, 64, dtype=torch.int32)
    elif name == "key_mask_short":
        kw["key_mask"] = torch.ones(2, 63, dtype=torch.bool)
    return (q, kc, vc, k, v), kw, shape_level


BAD = ["k_without_v", "cache_too_short_values", "cache_too_short_shape", "no_cache_seqlens_with_new_tokens",
       "paged_block_past_num_blocks", "paged_block_size_not_tile", "rotary_too_short_values",
       "rotary_too_short_shape", "batch_idx_out_of_range", "cache_seqlens_int64", "rotary_without_k",
       "key_mask_int", "key_mask_short"]


def _message(fn):
    with pytest.raises((ValueError, RuntimeError)) as e:
        fn()
    return str(e.value).split("\n")[0]


@pytest.mark.parametrize("name", BAD)
def test_bad_input_raises_before_writing(name):
    (q, kc, vc, k, v), kw, shape_level = _bad(name)
    kc0, vc0 = kc.clone(), vc.clone()
    msg = _message(lambda: mytorch_ext.flash_attn_with_kvcache(q, kc, vc, k, v, causal=True, **kw))
    assert msg.startswith("mytorch::flash_attn_with_kvcache: "), msg
    assert torch.equal(kc, kc0) and torch.equal(vc, vc0), "a failed call wrote into the cache"
    # the same message from the fake kernel (shape-level problems) and from the Python checks
    with torch._subclasses.FakeTensorMode() as mode:
        fake = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in (q, kc, vc, k, v)]
        fkw = {n: mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for n, t in kw.items()}
        if shape_level:
            assert _message(lambda: mytorch_ext.flash_attn_with_kvcache(*fake, causal=True, **fkw)) == msg
        else:
            mytorch_ext.flash_attn_with_kvcache(*fake, causal=True, **fkw)  # values: not seen
    if not shape_level:
        g = kvcache.check_inputs(q, kc, vc, k, v, kw.get("rotary_cos"), kw.get("rotary_sin"),
                                 kw.get("cache_seqlens"), kw.get("cache_batch_idx"), kw.get("cache_leftpad"),
                                 kw.get("block_table"), triton=False)
        assert _message(lambda: kvcache.check_values(g, kw.get("cache_seqlens"), kw.get("cache_batch_idx"),
                                                     kw.get("cache_leftpad"), kw.get("block_table"), True)) == msg


class TestMessages(TestCase):
    """The text of the errors the issue names, pinned."""

    def msg(self, name):
        (q, kc, vc, k, v), kw, _ = _bad(name)
        return _message(lambda: mytorch_ext.flash_attn_with_kvcache(q, kc, vc, k, v, causal=True, **kw))

    def test_cache_too_short(self):
        self.assertExpectedInline(self.msg("cache_too_short_values"), """mytorch::flash_attn_with_kvcache: the cache is too short for cache_seqlens + the new tokens: cache_seqlens[0] = 63 + 2 new tokens > cache length 64""")
        self.assertExpectedInline(self.msg("cache_too_short_shape"), """mytorch::flash_attn_with_kvcache: the cache is too short for the new tokens: 65 new tokens, cache length 64 (k_cache (2, 64, 2, 64) float32)""")

    def test_block_table_past_num_blocks(self):
        self.assertExpectedInline(self.msg("paged_block_past_num_blocks"), """mytorch::flash_attn_with_kvcache: expected block_table entries in [0, num_blocks = 11), got block_table[1][0] = 11""")

    def test_block_size(self):
        self.assertExpectedInline(self.msg("paged_block_size_not_tile"), """mytorch::flash_attn_with_kvcache: expected the block_size of a paged k_cache (its dim 1) a multiple of 16, got 15 (k_cache (11, 15, 2, 64) float32)""")

    def test_rotary_too_short(self):
        self.assertExpectedInline(self.msg("rotary_too_short_values"), """mytorch::flash_attn_with_kvcache: rotary_cos and rotary_sin are too short: sequence 0 uses position 20, the table has 20 rows""")

    def test_k_without_v(self):
        self.assertExpectedInline(self.msg("k_without_v"), """mytorch::flash_attn_with_kvcache: expected k and v together or neither, got k without v""")
