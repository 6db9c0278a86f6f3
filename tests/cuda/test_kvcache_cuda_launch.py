"""The C++ launch path of mytorch::flash_attn_with_kvcache on CUDA (csrc/kernels/cuda/kvcache.cpp).

The op launches the compiled Triton kernels of mytorch_ext/triton/kvcache.py itself; only the
first call of a specialization runs the Python launcher (launch_record.kvcache). Checked here:
- the CUDA key holds the C++ kernel;
- every case's first (recording) and second (replayed) call give the bits the Python launcher
  gives, outputs and the appended caches alike: plain and paged caches, cache_batch_idx,
  cache_leftpad, rotary (interleaved and not), GQA / MQA, causal, windows, softcap, ALiBi, key_mask,
  no new tokens, no cache_seqlens, head_dim 64 / 128 / 256, float32, split counts 1 / 3 / 16
  and the heuristic's, and arguments Triton specializes (ints equal to 1, unaligned and
  strided views);
- the same cases against the float64 reference, the append in place at the right slots;
- a repeated call never enters Python, a new specialization does (once);
- a decode step has no host synchronization and replays in a CUDA graph;
- bad shapes get the CPU kernel's messages, before anything is written.
"""
import math
import os
import sys

import pytest
import torch

import mytorch_ext
from helpers import capture_cuda_graph, run_without_host_sync

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ops"))
from test_kvcache import BAD, _bad, _message, check, make_case  # noqa: E402

pytestmark = pytest.mark.gpu
GPU = torch.cuda.is_available()
if GPU:
    from mytorch_ext.triton import kvcache as tk
    from mytorch_ext.triton import launch_record


# ----------------------------------------------------------------------------- cases

def _offset(t):
    """t's values in a contiguous view whose data pointer is one element past t's alignment."""
    base = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    view = base[1:].view(t.shape)
    view.copy_(t)
    return view


def _wide(t):
    """t's values in a view with twice t's head stride (dim 2), so every stride but the last
    differs from a contiguous tensor's."""
    big = torch.zeros(*t.shape[:2], 2 * t.shape[2], t.shape[3], dtype=t.dtype, device=t.device)
    big[:, :, 1::2] = t
    return big[:, :, 1::2]


LAYOUTS = {None: lambda t: t, "unaligned": _offset, "strided": _wide}

D = dict(dtype=torch.bfloat16, device="cuda")
CASES = {
    # name: (make_case kwargs, call options, layout of q, the caches, k and v)
    "plain": (dict(batch=3, heads=8, heads_k=8, d=128, cap=300), dict(causal=True), None),
    "plain_chunk_noncausal": (dict(batch=2, seqlen_q=4, seqlen_new=4, heads=4, heads_k=4, cap=200), {}, None),
    "paged_32": (dict(paged=True, block_size=32, batch=3, heads=8, heads_k=2, d=128, cap=500),
                 dict(causal=True), None),
    "paged_256_chunk": (dict(paged=True, block_size=256, batch=2, seqlen_q=3, seqlen_new=3, heads=8, heads_k=2,
                             d=128, cap=1000), dict(causal=True), None),
    "paged_16_d256": (dict(paged=True, block_size=16, heads=4, heads_k=2, d=256, cap=120, dtype=torch.float16),
                      dict(causal=True), None),
    "batch_idx": (dict(batch_idx=True, batch=3, heads=8, heads_k=2), dict(causal=True), None),
    "leftpad_rotary_half": (dict(leftpad=True, batch=3, seqlen_q=2, seqlen_new=2, rotary="half"),
                            dict(causal=True), None),
    "rotary_interleaved_batch_idx": (dict(rotary="interleaved", batch_idx=True, heads=8, heads_k=2, d=128),
                                     dict(causal=True), None),
    "rotary_half_noncausal": (dict(rotary="half", seqlen_q=3, seqlen_new=3), {}, None),
    "gqa_32_8": (dict(batch=2, heads=32, heads_k=8, d=128, cap=1000), dict(causal=True), None),
    "mqa": (dict(batch=2, heads=8, heads_k=1, cap=400, seqlen_q=2, seqlen_new=1), dict(causal=True), None),
    "window_softcap_alibi_scale": (dict(alibi=True, seqlen_q=3, seqlen_new=2, leftpad=True),
                                   dict(causal=True, window_size=(40, -1), softcap=5.0, scale=0.1), None),
    "window_right": (dict(seqlen_q=5, seqlen_new=2, heads=6, heads_k=2), dict(window_size=(20, 1)), None),
    "no_new_tokens": (dict(seqlen_new=0, seqlen_q=2, cap=170), dict(causal=True), None),
    "full_cache_no_cache_seqlens": (dict(seqlen_new=0, full=True, cap=90), {}, None),
    "fp32": (dict(dtype=torch.float32, heads=4, heads_k=2, d=64, rotary="interleaved"), dict(causal=True), None),
    # ints equal to 1 (seqlen_q, seqlen_new, heads, batch_cache): constants in the compiled kernels
    "one_head": (dict(batch=1, heads=1, heads_k=1, seqlen_q=1, seqlen_new=1, d=128), dict(causal=True), None),
    "unaligned": (dict(batch=2, heads=4, heads_k=2, seqlen_q=2, seqlen_new=2, rotary="half"),
                  dict(causal=True), "unaligned"),
    "strided": (dict(batch=2, heads=4, heads_k=2, seqlen_q=2, seqlen_new=2, batch_idx=True),
                dict(causal=True), "strided"),
    "paged_strided": (dict(paged=True, block_size=32, heads=4, heads_k=2, cap=200), dict(causal=True), "strided"),
    # key_mask: a transposed view (strides (1, batch)), and one row expanded (strides (0, 1))
    "key_mask_leftpad": (dict(key_mask=True, leftpad=True, batch=3, heads=8, heads_k=2, cap=300), {}, None),
    "key_mask_paged_window": (dict(key_mask=True, paged=True, block_size=32, seqlen_q=2, seqlen_new=2, cap=300),
                              dict(causal=True, window_size=(50, -1)), None),
    "key_mask_expanded": (dict(key_mask="expanded", batch=3, heads=8, heads_k=2, cap=300), dict(causal=True), None),
}
# split counts 1 / 3 / 16 on some cases (the others take the heuristic's)
SPLITS = [(name, n) for name in CASES for n in (0,)] + [
    (name, n) for name in ("plain", "paged_32", "leftpad_rotary_half", "gqa_32_8", "window_softcap_alibi_scale",
                           "unaligned", "key_mask_leftpad", "key_mask_expanded") for n in (1, 3, 16)]


def _build(name):
    """The case's tensors, built the same way on every call (a fixed seed), in its layout."""
    make_kw, opts, layout = CASES[name]
    q, kc, vc, k, v, kw = make_case(**{**D, **make_kw})
    if name == "full_cache_no_cache_seqlens":
        kw.pop("cache_seqlens")
    f = LAYOUTS[layout]
    q, kc, vc = f(q), f(kc), f(vc)
    k, v = (None if t is None else f(t) for t in (k, v))
    return q, kc, vc, k, v, kw


def _python(q, kc, vc, k, v, kw, opts, num_splits):
    """The Python launcher (kvcache_forward) as the Python kernel calls it."""
    wl, wr = opts.get("window_size", (-1, -1))
    scale = opts["scale"] if opts.get("scale") is not None else 1.0 / math.sqrt(q.shape[-1])
    out, lse = tk.kvcache_forward(
        q, kc, vc, k, v, rotary_cos=kw.get("rotary_cos"), rotary_sin=kw.get("rotary_sin"),
        cache_seqlens=kw.get("cache_seqlens"), cache_batch_idx=kw.get("cache_batch_idx"),
        cache_leftpad=kw.get("cache_leftpad"), block_table=kw.get("block_table"), softmax_scale=scale,
        causal=opts.get("causal", False), window_left=wl, window_right=wr, softcap=opts.get("softcap", 0.0),
        rotary_interleaved=kw.get("rotary_interleaved", True), alibi_slopes=kw.get("alibi_slopes"),
        num_splits=num_splits, key_mask=kw.get("key_mask"))
    return out, lse, kc, vc


def _cpp(q, kc, vc, k, v, kw, opts, num_splits):
    out, lse = mytorch_ext.flash_attn_with_kvcache(
        q, kc, vc, k, v, causal=opts.get("causal", False), window_size=opts.get("window_size", (-1, -1)),
        softcap=opts.get("softcap", 0.0), softmax_scale=opts.get("scale"), num_splits=num_splits,
        return_softmax_lse=True, **kw)
    return out, lse, kc, vc


def _assert_same(got, want, what):
    for name, a, b in zip(("out", "lse", "k_cache", "v_cache"), got, want):
        assert a.shape == b.shape and a.stride() == b.stride(), f"{what}: {name} layout differs"
        assert torch.equal(a, b), f"{what}: {name} differs from the Python launcher"


# ----------------------------------------------------------------------------- tests

def test_cuda_key_holds_the_cpp_kernel():
    name = "mytorch::flash_attn_with_kvcache"
    assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "CUDA")
    dump = torch._C._dispatch_dump(name)
    cuda = [line for line in dump.splitlines() if line.startswith("CUDA:")]
    assert len(cuda) == 1 and "kernels/cuda/kvcache.cpp" in cuda[0], dump  # not torch/library.py


@pytest.mark.parametrize("name,num_splits", SPLITS, ids=[f"{n}-splits{s}" for n, s in SPLITS])
def test_replay_equals_python_launcher(name, num_splits):
    opts = CASES[name][1]
    want = _python(*_build(name), opts, num_splits)
    for call in ("first", "second"):  # the first call records the plan (unless an earlier test did)
        _assert_same(_cpp(*_build(name), opts, num_splits), want, f"{name}, {call} call")


@pytest.mark.parametrize("name,num_splits", SPLITS, ids=[f"{n}-splits{s}" for n, s in SPLITS])
def test_matches_reference(name, num_splits):
    """Against the float64 reference; check() also holds the append to the new slots of the
    caches the op was given (every other slot untouched)."""
    make_kw, opts, layout = CASES[name]
    if layout is not None:
        pytest.skip("check() copies the caches contiguously: these layouts are compared with Python above")
    check(_build(name), num_splits=num_splits, causal=opts.get("causal", False),
          window_size=opts.get("window_size", (-1, -1)), softcap=opts.get("softcap", 0.0), scale=opts.get("scale"))


def _decode(batch, cap, heads, heads_k, d=128, seed=0, filled=None):
    """A bf16 decode step (one new token) on a long cache, built on the GPU from a seed."""
    g = torch.Generator(device="cuda").manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, device="cuda", dtype=torch.bfloat16)

    q = rnd(batch, 1, heads, d)
    kc, vc = rnd(batch, cap, heads_k, d), rnd(batch, cap, heads_k, d)
    k, v = rnd(batch, 1, heads_k, d), rnd(batch, 1, heads_k, d)
    n = filled if filled is not None else cap - 1
    seqlens = torch.full((batch,), n, dtype=torch.int32, device="cuda")
    seqlens[0] = cap - 1
    return q, kc, vc, k, v, {"cache_seqlens": seqlens}


DECODE = {"b1_32k_gqa": (1, 32768, 32, 8), "b4_8k_gqa": (4, 8192, 32, 8), "b64_4k_gqa": (64, 4096, 32, 8),
          "b2_3k_mha": (2, 3000, 16, 16), "b1_1k_mqa": (1, 1024, 8, 1)}


@pytest.mark.parametrize("shape", list(DECODE))
def test_split_heuristic_equals_python(shape):
    """num_splits=0: the C++ port of pick_num_splits picks what the Python one picks (a
    different count would change the bits), on the decode shapes the benchmark times."""
    batch, cap, heads, heads_k = DECODE[shape]
    opts = dict(causal=True)
    want = _python(*_decode(batch, cap, heads, heads_k, filled=cap // 2), opts, 0)
    for call in ("first", "second"):
        _assert_same(_cpp(*_decode(batch, cap, heads, heads_k, filled=cap // 2), opts, 0), want, f"{shape}, {call}")


def test_specialization_classes_get_their_own_plans():
    """The same shapes with an argument in another specialization class (batch_cache 1 vs 2,
    an aligned vs an unaligned q) run their own compiled kernels, each equal to Python's."""
    def run(batch_cache, unaligned):
        q, kc, vc, k, v, kw = make_case(**D, batch=1, heads=4, heads_k=2, cap=96)
        if batch_cache == 2:
            kc, vc = torch.cat([kc, kc]), torch.cat([vc, vc])
        if unaligned:
            q = _offset(q)
        return q, kc, vc, k, v, kw

    for batch_cache, unaligned in ((1, False), (2, False), (2, True), (1, True), (1, False)):
        want = _python(*run(batch_cache, unaligned), dict(causal=True), 0)
        _assert_same(_cpp(*run(batch_cache, unaligned), dict(causal=True), 0), want,
                     f"batch_cache {batch_cache}, unaligned q {unaligned}")


def test_python_runs_once_per_specialization(monkeypatch):
    calls = []
    record = launch_record.kvcache

    def counting(*args):
        calls.append(1)
        return record(*args)

    monkeypatch.setattr(launch_record, "kvcache", counting)
    # a shape no other test uses: its plan is not cached yet
    case = dict(**D, batch=2, heads=6, heads_k=3, d=72, cap=77, seqlen_q=2, seqlen_new=2, rotary="half")
    for i in range(3):
        q, kc, vc, k, v, kw = make_case(**case)
        mytorch_ext.flash_attn_with_kvcache(q, kc, vc, k, v, causal=True, num_splits=3, **kw)
        assert len(calls) == 1, f"call {i + 1}: the Python launcher ran {len(calls)} times"


def test_repeated_call_never_enters_python(monkeypatch):
    def make():
        return make_case(**D, paged=True, block_size=32, batch=3, heads=8, heads_k=2, d=128, cap=300,
                         rotary="interleaved", leftpad=True)

    q, kc, vc, k, v, kw = make()
    first = mytorch_ext.flash_attn_with_kvcache(q, kc, vc, k, v, causal=True, num_splits=3, **kw)

    def refuse(*args, **kwargs):
        raise AssertionError("a repeated call ran the Python launcher")

    monkeypatch.setattr(launch_record, "kvcache", refuse)
    monkeypatch.setattr(tk, "kvcache_forward", refuse)
    q2, kc2, vc2, k2, v2, kw2 = make()
    second = mytorch_ext.flash_attn_with_kvcache(q2, kc2, vc2, k2, v2, causal=True, num_splits=3, **kw2)
    assert torch.equal(first, second) and torch.equal(kc, kc2) and torch.equal(vc, vc2)


@pytest.mark.parametrize("num_splits", [1, 0])
def test_no_host_sync_and_cuda_graph_replay(num_splits):
    q, kc, vc, k, v, kw = _decode(2, 8192, 32, 8, filled=5000)
    kc0, vc0 = kc.clone(), vc.clone()

    def step():
        return mytorch_ext.flash_attn_with_kvcache(q, kc, vc, k, v, causal=True, num_splits=num_splits,
                                                   return_softmax_lse=True, **kw)

    eager = [t.clone() for t in step()]  # records the plan
    torch.cuda.synchronize()
    run_without_host_sync(step)
    kc.copy_(kc0), vc.copy_(vc0)
    graph, captured = capture_cuda_graph(step)
    kc.copy_(kc0), vc.copy_(vc0)
    graph.replay()
    torch.cuda.synchronize()
    for a, b in zip(captured, eager):
        assert torch.equal(a, b)
    kc_e, vc_e = kc0.clone(), vc0.clone()
    mytorch_ext.flash_attn_with_kvcache(q, kc_e, vc_e, k, v, causal=True, num_splits=num_splits, **kw)
    assert torch.equal(kc, kc_e) and torch.equal(vc, vc_e)


SHAPE_LEVEL = [n for n in BAD if _bad(n)[2]]


@pytest.mark.parametrize("name", SHAPE_LEVEL)
def test_bad_shapes_raise_the_cpu_message_before_writing(name):
    (q, kc, vc, k, v), kw, _ = _bad(name)
    want = _message(lambda: mytorch_ext.flash_attn_with_kvcache(q, kc, vc, k, v, causal=True, **kw))
    cuda = [None if t is None else t.cuda() for t in (q, kc, vc, k, v)]
    ckw = {n: t.cuda() if isinstance(t, torch.Tensor) else t for n, t in kw.items()}
    kc0, vc0 = cuda[1].clone(), cuda[2].clone()
    assert _message(lambda: mytorch_ext.flash_attn_with_kvcache(*cuda, causal=True, **ckw)) == want
    assert torch.equal(cuda[1], kc0) and torch.equal(cuda[2], vc0)


@pytest.mark.parametrize("what", ["float64", "head_dim_12"])
def test_triton_rules_messages_equal_the_fake_kernels(what):
    """The CUDA kernel's dtype and head_dim rules (the Triton kernels'), as the fake kernel words them."""
    if what == "float64":
        q, kc, vc, k, v, kw = make_case(dtype=torch.float64, device="cuda")
    else:
        q, kc, vc, k, v, kw = make_case(d=12, device="cuda")
    got = _message(lambda: mytorch_ext.flash_attn_with_kvcache(q, kc, vc, k, v, **kw))
    with torch._subclasses.FakeTensorMode() as mode:
        fake = [mode.from_tensor(t) for t in (q, kc, vc, k, v)]
        fkw = {n: mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for n, t in kw.items()}
        assert _message(lambda: mytorch_ext.flash_attn_with_kvcache(*fake, **fkw)) == got
    assert got.startswith("mytorch::flash_attn_with_kvcache: expected ")
