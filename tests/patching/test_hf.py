"""Real Hugging Face models with mytorch kernels: same logits, loss and gradients."""
import contextlib
import sys

import pytest
import torch

import mytorch_ext
from mytorch_ext.patching import hf

pytest.importorskip("transformers")

from hf_models import assert_same, batch, build, probe  # noqa: E402

MODELS = ["llama", "gpt2", "qwen2", "mistral"]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# fp32 on the CPU; bf16 on CUDA (the Triton kernels are 16-bit)
SETUP = {"cpu": (torch.float32, dict(rtol=2e-4, atol=2e-5)),
         "cuda": (torch.bfloat16, dict(rtol=5e-2, atol=5e-2))}


@pytest.fixture(autouse=True)
def _one_thread():
    # tiny models: one thread (threads only add start-up and contention at these sizes);
    # conftest.py reverts what a test leaves patched
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _expected_kernels(name, device):
    """Ops that must have run mytorch kernels (those with a kernel on this device)."""
    from mytorch_ext.patching.aten import _has_kernel

    ops = []
    if name == "gpt2" and _has_kernel("layer_norm", device):
        ops.append("layer_norm")
    if name != "gpt2" and _has_kernel("rms_norm", device):
        ops.append("rms_norm")
    return ops


def _expected_calls(name, device, cross_entropy):
    """apply_to's per-layer and loss swaps that must have run mytorch kernels, and their counts
    for one forward of the 2-layer models."""
    from mytorch_ext.patching.aten import _has_kernel

    calls = {}
    if name != "gpt2":
        calls.update({op: 2 for op in ("swiglu", "rope") if _has_kernel(op, device)})
    ce = {"fused_linear": "fused_linear_cross_entropy",
          "fused": "fused_cross_entropy"}[cross_entropy]
    if _has_kernel(ce, device):
        calls["cross_entropy"] = 1
    return calls


def _rope_global(model):
    """The apply_rotary_pos_emb installed now in model's modeling module (None for GPT-2)."""
    return getattr(sys.modules[type(model).__module__], "apply_rotary_pos_emb", None)


def _rope_original(model):
    """The modeling module's own apply_rotary_pos_emb, whatever is installed now."""
    return hf.original_rope(sys.modules[type(model).__module__])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mask", ["causal", "padding"])
@pytest.mark.parametrize("name", MODELS)
def test_patch(name, mask, device):
    """mytorch_ext.patch(): the model's code is untouched (attn_implementation="sdpa")."""
    dtype, tol = SETUP[device]
    model = build(name, "sdpa", dtype, device)
    data = batch(mask, device)
    ref = probe(model, *data)
    with mytorch_ext.patched():
        got = probe(model, *data)
    stats = mytorch_ext.patch_stats()
    assert_same(got, ref, **tol)
    assert stats["sdpa"]["mytorch"] == 2 and stats["sdpa"]["fallthrough"] == 0, stats
    if name == "gpt2" and "layer_norm" in _expected_kernels(name, device):
        assert stats["layer_norm"] == {"mytorch": 5, "fallthrough": 0}, stats  # 2 per block + ln_f
    from mytorch_ext.patching.aten import _has_kernel

    if _has_kernel("fused_cross_entropy", device):  # the loss's F.cross_entropy
        assert stats["cross_entropy"] == {"mytorch": 1, "fallthrough": 0}, stats


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cross_entropy", ["fused_linear", "fused"])
@pytest.mark.parametrize("mask", ["causal", "padding"])
@pytest.mark.parametrize("name", MODELS)
def test_apply_to(name, mask, cross_entropy, device):
    """apply_to(model): attn_implementation "mytorch", swapped modules, RoPE and loss; the same
    loss and gradients; revert() undoes it."""
    dtype, tol = SETUP[device]
    model = build(name, "sdpa", dtype, device)
    data = batch(mask, device)
    ref = probe(model, *data)
    rope_fn = _rope_original(model)
    assert _rope_global(model) is rope_fn  # nothing left swapped by an earlier test
    handle = mytorch_ext.apply_to(model, cross_entropy=cross_entropy)
    assert model.config._attn_implementation == "mytorch"
    assert "forward" in model.__dict__
    assert (_rope_global(model) is rope_fn) == (name == "gpt2")
    got = probe(model, *data)
    stats = mytorch_ext.patch_stats(reset=True)
    if cross_entropy == "fused_linear":  # the logits are never materialized
        assert got[0] is None
        ref = (None, *ref[1:])
    assert_same(got, ref, **tol)
    assert stats["hf_attention"] == {"mytorch": 2, "fallthrough": 0}, stats
    for op in _expected_kernels(name, device):
        assert stats[op] == {"mytorch": 5, "fallthrough": 0}, stats  # 2 per block + the final norm
    for op, n in _expected_calls(name, device, cross_entropy).items():
        assert stats[op] == {"mytorch": n, "fallthrough": 0}, stats
    if name == "gpt2" and device == "cpu":
        assert stats["gelu"] == {"mytorch": 2, "fallthrough": 0}, stats
    ids, mask_t, _ = data
    with torch.no_grad():  # no labels: the original forward, with logits
        logits = model(input_ids=ids, attention_mask=mask_t).logits
        assert "cross_entropy" not in mytorch_ext.patch_stats(reset=True)
        mytorch_ext.revert(model)
        ref_logits = model(input_ids=ids, attention_mask=mask_t).logits
    keep = slice(None) if mask_t is None else mask_t.bool()  # padded rows are arbitrary
    torch.testing.assert_close(logits[keep], ref_logits[keep], **tol)
    assert model.config._attn_implementation == "sdpa"
    assert not any("forward" in m.__dict__ for m in model.modules())
    assert _rope_global(model) is rope_fn
    assert handle.modules == [] and handle.rope_modules == []
    mytorch_ext.patch_stats(reset=True)
    probe(model, *data)
    assert mytorch_ext.patch_stats() == {}


def test_from_config_attn_implementation():
    """AutoModelForCausalLM.from_config(cfg, attn_implementation="mytorch")."""
    ref_model = build("llama", "sdpa")
    model = build("llama", "mytorch")
    assert model.config._attn_implementation == "mytorch"
    data = batch("padding")
    ref = probe(ref_model, *data)
    got = probe(model, *data)
    assert_same(got, ref, rtol=2e-4, atol=2e-5)
    assert mytorch_ext.patch_stats()["hf_attention"] == {"mytorch": 2, "fallthrough": 0}


def test_apply_to_twice_and_fallthrough():
    model = build("qwen2")
    mytorch_ext.apply_to(model)
    h = mytorch_ext.apply_to(model)
    assert len(h.modules) == 8  # 5 RMSNorms, 2 MLPs, the causal-LM forward
    assert len(h.rope_modules) == 1
    # float16 on the CPU runs the OpenMP kernel (as on the mytorch device); a call that wants
    # the attention probabilities falls through to sdpa
    model.half()
    ids, mask, labels = batch("padding")
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
        assert mytorch_ext.patch_stats(reset=True)["hf_attention"] == {"mytorch": 2, "fallthrough": 0}
        model(input_ids=ids, attention_mask=mask, output_attentions=True)
    stats = mytorch_ext.patch_stats()
    assert stats["hf_attention"] == {"mytorch": 0, "fallthrough": 2}, stats
    h.revert()
    assert model.config._attn_implementation == "sdpa"


def test_convergence_llama():
    """50 AdamW steps with and without mytorch kernels: the loss curves agree."""
    def train(patch):
        model = build("llama", seed=3)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        g = torch.Generator().manual_seed(4)
        losses = []
        ctx = mytorch_ext.patched() if patch else contextlib.nullcontext()
        h = mytorch_ext.apply_to(model) if patch else None
        with ctx:
            for _ in range(50):
                ids = torch.randint(0, 24, (4, 16), generator=g)  # a small vocabulary: learnable
                loss = model(input_ids=ids, labels=ids).loss
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
        if h is not None:
            h.revert()
        return torch.tensor(losses)

    ref = train(False)
    got = train(True)
    assert mytorch_ext.patch_stats()["hf_attention"]["mytorch"] == 100
    assert ref[-1] < ref[0] - 0.5  # it learns
    torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-3)


def test_compile_no_graph_break():
    """torch.compile of a patched model: mytorch ops in the graph, no graph break, with and
    without labels (the fused linear cross-entropy, and the original head)."""
    from torch._dynamo.backends.common import aot_autograd

    model = build("llama", dtype=torch.bfloat16)
    ids, _, labels = batch("causal")
    with torch.no_grad():
        ref = model(input_ids=ids, labels=labels)
    seen = []

    def capture(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm

    with mytorch_ext.patched():
        mytorch_ext.apply_to(model)
        torch._dynamo.reset()
        # no KV cache: transformers 4.55's DynamicCache breaks the graph of the stock model
        for kwargs in (dict(input_ids=ids, use_cache=False),
                       dict(input_ids=ids, labels=labels, use_cache=False)):
            explain = torch._dynamo.explain(model)(**kwargs)
            assert explain.graph_break_count == 0, explain.break_reasons
        compiled = torch.compile(model, backend=aot_autograd(fw_compiler=capture), fullgraph=True)
        out = compiled(input_ids=ids, labels=labels, use_cache=False)
        out.loss.backward()
        logits = compiled(input_ids=ids, use_cache=False).logits
        mytorch_ext.revert(model)
    torch._dynamo.reset()
    for op in ("flash_attn", "rms_norm", "swiglu", "rope", "fused_linear_cross_entropy"):
        assert f"mytorch.{op}.default" in seen, seen
    assert out.logits is None
    torch.testing.assert_close(out.loss.detach(), ref.loss, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(logits.detach(), ref.logits, rtol=2e-2, atol=2e-2)


def test_rope_refcount_and_fallthrough():
    """apply_rotary_pos_emb: shared by the models of a family until the last handle reverts;
    a per-row table (position_ids of batch > 1) or unsqueeze_dim=2 runs the original."""
    from transformers.models.llama import modeling_llama

    original = hf.original_rope(modeling_llama)
    assert modeling_llama.apply_rotary_pos_emb is original
    a, b = build("llama"), build("llama", seed=1)
    ha, hb = mytorch_ext.apply_to(a), mytorch_ext.apply_to(b)
    patched = modeling_llama.apply_rotary_pos_emb
    assert patched is not original
    ha.revert()
    assert modeling_llama.apply_rotary_pos_emb is patched
    ids, mask, labels = batch("padding")
    pos = torch.arange(ids.shape[1]).expand(ids.shape[0], -1)
    cos, sin = b.model.rotary_emb(b.model.embed_tokens(ids), pos)  # (batch, seq, head_dim)
    with torch.no_grad():
        got = b(input_ids=ids, attention_mask=mask, position_ids=pos).logits
    assert mytorch_ext.patch_stats(reset=True)["rope"] == {"mytorch": 0, "fallthrough": 2}
    hb.revert()
    assert modeling_llama.apply_rotary_pos_emb is original
    with torch.no_grad():
        torch.testing.assert_close(got, b(input_ids=ids, attention_mask=mask).logits,
                                   rtol=2e-4, atol=2e-5)
    # the replacement alone: q, k (batch, heads, seq, head_dim), then (batch, seq, heads, head_dim)
    q, k = torch.randn(2, 4, 24, 16), torch.randn(2, 2, 24, 16)
    for args, kwargs in (((q, k, cos[:1], sin[:1]), {}), ((q, k, cos, sin), {}),
                         ((q.transpose(1, 2), k.transpose(1, 2), cos[:1], sin[:1]),
                          dict(unsqueeze_dim=2))):
        expected = original(*args, **kwargs)
        hb = mytorch_ext.apply_to(b)
        out = modeling_llama.apply_rotary_pos_emb(*args, **kwargs)
        hb.revert()
        for x, y in zip(out, expected):
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6)
    assert mytorch_ext.patch_stats()["rope"] == {"mytorch": 1, "fallthrough": 2}


def test_cross_entropy_options():
    model = build("qwen2")
    ids, mask, labels = batch("padding")
    n_items = torch.tensor(7)  # not the count of labels: the sum / 7, not the mean
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask, labels=labels, num_items_in_batch=n_items)
        ref_tuple = model(input_ids=ids, attention_mask=mask, labels=labels, return_dict=False)
    params = [model.lm_head.weight, model.model.norm.weight]

    def grads():  # training: the division by num_items_in_batch rides in the kernels' pass
        loss = model(input_ids=ids, attention_mask=mask, labels=labels, num_items_in_batch=n_items).loss
        return torch.autograd.grad(loss, params)

    ref_grads = grads()
    with pytest.raises(ValueError, match="cross_entropy must be one of"):
        mytorch_ext.apply_to(model, cross_entropy="liger")
    h = mytorch_ext.apply_to(model, cross_entropy=None)
    assert "forward" not in model.__dict__
    h.revert()
    for mode in ("fused_linear", "fused"):
        mytorch_ext.apply_to(model, cross_entropy=mode)
        with torch.no_grad():  # the sum over the batch's tokens / num_items_in_batch
            out = model(input_ids=ids, attention_mask=mask, labels=labels,
                        num_items_in_batch=n_items)
        torch.testing.assert_close(out.loss, ref.loss, rtol=2e-4, atol=2e-5)
        assert out.loss.dtype == ref.loss.dtype == torch.float32
        if mode == "fused":
            torch.testing.assert_close(out.logits, ref.logits, rtol=2e-4, atol=2e-5)
        for got, want in zip(grads(), ref_grads):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
        stats = mytorch_ext.patch_stats(reset=True)
        assert stats["cross_entropy"] == {"mytorch": 2, "fallthrough": 0}, stats
    with torch.no_grad():
        # return_dict=False: the original forward
        got_tuple = model(input_ids=ids, attention_mask=mask, labels=labels, return_dict=False)
        assert isinstance(got_tuple, tuple)
        torch.testing.assert_close(got_tuple[0], ref_tuple[0], rtol=2e-4, atol=2e-5)
        assert mytorch_ext.patch_stats()["cross_entropy"] == {"mytorch": 0, "fallthrough": 1}
    mytorch_ext.revert(model)


def test_revert_all():
    """revert_all(): handles left unreverted (a test failing half-way, a model dropped) are
    undone and every apply_rotary_pos_emb is put back; nothing to do is fine; an apply_to that
    fails half-way leaves nothing applied."""
    import gc

    from transformers.models.llama import modeling_llama
    from transformers.models.qwen2 import modeling_qwen2

    hf.revert_all()  # nothing applied
    originals = {m: hf.original_rope(m) for m in (modeling_llama, modeling_qwen2)}
    assert all(m.apply_rotary_pos_emb is f for m, f in originals.items())
    kept, dropped, qwen = build("llama"), build("llama", seed=1), build("qwen2")
    for model in (kept, dropped, qwen):
        mytorch_ext.apply_to(model)
    assert not any(m.apply_rotary_pos_emb is f for m, f in originals.items())
    assert all(hf.original_rope(m) is f for m, f in originals.items())  # also while swapped
    del dropped, model
    gc.collect()  # its handle is gone; the RoPE swap it held is not
    hf.revert_all()
    assert all(m.apply_rotary_pos_emb is f for m, f in originals.items())
    for model in (kept, qwen):
        assert model.config._attn_implementation == "sdpa"
        assert not any("forward" in m.__dict__ for m in model.modules())
        assert getattr(model, "_mytorch_handle", None) is None
    hf.revert_all()  # twice: nothing left
    # a handle reverted after revert_all: its RoPE reference is not released twice
    h1, h2 = mytorch_ext.apply_to(kept), mytorch_ext.apply_to(qwen)
    hf.revert_all()
    h1.revert()
    h2.revert()
    assert all(m.apply_rotary_pos_emb is f for m, f in originals.items())

    def fail(*args, **kwargs):
        raise RuntimeError("set_attn_implementation failed")

    kept.set_attn_implementation = fail
    with pytest.raises(RuntimeError, match="set_attn_implementation failed"):
        mytorch_ext.apply_to(kept)
    del kept.set_attn_implementation
    assert modeling_llama.apply_rotary_pos_emb is originals[modeling_llama]
    assert not any("forward" in m.__dict__ for m in kept.modules())
    assert getattr(kept, "_mytorch_handle", None) is None
