"""The Triton kernels of mytorch::flash_attn_with_kvcache (mytorch_ext/triton/kvcache.py)
against the float64 reference: append + rotary, split-KV and its combine, paged reads.

Without a GPU they run under TRITON_INTERPRET=1 (fa_ref sets it before the kernels are
imported) on CPU tensors, through a test-local copy of the op, `mytorch_kv_test::`, whose
CPU key holds the Triton launcher (the real op's CPU key is the C++ kernel's); shapes stay
tiny there. On a GPU the real op's CUDA key runs, at decode-sized shapes as well.
"""
import os
import sys

import pytest
import torch

from fa_ref import DEVICE, GPU  # noqa: F401  (sets TRITON_INTERPRET=1 without a GPU)

import mytorch_ext  # noqa: E402
from mytorch_ext.ops import kvcache  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ops"))
from test_kvcache import check, make_case  # noqa: E402

TEST_NS = "mytorch_kv_test"
_lib = []


def _ops():
    """The op namespace the tests call: the real op (GPU), or the interpreter-backed copy (CPU)."""
    if GPU:
        return torch.ops.mytorch
    if not _lib:
        import mytorch_ext.triton.kvcache as tk

        assert "Interpreted" in type(tk._split_kernel).__name__, \
            "the Triton kernels were imported before TRITON_INTERPRET=1 was set"
        lib = torch.library.Library(TEST_NS, "DEF")
        lib.define(str(torch.ops.mytorch.flash_attn_with_kvcache.default._schema).split("::", 1)[1])
        kvcache.register(TEST_NS, ("cpu",), lib=lib)
        _lib.append(lib)
    return getattr(torch.ops, TEST_NS)


@pytest.fixture(autouse=True)
def _kv_ops(monkeypatch):
    """mytorch_ext's wrapper calls the interpreter-backed copy of the op (CPU), or the real op (GPU)."""
    if not GPU:
        monkeypatch.setattr(mytorch_ext, "flash_attn_with_kvcache", kvcache.bind(_ops()))
    yield


def _case(**kw):
    kw.setdefault("device", DEVICE)
    kw.setdefault("dtype", torch.float16)
    if not GPU:  # the interpreter: few programs
        kw.setdefault("cap", 40)
        kw.setdefault("d", 16)
    return make_case(**kw)


CASES = {
    "decode_gqa_rotary_interleaved": (dict(rotary="interleaved"), dict(causal=True)),
    "paged_rotary_half_leftpad_splits": (
        dict(paged=True, seqlen_q=2, seqlen_new=2, rotary="half", leftpad=True, heads=4, heads_k=1),
        dict(causal=True, num_splits=3)),
    "batch_idx_window_softcap_alibi_fp32": (
        dict(dtype=torch.float32, batch_idx=True, seqlen_q=3, seqlen_new=1, alibi=True),
        dict(window_size=(9, 0), softcap=3.0, num_splits=2)),
    "no_new_tokens_bf16_noncausal": (dict(dtype=torch.bfloat16, seqlen_new=0, seqlen_q=2), dict(num_splits=4)),
    "key_mask_leftpad_splits": (dict(key_mask=True, leftpad=True, seqlen_new=1), dict(causal=True, num_splits=3)),
    "key_mask_paged_fp32": (dict(key_mask=True, paged=True, dtype=torch.float32, seqlen_q=2, seqlen_new=2),
                            dict(causal=True)),
    "key_mask_expanded": (dict(key_mask="expanded", batch=3, seqlen_new=1), dict(causal=True, num_splits=2)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_reference(name):
    make_kw, check_kw = CASES[name]
    check(_case(**make_kw), **check_kw)


def test_default_split_heuristic_splits():
    """num_splits=0 with one sequence and one kv head: the heuristic splits (8 SMs assumed
    under the interpreter), and the combined result is right."""
    from mytorch_ext.triton.kvcache import pick_num_splits

    assert pick_num_splits(1, 10, 8) > 1 and pick_num_splits(100, 10, 8) == 1
    check(_case(batch=1, heads=2, heads_k=1, rotary="interleaved"), causal=True, num_splits=0)


def test_rotary_tables_with_different_row_strides():
    """sin a column slice of a wider table (its row stride twice cos's): both are read right."""
    q, kc, vc, k, v, kw = _case(rotary="half", seqlen_new=2)
    sin = kw["rotary_sin"]
    wide = torch.zeros(sin.shape[0], 2 * sin.shape[1], dtype=sin.dtype, device=sin.device)
    wide[:, : sin.shape[1]] = sin
    kw["rotary_sin"] = wide[:, : sin.shape[1]]
    assert kw["rotary_sin"].stride(0) != kw["rotary_cos"].stride(0)
    check((q, kc, vc, k, v, kw), causal=True)


@pytest.mark.skipif(not GPU, reason="decode-sized shapes: GPU only")
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("num_splits", [1, 16, 0])
def test_gpu_decode_shapes(d, num_splits):
    for dtype in (torch.float16, torch.bfloat16):
        check(make_case(dtype=dtype, batch=3, heads=8, heads_k=2, d=d, cap=4000, seqlen_q=1, seqlen_new=1,
                        rotary="half", paged=d == 128, block_size=256, device="cuda", key_mask=num_splits == 16),
              causal=True, num_splits=num_splits)


def test_bad_block_table_values_never_write_out_of_bounds():
    """block_table entries outside [0, num_blocks): the CUDA kernels do not read values on the
    host; they skip those pages, so the pages just before and after the cache (guards here)
    stay untouched. The interpreter route checks values like the CPU kernel and raises."""
    q, kc, vc, k, v, kw = _case(paged=True, seqlen_q=1, seqlen_new=1)
    nb = kc.shape[0]
    big_k = torch.zeros((nb + 2,) + tuple(kc.shape[1:]), dtype=kc.dtype, device=kc.device)
    big_v = torch.zeros_like(big_k)
    big_k[1:-1], big_v[1:-1] = kc, vc
    kc, vc = big_k[1:-1], big_v[1:-1]
    kw["block_table"][0, :] = -1
    kw["block_table"][1, :] = nb
    if GPU:
        out = mytorch_ext.flash_attn_with_kvcache(q, kc, vc, k, v, causal=True, **kw)
        torch.cuda.synchronize()
        for big in (big_k, big_v):
            assert torch.count_nonzero(big[0]) == 0 and torch.count_nonzero(big[-1]) == 0
        assert torch.isfinite(out).all()
    else:
        with pytest.raises(ValueError, match="expected block_table entries in"):
            mytorch_ext.flash_attn_with_kvcache(q, kc, vc, k, v, causal=True, **kw)


def test_opcheck():
    q, kc, vc, k, v, kw = _case(paged=True, seqlen_q=2, seqlen_new=2, rotary="half")
    op = _ops().flash_attn_with_kvcache.default
    torch.library.opcheck(op, (q, kc, vc, k, v, kw["rotary_cos"], kw["rotary_sin"], kw["cache_seqlens"],
                               None, None, kw["block_table"]), {"causal": True, "num_splits": 2})
